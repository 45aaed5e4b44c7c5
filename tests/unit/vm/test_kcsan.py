"""KCSAN's counters and the overlap model (values from kernel/kcsan/debugfs.c's format)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from harness.agent.overlap import (
    SPIN_DIR,
    SPIN_HOOK,
    SPIN_PAUSE,
    WatchSetup,
    host_share,
    overlap_watch,
    pair_covers,
    spinner_count,
    spinner_script,
    unload_command,
)
from harness.agent.values.stress import RacePair
from harness.errors import GuestError
from harness.vm.kcsan import (
    KCSAN_DEBUGFS,
    KCSAN_PARAMS,
    KNOBS,
    OVERLAP,
    READ_SETTINGS,
    KcsanCounts,
    KcsanSettings,
    KcsanWatch,
    co_scheduled,
    p_seen,
    pair_cover,
    parse_kcsan_stats,
    parse_settings,
    watched_share,
)

DEBUGFS_TEXT = """enabled: 1
used_watchpoints: 0
setup_watchpoints: 1200
data_races: 3
assert_failures: 0
no_capacity: 2
report_races: 0
races_unknown_origin: 1
unencodable_accesses: 0
encoding_false_positives: 0

blacklisted functions: none
"""


def test_debugfs_text_is_read_into_counts() -> None:
    counts = parse_kcsan_stats(DEBUGFS_TEXT)
    assert (counts.enabled, counts.setup_watchpoints, counts.data_races) == (1, 1200, 3)
    assert (counts.no_capacity, counts.races_unknown_origin) == (2, 1)


def test_text_without_counters_is_refused() -> None:
    with pytest.raises(ValueError, match="no KCSAN counters"):
        parse_kcsan_stats("cat: can't open '/sys/kernel/debug/kcsan'")


def test_until_is_the_change_of_each_counter() -> None:
    before = parse_kcsan_stats(DEBUGFS_TEXT)
    text = DEBUGFS_TEXT.replace("1200", "1500").replace("data_races: 3", "data_races: 5")
    after = parse_kcsan_stats(text)
    change = before.until(after)
    assert (change.enabled, change.setup_watchpoints, change.data_races) == (1, 300, 2)


def watch(setup: int, reads: int = 100, enabled: int = 1) -> KcsanWatch:
    return KcsanWatch("dt none", OVERLAP, KcsanCounts(enabled=enabled, setup_watchpoints=setup),
                      reads)  # fmt: skip


def test_a_case_that_set_no_watchpoint_is_unjudged() -> None:
    assert watch(300).unjudged_reason() == ""
    assert "no watchpoint" in watch(0).unjudged_reason()
    assert "no spinner" in watch(300, reads=0).unjudged_reason()
    assert "disabled" in watch(300, enabled=0).unjudged_reason()
    assert watch(0).describe().endswith("UNJUDGED (KCSAN set no watchpoint: no access of the "
                                        "agent was watched)")  # fmt: skip


def test_the_overlap_model() -> None:
    # 1000 executions at skip_watch 40: one watched in (40 + 3) / 2, 46.5 watched; a 200 us
    # stall, 100 us on average, against 300 reads a second: q = 1 - exp(-0.03) = 0.0296;
    # 1 - (1 - q)^46.5 = 1 - exp(-0.03 x 46.5) = 0.752.
    settings = KcsanSettings(skip_watch=40, udelay_task_us=200, udelay_interrupt_us=200)
    assert watched_share(settings) == pytest.approx(2 / 43)
    base = p_seen(1000, 300, settings, in_nmi=True)
    assert base == pytest.approx(0.752, abs=0.001)
    # Never watched: never seen; more watches, longer stalls or a faster reader: likelier.
    assert p_seen(0, 300, settings, in_nmi=True) == 0
    assert p_seen(2000, 300, settings, in_nmi=True) > base
    assert p_seen(1000, 600, settings, in_nmi=True) > base
    shorter = KcsanSettings(skip_watch=40, udelay_task_us=200, udelay_interrupt_us=20)
    assert p_seen(1000, 300, shorter, in_nmi=True) < base
    assert p_seen(1000, 300, shorter, in_nmi=False) == base  # a task's stall is udelay_task


def test_a_spinner_is_movable_pauses_for_an_unload_and_stops_on_its_file() -> None:
    script = spinner_script(1)
    assert script.startswith("printf 'repeat:")  # no pin step: a run's isolation can move it
    assert "exec:" not in script
    assert f"[ ! -e {SPIN_DIR}/stop ]" in script
    assert f"if [ -e {SPIN_PAUSE} ]" in script
    assert script.endswith("&")  # detached: the SSH command returns at once
    assert f"write:{SPIN_HOOK}:count=" in script  # the module's spinner hook
    unload = unload_command("profagent")
    assert unload.startswith(f"touch {SPIN_PAUSE}; ")
    assert unload.endswith(f"rm -f {SPIN_PAUSE}")


def test_counted_races_are_data_races_and_races_of_unknown_origin() -> None:
    counts = KcsanCounts(enabled=1, setup_watchpoints=9, data_races=2, races_unknown_origin=3)
    assert KcsanWatch("dt x", OVERLAP, counts, 10).races == 5
    assert watch(300).races == 0


def test_two_vcpus_meet_only_while_both_hold_a_host_core() -> None:
    assert co_scheduled(2, 2) == 1.0
    assert co_scheduled(8, 2) == pytest.approx(2 / 56)
    assert co_scheduled(4, 1) == 0.0


def test_a_pair_whose_writer_never_ran_is_not_met() -> None:
    cover = pair_cover("idle", 0, in_nmi=True, reads_per_s=1000, settings=OVERLAP, share=1)
    assert (cover.meetings, cover.p_seen, cover.met) == (0, 0, False)
    assert "UNJUDGED" in cover.describe()


def test_a_rare_writer_is_met_later_than_a_frequent_one() -> None:
    def cover(n: int) -> bool:
        return pair_cover("x", n, in_nmi=True, reads_per_s=100, settings=OVERLAP, share=1).met

    # W = 2n/100 watches of 50 us mean, each met by a read with 1 - exp(-100 x 50e-6)
    # = 0.005: met (p 0.95, 3 meetings) from about n = 30000.
    assert not cover(20_000)
    assert cover(40_000)


def test_pair_covers_sum_the_writer_over_runs_and_cpus() -> None:
    @dataclass
    class Numbers:
        values: dict[str, int]

        def numbers(self) -> dict[str, int]:
            return self.values

    runs = [Numbers({"percpu.0.w": 5, "percpu.1.w": 7}), Numbers({"percpu.1.w": 1})]
    watch = KcsanWatch("c", OVERLAP, KcsanCounts(enabled=1), spinner_reads=100, seconds=10)
    (cover,) = pair_covers([RacePair("w", "percpu.{cpu}.w")], runs, watch, 2)  # type: ignore[arg-type]
    assert cover.executions == 13
    assert watch.reads_per_s == 10
    # An NMI writer stalls its own vCPU: only the reads made on the other vCPUs meet it
    # (half on 2, none on 1); a task writer's stall leaves them all counted.
    pairs = [RacePair("w", "percpu.{cpu}.w"), RacePair("t", "percpu.{cpu}.w", in_nmi=False)]
    for vcpus, elsewhere in ((1, 0.0), (2, 0.5), (8, 7 / 8)):
        nmi, task = pair_covers(pairs, runs, watch, vcpus)  # type: ignore[arg-type]
        share = host_share(vcpus)
        assert nmi.meetings == pytest.approx(pair_cover(
            "w", nmi.executions, in_nmi=True, reads_per_s=10 * elsewhere, settings=OVERLAP,
            share=share).meetings)  # fmt: skip
        assert task.meetings == pytest.approx(pair_cover(
            "t", task.executions, in_nmi=False, reads_per_s=10, settings=OVERLAP,
            share=share).meetings)  # fmt: skip
    (alone,) = pair_covers(pairs[:1], runs, watch, 1)  # type: ignore[arg-type]
    assert alone.meetings == 0


def test_the_verdict_counts_pairs_met_and_names_the_rest_unjudged() -> None:
    watch = KcsanWatch("dt", OVERLAP, KcsanCounts(enabled=1, setup_watchpoints=900), 100, 10)
    met = pair_cover("ring index", 100_000, in_nmi=True, reads_per_s=1000, settings=OVERLAP,
                     share=1)  # fmt: skip
    rare = pair_cover("hand-off", 11, in_nmi=True, reads_per_s=1000, settings=OVERLAP, share=1)
    text = watch.describe([met, rare])
    assert text.endswith("could see a race on 1 of 2 declared pairs; UNJUDGED: hand-off")
    assert "could see a race somewhere (no pair declared" in watch.describe()


@dataclass(frozen=True, slots=True)
class Output:
    stdout: str
    exit_status: int = 0
    stderr: str = ""


class KnobShell:
    """A guest whose KCSAN knobs and counters are files; the spinners stop at once."""

    def __init__(self, knobs: KcsanSettings, fail_on: str = "") -> None:
        self.knobs = dict(zip(KNOBS, (knobs.skip_watch, knobs.udelay_task_us,
                                      knobs.udelay_interrupt_us), strict=True))  # fmt: skip
        self.fail_on, self.seen = fail_on, list[KcsanSettings]()

    def settings(self) -> KcsanSettings:
        return KcsanSettings(*(self.knobs[name] for name in KNOBS))

    def run(self, command: str, *, timeout_s: float | None = None, check: bool = True) -> Output:
        if self.fail_on and self.fail_on in command:
            raise GuestError(f"{command}: failed")
        if command == READ_SETTINGS:
            return Output("\n".join(str(self.knobs[name]) for name in KNOBS) + "\n")
        for write in re.finditer(rf"echo (-?\d+) > {KCSAN_PARAMS}/(\w+)", command):
            self.knobs[write[2]] = int(write[1])
        if KCSAN_DEBUGFS in command:
            self.seen.append(self.settings())  # what the watch ran under
            return Output(DEBUGFS_TEXT)
        return Output("1\n" * spinner_count((0, 1)) if ".passes" in command else "")


BOOT = KcsanSettings(skip_watch=4000, udelay_task_us=80, udelay_interrupt_us=20)
ROUND = KcsanSettings(skip_watch=100, udelay_task_us=5, udelay_interrupt_us=400)


def test_the_knobs_are_read_back_as_settings() -> None:
    shell = KnobShell(BOOT)
    assert parse_settings(shell.run(READ_SETTINGS).stdout) == BOOT
    with pytest.raises(ValueError, match="skip_watch"):
        parse_settings("4000\n80\n")


def test_a_watch_sets_its_knobs_and_puts_back_the_guests_after() -> None:
    shell = KnobShell(BOOT)
    result, watch = overlap_watch(WatchSetup(shell, (0, 1), 10, ROUND), "t", lambda: 7)
    assert (result, watch.settings) == (7, ROUND)
    assert shell.seen == [ROUND, ROUND]  # both counter reads under the round's knobs
    assert shell.settings() == BOOT


def test_a_watch_whose_runs_fail_still_puts_the_knobs_back() -> None:
    shell = KnobShell(BOOT)

    def runs() -> None:
        raise GuestError("the agent's run failed")

    with pytest.raises(GuestError, match="the agent's run failed"):
        overlap_watch(WatchSetup(shell, (0, 1), 10, ROUND), "t", runs)
    assert shell.settings() == BOOT


def test_a_restore_that_fails_does_not_hide_the_runs_error() -> None:
    shell = KnobShell(BOOT)

    def runs() -> None:
        shell.fail_on = f"echo {BOOT.skip_watch} >"  # the guest is gone by the restore
        raise GuestError("the agent's run failed")

    with pytest.raises(GuestError, match="the agent's run failed"):
        overlap_watch(WatchSetup(shell, (0, 1), 10, ROUND), "t", runs)
