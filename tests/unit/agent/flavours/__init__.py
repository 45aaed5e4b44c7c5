"""Unit tests of each flavour's oracles and report, one package per flavour."""
