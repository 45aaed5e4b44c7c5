"""``invoke check``: each check is a command; a missing tool fails its check, saying so."""

from __future__ import annotations

import logging

import pytest

from harness.cli.checks import LINT_CHECKS, WORKFLOWS, run_checks


def test_all_pass_only_when_every_command_exits_zero() -> None:
    assert run_checks([("true", ("true",)), ("also true", ("true",))])
    assert not run_checks([("true", ("true",)), ("false", ("false",))])


def test_a_tool_that_is_not_installed_fails_its_check_and_says_how_to_get_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    assert not run_checks([("schema", ("/nonexistent/check-jsonschema", "x.yml"))])
    assert "FAIL schema (status 127)" in caplog.text
    assert "/nonexistent/check-jsonschema is not installed; `. ./bootstrap.sh`" in caplog.text


def test_every_workflow_is_checked_against_githubs_schema() -> None:
    assert ".github/workflows/matrix.yml" in WORKFLOWS
    (argv,) = [argv for name, argv in LINT_CHECKS if name == "workflow schema"]
    assert argv[1:3] == ("--builtin-schema", "vendor.github-workflows")
    assert argv[3:] == WORKFLOWS
