"""The typed agent spec: what to sample and how the flavour buffers it.

Every field is checked here, in Python, before anything is rendered, built or
loaded; the module receives the values as load parameters::

    spec = AgentSpec(flavour="tprof", period=200_000, drain="manual")
    spec = spec.with_params(buffer_samples=8)   # a flavour's own parameter (its data.py)
    spec.validate()                     # ConfigError on impossible values
    spec.module_params()                # ("flavour=tprof", "event=cycles", ...)
    spec.param("buffer_samples")        # 8
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Literal, get_args

from harness.agent import flavours
from harness.errors import ConfigError

Event = Literal["cycles", "instructions", "cpu-clock"]
Drain = Literal["manual", "auto"]

#: Below this the guest under TCG spends its life in the overflow handler.
MIN_PERIOD = 10_000
MAX_PERIOD = 1 << 31

#: Events that need a hardware PMU, with the sysfs event name that proves it.
PMU_EVENTS: dict[str, str] = {"cycles": "cpu_cycles", "instructions": "inst_retired"}


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """One configuration of ``profagent``.

    ``period`` counts events between overflows (cycles run at QEMU's 1 GHz virtual
    clock under TCG, so 1_000_000 is about 1 ms). A flavour's own knobs (tprof's
    ``est_freq``, ``buffer_samples``, ``list_limit``) are ``params``. With
    ``pmu_produce`` off, overflows only carry injected bursts, so every
    recorded sample was injected: the mode for exact counts.
    """

    flavour: str = "tprof"
    event: str = "cycles"
    period: int = 1_000_000
    drain: str = "auto"
    drain_ms: int = 1000
    quirks: int = 0
    pmu_produce: bool = True
    #: Overrides of the flavour's own load parameters (`FlavourInfo.params`),
    #: as sorted (name, value) pairs; the rest keep their defaults.
    params: tuple[tuple[str, int], ...] = ()

    def param(self, name: str) -> int:
        """The value of the flavour's load parameter ``name`` in this spec.

        :raise ConfigError: the flavour has no such parameter.
        """
        default = flavours.get(self.flavour).param(name).default
        return dict(self.params).get(name, default)

    def with_params(self, **values: int) -> AgentSpec:
        """A copy with these flavour parameters overridden (others kept)."""
        merged = {**dict(self.params), **values}
        return replace(self, params=tuple(sorted(merged.items())))

    def flavour_params(self) -> tuple[tuple[str, int], ...]:
        """Every load parameter of the flavour with its value in this spec."""
        return tuple((p.name, self.param(p.name)) for p in flavours.get(self.flavour).params)

    def validate(self) -> AgentSpec:
        """Return ``self`` if every value is possible.

        :raise ConfigError: naming the field, the value and what is allowed.
        """
        info = flavours.get(self.flavour)
        _one_of("event", self.event, get_args(Event))
        _one_of("drain", self.drain, get_args(Drain))
        _within("period", self.period, MIN_PERIOD, MAX_PERIOD)
        _within("drain_ms", self.drain_ms, 10, 60_000)
        if self.quirks < 0:
            raise ConfigError(f"agent spec: quirks={self.quirks} is negative; it is a bit mask")
        for name, value in self.params:
            info.param(name).check(value)
        if len({name for name, _ in self.params}) != len(self.params):
            raise ConfigError(f"agent spec: params {self.params} names a parameter twice")
        unknown = self.quirks & ~info.quirk_mask
        if unknown:
            raise ConfigError(
                f"agent spec: quirks={self.quirks:#x} sets bits {unknown:#x} that flavour "
                f"{self.flavour} does not have (its bits: {info.quirk_mask:#x})"
            )
        return self

    def module_params(self) -> tuple[str, ...]:
        """The ``insmod`` arguments that make the module behave as this spec."""
        return (
            f"flavour={self.flavour}",
            f"event={self.event}",
            f"period={self.period}",
            f"drain={self.drain}",
            f"drain_ms={self.drain_ms}",
            f"quirks={self.quirks}",
            f"pmu_produce={int(self.pmu_produce)}",
            *(f"{name}={value}" for name, value in self.flavour_params()),
        )

    def describe(self) -> dict[str, object]:
        """The spec as a plain dict, for run records."""
        described = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "params"}
        return {**described, "params": dict(self.flavour_params())}


def parse_quirks(flavour: str, text: str) -> int:
    """A quirk mask from ``"0x3"``, ``"3"`` or defect names like ``"TP-D1,TP-D2"``.

    :raise ConfigError: neither a number nor known defect names of ``flavour``.
    """
    text = text.strip()
    try:
        return int(text, 0)
    except ValueError:
        pass
    info = flavours.get(flavour)
    mask = 0
    for name in filter(None, (part.strip() for part in text.split(","))):
        mask |= info.quirk_bit(name)
    return mask


def parse_params(flavour: str, items: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """Flavour parameter overrides from ``["nsamples=8", ...]`` (``--param`` values).

    :raise ConfigError: not ``name=integer``, or a name the flavour does not have.
    """
    info = flavours.get(flavour)
    values: dict[str, int] = {}
    for item in items:
        name, sep, text = item.partition("=")
        try:
            value = int(text, 0)
        except ValueError:
            value = None
        if not sep or value is None:
            raise ConfigError(f"--param {item!r}: write NAME=INTEGER, e.g. --param nsamples=8")
        values[info.param(name.strip()).name] = value
    return tuple(sorted(values.items()))


def event_available(event: str, pmu_events: frozenset[str], has_pmu: bool) -> str | None:
    """Why ``event`` cannot run on a guest, or None if it can.

    ``pmu_events`` are the names under ``/sys/bus/event_source/devices/<pmu>/events``.
    """
    if event == "cpu-clock":
        return None
    if not has_pmu:
        return f"event {event!r} needs a PMU and the guest has none; use event 'cpu-clock'"
    needed = PMU_EVENTS[event]
    if needed not in pmu_events:
        return (
            f"event {event!r} needs the PMU event {needed!r}, which the guest's PMU lacks "
            "(under TCG arm64 counts instructions only with -icount)"
        )
    return None


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"agent spec: {name}={value!r} is not one of {', '.join(allowed)}")


def _within(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ConfigError(f"agent spec: {name}={value} is outside {low}..{high}")
