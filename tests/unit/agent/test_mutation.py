from __future__ import annotations

import pytest

from harness.agent import flavours, mutants
from harness.agent.flavour import behaviour
from harness.agent.module.render import render_agent
from harness.agent.module.spec import AgentSpec
from harness.agent.mutants import MutantRow, format_table, merge, survivors, tally
from harness.errors import ConfigError
from harness.mutation.plan import FULL_ONLY_CASES, per_oracle, planned


def test_merge_collects_each_failed_oracle_once_in_case_order() -> None:
    row = merge("m", "tprof", ("IRQ",), [("standard", {"IRQ", "CALLS"}), ("exact", ["IRQ", "A"])])
    assert (row.failed, row.cases, row.verdict) == (("CALLS", "IRQ", "A"), ("standard", "exact"),
                                                    "caught")  # fmt: skip


@pytest.mark.parametrize(
    ("mutant", "expected", "failed", "verdict"),
    [
        ("m", ("IRQ",), ("IRQ",), "caught"),
        ("m", ("IRQ",), ("TP-O1",), "SURVIVED"),  # another oracle is no proof for IRQ
        ("m", ("IRQ",), (), "SURVIVED"),
        ("m", ("KP-O3", "KP-O5"), ("KP-O3", "KP-O5", "KP-O4"), "caught"),
        ("m", ("KP-O3", "KP-O5"), ("KP-O3",), "SURVIVED"),  # each named oracle must catch it
        ("none", (), (), "clean"),
        ("none", (), ("IRQ",), "BROKEN"),
    ],
)
def test_verdicts(
    mutant: str, expected: tuple[str, ...], failed: tuple[str, ...], verdict: str
) -> None:
    row = MutantRow(mutant, "tprof", expected, failed, ("standard",))
    assert row.verdict == verdict
    assert survivors([row]) == ([] if verdict in ("caught", "clean") else [row])


def test_a_mutant_no_run_could_judge_is_reported_neither_caught_nor_survived() -> None:
    unjudged = merge("stretched_period", "tprof", ("PEER",), [("peer", set())],
                     ("peer run 1 could not tell",), unjudged=True)  # fmt: skip
    assert (unjudged.verdict, unjudged.ok, survivors([unjudged])) == ("unjudged", True, [])
    assert unjudged.as_dict()["verdict"] == "unjudged"
    # A catch stays a catch, and a run that judged and missed stays a survival.
    caught = merge("stretched_period", "tprof", ("PEER",), [("peer", {"PEER"})], unjudged=True)
    assert caught.verdict == "caught"
    missed = merge("stretched_period", "tprof", ("PEER",), [("peer", set())])
    assert survivors([missed]) == [missed]
    control = merge("none", "tprof", (), [("peer", set())])
    assert tally([unjudged, caught, missed, control]) == "1 caught, 1 clean, 1 unjudged, 1 SURVIVED"
    assert tally([]) == "no rows"


def test_a_control_that_could_judge_nothing_is_not_clean() -> None:
    # A kcsan case that set no watchpoint: its clean console proves nothing.
    control = merge("none", "dt", (), [("kcsan", set())], ("KCSAN set no watchpoint",),
                    unjudged=True)  # fmt: skip
    assert (control.verdict, control.ok) == ("unjudged", True)
    broken = merge("none", "dt", (), [("kcsan", {"KCSAN"})], unjudged=True)
    assert broken.verdict == "BROKEN"


def test_the_table_names_each_mutant_and_its_notes() -> None:
    rows = [
        MutantRow("none", "tprof", (), (), ("standard", "exact")),
        MutantRow("drop_7th_overflow", "dt", ("IRQ",), ("IRQ", "CALLS"), ("standard",),
                  ("a note",)),
    ]  # fmt: skip
    lines = format_table(rows).splitlines()
    assert lines[0].split() == ["mutant", "flavour", "cases", "must", "fail", "failed", "verdict"]
    assert lines[1].split() == ["none", "tprof", "standard+exact", "-", "-", "clean"]
    assert lines[2].split() == ["drop_7th_overflow", "dt", "standard", "IRQ", "IRQ,CALLS",
                                "caught"]  # fmt: skip
    assert lines[3:] == ["notes:", "  drop_7th_overflow/dt: a note"]


def test_every_mutant_names_an_oracle_its_flavour_has() -> None:
    # Judged by the debug case and the sanitizer cases, by the witness case's WITNESS and
    # the stress case's STRESS, not by a flavour's check.
    known = {"KMEMLEAK", "CONSOLE", "KASAN", "KCSAN", "UBSAN", "WITNESS", "STRESS"}
    for name in flavours.names():
        oracles = set(behaviour(name).oracle_names) | known
        for mutant in mutants.for_flavour(name):
            named = {mutants.unjudged_oracle(token) or token for token in mutant.caught_by}
            assert named <= oracles, (name, mutant.name)


def test_mutant_names_are_unique_and_lower_case() -> None:
    names = mutants.names()
    assert len(names) == len(set(names))
    assert all(name == name.lower() and name.isidentifier() for name in names)


def test_only_a_mutation_build_selects_a_mutant() -> None:
    plain = render_agent(AgentSpec())
    broken = render_agent(AgentSpec(), mutant="drop_7th_overflow")
    assert "#define PA_MUTANT_ACTIVE PA_MUTANT_NONE" in plain.files["profagent.h"]
    assert "#define PA_MUTANT_ACTIVE PA_MUTANT_DROP_7TH_OVERFLOW" in broken.files["profagent.h"]
    assert plain.key != broken.key  # a different cache entry
    assert "mutant" not in AgentSpec.__dataclass_fields__  # no spec, scenario or CLI can


def test_an_unknown_mutant_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown mutant 'nope'; known: drop_7th_overflow"):
        render_agent(AgentSpec(), mutant="nope")


def test_the_quick_set_leaves_out_the_guest_ending_and_debug_mutants() -> None:
    quick = {m.name for m in planned("tprof", full=False)}
    core = {"drop_7th_overflow", "skip_producer_7th", "defer_producer", "nmi_wrapped_trylock",
            "nmi_plain_lock", "self_throttle"}  # fmt: skip
    assert quick == core | {"wrong_cpu", "skip_kick_swap", "shared_pid_cache", "probe_masks_nmi",
                            "double_count", "lose_at_swap", "publish_early",
                            "no_nest_guard",
                            "handler_pc", "pid_zero_2nd", "flip_mode_7th",
                            "parent_sample_5th", "tgid_as_tid", "user_pc_shift",
                            "kernel_pc_shift"}  # fmt: skip
    assert {m.name for m in planned("dt", full=False)} == core | {
        "skip_canary", "drop_uncounted", "ring_holds_14", "gstats_skips_cpu0",
        "recursion_as_drop", "skiptick_short", "retry_get", "producer_skips_open",
        "skiptick_pmu_lost",
        "handler_pc", "pid_zero_2nd", "flip_mode_7th",
        "chain_skip_frame", "chain_cut_silent", "chain_swap_frames", "chain_wrong_task",
        "chain_end_unsaid", "parent_sample_5th", "tgid_as_tid", "user_pc_shift", "kernel_pc_shift",
    }  # fmt: skip
    assert {m.name for m in planned("dt", full=False, case="readers")} == {
        "no_reader_mutex", "fault_loses_copied"
    }  # fmt: skip
    assert {m.name for m in planned("tprof", full=True, case="debug")} == {
        "nmi_spinlock", "leak_at_start", "nmi_lock_via_pointer"
    }  # fmt: skip


def test_every_flavour_runs_the_peer_mutants_beside_perf() -> None:
    for name in flavours.names():
        assert behaviour(name).peer_run is not None, name  # PEER and PROFILE can fail there
        peer = {m.name for m in planned(name, full=False, case="peer")}
        assert peer == {"stretched_period", "fixed_pc_3rd"}, name
        paired = {"ts_skew"} if flavours.get(name).pairs_profile else set()  # pairs by time
        full = {m.name for m in planned(name, full=True, case="peer")}
        assert full == {"stretched_period", "fixed_pc_3rd"} | paired, name
        assert not peer & {m.name for m in planned(name, full=False)}, name


def test_only_narrows_the_planned_mutants_to_those_named() -> None:
    assert {m.name for m in planned("hwpmc", full=False, only=("no_restart",))} == {"no_restart"}
    assert planned("hwpmc", full=False, case="counting", only=("no_restart",)) == ()
    assert {m.name for m in planned("hwpmc", full=False, case="counting")} == {"sc_never_counts"}
    assert {m.name for m in planned("hwpmc", full=False, case="independence")} == {
        "shared_stall_flag"
    }
    assert {m.name for m in planned("kprof", full=False, case="offline")} == {"offline_keeps_block"}


def test_every_oracle_of_every_flavour_has_a_mutant_it_must_catch() -> None:
    for name in flavours.names():
        caught = {oracle for m in mutants.for_flavour(name) for oracle in m.caught_by}
        assert set(behaviour(name).oracle_names) <= caught, name


def test_cis_share_shows_every_oracle_of_the_quick_set_failing_once() -> None:
    names = flavours.names()
    picks = per_oracle(names)
    quick = {
        (n, m.name): m
        for n in names
        for m in mutants.for_flavour(n)
        if m.quick and m.case not in FULL_ONLY_CASES and m.name != "leave_event_armed"
    }
    chosen = [quick[(n, m)] for n, ms in picks.items() for m in ms]  # only quick ones
    wanted = {o for m in quick.values() for o in m.caught_by}
    assert {o for m in chosen for o in m.caught_by} == wanted
    # each pick adds an oracle no earlier pick shows; shared ones only on the first flavour
    assert len(chosen) < len(quick) / 2
    assert "drop_7th_overflow" in picks["tprof"]
    assert "drop_7th_overflow" not in picks["dt"]
    assert "no_reader_mutex" in picks["dt"]  # an extra run's (dt's readers) own oracle
    assert all(picks[n] for n in names)  # every flavour shows its own oracles
