"""Unit tier: pure and fast, no QEMU, no network."""

from __future__ import annotations

import pytest

# Helpers that assert get pytest's readable assertion messages too.
pytest.register_assert_rewrite("tests.unit.golden")
