"""hermes-core default plugin: summarizer_deterministic."""
