"""What a peer run prints and hands the matrix: PEER's ranges, top symbols, PROFILE's line."""

from __future__ import annotations

import dataclasses

from harness.agent.peer.counts import PeerBound, PeerEvidence, PeerWindow
from harness.agent.peer.pairing import ProfilePair
from harness.agent.peer.profile import profile_report, profile_summary
from harness.agent.peer.symbols import fold
from harness.vm.perfread import parse_perf_output
from tests.unit.golden import LOGS_DIR

COUNTS = parse_perf_output((LOGS_DIR / "arm64-perf-plain.txt").read_text(), period=10_000_000)
PAIR = ProfilePair(fold([("main", "leaf")] * 300 + [("idle",)] * 100),
                   fold([("main", "leaf")] * 310 + [("idle",)] * 90))  # fmt: skip
PEER = PeerEvidence(COUNTS, PeerWindow((0, 1), (0, 1), PeerBound()), PAIR)


def test_the_report_gives_each_cpus_range_the_top_symbols_and_the_statistic() -> None:
    lines = profile_report(PEER).splitlines()
    assert lines[0].startswith("PEER: perf's samples per CPU in the window")
    assert "0: 43 (" in lines[0]  # the recorded run's counts
    assert "1: 43 (" in lines[0]
    assert lines[0].endswith("; of 86 samples recorded")  # perf's whole record: its sizing
    assert lines[1] == "top symbols (leaf): agent 400 samples, perf 400"
    assert lines[3].split() == ["1", "leaf", "75.0%", "leaf", "77.5%"]
    assert lines[-1].startswith("PROFILE: chi2 ")
    assert lines[-1].endswith(": alike")


def test_a_paired_profile_says_on_its_line_how_many_samples_it_paired() -> None:
    paired = dataclasses.replace(PAIR, pairing=(400, 410, 430))
    line = profile_report(dataclasses.replace(PEER, profiles=paired)).splitlines()[-1]
    assert line.endswith(": alike; paired samples only: 400 of the agent's 410 and perf's 430 "
                         "(93% of perf's)")  # fmt: skip


def test_a_profile_of_too_few_samples_is_shown_and_said_not_judged() -> None:
    few = ProfilePair(
        fold([("main", "leaf")] * 290), fold([("main", "leaf")] * 200 + [("idle",)] * 90)
    )
    line = profile_report(dataclasses.replace(PEER, profiles=few)).splitlines()[-1]
    assert line.startswith("PROFILE: chi2 ")  # APART, but 290 a side cannot be judged
    assert line.endswith(": not judged, too few samples to judge (agent 290, perf 290; "
                         "PROFILE needs 300 a side)")  # fmt: skip


def test_no_peer_no_report_and_no_profile_for_the_matrix() -> None:
    assert profile_report(None) == ""
    assert profile_summary(None) == {}


def test_the_matrix_gets_both_profiles_as_folded_text() -> None:
    found = profile_summary(PEER)
    assert found["agent"] == "main;leaf 300\nidle 100\n"
    assert found["perf"] == "main;leaf 310\nidle 90\n"
    assert found["test"].startswith("PROFILE: chi2 ")


def test_the_profile_line_names_the_cpus_left_out_and_their_drops() -> None:
    thinned = PeerEvidence(COUNTS, PEER.window, ProfilePair(PAIR.agent, PAIR.perf, ((1, 91),)))
    assert profile_summary(thinned)["test"].endswith(
        ": alike; left out, the agent dropped samples there: CPU 1 (91 lost)"
    )
