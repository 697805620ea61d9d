"""hermes-core default plugin: postgres_store."""
