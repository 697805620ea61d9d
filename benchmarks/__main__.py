"""``python -m benchmarks``: ours vs hermes-agent, every measurement, one table and one JSON.

This is :mod:`benchmarks.compare` (see its docstring for what is measured and
``--help`` for the options; ``--quick`` is a smoke run of a few minutes).
Single parts still run on their own:

=============================================  ========================================
``python -m benchmarks.runtime``               turn-runtime overhead and growth ratio
``python -m benchmarks.store_sqlite``          SQLite store with the raw-SQLite ceiling
``python -m benchmarks.store_postgres``        the same on PostgreSQL (needs a server)
``python -m benchmarks.compression``           the compressor engineer's own comparison
``python -m benchmarks.tokens``                token counting throughput
``python -m benchmarks.recall``                recall after compaction, three systems
``python -m benchmarks.torture``               the torture suite (not a benchmark)
=============================================  ========================================
"""

from __future__ import annotations

import sys

from .comparison.runner import main

if __name__ == "__main__":
    sys.exit(main())
