"""Unit tests of the matrix: loading, selection, the report and its plots."""
