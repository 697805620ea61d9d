"""``python -m hermes_core.cli``: the same as the ``hermes-core`` command."""

from . import main

main()
