"""Unit tests of scenarios: loading and checks, repro and deterministic bundles."""
