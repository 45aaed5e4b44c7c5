"""The overlap watch's rare-writer rounds: repeated until each pair is met, a cap, a budget."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.agent import flavours
from harness.agent.flavour import behaviour
from harness.agent.overlap import SAMPLING, declared_pairs
from harness.agent.rarerounds import CAP_FACTOR, NMI_ROUNDS, drive_rare_writers, round_settings
from harness.agent.values.stress import RacePair, RareWriters
from harness.scenarios.load import load_scenario
from harness.scenarios.rarewriters import rare_case
from harness.vm.kcsan import MEETINGS_MET, OVERLAP, KcsanSettings, PairCover

SMALL = RareWriters("small blocks", {"cpubufsz": 16384}, ({"op": "idle", "ms": 100},))
OTHER = RareWriters("no reader", {}, ({"op": "spin", "cpu": "each", "ms": 100},))


def cover(name: str, meetings: float, executions: int = 10) -> PairCover:
    return PairCover(name, executions, meetings, 1 - math.exp(-meetings))


class FakeRounds:
    """Each round of a drive meets each pair ``per_round[drive][pair]`` times (a list: in turn).

    A pair met 0 times had no write in the round.
    """

    def __init__(self, per_round: dict[str, dict[str, list[float]]],
                 seconds: float | list[float] = 10) -> None:  # fmt: skip
        self.per_round, self.ran = per_round, list[str]()
        self.seconds = seconds if isinstance(seconds, list) else [seconds]

    def __call__(self, drive: RareWriters) -> tuple[Sequence[PairCover], float]:
        rounds = self.ran.count(drive.name)
        self.ran.append(drive.name)
        found = self.per_round.get(drive.name, {})
        met = {name: m[min(rounds, len(m) - 1)] for name, m in found.items()}
        seconds = self.seconds[min(rounds, len(self.seconds) - 1)]
        return [cover(name, m, 10 if m else 0) for name, m in met.items()], seconds


def test_a_rare_writer_is_driven_until_met() -> None:
    pairs = [RacePair("offset", "o"), RacePair("hand-off", "h", drive=SMALL)]
    rounds = FakeRounds({"small blocks": {"offset": [5.0], "hand-off": [0.7]}})
    result = drive_rare_writers(pairs, [cover("offset", 4.0), cover("hand-off", 0.1)], rounds, 300)
    # 3.0 meetings needed, 0.1 before, 0.7 a round: 5 rounds (0.1 + 3.5).
    assert rounds.ran == ["small blocks"] * 5
    assert [d.cover.met for d in result.pairs] == [True, True]
    assert result.pairs[1].rounds == 5
    assert result.pairs[1].cover.meetings == pytest.approx(3.6)
    assert (result.rounds, result.seconds) == (5, 50)
    assert result.describe("kprof").endswith("could see a race on 2 of 2 declared pairs")


def test_a_pair_met_by_the_case_runs_no_round() -> None:
    pairs = [RacePair("index", "i", drive=SMALL)]
    rounds = FakeRounds({})
    result = drive_rare_writers(pairs, [cover("index", 3.5)], rounds, 300)
    assert rounds.ran == []
    assert (result.rounds, result.pairs[0].why, result.pairs[0].cover.met) == (0, "", True)


def test_a_writer_that_never_runs_in_its_drive_stays_unjudged_after_one_round() -> None:
    pairs = [RacePair("hand-off", "h", drive=SMALL)]
    rounds = FakeRounds({"small blocks": {"hand-off": [0.0]}})
    result = drive_rare_writers(pairs, [cover("hand-off", 0.0, executions=0)], rounds, 300)
    (driven,) = result.pairs
    assert rounds.ran == ["small blocks"]
    assert not driven.cover.met
    assert driven.why == "small blocks: its writer did not run in 1 round(s) of it"
    assert "UNJUDGED: hand-off (small blocks: its writer did not run" in result.describe("x")
    assert "UNJUDGED" in driven.describe()


def test_a_pair_without_a_drive_stays_unjudged_and_runs_nothing() -> None:
    rounds = FakeRounds({})
    result = drive_rare_writers([RacePair("swap", "s")], [cover("swap", 0.2)], rounds, 300)
    assert rounds.ran == []
    assert result.pairs[0].why == "no rare-writer run declared"
    assert result.describe("tprof").endswith("UNJUDGED: swap (no rare-writer run declared)")


def test_a_pair_another_drive_does_not_meet_stays_unjudged_by_name() -> None:
    pairs = [RacePair("index", "i", drive=SMALL), RacePair("full", "f", drive=OTHER)]
    per_round = {"small blocks": {"index": [1.0], "full": [0.0]},
                 "no reader": {"index": [0.0], "full": [0.0]}}  # fmt: skip
    rounds = FakeRounds(per_round, seconds=1)
    result = drive_rare_writers(pairs, [cover("index", 0.5), cover("full", 0.0, 0)], rounds, 300)
    assert rounds.ran == ["small blocks"] * 3 + ["no reader"]
    assert [d.cover.met for d in result.pairs] == [True, False]
    assert result.describe("dt").endswith(
        "could see a race on 1 of 2 declared pairs; "
        "UNJUDGED: full (no reader: its writer did not run in 1 round(s) of it)"
    )


def test_the_cores_pair_is_driven_by_the_flavours_first_drive() -> None:
    pairs = declared_pairs([RacePair("hand-off", "h", drive=SMALL),
                            RacePair("reader", "r", in_nmi=False)])  # fmt: skip
    assert [p.name for p in pairs] == ["the core's producer-call count", "hand-off", "reader"]
    assert pairs[0].drive == SMALL
    assert pairs[2].drive is None  # sampling does not move a reader's index: none made up


def test_a_pair_written_in_nmi_with_no_drive_is_driven_by_sampling() -> None:
    # A scaffolded port declares no drive: on 2 vCPUs its ring index and the core's count
    # went unmet over its standard and exact runs, and no round ran.
    core, ring = declared_pairs([RacePair("ring index", "percpu.{cpu}.x_recorded")])
    assert core.drive == SAMPLING
    assert ring.drive == SAMPLING
    assert declared_pairs([])[0].drive == SAMPLING


def test_the_budget_stops_a_drive_the_model_says_cannot_finish() -> None:
    pairs = [RacePair("hand-off", "h", drive=SMALL)]
    rounds = FakeRounds({"small blocks": {"hand-off": [0.01]}}, seconds=10)
    result = drive_rare_writers(pairs, [cover("hand-off", 0.0)], rounds, 300)
    # 300 rounds of 10 s expected: not started beyond the first.
    assert rounds.ran == ["small blocks"]
    (driven,) = result.pairs
    assert not driven.cover.met
    assert driven.why == (
        "small blocks: the model expects 300 rounds of 10 s (hand-off: 3000 "
        "writes at 10 a round), more than the 290 s left of the budget"
    )


def test_a_drive_slower_than_the_model_expected_stops_at_its_cap() -> None:
    pairs = [RacePair("hand-off", "h", drive=SMALL)]
    # The first round promises 3 rounds; later rounds meet a tenth as often.
    rounds = FakeRounds({"small blocks": {"hand-off": [1.0, 0.1]}}, seconds=1)
    result = drive_rare_writers(pairs, [cover("hand-off", 0.0)], rounds, 300)
    assert len(rounds.ran) == CAP_FACTOR * math.ceil(MEETINGS_MET / 1.0)
    (driven,) = result.pairs
    assert not driven.cover.met
    assert driven.why == f"small blocks: not met after {len(rounds.ran)} rounds, the cap"


def test_the_budget_ends_rounds_that_ran_long() -> None:
    pairs = [RacePair("hand-off", "h", drive=SMALL)]
    rounds = FakeRounds({"small blocks": {"hand-off": [0.5]}}, seconds=100)
    result = drive_rare_writers(pairs, [cover("hand-off", 0.0)], rounds, 250)
    # 6 rounds expected, 600 s: more than 150 s left after the first: stopped at once.
    assert rounds.ran == ["small blocks"]
    assert "more than the 150 s left of the budget" in result.pairs[0].why


def test_every_drive_runs_and_a_round_counts_for_every_pair() -> None:
    pairs = [RacePair("full", "f", drive=OTHER), RacePair("hand-off", "h", drive=SMALL)]
    per_round = {"no reader": {"full": [1.0], "hand-off": [0.0]},
                 "small blocks": {"full": [0.0], "hand-off": [1.5]}}  # fmt: skip
    rounds = FakeRounds(per_round, seconds=1)
    result = drive_rare_writers(pairs, [cover("full", 0.5), cover("hand-off", 0.0)], rounds, 300)
    assert rounds.ran == ["no reader"] * 3 + ["small blocks"] * 2
    assert [d.rounds for d in result.pairs] == [3, 2]
    assert result.rounds == 5


def test_rounds_needed_is_the_meetings_missing_over_a_rounds() -> None:
    assert cover("x", 1.0).rounds_needed(cover("x", 0.5)) == math.ceil((MEETINGS_MET - 1) / 0.5)
    assert cover("x", 3.5).rounds_needed(cover("x", 0.0)) == 0
    assert cover("x", 1.0).rounds_needed(cover("x", 0.0)) is None
    both = cover("x", 1.0, executions=3).plus(cover("x", 2.0, executions=4))
    assert (both.executions, both.meetings) == (7, 3.0)
    assert both.p_seen == pytest.approx(1 - math.exp(-3))


def test_a_drive_is_a_scenario_with_each_cpu_expanded(tmp_path: Path) -> None:
    case = rare_case("dt", OTHER, "1s1cl2c1t", 2)
    path = tmp_path / f"{case.file}.toml"
    path.write_text(case.text)
    scenario = load_scenario(path)
    assert case.file == "rare-dt-no-reader"
    assert [(s.op, s.cpu) for s in scenario.steps] == [("spin", 0), ("spin", 1)]


@pytest.mark.parametrize("name", flavours.names())
def test_each_flavours_pairs_have_a_drive_that_loads(name: str, tmp_path: Path) -> None:
    pairs = behaviour(name).race_pairs
    assert pairs
    for pair in pairs:
        assert pair.drive is not None, f"{name}: {pair.name} declares no rare-writer run"
        case = rare_case(name, pair.drive, "1s1cl2c1t", 2)
        path = tmp_path / f"{case.file}.toml"
        path.write_text(case.text)
        assert load_scenario(path).agent.flavour == name


def test_rounds_longer_than_the_first_end_when_the_next_would_pass_the_budget() -> None:
    pairs = [RacePair("hand-off", "h", drive=SMALL)]
    # The first round (10 s) promises 3 rounds in 30 s; the next one takes 200 s.
    rounds = FakeRounds({"small blocks": {"hand-off": [1.0]}}, seconds=[10.0, 200.0])
    result = drive_rare_writers(pairs, [cover("hand-off", 0.0)], rounds, 300)
    # After 2 rounds (210 s) a third at their mean (105 s) would pass 300 s.
    assert len(rounds.ran) == 2
    assert result.pairs[0].why == "small blocks: the budget of 300 s ran out after 2 rounds"
    assert result.seconds == 210


def test_no_round_runs_where_vcpus_share_host_cores() -> None:
    pairs = [RacePair("offset", "o"), RacePair("hand-off", "h", drive=SMALL)]
    rounds = FakeRounds({"small blocks": {"hand-off": [5.0]}})
    covers = [cover("offset", 4.0), cover("hand-off", 0.1)]
    result = drive_rare_writers(pairs, covers, rounds, 300, share=2 / 56)
    assert rounds.ran == []  # the round would have met it: the share alone decides
    assert [d.cover.met for d in result.pairs] == [True, False]
    assert "no round: two vCPUs hold host cores at once 0.036 of the time" in result.pairs[1].why
    assert "UNJUDGED: hand-off (small blocks: no round" in result.describe("kprof")


def test_a_drive_of_nmi_writers_only_runs_its_rounds_under_the_nmi_knobs() -> None:
    nmi = (RacePair("index", "a", drive=SMALL), RacePair("count", "b", drive=SMALL))
    mixed = (*nmi, RacePair("reader", "c", in_nmi=False, drive=OTHER),
             RacePair("drop", "d", drive=OTHER))  # fmt: skip
    assert round_settings(nmi, SMALL, OVERLAP) == NMI_ROUNDS
    assert round_settings(mixed, OTHER, OVERLAP) == OVERLAP  # a task writer's stall kept
    assert round_settings(nmi, OTHER, OVERLAP) == OVERLAP  # no pair of its own


def test_the_nmi_knobs_shorten_only_the_task_stall_and_keep_the_watch_rate() -> None:
    assert NMI_ROUNDS.skip_watch == OVERLAP.skip_watch  # the model's 2 / skip_watch as measured
    assert NMI_ROUNDS.udelay_task_us < OVERLAP.udelay_task_us
    assert NMI_ROUNDS.udelay_interrupt_us > OVERLAP.udelay_interrupt_us


@pytest.mark.parametrize(("name", "knobs"), [("kprof", NMI_ROUNDS), ("tprof", OVERLAP),
                                             ("dt", OVERLAP)])  # fmt: skip
def test_each_flavours_first_drive_rounds_under_the_knobs_its_writers_allow(
    name: str, knobs: KcsanSettings
) -> None:
    pairs = declared_pairs(behaviour(name).race_pairs)
    first = pairs[0].drive
    assert first is not None
    assert round_settings(pairs, first, OVERLAP) == knobs
