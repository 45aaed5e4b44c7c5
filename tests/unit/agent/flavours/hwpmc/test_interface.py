"""hwpmc's fuzzing model: which bursts can land, where a full ring stalls its counter.

Pure: the model over `Step` values (`harness.fuzz.generate`).
"""

from __future__ import annotations

from harness.agent.flavours.hwpmc.interface import INTERFACE
from harness.fuzz import generate
from harness.scenarios.types import Step

TARGET = generate.Target(INTERFACE, cpus=2)
SMALL = generate.Target(INTERFACE, cpus=2, params={"nsamples": 8})


def test_a_burst_into_a_suppressed_full_ring_is_not_drawn() -> None:
    # Fuzz seed 7 on the fixed build: the ring of CPU 1 filled with its sweeps
    # suppressed, its counter stalled, and the next burst there waited out 30 s.
    facts = generate.walk(TARGET, (Step("suppress", cpu=1), Step("inject", cpu=1, count=2106)))
    assert not generate.allows(TARGET, facts, Step("inject", cpu="all", count=1))
    assert not generate.allows(TARGET, facts, Step("inject", cpu=1, count=1))
    assert generate.allows(TARGET, facts, Step("inject", cpu=0, count=2106))  # CPU 0 sweeps


def test_a_suppressed_ring_takes_bursts_until_it_could_be_full() -> None:
    facts = generate.walk(SMALL, (Step("suppress", cpu=0), Step("inject", cpu="all", count=4)))
    assert generate.allows(SMALL, facts, Step("inject", cpu=0, count=3))  # 7 of 8
    assert not generate.allows(SMALL, facts, Step("inject", cpu=0, count=4))


def test_entries_before_the_suppress_count_and_a_resume_empties_the_ring() -> None:
    before = generate.walk(SMALL, (Step("inject", cpu=0, count=8), Step("suppress", cpu=0)))
    assert not generate.allows(SMALL, before, Step("inject", cpu=0, count=1))  # maybe unswept
    steps = (Step("resume", cpu=0), Step("suppress", cpu=0))
    again = generate.walk(SMALL, (Step("inject", cpu=0, count=8), Step("suppress", cpu=0), *steps))
    assert generate.allows(SMALL, again, Step("inject", cpu=0, count=7))
