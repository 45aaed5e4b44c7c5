"""Unit tests of dt's oracles and report."""
