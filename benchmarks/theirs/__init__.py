"""The reference side: the hermes-agent venv (:mod:`.environment`) and the runners run in it.

The runners (``*_bench.py``, ``search_cache.py``) are started by path with the reference
venv's python and import their neighbours flat; they never import hermes-core.
"""
