"""What a peer run prints and hands the matrix: PEER's ranges, top symbols, PROFILE's line."""

from __future__ import annotations

import dataclasses

from harness.agent.peer import PeerBound, PeerEvidence, PeerWindow
from harness.agent.peer_run import profile_report, profile_summary
from harness.agent.profile import ProfilePair, fold
from harness.vm.perf import parse_perf_output
from tests.unit.golden import LOGS_DIR

COUNTS = parse_perf_output((LOGS_DIR / "arm64-perf-plain.txt").read_text(), period=10_000_000)
PAIR = ProfilePair(fold([("main", "leaf")] * 30 + [("idle",)] * 10),
                   fold([("main", "leaf")] * 31 + [("idle",)] * 9))  # fmt: skip
PEER = PeerEvidence(COUNTS, PeerWindow((0, 1), (0, 1), PeerBound()), PAIR)


def test_the_report_gives_each_cpus_range_the_top_symbols_and_the_statistic() -> None:
    lines = profile_report(PEER).splitlines()
    assert lines[0].startswith("PEER: perf's samples per CPU in the window")
    assert "0: 43 (" in lines[0]  # the recorded run's counts
    assert "1: 43 (" in lines[0]
    assert lines[1] == "top symbols (leaf): agent 40 samples, perf 40"
    assert lines[3].split() == ["1", "leaf", "75.0%", "leaf", "77.5%"]
    assert lines[-1].startswith("PROFILE: chi2 ")
    assert lines[-1].endswith(": alike")


def test_a_paired_profile_says_on_its_line_how_many_samples_it_paired() -> None:
    paired = dataclasses.replace(PAIR, pairing=(40, 41, 43))
    line = profile_report(dataclasses.replace(PEER, profiles=paired)).splitlines()[-1]
    assert line.endswith(": alike; paired samples only: 40 of the agent's 41 and perf's 43 "
                         "(93% of perf's)")  # fmt: skip


def test_no_peer_no_report_and_no_profile_for_the_matrix() -> None:
    assert profile_report(None) == ""
    assert profile_summary(None) == {}


def test_the_matrix_gets_both_profiles_as_folded_text() -> None:
    found = profile_summary(PEER)
    assert found["agent"] == "main;leaf 30\nidle 10\n"
    assert found["perf"] == "main;leaf 31\nidle 9\n"
    assert found["test"].startswith("PROFILE: chi2 ")


def test_the_profile_line_names_the_cpus_left_out_and_their_drops() -> None:
    thinned = PeerEvidence(COUNTS, PEER.window, ProfilePair(PAIR.agent, PAIR.perf, ((1, 91),)))
    assert profile_summary(thinned)["test"].endswith(
        ": alike; left out, the agent dropped samples there: CPU 1 (91 lost)"
    )
