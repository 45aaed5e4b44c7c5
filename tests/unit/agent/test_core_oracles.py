from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import pytest

from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.core import (
    CORE_ORACLES,
    CoreView,
    applicable_core,
    check_core,
    check_nmi_context,
    check_profile,
    judge_core,
    judge_flavour,
)
from harness.agent.oracles.evidence import Injections, KernelEvidence
from harness.agent.oracles.nmi import judge_nmi
from harness.agent.peer.pairing import ProfilePair
from harness.agent.peer.profile import MIN_COMPARED, profile_judged
from harness.agent.peer.symbols import fold
from harness.agent.values.info import CORE_PERCPU
from harness.agent.values.results import Judged
from harness.errors import ConfigError
from harness.vm.perf import PerfCounts, PerfCpu


def core(**values: int) -> dict[str, int]:
    return {**dict.fromkeys((name for name, _ in CORE_PERCPU), 0), **values}


#: Two CPUs: 100 and 50 overflows, every one in NMI; CPU 0 also carried 2 bursts (10 calls).
VIEW = CoreView(
    spec=AgentSpec(),
    core={
        0: core(x_nmi_total=100, x_producer_calls_nmi=108),
        1: core(x_nmi_total=50, x_producer_calls_nmi=50, x_producer_calls_task=4),
    },
    kernel=KernelEvidence("arm-pmu", {0: 10, 1: 20}, {0: 110, 1: 70}, {0: 110, 1: 70}),
    injections=Injections(nmi={0: 10}, bursts={0: 2}, task={1: 4}),
    throttling_disabled=True,
)


def brief(view: CoreView) -> list[tuple[str, int | None, str, str]]:
    return [(v.oracle, v.cpu, v.expected, v.observed) for v in check_core(view)]


def test_a_consistent_view_passes_every_core_oracle() -> None:
    assert applicable_core(VIEW) == {name for name, _ in CORE_ORACLES} - {"PEER", "PROFILE", "C-3"}
    assert check_core(VIEW) == []


def test_pmu_sampling_off_only_injections_call_the_producer() -> None:
    view = replace(VIEW, spec=AgentSpec(pmu_produce=False))
    assert brief(view) == [
        ("CALLS", 0, "x_producer_calls_nmi + _irq = 0 + injected 10", "108"),
        ("CALLS", 1, "x_producer_calls_nmi + _irq = 0 + injected 0", "50"),
    ]


def test_irq_context_calls_count_like_nmi_ones() -> None:
    moved = {**VIEW.core, 1: core(x_nmi_total=50, x_producer_calls_irq=50,
                                  x_producer_calls_task=4)}  # fmt: skip
    assert check_core(replace(VIEW, core=moved)) == []


def test_a_software_clock_or_no_kernel_counts_skips_irq_and_released() -> None:
    for view in (replace(VIEW, spec=AgentSpec(event="cpu-clock")), replace(VIEW, kernel=None)):
        assert applicable_core(view) == {"CALLS", "THROTTLE", "C-2"}


def peer_of(samples: dict[int, int]) -> PerfCounts:
    """perf's counts over a 1 s window at period 1e6: every period delivered."""
    cpus = tuple(PerfCpu(cpu, n, 0, 0, 0, 0, 0, 10**9) for cpu, n in samples.items())
    return PerfCounts(cpus=cpus, window=(0, 10**9), period=1_000_000, version="6.1",
                      totals=())  # fmt: skip


def test_a_peer_beside_the_agent_is_judged_and_released_is_not() -> None:
    shared = replace(VIEW.kernel, pmu_shared=True) if VIEW.kernel else None
    view = replace(VIEW, kernel=shared, peer=peer_of({0: 101, 1: 48}))
    skipped = {"RELEASED", "PROFILE", "C-3"}  # C-3: no instruction clock
    assert applicable_core(view) == {name for name, _ in CORE_ORACLES} - skipped
    assert check_core(view) == []
    off = replace(view, peer=peer_of({0: 120, 1: 50}))  # 100 seen on CPU 0: 20 short
    assert [(v.oracle, v.cpu) for v in check_core(off)] == [("PEER", 0)]


def test_profile_judges_a_wrong_third_only_on_enough_samples_a_side() -> None:
    def moved(n: int) -> ProfilePair:  # a third of the agent's samples at one wrong PC
        return ProfilePair(fold([("hot",)] * (n - n // 3) + [("pa_produce",)] * (n // 3)),
                           fold([("hot",)] * n))  # fmt: skip

    assert [v.oracle for v in check_profile(replace(VIEW, profile=moved(MIN_COMPARED)))] == [
        "PROFILE"
    ]
    assert check_profile(replace(VIEW, profile=moved(MIN_COMPARED - 1))) == []  # not judged
    nothing = ProfilePair(fold([]), fold([("hot",)] * 500))
    assert [v.observed for v in check_profile(replace(VIEW, profile=nothing))] == [
        "no agent sample"
    ]


def test_each_applicable_core_oracle_says_what_it_compared() -> None:
    judged = {j.oracle: j.n for j in judge_core(VIEW)}
    # n counts what each compared: producer calls (108 + 50 + 4), overflows, the kernel's
    # PMU interrupts (100 + 50); RELEASED the CPU-ms watched after STOP (2 CPUs × idle_ms).
    assert VIEW.kernel is not None
    idle_ms = VIEW.kernel.idle_ms
    assert judged == {"CALLS": 162, "THROTTLE": 150, "C-2": 162, "IRQ": 150,
                      "RELEASED": 2 * idle_ms}  # fmt: skip
    quiet = {cpu: core() for cpu in VIEW.core}
    assert VIEW.kernel is not None
    idle = replace(VIEW, core=quiet, kernel=replace(VIEW.kernel, after=VIEW.kernel.before))
    assert not any(j.judged for j in judge_core(idle) if j.oracle != "RELEASED")
    peer = replace(VIEW, peer=peer_of({0: 101}))
    peer_judged = {j.oracle: j for j in judge_core(peer)}["PEER"]
    assert (peer_judged.n, peer_judged.what.split(",")[0]) == (101, "perf samples on 1 CPUs")
    silent = replace(VIEW, peer=peer_of({0: 0, 1: 0}))  # perf watched, sampled nothing
    assert not {j.oracle: j for j in judge_core(silent)}["PEER"].judged
    # A flavour's own law is counted by the flavour, in events; one it left out is an error.
    law = Judged("TP-O1", 162, "producer calls held to conservation")
    own = {j.oracle: j.n for j in judge_flavour(VIEW, {"IRQ", "TP-O1"}, [law])}
    assert (own["IRQ"], own["TP-O1"]) == (150, 162)
    with pytest.raises(ConfigError, match="TP-O2"):
        judge_flavour(VIEW, {"TP-O1", "TP-O2"}, [law])
    # RELEASED watches the CPUs read at STOP and after the idle window, not the core's.
    assert VIEW.kernel is not None
    no_idle = replace(VIEW, kernel=replace(VIEW.kernel, idle={}))
    (released,) = (j for j in judge_core(no_idle) if j.oracle == "RELEASED")
    assert (released.n, released.judged) == (0, False)
    one = replace(VIEW, kernel=replace(VIEW.kernel, idle={1: VIEW.kernel.after[1]}))
    assert next(j.n for j in judge_core(one) if j.oracle == "RELEASED") == idle_ms


@pytest.mark.parametrize(("pair", "n", "why"), [
    (ProfilePair(fold([("hot",)] * 500), fold([])), 0, "perf sampled nothing in the window"),
    (ProfilePair(fold([("hot",)] * 500), fold([("hot",)] * 299)), 0, "too few samples"),
    (ProfilePair(fold([]), fold([]), pairing=(0, 800, 900)), 0,
     "no agent sample paired with one of perf's 900"),
    (ProfilePair(fold([("hot",)] * 400), fold([("hot",)] * 300)), 300, ""),
])  # fmt: skip
def test_profile_says_how_many_it_compared_or_why_none(pair: ProfilePair, n: int, why: str) -> None:
    """A PROFILE that compared nothing is UNJUDGED with its reason, never a pass."""
    judged = profile_judged(pair)
    assert judged.n == n
    assert why in judged.why
    held = check_profile(replace(VIEW, profile=pair)) == []
    assert held  # none of these is a violation: the count is what tells them apart


def test_throttling_on_leaves_throttle_to_the_throttling_case() -> None:
    view = replace(VIEW, throttling_disabled=False)
    assert "THROTTLE" not in applicable_core(view)


@pytest.mark.parametrize(
    ("cores", "expected"),
    [
        pytest.param({0: core(), 1: core()}, [], id="no overflow seen: nothing asked"),
        pytest.param(
            {0: core(x_nmi_total=3), 1: core()},
            [("NMI", None, "x_nmi_ctx_ok > 0 on some CPU", "x_nmi_ctx_ok = 0 on every CPU")],
            id="overflows seen, none in NMI",
        ),
        pytest.param({0: core(x_nmi_total=3, x_nmi_ctx_ok=3), 1: core()}, [], id="in NMI"),
    ],
)
def test_nmi_asks_for_some_overflow_in_nmi_only_when_one_was_seen(
    cores: dict[int, dict[str, int]], expected: list[tuple[str, int | None, str, str]]
) -> None:
    found = check_nmi_context(cores, nmi_expected=True)
    assert [(v.oracle, v.cpu, v.expected, v.observed) for v in found] == expected


def test_nmi_counts_every_context_it_checked() -> None:
    @dataclass(frozen=True)
    class Run:
        core: Mapping[int, Mapping[str, int]]
        nmi_expected: bool = True

    judged = judge_nmi(Run(VIEW.core))  # 150 overflows, 162 producer calls
    assert (judged.oracle, judged.n, judged.judged) == ("NMI", 312, True)
    assert not judge_nmi(Run({0: core(), 1: core()})).judged
