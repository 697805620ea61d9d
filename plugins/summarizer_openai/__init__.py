"""hermes-core default plugin: summarizer_openai."""
