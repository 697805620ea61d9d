"""Benchmarks of hermes-core alone (one area each, also run by the comparison)."""
