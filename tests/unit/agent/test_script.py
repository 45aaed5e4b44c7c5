"""A translated scenario (`Script`): what it injected, counted the way a flavour asks."""

from __future__ import annotations

from harness.agent.flavour import Script


def test_injected_by_adds_the_named_ops_counts_to_inject_s() -> None:
    script = Script(
        body=(),
        injected={0: 5},
        op_counts={"inject-task": {0: 2, 1: 3}, "skip": {2: 7}},
    )
    assert script.injected_by("inject-task") == {0: 7, 1: 3}
    assert script.injected_by() == {0: 5}
    assert Script(body=()).injected_by("inject-task") == {}
