"""hermes-core default plugin: responses_compaction."""
