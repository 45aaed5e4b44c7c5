"""The fuzzer's pure core: generation inside the declared interface, shrinking, rendering.

No guest: a finding is faked by a predicate over the sequence (the seam the shell
fills with a guest run), and the console is recorded text.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.agent import flavours
from harness.agent.controlspec import STATS
from harness.agent.flavour import behaviour
from harness.agent.profctl import parse_output
from harness.builder.cache import Cache
from harness.cli import fuzz as cli_fuzz
from harness.cli.fuzz import FuzzOptions, fuzz_request
from harness.errors import ConfigError, InfraError
from harness.fuzz import calls, generate, invariants, render, search, shrink
from harness.fuzz import session as session_module
from harness.fuzz.generate import Target
from harness.fuzz.invariants import Finding
from harness.fuzz.session import FuzzRequest, FuzzResult
from harness.scenarios.load import OPS, load_scenario
from harness.scenarios.types import Step

IN_TREE = ("tprof", "dt", "kprof", "hwpmc")
CPUS = 2
FEW = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))

#: A console as a guest prints one, with a warning planted in the middle.
CONSOLE = """[    1.100000] profagent: loaded flavour=dt
[    2.200000] ------------[ cut here ]------------
[    2.200100] WARNING: CPU: 1 PID: 77 at kernel/workqueue.c:3000 __flush_work+0x2c/0x30
[    2.300000] profagent: unloaded
"""


def _target(flavour: str) -> Target:
    return Target(generate.interface_of(flavour), CPUS)


def _in_declared_range(target: Target, step: Step) -> list[str]:
    """Why ``step`` is outside its op's declaration (nothing when inside)."""
    decl = target.interface.op(step.op)
    wrong = []
    for arg in decl.args:
        value = getattr(step, arg.key)
        low, high = arg.valid
        if not (low <= value <= high or value in arg.values()):
            wrong.append(f"{step.describe()}: {arg.key} outside {arg.valid} and {arg.values()}")
    kinds: dict[str | None, set[object]] = {
        None: {None},
        "one": set(range(CPUS)),
        "hotplug": set(range(1, CPUS)),
        "one-or-all": {*range(CPUS), "all"},
    }
    allowed_cpu = kinds[decl.cpu]
    if step.cpu not in allowed_cpu:
        wrong.append(f"{step.describe()}: cpu {step.cpu} not {decl.cpu}")
    if (step.on is not None) != decl.switch:
        wrong.append(f"{step.describe()}: on given {step.on}, switch {decl.switch}")
    return wrong


@pytest.mark.parametrize("flavour", IN_TREE)
def test_generated_steps_stay_inside_the_declared_ranges_and_the_model(flavour: str) -> None:
    target = _target(flavour)

    @FEW
    @given(generate.sequences(target, 16))
    def check(steps: tuple[Step, ...]) -> None:
        facts = generate.start(target)
        for step in steps:
            assert _in_declared_range(target, step) == []
            assert generate.allows(target, facts, step), step.describe()
            facts = generate.after(target, facts, step)
        assert generate.closing(target, facts) == ()  # every CPU online, no skip pending

    check()


@pytest.mark.parametrize("flavour", IN_TREE)
def test_every_declared_op_is_one_the_scenario_loader_takes_within_its_limits(
    flavour: str,
) -> None:
    rules = {**OPS, **behaviour(flavour).ops}
    for decl in generate.interface_of(flavour).ops:
        rule = rules[decl.op]
        assert decl.cpu == rule.cpu, decl.op
        assert decl.switch == rule.on, decl.op
        for arg in decl.args:
            top = rule.count_max if arg.key == "count" else rule.ms_max
            assert top is not None, f"{decl.op} takes no {arg.key}"
            assert all(1 <= v <= top for v in (*arg.valid, *arg.values())), decl.op


def test_an_edge_value_is_drawn_beside_the_range() -> None:
    qlimit = generate.interface_of("kprof").op("kpctl-qlimit").arg("count")
    seen: set[int] = set()

    @settings(max_examples=200, deadline=None)
    @given(generate.numbers(qlimit))
    def record(value: int) -> None:
        seen.add(value)

    record()
    assert seen & set(qlimit.invalid)  # values the agent must refuse are drawn too
    assert all(qlimit.valid[0] <= v <= qlimit.valid[1] or v in qlimit.values() for v in seen)


def test_the_hwpmc_model_never_touches_a_released_pmc() -> None:
    target = _target("hwpmc")
    facts = generate.after(target, generate.start(target), Step("pmc-release", cpu=0))
    assert not generate.allows(target, facts, Step("pmc-start", cpu=0))
    assert not generate.allows(target, facts, Step("pmc-release", cpu=0))
    assert generate.allows(target, facts, Step("pmc-stop", cpu=1))


def test_the_kprof_model_predicts_qlimit_only_for_a_limit_set_while_stopped() -> None:
    target = _target("kprof")
    model = target.interface.model
    refused = (Step("kpctl-qlimit", count=2048),)  # profiling: EBUSY, 64 MiB stays
    assert model.expected(generate.walk(target, refused)) == {"stats.qlimit": 64 << 20}
    taken = (Step("kpctl-stop"), Step("kpctl-qlimit", count=2048), Step("kpctl-start"))
    assert model.expected(generate.walk(target, taken)) == {"stats.qlimit": 2 << 20}
    too_small = (Step("kpctl-stop"), Step("kpctl-qlimit", count=512))
    assert model.expected(generate.walk(target, too_small)) == {"stats.qlimit": 64 << 20}


@given(st.data())
@FEW
def test_a_finding_is_shrunk_to_the_steps_that_make_it(data: st.DataObject) -> None:
    """DT-D2's shape: an odd read size and a burst; every other step is noise."""
    target = _target("dt")
    noise = data.draw(generate.sequences(target, 12))
    culprit = (Step("read-size", count=552), Step("inject", cpu=0, count=3))
    steps = shrink.normalize(target, (*culprit[:1], *noise, *culprit[1:]))

    def fails(candidate: tuple[Step, ...]) -> bool:
        return Step("read-size", count=552) in candidate and any(
            s.op == "inject" for s in candidate
        )

    if not fails(steps):  # the model dropped the culprit (noise set a read size first)
        return
    shrunk = shrink.shrink(target, steps, fails, stop=lambda: False)
    assert fails(shrunk)
    assert len(shrunk) == 2 + len(generate.closing(target, generate.walk(target, shrunk)))


def test_shrinking_stops_when_told() -> None:
    target = _target("tprof")
    steps = tuple(Step("inject", cpu=0, count=n) for n in range(1, 9))
    runs: list[int] = []

    def fails(candidate: tuple[Step, ...]) -> bool:
        runs.append(len(candidate))
        return True

    shrunk = shrink.shrink(target, steps, fails, stop=lambda: len(runs) >= 2)
    assert len(runs) == 2
    assert 1 < len(shrunk) < len(steps)


def test_a_finding_renders_as_a_scenario_the_loader_accepts(tmp_path: Path) -> None:
    steps = (Step("kpctl-stop"), Step("kpctl-qlimit", count=1024), Step("inject", cpu="all",
             count=5), Step("offline", cpu=1), Step("online", cpu=1))  # fmt: skip
    findings = (Finding("model", "stats.qlimit is 67108864, the model expects 1048576",
                        (("stats.qlimit", 67108864),)),)  # fmt: skip
    parts = render.ScenarioText(
        name="fuzz-kprof-kp-d3-s7", description=render.describe(findings, 7, "kprof"), seed=7,
        topology="1s1cl2c1t", agent={"flavour": "kprof", "period": 200000,
        "pmu_produce": False, "quirks": ["KP-D3"]}, steps=steps,
        expect=render.finding_expect(findings))  # fmt: skip
    path = tmp_path / "fuzz-kprof-kp-d3-s7.toml"
    path.write_text(render.scenario_text(parts))
    scenario = load_scenario(path)
    assert scenario.steps == steps
    assert scenario.seed == 7
    assert [e.describe() for e in scenario.expect] == ["stats.qlimit == 67108864"]
    assert scenario.agent.quirks == flavours.get("kprof").quirk_bit("KP-D3")
    assert "the model expects 1048576" in scenario.description


def test_an_oracle_finding_without_numbers_expects_the_oracle_to_fail() -> None:
    findings = (Finding("oracle", "TP-O1: lost 3", oracle="TP-O1"),)
    assert render.finding_expect(findings) == ({"oracle": "TP-O1", "fails": True},)
    assert render.finding_expect(()) == render.CLEAN_EXPECT


def test_a_warning_and_a_refused_call_are_expected_by_their_stable_text(tmp_path: Path) -> None:
    findings = (
        Finding("console", "[   80.1] WARNING: CPU: 1 PID: 412 at /root/.cache/x/src/kprof.c:913 "
                "kp_d5_would_block+0x5c/0x90 [profagent]"),
        Finding("console", "[   80.2] WARNING: CPU: 0 PID: 413 at /x/kprof.c:913 "
                "kp_d5_would_block+0x5c/0x90 [profagent]"),
        Finding("guest", "agent step failed: step 31 (open, failed with EDEADLK; no values)\nmore"),
    )  # fmt: skip
    expect = render.finding_expect(findings)
    refused = "(open, failed with EDEADLK"  # not the step's index: the replay's differs
    assert expect == ({"console": " kp_d5_would_block+0x"}, {"error": refused})
    steps = (Step("fault-queue"), Step("kpctl-reopen"))
    parts = render.ScenarioText(name="fuzz-kprof-kp-d5-s1", description="d", seed=1,
                                topology="1s1cl2c1t", agent={"flavour": "kprof"},
                                steps=steps, expect=expect)  # fmt: skip
    path = tmp_path / "fuzz-kprof-kp-d5-s1.toml"
    path.write_text(render.scenario_text(parts))
    described = [e.describe() for e in load_scenario(path).expect]
    assert described == ["console shows ' kp_d5_would_block+0x'", f"the run fails with {refused!r}"]
    assert render.console_text("[ 3.1] BUG: KASAN: slab-use-after-free in dt_read+0x1c/0x40") == (
        "BUG: KASAN: slab-use-after-free in dt_read"
    )


def test_a_planted_warning_in_the_console_is_a_finding() -> None:
    found = invariants.console_findings(CONSOLE)
    assert [f.kind for f in found] == ["console"]
    assert found[0].what.startswith("[    2.200100] WARNING: CPU: 1 PID: 77")
    clean = "\n".join(line for line in CONSOLE.splitlines() if "WARNING" not in line)
    assert invariants.console_findings(clean) == ()


@pytest.mark.parametrize(
    "line",
    [
        "BUG: KASAN: slab-use-after-free in tp_read+0x1/0x2",
        "BUG: KCSAN: data-race in kp_flush / kp_qpass",
        "WARNING: possible recursive locking detected",
        "INFO: task profctl:88 blocked for more than 30 seconds.",
        "Unable to handle kernel NULL pointer dereference at virtual address 0",
        "UBSAN: shift-out-of-bounds in dt.c:12:3",
        "kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)",
    ],
)
def test_every_report_kind_is_seen(line: str) -> None:
    assert len(invariants.console_findings(f"[ 9.0] {line}\n")) == 1


def test_a_broken_law_and_a_wrong_prediction_are_findings() -> None:
    dt = generate.interface_of("dt")
    law = invariants.number_findings(dt, {"samples": 1, "stats.readevt": 2}, {})
    assert [(f.kind, f.numbers) for f in law] == [("law", (("samples", 1), ("stats.readevt", 2)))]
    assert invariants.number_findings(dt, {"samples": 2, "stats.readevt": 2}, {}) == ()
    model = invariants.number_findings(dt, {"stats.qlimit": 5}, {"stats.qlimit": 6})
    assert [f.kind for f in model] == ["model"]


def test_an_unjudged_oracle_is_no_finding() -> None:
    dt = generate.interface_of("dt")
    found = invariants.oracle_findings(dt, [("DT-O6", "x"), ("DT-O1", "y")])
    assert [f.oracle for f in found] == ["DT-O1"]


def test_an_unknown_flavour_is_named() -> None:
    with pytest.raises(ConfigError, match=r"nosuchflavour"):
        generate.interface_of("nosuchflavour")


def test_the_request_keeps_to_two_vcpus_and_a_positive_budget() -> None:
    assert fuzz_request(FuzzOptions(flavour="dt", budget_min=0.5)).budget_s == 30
    with pytest.raises(ConfigError, match="--cpus 4"):
        fuzz_request(FuzzOptions(flavour="dt", cpus=4))
    with pytest.raises(ConfigError, match="budget"):
        fuzz_request(FuzzOptions(flavour="dt", budget_min=0))


def test_ci_s_fuzz_stage_fuzzes_every_flavour_and_the_scaffold_and_fails_on_a_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[FuzzRequest] = []

    def fake_fuzz(request: FuzzRequest, cache: object, announce: object) -> FuzzResult:
        asked.append(request)
        if request.flavour != "dt":
            return FuzzResult(tmp_path, 3, 9, (), None, None, None, None, 1.0)
        lost = (Finding("law", "DT-readevt: samples 1 != stats.readevt 2"),)
        return FuzzResult(tmp_path, 3, 9, lost, tmp_path / "finding.toml", 2.0, 1, 1, 1.0)

    monkeypatch.setattr(cli_fuzz, "fuzz", fake_fuzz)
    monkeypatch.setattr(cli_fuzz, "new_run_dir", lambda *parts: tmp_path)
    monkeypatch.setattr(cli_fuzz, "use_flavours", lambda paths: (cli_fuzz.CI_SCAFFOLD,))
    assert cli_fuzz.run_fuzz_stage(cast(Cache, None), budget_s=5.0) == 1
    assert [r.flavour for r in asked] == [*flavours.names(), cli_fuzz.CI_SCAFFOLD]
    assert {(r.quirks, r.seed, r.budget_s, r.scenario_dir) for r in asked} == {
        ((), cli_fuzz.CI_FUZZ_SEED, 5.0, tmp_path)
    }
    assert (tmp_path / cli_fuzz.CI_SCAFFOLD / "profbench_fuzzport" / "interface.py").is_file()


def test_memory_the_closed_agent_left_is_a_finding_a_replay_expects() -> None:
    block = (
        "unreferenced object 0xffffff8004a1c000 (size 4096):\n"
        '  comm "profctl", pid 91, jiffies 4294893000 (age 6.2s)\n'
        "  backtrace:\n    kvmalloc_node+0x4c/0x100\n    tp_buf_alloc+0x30/0x90 [profagent]"
    )
    (found,) = invariants.leak_findings([block, block])
    assert found.kind == "kmemleak"
    assert found.what.startswith("memory left behind by the closed agent: 2 object(s); first: ")
    assert "(size 4096)" in found.what
    assert invariants.leak_findings([]) == ()
    assert render.finding_expect((found,)) == ({"console": render.LEAK_TEXT},)


def test_a_suppressed_sweep_is_resumed_before_the_collect() -> None:
    target = _target("hwpmc")
    steps = (Step("suppress", cpu=1), Step("pmc-release", cpu=0))
    facts = generate.walk(target, steps)
    assert generate.closing(target, facts) == (Step("resume", cpu=1),)
    assert generate.closing(target, generate.walk(target, (*steps, Step("resume", cpu=1)))) == ()


def test_a_finding_that_does_not_recur_when_hypothesis_replays_it_still_ends_the_search() -> None:
    target = _target("kprof")
    tally = session_module._Tally(time.monotonic())
    found = (Finding("oracle", "KP-O1: lost 1", oracle="KP-O1"),)
    runs: list[tuple[Step, ...]] = []

    def execute(steps: tuple[Step, ...]) -> tuple[Finding, ...]:
        runs.append(steps)
        tally.sequences += 1
        return found if len(runs) == 1 else ()  # the first sequence only: a flaky finding

    fake = SimpleNamespace(request=FuzzRequest(flavour="kprof", budget_s=60.0, shrink_s=0.0,
                                               seed=1, max_steps=3),
                           tally=tally, target=target, execute=execute,
                           announce=lambda line: None)  # fmt: skip
    search._search(cast(session_module.FuzzSession, fake))
    assert tally.best is not None
    assert tally.best[1] == found
    assert tally.first_sequence == 1


# --- process ops and deadlines (harness.fuzz.calls) ---------------------------------------


@pytest.mark.parametrize("flavour", IN_TREE)
def test_each_flavour_runs_unload_busy_and_names_the_process_ops_it_lacks(flavour: str) -> None:
    interface = generate.interface_of(flavour)
    mine = {p.op for p in interface.processes}
    assert "unload-busy" in mine
    assert mine | set(interface.no_processes) == {"unload-busy", "openers", "blocked-readers"} - (
        {"openers"} if flavour == "dt" else set()  # dt's blocked readers are concurrent opens
    )
    assert not mine & {*OPS, *behaviour(flavour).ops}  # never mistaken for a scenario op
    assert {d.op for d in _target(flavour).ops()} >= mine  # drawn


def _fake_body(prefix: tuple[Step, ...]) -> tuple[str, ...]:
    return ("open:/dev/dt", *(f"sleep:{s.ms or 1}" for s in prefix))


def test_a_plan_marks_and_times_every_call_and_awaits_each_process() -> None:
    interface = generate.interface_of("dt")
    steps = (Step("idle", ms=5), Step("blocked-readers", count=2), Step("idle", ms=7))
    made = calls.plan(interface, steps, _fake_body)
    assert made.scenario_steps == (steps[0], steps[2])
    marks = [s for s in made.body if s.startswith(f"mark:{calls.MARK}")]
    assert marks == [f"mark:{calls.MARK}{k}" for k in (0, 1, 2, "end")]
    assert made.body[:4] == ("open:/dev/dt", marks[0], "clock", "sleep:5")
    assert [c.n for c in made.children] == [0, 1]
    launched = [s for s in made.body if s.startswith(("exec:", "await:"))]
    assert launched == [
        *(c.launch() for c in made.children),
        *(f"await:{c.done}" for c in made.children),
    ]
    assert made.children[0].steps()[-1] == f"mark:{made.children[0].done}"
    assert all(c.stem in calls.setup_command(made) for c in made.children)
    with pytest.raises(InfraError, match="body changed"):
        calls.plan(interface, steps, lambda prefix: (str(len(prefix)),))


def _clock_lines(steps: tuple[str, ...], outcomes: dict[int, str], ns: list[int]) -> str:
    lines, clocks = [], iter(ns)
    for i, step in enumerate(steps):
        op = step.split(":")[0]
        if op == "clock":
            lines.append(f"step={i} op=clock ok=1 ns={next(clocks)}")
        elif i in outcomes and outcomes[i] != "ok":
            lines.append(f"step={i} op={op} ok=0 errno={outcomes[i]}")
        else:
            lines.append(f"step={i} op={op} ok=1" + (" bytes=0 lines=0" if op == "cat" else ""))
    return "".join(f"{line}\n" for line in lines)


def test_a_call_past_its_deadline_and_a_process_step_not_allowed_are_findings() -> None:
    interface = generate.interface_of("dt")
    steps = (Step("idle", ms=5), Step("unload-busy", count=1))
    made = calls.plan(interface, steps, _fake_body)
    s = 10**9
    body_out = _clock_lines(made.body, {}, [0, 30 * s, 31 * s])  # idle 5 ms took 30 s
    times = calls.call_times_ns(made.body, parse_output(body_out, made.body))
    assert times == {"0": 0, "1": 30 * s, "end": 31 * s}
    (late,) = calls.deadline_findings(interface, made, times)
    assert (late.kind, late.what.split(" took")[0]) == ("deadline", "call 0 (idle ms=5)")
    child = made.children[0]
    refused = _clock_lines(child.steps(), {1: "EAGAIN"}, [0, s, 2 * s])
    assert calls.child_findings(interface, made, {child.out: refused}) == ()
    unloaded = _clock_lines(child.steps(), {}, [0, s, 60 * s])  # unloaded; cat took 59 s
    found = calls.child_findings(interface, made, {child.out: unloaded})
    assert [f.kind for f in found] == ["process", "deadline"]
    assert "unload:profagent ended ok, not EAGAIN or EBUSY" in found[0].what
    (gone,) = calls.child_findings(interface, made, {})
    assert gone.what.endswith("did not finish: in clock")
    hung = "".join(refused.splitlines(keepends=True)[:3])  # clock, unload, clock: then cat
    (stuck,) = calls.child_findings(interface, made, {child.out: hung})
    assert stuck.what == f"unload-busy process 0 of call 1 did not finish: in cat:{STATS}"
    listing = calls.split_outputs(f"{calls.HEADER}{child.out}\n{refused}")
    assert listing == {child.out: refused}
    assert calls.running_call(made, f"{calls.MARK}0\n{calls.MARK}1\n") == (
        "in call 1 (unload-busy count=1)"
    )


def test_a_sequence_s_scenario_holds_no_process_op(tmp_path: Path) -> None:
    session = object.__new__(session_module.FuzzSession)
    session.request = FuzzRequest(flavour="dt", seed=1)
    session.interface = generate.interface_of("dt")
    steps = (Step("inject", cpu=0, count=3), Step("blocked-readers", count=2))
    scenario = session.scenario_of(steps, "seq", where=tmp_path)
    assert scenario.steps == steps[:1]
    assert "1: blocked-readers count=2" in scenario.description
