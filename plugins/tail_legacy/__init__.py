"""hermes-core default plugin: tail_legacy."""
