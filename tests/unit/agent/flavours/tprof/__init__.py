"""Unit tests of tprof's oracles and report."""
