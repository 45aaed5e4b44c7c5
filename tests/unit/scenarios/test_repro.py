"""The pure parts of ``invoke repro``: steps → profctl steps, values, verdicts."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import pytest

from harness.agent import profctl
from harness.agent.flavour import AgentLike, AgentRun, Script, behaviour
from harness.agent.module.spec import AgentSpec
from harness.agent.steps import inject_step, kick_step
from harness.agent.values.results import Violation
from harness.errors import InfraError
from harness.paths import REPO_ROOT
from harness.scenarios import repro
from harness.scenarios.load import Expectation, find_scenario, load_scenario
from harness.scenarios.repro import (
    compare_numbers,
    judge,
    judge_error,
    observe,
    program,
    run_agent,
)
from tests.unit.agent.flavours.tprof.test_oracles import BASE

SHIPPED = REPO_ROOT / "scenarios"


def test_tp_d1_translates_to_injections_and_kicks() -> None:
    scenario = load_scenario(find_scenario("tprof-tp-d1-quirk", SHIPPED))
    prog = program(scenario, pause=lambda ms: None, nmi=lambda: None)
    assert prog.body == (*(inject_step(0, 12), kick_step("all")) * 4, profctl.wait_step())
    assert prog.injected == {0: 48}
    assert prog.kicks == 4
    assert not prog.actions


def test_a_pause_becomes_a_host_action_between_marker_steps() -> None:
    scenario = load_scenario(find_scenario("nmi-ab-on", SHIPPED))
    paused: list[int] = []
    prog = program(scenario, pause=paused.append, nmi=lambda: None)
    (name,) = prog.actions
    assert any(step.startswith("mark:") and name in step for step in prog.body)
    assert any(step.startswith("await:") and name in step for step in prog.body)
    prog.actions[name]()
    assert paused == [300]


def test_values_and_verdicts_come_from_the_run() -> None:
    sample = BASE.counters.stats["sample"]
    assert observe(BASE.numbers(), "stats.sample") == sample
    assert observe(BASE.numbers(), "samples") == len(BASE.samples)
    assert observe(BASE.numbers(), "core.1.x_nmi_total") == BASE.counters.core[1]["x_nmi_total"]
    verdicts = judge(
        (
            Expectation(value="stats.sample", equals=sample),
            Expectation(value="stats.sample", at_least=sample + 1),
            Expectation(oracle="TP-O1"),
        ),
        BASE,
        behaviour("tprof"),
    )
    assert [v.held for v in verdicts] == [True, False, True]
    assert verdicts[1].observed == str(sample)


def test_a_defect_s_expectations_hold_when_the_oracle_fails_and_the_text_is_seen() -> None:
    tprof = behaviour("tprof")
    lost = Violation("TP-O1", 1, "x_producer_calls = 1", "every term 0 = 0")
    broken = replace(tprof, judges=replace(tprof.judges, check=lambda run: [lost]))
    expect = (Expectation(oracle="TP-O1", fails=True), Expectation(console=" tp_stop+0x"),
              Expectation(error="EBUSY"))  # fmt: skip
    console = "[ 9.1] WARNING: CPU: 1 PID: 7 at x.c:1 tp_stop+0x1/0x2 [profagent]\n"
    assert [v.held for v in judge(expect, BASE, tprof, console)] == [
        False, True, False]  # fmt: skip
    verdicts = judge(expect, BASE, broken, "")
    assert [v.held for v in verdicts] == [True, False, False]
    assert verdicts[2].observed == "the run completed"
    error = "agent step failed: step 6 (ioctl, failed with EBUSY; no values)\nevidence"
    ended = judge_error(expect, error, console)
    assert [v.held for v in ended] == [False, True, True]
    assert ended[0].observed.startswith("the run ended in an error: agent step failed")
    assert [v.held for v in judge_error(expect, "step 6 failed with EPERM", "")] == [
        False, False, False]  # fmt: skip


def test_an_oracle_that_does_not_apply_is_not_held() -> None:
    (verdict,) = judge((Expectation(oracle="PLACE"),), replace(BASE, busy={}), behaviour("tprof"))
    assert (verdict.held, verdict.observed) == (False, "not applicable to this run")


def test_numbers_that_differ_across_attempts_are_named() -> None:
    first = BASE.numbers()
    second = {**first, "core.0.x_enabled_ns": first["core.0.x_enabled_ns"] + 1}
    report = compare_numbers([first, second])
    assert report["differing"] == {
        "core.0.x_enabled_ns": [first["core.0.x_enabled_ns"], second["core.0.x_enabled_ns"]]
    }
    assert report["identical"] == report["numbers"] - 1  # type: ignore[operator]


def test_a_number_the_run_did_not_report_is_an_error_not_zero() -> None:
    with pytest.raises(InfraError, match=r"stats\.no_such_counter"):
        observe(BASE.numbers(), "stats.no_such_counter")


def test_dt_ops_translate_through_the_flavour() -> None:
    scenario = load_scenario(find_scenario("dt-d1-quirk-4cpu", SHIPPED))
    prog = program(scenario, pause=lambda ms: None, nmi=lambda: None)
    assert prog.op_counts  # nest/skip counted per CPU for the oracles
    assert all(op in behaviour("dt").op_steps for op in prog.op_counts)


def test_a_named_run_replaces_the_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = load_scenario(find_scenario("hwpmc-hw-d2-fixed", SHIPPED))
    calls: list[tuple[str, object]] = []

    def by_script(agent: AgentLike, spec: AgentSpec, script: Script) -> AgentRun:
        calls.append(("script", script.body))
        return BASE

    def counting(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
        calls.append(("counting", cpus))
        return BASE

    fake = replace(behaviour("hwpmc"), run_script=by_script, extra_runs={"counting": counting})
    monkeypatch.setattr(repro, "behaviour", lambda name: fake)

    class Online:
        def online_cpus(self) -> tuple[int, ...]:
            return (0, 1, 2)

    script = program(scenario, pause=lambda ms: None, nmi=lambda: None)
    agent = cast(AgentLike, Online())
    assert run_agent(scenario, agent, script) is BASE
    assert run_agent(replace(scenario, run="counting", steps=()), agent, script) is BASE
    assert calls == [("script", script.body), ("counting", (0, 1, 2))]
