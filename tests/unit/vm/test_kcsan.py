"""KCSAN's counters and the overlap model (values from kernel/kcsan/debugfs.c's format)."""

from __future__ import annotations

import pytest

from harness.agent.overlap import (
    SPIN_DIR,
    SPIN_HOOK,
    SPIN_PAUSE,
    spinner_script,
    unload_command,
)
from harness.vm.kcsan import (
    OVERLAP,
    KcsanCounts,
    KcsanSettings,
    KcsanWatch,
    p_seen,
    parse_kcsan_stats,
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
    # 1000 executions at skip_watch 40: 50 watched; a 200 us stall, 100 us on average,
    # against 300 reads a second: q = 1 - exp(-0.03) = 0.0296; 1 - (1 - q)^50 = 0.777.
    settings = KcsanSettings(skip_watch=40, udelay_task_us=200, udelay_interrupt_us=200)
    base = p_seen(1000, 300, settings, in_nmi=True)
    assert base == pytest.approx(0.777, abs=0.001)
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
