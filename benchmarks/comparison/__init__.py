"""Ours against hermes-agent on the same inputs: the parts of ``python -m benchmarks``."""
