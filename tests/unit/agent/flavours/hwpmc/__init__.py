"""Unit tests of hwpmc's oracles and report."""
