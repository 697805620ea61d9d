"""``python -m benchmarks.torture``: the torture suite (see :mod:`benchmarks.torture.runner`)."""

from __future__ import annotations

import sys

from .runner import main

if __name__ == "__main__":
    sys.exit(main())
