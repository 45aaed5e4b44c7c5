"""Sequences of scenario steps drawn from a flavour's declared control interface.

Pure: a Hypothesis strategy over `harness.scenarios.types.Step` tuples that keeps
every sequence inside what the interface's model allows (and brings every CPU it
took offline back online at the end), plus the model's walk over a sequence::

    target = Target(interface_of("kprof"), cpus=2)
    strategy = sequences(target, max_steps=8)          # hypothesis SearchStrategy
    facts = walk(target, steps)                        # the model's facts after them
    target.interface.model.expected(facts)             # {'stats.qlimit': 67108864}
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hypothesis import strategies as st

from harness.agent import flavours
from harness.agent.controlspec import ArgRange, ControlInterface, Facts, OpDecl
from harness.errors import ConfigError
from harness.fuzz import faults
from harness.scenarios.types import Step

#: The interface module a flavour package holds beside ``data.py`` and ``flavour.py``.
MODULE = "interface"


def interface_of(flavour: str) -> ControlInterface:
    """The flavour's declared interface: ``INTERFACE`` in its package's ``interface.py``.

    :raise ConfigError: the flavour is unknown or declares no interface.
    """
    package = flavours.package(flavour).package
    try:
        module = importlib.import_module(f"{package}.{MODULE}")
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"flavour {flavour!r} declares no control interface ({package}.{MODULE}: {exc})"
        ) from exc
    found = getattr(module, "INTERFACE", None)
    if not isinstance(found, ControlInterface) or found.flavour != flavour:
        raise ConfigError(f"{package}.{MODULE}.INTERFACE is not {flavour}'s ControlInterface")
    return found


@dataclass(frozen=True, slots=True)
class Target:
    """What a sequence runs on: the interface, the guest's CPU count, the load parameters.

    ``fault_call`` is the flavour's fault call on a kernel with fault injection (the
    fault ops are drawn then), None elsewhere.
    """

    interface: ControlInterface
    cpus: int
    params: Mapping[str, int] = field(default_factory=dict)
    fault_call: faults.FaultCall | None = None

    def ops(self) -> tuple[OpDecl, ...]:
        """The ops this guest can run (hotplug needs a second CPU), process and fault ops too."""
        drawn = (*self.interface.ops, *(p.decl() for p in self.interface.processes))
        if self.fault_call is not None:
            drawn += tuple(cap.decl() for cap in faults.CAPABILITIES)
        return tuple(op for op in drawn if op.weight > 0 and (op.cpu != "hotplug" or self.cpus > 1))

    def as_model_sees(self, step: Step) -> Step:
        """A fault op as the op its call amounts to (tprof: ``restart``); others as they are."""
        if faults.capability(step.op) is None or self.fault_call is None:
            return step
        return Step(op=self.fault_call.amounts_to or "wait")


def _offline(facts: Facts) -> set[int]:
    return {int(k.split(".")[1]) for k, v in facts.items() if k.startswith("offline.") and v}


def allows(target: Target, facts: Facts, step: Step) -> bool:
    """Whether ``step`` may run after the steps that led to ``facts``.

    Shared rules first: a CPU-targeted op needs its CPU online (``all``: every CPU),
    ``offline`` an online CPU, ``online`` an offline one; then the flavour's model.
    """
    offline = _offline(facts)
    if step.op == "offline":
        shared = step.cpu not in offline
    elif step.op == "online":
        shared = step.cpu in offline
    else:
        shared = not (offline and step.cpu == "all") and step.cpu not in offline
    model = target.interface.model
    seen = target.as_model_sees(step)  # a fault op: the model may refuse it by name, too
    return shared and model.allows(facts, step) and model.allows(facts, seen)


def after(target: Target, facts: Facts, step: Step) -> dict[str, int]:
    """The facts once ``step`` ran."""
    out = target.interface.model.after(facts, target.as_model_sees(step))
    if step.op in ("offline", "online"):
        out[f"offline.{step.cpu}"] = int(step.op == "offline")
    return out


def start(target: Target) -> dict[str, int]:
    """The facts before the first step."""
    return target.interface.model.start(target.params)


def walk(target: Target, steps: Sequence[Step]) -> dict[str, int]:
    """The facts after ``steps`` (each assumed allowed)."""
    facts = start(target)
    for step in steps:
        facts = after(target, facts, step)
    return facts


def closing(target: Target, facts: Facts) -> tuple[Step, ...]:
    """The model's closing steps, then ``online`` for every CPU left offline.

    The next sequence starts with every CPU online; the model's steps run first,
    while the CPUs they name are still known online.
    """
    own = tuple(Step(**keys) for keys in target.interface.model.closing(facts))  # type: ignore[arg-type]
    return (*own, *(Step(op="online", cpu=cpu) for cpu in sorted(_offline(facts))))


def numbers(arg: ArgRange) -> st.SearchStrategy[int]:
    """An argument's values: its valid range, or one of its edge and invalid values."""
    ranged = st.integers(*arg.valid)
    return st.one_of(ranged, st.sampled_from(arg.values())) if arg.values() else ranged


def step_of(decl: OpDecl, cpus: int) -> st.SearchStrategy[Step]:
    """One step of ``decl`` with arguments drawn from its declared ranges."""
    cpu: st.SearchStrategy[int | str | None] = st.none()
    if decl.cpu == "one":
        cpu = st.integers(0, cpus - 1)
    elif decl.cpu == "one-or-all":
        cpu = st.one_of(st.just("all"), st.integers(0, cpus - 1))
    elif decl.cpu == "hotplug":
        cpu = st.integers(1, cpus - 1)
    keys: dict[str, st.SearchStrategy[object]] = {"cpu": cpu}
    for arg in decl.args:
        keys[arg.key] = numbers(arg)
    keys["on"] = st.booleans() if decl.switch else st.none()
    return st.fixed_dictionaries(keys).map(lambda k: Step(op=decl.op, **k))  # type: ignore[arg-type]


def sequences(target: Target, max_steps: int = 10) -> st.SearchStrategy[tuple[Step, ...]]:
    """Sequences of 1..``max_steps`` drawn steps the model allows, closed by `closing`.

    A drawn step the model refuses is left out (Hypothesis still shrinks the draws),
    so a sequence may come out shorter than drawn.
    """
    pool = tuple(decl for decl in target.ops() for _ in range(decl.weight))
    choices = {decl.op: step_of(decl, target.cpus) for decl in target.ops()}

    @st.composite
    def build(draw: st.DrawFn) -> tuple[Step, ...]:
        facts = start(target)
        steps: list[Step] = []
        for _ in range(draw(st.integers(1, max_steps))):
            step = draw(choices[draw(st.sampled_from(pool)).op])
            if allows(target, facts, step):
                steps.append(step)
                facts = after(target, facts, step)
        return (*steps, *closing(target, facts))

    return build()
