"""Every mutant's case names a run its flavour has (harness.agent.values.info.Mutant.case)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.agent import flavours, mutants
from harness.agent.flavour import behaviour
from harness.agent.values.info import SHARED_CASES


@pytest.mark.parametrize("name", flavours.names())
def test_a_flavour_mutant_names_a_shared_case_or_one_of_its_extra_runs(name: str) -> None:
    """A case no run answers to would plan the mutant into no group: it would never run."""
    known = {*SHARED_CASES, *behaviour(name).extra_runs}
    strays = {m.name: m.case for m in flavours.get(name).mutants if m.case not in known}
    assert strays == {}


def test_the_core_mutants_use_the_shared_cases_only() -> None:
    assert {m.case for m in mutants.CORE_MUTANTS} <= set(SHARED_CASES)


@pytest.mark.parametrize("name", flavours.names())
def test_whether_a_flavour_records_chains_is_said_once(name: str) -> None:
    """CHAIN, its mutants and the truth's module tables all follow FlavourInfo.records_chains."""
    chains = flavours.get(name).records_chains
    assert ("CHAIN" in behaviour(name).oracle_names) == chains
    chain_mutants = {m.name for m in mutants.for_flavour(name) if "CHAIN" in m.caught_by}
    assert bool(chain_mutants) == chains


def test_a_core_mutant_is_built_where_the_flavour_has_what_it_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a flavour records decides its core mutants (`Mutant.needs`), not its name."""
    least = replace(flavours.get("tprof"), records_tid=False, kernel_pids=False, mutants=())
    most = replace(least, records_tid=True, kernel_pids=True, records_chains=True,
                   records_chain_stop=True, pairs_profile=True)  # fmt: skip
    monkeypatch.setitem(flavours.FLAVOURS, "tprof", least)
    few = {m.name for m in mutants.for_flavour("tprof")}
    monkeypatch.setitem(flavours.FLAVOURS, "tprof", most)
    every = {m.name for m in mutants.for_flavour("tprof")}
    assert every == {m.name for m in mutants.CORE_MUTANTS}
    assert every - few == {
        "tgid_as_tid", "ts_skew", "chain_skip_frame", "chain_cut_silent",
        "chain_swap_frames", "chain_end_unsaid", "chain_wrong_task", "kernel_tid_tgid",
        "user_frames_stack", "kernel_chain_cut3",
    }  # fmt: skip
    assert {"handler_pc", "pid_zero_2nd", "flip_mode_7th", "user_pc_shift"} <= few
