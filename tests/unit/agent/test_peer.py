"""PEER: the agent's count against perf's, with the bound the model allows."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from harness.agent.peer.counts import (
    PeerBound,
    armed_spans,
    check_peer,
    info_window,
    peer_range,
    stretch_margin,
)
from harness.errors import InfraError
from harness.vm.perf import PerfCounts, PerfCpu
from harness.vm.perfread import parse_perf_output
from tests.unit.golden import LOGS_DIR

MS = 1_000_000
#: Both recorded sessions ran on CPUs 0-1 of one guest, enabled back to back; this
#: span lies inside both on both CPUs. Counted from the text (awk): 397 and 391 in each.
PAIR_WINDOW = (21_211_693_896, 21_896_998_424)
PAIR_SAMPLES = {0: 397, 1: 391}


def pair(session: str) -> PerfCounts:
    text = (LOGS_DIR / f"arm64-perf-pair-{session}.txt").read_text()
    return parse_perf_output(text, period=MS, cpus=(0, 1), window=PAIR_WINDOW)


def test_two_real_perf_sessions_side_by_side_agree_and_a_dropping_one_does_not() -> None:
    first, second = pair("a"), pair("b")
    assert first.samples() == second.samples() == PAIR_SAMPLES
    assert check_peer(first.samples(), second) == []
    dropping = {cpu: n - n // 7 for cpu, n in first.samples().items()}
    assert [(v.cpu, v.observed) for v in check_peer(dropping, second)] == [(0, "341"), (1, "336")]


def counts_of(*cpus: PerfCpu, window: tuple[int, int] | None = (0, 1000 * MS)) -> PerfCounts:
    return PerfCounts(cpus=cpus, period=MS, window=window, version="perf", totals=())


def cpu_with(cpu: int, samples: int, **kwargs: int) -> PerfCpu:
    base = PerfCpu(cpu, samples, 0, 0, 0, 0, 0, 999 * MS)
    return replace(base, **kwargs)


def test_range_is_samples_plus_lost_with_edges_phase_and_fold_interrupts() -> None:
    # 1000 periods in the window, 600 samples, 100 lost: 300 folded periods, so at
    # most 300 fold interrupts, 0.05 x 300 = 15 of them mismatched.
    allowed = peer_range(cpu_with(0, 600, lost=100), counts_of(cpu_with(0, 600, lost=100)))
    assert allowed.folds == 300
    assert (allowed.low, allowed.high) == (600 - 18, 700 + 18)


def test_fold_interrupts_are_at_most_the_samples() -> None:
    # 8 vCPUs on 2 busy cores: 6 % delivered, 345 samples for 6656 periods.
    allowed = peer_range(cpu_with(0, 345), counts_of(window=(0, 6656 * MS)))
    assert allowed.folds == 345
    assert (allowed.low, allowed.high) == (345 - 21, 345 + 21)


def test_agreeing_counts_pass_and_counts_beyond_the_bound_fail() -> None:
    peer_counts = counts_of(cpu_with(0, 1000), cpu_with(1, 1000))
    assert check_peer({0: 1000 - 3, 1: 1000 + 3}, peer_counts) == []
    [low, high] = check_peer({0: 1000 - 4, 1: 1000 + 4}, peer_counts)
    assert (low.oracle, low.cpu, low.expected, low.observed) == ("PEER", 0, "997..1003", "996")
    assert (high.cpu, high.observed) == (1, "1004")
    assert "edges 2 + phase 1" in low.detail


def test_an_agent_dropping_one_overflow_in_seven_fails_even_on_a_folding_host() -> None:
    # 8 busy vCPUs on 2 host cores: about a third of the periods delivered.
    peer_counts = counts_of(cpu_with(2, 350))
    assert check_peer({2: 350}, peer_counts) == []
    assert [v.cpu for v in check_peer({2: 350 - 350 // 7}, peer_counts)] == [2]


def test_throttling_widens_the_range_by_the_periods_it_spanned() -> None:
    throttled = cpu_with(0, 1000, throttles=2, throttled_ns=10 * MS)
    assert check_peer({0: 1000 + 3 + 14}, counts_of(throttled)) == []
    assert len(check_peer({0: 1000 + 3 + 15}, counts_of(throttled))) == 1


def test_every_cpu_perf_watched_is_judged_and_only_those() -> None:
    # CPU 1 was watched and perf saw nothing there: no interrupt, so nothing folded.
    peer_counts = counts_of(cpu_with(0, 500), PerfCpu(1, 0, 0, 0, 0, 0, None, None))
    [missing, idle] = check_peer({1: 40, 5: 40}, peer_counts)
    assert (missing.cpu, missing.observed) == (0, "no agent count")
    assert (idle.cpu, idle.expected, idle.observed) == (1, "0..3", "40")


def test_the_bound_is_a_parameter() -> None:
    peer_counts = counts_of(cpu_with(0, 1000))
    assert check_peer({0: 1010}, peer_counts, bound=PeerBound(edges=10)) == []


def test_a_run_with_overflows_on_time_can_tell_a_stretched_period() -> None:
    # 1000 periods in the window, 950 delivered: at most 50 fold interrupts.
    on_time = counts_of(cpu_with(0, 950), cpu_with(1, 600))
    assert stretch_margin(on_time) > 0
    stretched = math.floor(950 * 8 / 9)  # an agent counting 9/8 periods per overflow
    assert check_peer({0: stretched, 1: 600}, on_time)  # and PEER does catch it there


def test_a_run_where_most_periods_fold_cannot_tell_it() -> None:
    # 1000 periods, 400 delivered: up to 400 fold interrupts, so no sample need be on time.
    folded = counts_of(cpu_with(0, 400), cpu_with(1, 380))
    assert stretch_margin(folded) <= 0


def test_fold_interrupts_can_hide_a_stretch_the_on_time_share_alone_would_show() -> None:
    # Measured (6.12, 2 vCPUs, tprof's peer run, window 1358 ms, edges 8): perf 934
    # samples with 423 periods folded, `stretched_period` 907, inside the range. The
    # on-time share alone (934 - 423 = 511) promised a loss of 56, more than the slack
    # of 31; the agent's counter, out of phase with perf's, kept its phase at some of
    # perf's 423 fold interrupts and won most of it back.
    window = (0, 1_357_975_280)
    measured = counts_of(cpu_with(0, 934, last_ns=1357 * MS), window=window)
    assert peer_range(measured.cpu(0), measured, PeerBound(edges=8)).folds == 423
    assert check_peer({0: 907}, measured, bound=PeerBound(edges=8)) == []
    assert stretch_margin(measured, PeerBound(edges=8)) <= 0


# Per-CPU armed spans: where PROFILE folds perf's samples of each CPU (`armed_spans`).
INFO = {"arm_begin_ns": "100", "arm_end_ns": "180",
        "disarm_begin_ns": "1000", "disarm_end_ns": "1500"}  # fmt: skip


def armed(at: int, until: int) -> dict[str, int]:
    return {"x_armed_at_ns": at, "x_disarmed_at_ns": until}


def test_each_cpu_is_folded_in_its_own_armed_span_and_others_in_the_outer_span() -> None:
    # CPU 0 disarmed first, CPU 1 last: the outer span would fold perf's samples of
    # CPU 0 for the 480 ns after the agent's event there stopped counting.
    window = info_window(INFO, 10, {0: armed(110, 1020), 1: armed(170, 1500), 2: armed(0, 0)})
    assert window.armed == ((0, 110, 1020), (1, 170, 1500))
    assert window.profile_span(0) == (110, 1020)
    assert window.profile_span(1) == (170, 1500)
    assert window.profile_span(2) == (100, 1500)  # never armed and disarmed: the outer span
    assert (window.inner, window.outer) == ((180, 1000), (100, 1500))


def test_without_the_cores_numbers_every_cpu_is_folded_in_the_outer_span() -> None:
    window = info_window(INFO, 10)
    assert window.armed == ()
    assert window.profile_span(0) == window.outer == (100, 1500)


def test_an_armed_span_may_trim_the_edges_but_never_the_middle() -> None:
    for times in (armed(190, 1200), armed(110, 990), armed(90, 1200), armed(110, 1600)):
        with pytest.raises(InfraError, match="CPU 3: armed"):
            armed_spans({3: times}, inner=(180, 1000), outer=(100, 1500))
