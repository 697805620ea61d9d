"""hermes-core default plugin: tail_lean."""
