"""What a flavour tells the shared stress plan and the overlap watch about itself: data only.

Every flavour, in the tree or outside it, is put through the same stress plan
(`harness.scenarios.stress`): its buffers filled past their capacity, each drop cause
provoked on its own, a reader running all through the producers, a stop and start
while they run, and its exact run. The flavour declares only what the plan cannot
know, as scenario steps (`scenarios/FORMAT.md`) and counter names::

    Stress(agent={"skel_slots": 16}, capacity=16, full="x_drop_full",
           causes=("x_drop_full", "x_drop_stopped", "x_drop_nested"),
           recorded="x_recorded",
           unprovoked={"x_drop_nested": "no hook holds a producer call open"})

A step is one ``[[steps]]`` table as a mapping; ``"cpu": "each"`` repeats it on every
CPU of the topology, in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: One ``[[steps]]`` table: ``{"op": "inject", "cpu": 0, "count": 5}``.
StepData = Mapping[str, int | str | bool]
#: An ``[agent]`` table's keys beyond ``flavour`` (small buffers, injected bursts only).
AgentKeys = Mapping[str, int | str | bool]


@dataclass(frozen=True, slots=True)
class Provoke:
    """Steps that make one drop cause count on CPU 0, and exactly what every cause reads.

    After ``steps`` (on top of `Stress.agent` and ``agent``), CPU 0's ``counter`` reads
    ``count``; every other cause of `Stress.causes` reads its value in ``others``
    (0 where absent) on every CPU.
    """

    counter: str
    count: int
    steps: tuple[StepData, ...]
    agent: AgentKeys = field(default_factory=dict)
    others: Mapping[str, int] = field(default_factory=dict)
    why: str = ""  # what the steps do, for the case's description


@dataclass(frozen=True, slots=True)
class Stress:
    """A flavour's part of the shared stress plan.

    ``agent``: the ``[agent]`` keys of every case but the reader's (small buffers,
    ``pmu_produce = false``). ``capacity``: records one CPU keeps unread under them
    (``global_buffer``: records the whole machine keeps), in multiples of
    ``granule``, the records a full buffer drops together (kprof: a block).
    ``full``: the counter of records a full buffer dropped; ``causes``: every drop
    cause counter, each 0 unless a case provokes it; ``recorded``: the counter of
    records kept (None: the flavour has none per CPU). ``inject_op`` makes records
    (kprof: ``inject-task``, uniform records); each fill burst makes ``spill`` records
    more than whole granules (kprof: 1, as a block is handed off by the call after the
    one that filled it). ``setup`` runs first in the fill and
    provoke cases (hwpmc: the sweeps held back); ``flush`` after the fill's bursts
    (tprof: a kick moves the buffers to the read list). ``reader``: steps that start
    a reader concurrent with the producers for the rest of the run, under
    ``reader_agent`` (``()``: the flavour's own consumer already runs; None: it has
    none, and the plan says so). ``restart``: steps that stop and start it while
    producers run (None: none declared). ``unprovoked``: cause → why no step can
    provoke it alone.
    """

    agent: AgentKeys
    capacity: int
    full: str
    causes: tuple[str, ...]
    recorded: str | None = None
    granule: int = 1
    global_buffer: bool = False
    inject_op: str = "inject"
    spill: int = 0
    setup: tuple[StepData, ...] = ()
    flush: tuple[StepData, ...] = ()
    provoke: tuple[Provoke, ...] = ()
    reader: tuple[StepData, ...] | None = None
    reader_agent: AgentKeys = field(default_factory=dict)
    restart: tuple[StepData, ...] | None = None
    unprovoked: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RareWriters:
    """A run that makes a flavour's rare writers write often: the overlap watch repeats it.

    ``agent``: its ``[agent]`` keys (small blocks, small rings, a short sweep or drain
    period); ``steps``: its scenario steps, ``"cpu": "each"`` as in `Stress` (a reader
    that drains often, or none so that the rings stay full). ``name`` says what it does
    in the report (``"16 KiB blocks, a reader draining"``). The overlap watch runs it beside
    its spinners while a pair that names it is not met, up to the model's cap
    (`harness.agent.rarerounds.drive_rare_writers`).
    """

    name: str
    agent: AgentKeys
    steps: tuple[StepData, ...]


@dataclass(frozen=True, slots=True)
class RacePair:
    """A variable a producer writes and the overlap watch's spinners read: one pair to meet.

    ``writer`` names the run's number that counts the writer's executions on one CPU,
    with ``{cpu}`` for it (``percpu.{cpu}.x_committed``: one store of the index per
    committed event); ``in_nmi``: the writer runs in NMI (KCSAN's interrupt stall).
    `harness.vm.kcsan.pair_cover` says whether a race there could have been seen.
    ``drive``: the run that makes this writer write often, repeated while the pair is
    not met (None: none declared; an unmet pair stays UNJUDGED).
    """

    name: str
    writer: str
    in_nmi: bool = True
    drive: RareWriters | None = None
