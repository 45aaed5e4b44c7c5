"""The unit tier's guard (`tests/unit/conftest.py`) names what a test left changed."""

from __future__ import annotations

from tests.unit.conftest import leaked


def test_a_variable_set_changed_or_removed_is_named() -> None:
    before = {"PROFBENCH_CACHE": "/c", "PROFBENCH_SLOW": "1"}
    after = {"PROFBENCH_CACHE": "/d", "PROFBENCH_FLAVOUR_PATH": "/tmp/pbt_fl7"}
    assert leaked(before, after) == [
        "PROFBENCH_CACHE: '/c' before, '/d' after",
        "PROFBENCH_FLAVOUR_PATH: None before, '/tmp/pbt_fl7' after",
        "PROFBENCH_SLOW: '1' before, None after",
    ]


def test_an_unchanged_environment_is_no_leak() -> None:
    assert leaked({"PROFBENCH_CACHE": "/c"}, {"PROFBENCH_CACHE": "/c"}) == []
