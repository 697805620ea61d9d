"""``python -m benchmarks``: the one runner of the benchmarks and the torture suite.

=================================================  ===========================================
``python -m benchmarks``                           ours vs hermes-agent, every part, one table
                                                   and one JSON (:mod:`benchmarks.comparison`)
``python -m benchmarks --quick --only P,Q``        a smoke run of some parts
``python -m benchmarks --list``                    the parts and the commands
``python -m benchmarks torture [--quick]``         the torture suite (also
                                                   ``python -m benchmarks.torture``)
``python -m benchmarks COMMAND [--help]``          one benchmark alone: recall, runtime,
                                                   store-sqlite, store-postgres, compression,
                                                   tokens, redaction, search-recall, ...
=================================================  ===========================================

The table of commands is :data:`benchmarks.commands.COMMANDS`.
"""

from __future__ import annotations

import sys

from .commands import main

if __name__ == "__main__":
    sys.exit(main())
