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
Every call has a deadline (``OpDecl.deadline_s``, plus its ``ms``). A `ProcessOp`
runs in guest processes of their own while the sequence's process holds the agent's
files open (several at once: openers refused, readers blocked then signalled, an
unload that must be refused); each step's outcome must be one it allows::

    unload_busy().allowed                          # (('EAGAIN', 'EBUSY'), ('ok',))

A flavour's own ops are declared once, as the scenario loader's rules (`Flavour.ops`);
`own_ops` makes them the interface's, drawn where the flavour gives their ranges::

    own_ops(FLAVOUR.ops, OpDecl("skip", cpu="one", args=(...,)))   # the rest: weight 0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from harness.agent.flavour import OpRule
from harness.errors import ConfigError

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


#: A call's deadline in the guest: generous, since a TCG guest shares this host's 2 cores
#: with other guests.
CALL_DEADLINE_S = 20.0


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
    #: How long one call may take in the guest, beyond its own ``ms`` (`CALL_DEADLINE_S`).
    deadline_s: float = CALL_DEADLINE_S

    def deadline_of(self, ms: int | None = None) -> float:
        """A call's deadline in seconds: the op's, plus the ``ms`` the step asked to take."""
        return self.deadline_s + (ms or 0) / 1000

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


#: The outcome of a step that succeeded, as `ProcessOp.allowed` names it.
OK = "ok"


@dataclass(frozen=True, slots=True)
class ProcessOp:
    """An op the fuzzer runs in guest processes of its own, ``count`` of them at once.

    Each process runs ``steps(scratch)`` (profctl steps; ``scratch`` is a guest path
    prefix of its own for any file a step writes) while the sequence's own process
    holds the agent's files open and waits for all of them. ``allowed[i]`` names the
    outcomes step i may end in: `OK` or errno names. Each step must also end within
    ``deadline_s``. A drawn step carries the process count in ``count``.
    """

    op: str
    steps: Callable[[str], tuple[str, ...]]
    allowed: tuple[tuple[str, ...], ...]
    processes: tuple[int, int] = (1, 1)
    deadline_s: float = 10.0
    weight: int = 1
    what: str = ""

    def decl(self) -> OpDecl:
        """The op as the generator draws it: ``count`` processes, each step in its deadline."""
        count = ArgRange("count", self.processes)
        whole = self.deadline_s * len(self.allowed) + CALL_DEADLINE_S
        return OpDecl(self.op, args=(count,), blocks=True, weight=self.weight, what=self.what,
                      deadline_s=whole)  # fmt: skip


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
    #: Ops run in guest processes of their own (`ProcessOp`); not scenario steps.
    processes: tuple[ProcessOp, ...] = ()
    #: Process ops it cannot have, each with why (a single-owner device has no second reader).
    no_processes: Mapping[str, str] = field(default_factory=dict)

    def op(self, name: str) -> OpDecl:
        """The declared op ``name``, a process op's as drawn.

        :raise KeyError: the interface declares no such op.
        """
        for op in (*self.ops, *(p.decl() for p in self.processes)):
            if op.op == name:
                return op
        raise KeyError(f"{self.flavour} declares no op {name!r}")

    def process(self, name: str) -> ProcessOp | None:
        """The process op ``name``; None when ``name`` is a scenario op."""
        return next((p for p in self.processes if p.op == name), None)


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


def own_ops(rules: Mapping[str, OpRule], *drawn: OpDecl) -> tuple[OpDecl, ...]:
    """A flavour's own scenario ops (``Flavour.ops``: op → `OpRule`) as the fuzzer knows them.

    An op of ``drawn`` is declared as given (its ranges, its weight); every other op
    from its rule, and not drawn (weight 0): a step of it still replays with a
    deadline. Its count or ms ranges from 1 to the rule's limit; a switch blocks, as a
    background reader's read does.

    A drawn op may narrow its rule and weigh more than 1, since the two say different
    things: the rule is every value a scenario may give (what the loader takes and the
    agent must handle), the draw is where a budget of a few minutes is spent. dt's
    ``skip`` takes up to 2^32 - 1 forced ticks (several add up past a u32: DT-D9); a
    draw of 1..100 with 2^32 - 1 as an edge reaches both small counts and the sum past
    a u32. One of dt's ``racers`` races nothing, though a scenario may ask for it
    (drawn: 2 to 3). A drawn range, edge or invalid value stays inside its rule, never
    beyond it: beyond, the fuzzer would draw a step the loader refuses, and a finding
    would not replay. Likewise a drawn op gives every count or ms its rule requires.

    :raise ConfigError: an op of ``drawn`` is not in ``rules``, takes other keys or
        values than its rule lets a scenario give it, or leaves out a count or ms its
        rule requires.
    """
    given = {decl.op: decl for decl in drawn}
    if unknown := sorted(set(given) - set(rules)):
        raise ConfigError(f"ops not among the flavour's own (Flavour.ops): {', '.join(unknown)}")
    for decl in drawn:
        _check_rule(decl, rules[decl.op])
    return tuple(given.get(name) or _from_rule(name, rule) for name, rule in rules.items())


def _limits(rule: OpRule) -> dict[Literal["count", "ms"], int]:
    limits: dict[Literal["count", "ms"], int | None] = {"count": rule.count_max, "ms": rule.ms_max}
    return {key: top for key, top in limits.items() if top is not None}


def _from_rule(name: str, rule: OpRule) -> OpDecl:
    args = tuple(ArgRange(key, (1, top), edge=(1,)) for key, top in _limits(rule).items())
    return OpDecl(
        name,
        cpu=rule.cpu,
        args=args,
        switch=rule.on,
        blocks=rule.on,
        weight=0,
        what="the flavour's own op, declared from its rule and not drawn",
    )


def _check_rule(decl: OpDecl, rule: OpRule) -> None:
    limits = _limits(rule)
    wrong = [f"cpu {decl.cpu} (its rule: {rule.cpu})"] if decl.cpu != rule.cpu else []
    wrong += [f"on: {decl.switch} (its rule: {rule.on})"] if decl.switch != rule.on else []
    for arg in decl.args:
        values, top = (*arg.valid, *arg.values()), limits.get(arg.key)
        if top is None:
            wrong.append(f"a {arg.key} (its rule takes none)")
        elif not all(1 <= v <= top for v in values):
            wrong.append(f"{arg.key} {values} (its rule: 1 to {top})")
    given = {arg.key for arg in decl.args}
    wrong += [f"no {key} (its rule requires one)" for key in limits if key not in given]
    if wrong:
        raise ConfigError(f"op {decl.op!r} is declared with {', '.join(wrong)}")


#: What delete_module(2) says while a file of the module is open: EAGAIN (EWOULDBLOCK);
#: EBUSY if another module uses it.
UNLOAD_REFUSED = ("EAGAIN", "EBUSY")
#: The core's statistics file every flavour has: it must still read after a refusal.
STATS = "/sys/kernel/debug/profagent/stats"


def unload_busy(module: str = "profagent") -> ProcessOp:
    """An rmmod while the sequence holds the device open: refused, and the module still works.

    The module's files have ``.owner = THIS_MODULE``, so an open file holds a reference
    and delete_module must refuse; succeeding would free the code the open file calls.
    """
    return ProcessOp(
        "unload-busy",
        lambda scratch: (f"unload:{module}", f"cat:{STATS}"),
        allowed=(UNLOAD_REFUSED, (OK,)),
        what="delete_module while the device is open: refused; stats still read",
    )


def openers(path: str, outcome: str, processes: tuple[int, int] = (2, 3)) -> ProcessOp:
    """Processes that open ``path`` at once and close it: each open ends in ``outcome``.

    ``outcome`` is `OK` where the device takes several opens (hwpmc's owners), else the
    errno a single-owner device refuses a second open with (EBUSY).
    """
    return ProcessOp(
        "openers",
        lambda scratch: (f"open:{path}", "close:3"),
        allowed=((outcome,), (OK,) if outcome == OK else ("EBADF",)),
        processes=processes,
        what=f"{processes[0]}-{processes[1]} processes open {path} at once and close it",
    )


def blocked_readers(path: str, chunk: int, processes: tuple[int, int] = (1, 3)) -> ProcessOp:
    """Processes that open ``path``, block in read(2) with nothing to read, get SIGALRM.

    Each read must end in EINTR (the driver's -ERESTARTSYS without SA_RESTART) about a
    second after it began, not block on (``deadline_s`` covers the read), and close.
    """
    return ProcessOp(
        "blocked-readers",
        lambda scratch: (f"open:{path}", "timeout:1", f"read:3:{scratch}.bin:{chunk}", "close:3"),
        allowed=((OK,), (OK,), ("EINTR",), (OK,)),
        processes=processes,
        what=f"readers of fresh opens of {path} blocked in read, signalled by SIGALRM after 1 s",
    )
