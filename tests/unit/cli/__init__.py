"""Unit tests of what the invoke tasks call: test runs, skips, bench, checks, cache."""
