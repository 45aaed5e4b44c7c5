"""Scenarios: the TOML format and its checks, loading, repro bundles, deterministic runs."""
