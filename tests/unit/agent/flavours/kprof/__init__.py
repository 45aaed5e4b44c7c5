"""Unit tests of kprof's oracles and report."""
