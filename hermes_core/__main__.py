"""``python -m hermes_core``: the same as the ``hermes-core`` command."""

from .cli import main

main()
