"""Every mutant's case names a run its flavour has (harness.agent.module.info.Mutant.case)."""

from __future__ import annotations

import pytest

from harness.agent import flavours, mutants
from harness.agent.flavour import behaviour
from harness.agent.module.info import SHARED_CASES


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
    assert (name in mutants.CHAIN_FLAVOURS) == chains
