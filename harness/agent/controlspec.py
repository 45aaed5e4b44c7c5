"""A flavour's control interface as data: what a fuzzer may call, with which arguments.

Each flavour declares one `ControlInterface` in its folder's ``interface.py``
(``INTERFACE``); an outside flavour package does the same in its own package. The
ops are scenario step ops (`harness.scenarios.types.OPS` and the flavour's own), so
a generated sequence is a scenario and a finding replays with ``invoke repro``::

    INTERFACE.op("inject").arg("count").valid      # (1, 4000)
    INTERFACE.model.allows(facts, step)            # whether the model lets it run now

An argument's ``valid`` range is what the agent must accept; ``edge`` values sit on
its boundaries; ``invalid`` values the scenario loader takes and the agent must
refuse (kprof's ``prof_qlimit 1``). A `Law` is a pair of a run's numbers that must be
equal after every sequence; a `Model`'s ``expected`` adds numbers it predicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

#: What a ``cpu`` argument may name: one CPU, one or ``all``, a CPU that can go offline.
CpuKind = Literal["one", "one-or-all", "hotplug"]
#: The model's facts: small named integers (``profiling``, ``qlimit``, ``offline.1``).
Facts = Mapping[str, int]


class StepLike(Protocol):
    """A scenario step as a model reads it (`harness.scenarios.types.Step`)."""

    @property
    def op(self) -> str:
        """The op's name."""

    @property
    def cpu(self) -> int | Literal["all"] | None:
        """The CPU, ``all``, or None."""

    @property
    def count(self) -> int | None:
        """The count, or None."""

    @property
    def on(self) -> bool | None:
        """The switch, or None."""


@dataclass(frozen=True, slots=True)
class ArgRange:
    """One integer argument of an op (``count``, ``ms``): valid range, edges, invalid values."""

    key: Literal["count", "ms"]
    valid: tuple[int, int]  # inclusive; the agent must accept any value in it
    edge: tuple[int, ...] = ()  # on the boundaries, valid or not
    invalid: tuple[int, ...] = ()  # the loader takes them; the agent must refuse them

    def values(self) -> tuple[int, ...]:
        """Every single value named besides the range (edges, then invalid ones)."""
        return (*self.edge, *self.invalid)


@dataclass(frozen=True, slots=True)
class OpDecl:
    """One op of the interface: its arguments, whether it blocks, how often to draw it."""

    op: str
    cpu: CpuKind | None = None
    args: tuple[ArgRange, ...] = ()
    switch: bool = False  # takes ``on``
    blocks: bool = False  # may sleep or wait in the guest (idle, wait, a reader's read)
    weight: int = 1
    what: str = ""

    def arg(self, key: str) -> ArgRange:
        """The argument called ``key``.

        :raise KeyError: the op takes no such argument.
        """
        for arg in self.args:
            if arg.key == key:
                return arg
        raise KeyError(f"op {self.op!r} takes no {key!r}")


@dataclass(frozen=True, slots=True)
class Law:
    """Two numbers of every run (`AgentRun.numbers` names) that must be equal."""

    name: str
    left: str
    right: str
    why: str


def _allow_all(facts: Facts, step: StepLike) -> bool:
    return True


def _unchanged(facts: Facts, step: StepLike) -> dict[str, int]:
    return dict(facts)


def _nothing(facts: Facts) -> dict[str, int]:
    return {}


def _no_steps(facts: Facts) -> tuple[Mapping[str, int | str], ...]:
    return ()


def _judge_all(facts: Facts) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True, slots=True)
class Model:
    """A flavour's state model: which ops may run now, what they change, what must read.

    ``start`` gives the facts before the first step from the agent's load parameters;
    ``allows`` keeps a sequence inside what the executor can run (a refused op is an
    outcome, but ``pmc-start`` of a released PMC is not a sequence at all); ``expected``
    names numbers of the run and the values the model predicts for them; ``closing``
    gives the steps (as a scenario file's keys) that end a sequence in a state the
    oracles judge (dt: a burst that takes a forced skip still pending); ``unjudged``
    names oracles whose count the executor cannot make for this sequence (tprof's
    TP-O2 counts swaps from kicks, not from a ``restart``'s STOP and START).
    """

    start: Callable[[Mapping[str, int]], dict[str, int]] = field(default=lambda params: {})
    allows: Callable[[Facts, StepLike], bool] = _allow_all
    after: Callable[[Facts, StepLike], dict[str, int]] = _unchanged
    expected: Callable[[Facts], dict[str, int]] = _nothing
    closing: Callable[[Facts], tuple[Mapping[str, int | str], ...]] = _no_steps
    unjudged: Callable[[Facts], tuple[str, ...]] = _judge_all


@dataclass(frozen=True, slots=True)
class ControlInterface:
    """Everything a fuzzer needs from one flavour."""

    flavour: str
    files: tuple[str, ...]  # the device and debugfs files the ops reach
    ops: tuple[OpDecl, ...]
    laws: tuple[Law, ...] = ()
    model: Model = Model()
    #: ``[agent]`` keys every generated scenario sets (tprof: ``drain = "manual"``, for kick).
    agent: Mapping[str, str | int | bool] = field(default_factory=dict)
    #: Oracles not judged after a random sequence, each with why (a shape they need).
    unjudged: Mapping[str, str] = field(default_factory=dict)

    def op(self, name: str) -> OpDecl:
        """The declared op ``name``.

        :raise KeyError: the interface declares no such op.
        """
        for op in self.ops:
            if op.op == name:
                return op
        raise KeyError(f"{self.flavour} declares no op {name!r}")


#: Injected bursts: a record's worth up to a few rings' worth; 1 and the top are edges.
INJECT = OpDecl(
    "inject",
    cpu="one-or-all",
    args=(ArgRange("count", (1, 4000), edge=(1, 4000)),),
    weight=4,
    what="an NMI burst of count producer calls",
)
#: Durations are short: a sequence is a few seconds of guest time at most.
SHORT_MS = ArgRange("ms", (1, 300), edge=(1,))


def shared_ops(*, kick: bool = True, hotplug: bool = True) -> tuple[OpDecl, ...]:
    """The shared scenario ops (`harness.scenarios.types.OPS`) as a fuzzer draws them.

    ``kick``: the flavour drains by hand (dt has no drain); ``hotplug``: CPU offline and
    online while sampling. ``pause`` and ``inject-nmi`` stay out: QMP acts from the host
    and arm64's virt has no NMI to inject.
    """
    ops = [
        INJECT,
        OpDecl("spin", cpu="one", args=(SHORT_MS,), what="a pinned busy loop, reaped by wait"),
        OpDecl("wait", blocks=True, what="wait for spins and readers"),
        OpDecl("idle", args=(SHORT_MS,), blocks=True, what="sleep"),
        OpDecl(
            "probe", cpu="one", args=(ArgRange("ms", (1, 50), edge=(1,)),), what="an IRQ-off window"
        ),
    ]
    if kick:
        ops.append(OpDecl("kick", cpu="one-or-all", weight=2, what="a manual drain"))
    if hotplug:
        ops.append(OpDecl("offline", cpu="hotplug", blocks=True, what="CPU hotplug: off"))
        ops.append(OpDecl("online", cpu="hotplug", blocks=True, what="CPU hotplug: on"))
    return tuple(ops)
