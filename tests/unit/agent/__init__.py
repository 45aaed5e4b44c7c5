"""Unit tests of the agent: spec, rendering, driver, laws, oracles, mutants, reports."""
