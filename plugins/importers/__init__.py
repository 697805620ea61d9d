"""hermes-core default plugin: importers."""
