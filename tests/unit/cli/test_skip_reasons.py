"""Every skip in the guest tier names a command that runs the check (harness.cli.skips).

The end of ``invoke test`` lists each check that did not run with the command its
reason quotes in backticks; a reason without one leaves the reader stuck, and a
``-k`` that matches no test in its file runs nothing.
"""

from __future__ import annotations

import ast
import shlex
from pathlib import Path

import pytest

from harness.cli.skips import enabling_command
from harness.paths import REPO_ROOT

SKIPPING = [
    *sorted((REPO_ROOT / "tests" / "guest").glob("*.py")),
    REPO_ROOT / "tests" / "conftest.py",
    REPO_ROOT / "tests" / "scenarios" / "test_shipped.py",
]


def _text(node: ast.expr) -> str:
    """A reason's literal text (an f-string's placeholders become ``{}``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            _text(part) if isinstance(part, ast.Constant) else "{}" for part in node.values
        )
    if isinstance(node, ast.BinOp):
        return _text(node.left) + _text(node.right)
    return "{}"


def skip_reasons(path: Path) -> list[str]:
    """The reasons of every ``pytest.skip(...)`` and ``skipif(..., reason=...)`` in ``path``."""
    reasons = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        called = ast.unparse(node.func)
        if called == "pytest.skip" and node.args:
            reasons.append(_text(node.args[0]))
        reasons += [_text(k.value) for k in node.keywords if k.arg == "reason" and "skip" in called]
    return reasons


@pytest.mark.parametrize("path", SKIPPING, ids=lambda p: p.name)
def test_every_skip_names_a_command_that_selects_a_test_of_its_file(path: Path) -> None:
    tests = [
        n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)
    ]
    for reason in skip_reasons(path):
        command = enabling_command(reason, arch="arm64")
        assert command is not None, f"{path.name}: {reason!r} names no command"
        words = shlex.split(command)
        if "-k" in words:
            keyword = words[words.index("-k") + 1]
            assert keyword in path.stem or any(keyword in t for t in tests), (path.name, keyword)


def test_the_quoted_command_keeps_the_environment_it_needs() -> None:
    reason = "slow: `PROFBENCH_SLOW=1 invoke test -k test_kp_d2_full`"
    assert (
        enabling_command(reason, arch="arm64") == "PROFBENCH_SLOW=1 invoke test -k test_kp_d2_full"
    )


def test_a_reason_without_a_command_is_found() -> None:
    assert enabling_command("needs 33 or more CPUs (--cpus 40 --cpus 33)", arch="arm64") is None
