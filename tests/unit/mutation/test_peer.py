"""A peer run that could not judge its mutant says why, so the mutant runs again."""

from __future__ import annotations

from harness.agent import mutants
from harness.agent.peer.counts import PeerBound, PeerEvidence, PeerWindow
from harness.agent.peer.pairing import ProfilePair
from harness.agent.peer.symbols import fold
from harness.mutation.peer import _peer_unjudged
from harness.vm.perfread import parse_perf_output
from tests.unit.golden import LOGS_DIR

COUNTS = parse_perf_output((LOGS_DIR / "arm64-perf-plain.txt").read_text(), period=10_000_000)
WINDOW = PeerWindow((0, 1), (0, 1), PeerBound())
PAIR = ProfilePair(fold([("main", "leaf")] * 300), fold([("main", "leaf")] * 310))
FIXED_PC = mutants.get("fixed_pc_3rd")


def test_a_profile_compared_is_a_judged_run() -> None:
    assert "PROFILE" in FIXED_PC.caught_by
    assert _peer_unjudged(FIXED_PC, PeerEvidence(COUNTS, WINDOW, PAIR)) == ""


def test_a_profile_of_too_few_samples_is_not_a_judged_run() -> None:
    """CI: dt's peer run paired 24 samples, and fixed_pc_3rd survived on them."""
    few = ProfilePair(fold([("main", "leaf")] * 24), fold([("main", "leaf")] * 24),
                      pairing=(24, 1980, 1981))  # fmt: skip
    why = _peer_unjudged(FIXED_PC, PeerEvidence(COUNTS, WINDOW, few))
    assert why == ("compared too few samples to judge (agent 24, perf 24; PROFILE needs 300 a "
                   "side); paired samples only: 24 of the agent's 1980 and perf's 1981 "
                   "(1% of perf's)")  # fmt: skip


def test_every_cpu_left_out_means_the_profile_mutant_was_not_judged() -> None:
    thinned = ProfilePair(fold([]), fold([]), ((0, 13), (1, 116)))
    why = _peer_unjudged(FIXED_PC, PeerEvidence(COUNTS, WINDOW, thinned))
    assert why.startswith("compared no profile (left out, the agent dropped samples there:")
    assert "CPU 1 (116 lost)" in why


def test_a_mutant_profile_does_not_judge_is_not_held_back_by_an_empty_profile() -> None:
    stretched = mutants.get("stretched_period")
    assert "PROFILE" not in stretched.caught_by
    empty = ProfilePair(fold([]), fold([]), ((0, 5),))
    why = _peer_unjudged(stretched, PeerEvidence(COUNTS, WINDOW, empty))
    assert not why.startswith("compared no profile")
