"""hermes-core default plugin: compressor."""
