"""Scenario checks: each part of a scenario file validated into its typed value.

The private helpers `harness.scenarios.load.load_scenario` reads a file with. Each
takes where the value came from (a `_Where`: the file; a `_Context`: the file
plus the flavour, arch and CPU count that steps and expectations are checked
against), the key and the raw TOML value, and returns the typed value or raises
a `ConfigError` naming the file, the key and the reason::

    where = _Where(path)
    guest = _guest(where, data.get("guest"))          # GuestSetup
    agent, throttling, max_rate = _agent(where, data.get("agent"))
    ctx = _Context(path, flavours.get(agent.flavour), arches.get(guest.arch), guest.topology.cpus)
    _step(ctx, "steps[0]", {"op": "kick"})            # Step(op='kick', cpu='all', ...)
    _expectation(ctx, "expect[0]", {"value": "samples.cpu.9", "equals": 1})
    # ConfigError: ...: key 'expect[0].value': CPU 9 does not exist in a 4-CPU topology (0..3)
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from harness import arches
from harness.agent import flavours
from harness.agent.flavour import OpRule, behaviour
from harness.agent.module.spec import AgentSpec
from harness.agent.values.info import FlavourInfo
from harness.agent.values.results import CORE_NAMES
from harness.builder.kernel import check_variant
from harness.builder.kernels import DEFAULT_VERSION, get_version
from harness.errors import ConfigError
from harness.scenarios.types import (
    ACCEL_CHOICES,
    MAX_SAMPLE_RATE,
    OPS,
    RELATIONS,
    Expectation,
    GuestSetup,
    Step,
)
from harness.vm.argv import MachineSpec
from harness.vm.topology import CpuTopology

_T = TypeVar("_T")
_S = TypeVar("_S", bound=str)
_GUEST_KEYS = ("arch", "accel", "topology", "variant", "nmi", "kernel_args", "kernel")
_SPEC = AgentSpec()  # the defaults of every agent key left out
#: The [agent] keys besides the flavour's own load parameters: AgentSpec's fields but
#: ``params`` (each parameter is a key of its own), then the run's perf throttling
#: settings. A key not listed is refused as unknown until `_agent` reads it.
_AGENT_KEYS = (
    "flavour", "event", "period", "drain", "drain_ms", "quirks", "pmu_produce", "throttling",
    "max_sample_rate",
)  # fmt: skip
_VALUE_FORMS = "samples, samples.cpu.<cpu>, stats.<name>, percpu.<cpu>.<name>, core.<cpu>.<name>"


@dataclass(frozen=True, slots=True)
class _Where:
    """Which file an error is about."""

    path: Path

    def error(self, key: str, reason: str) -> ConfigError:
        return ConfigError(f"{self.path}: key '{key}': {reason}")

    def wrong(self, key: str, what: str, raw: object) -> ConfigError:
        got = "; it is missing" if raw is None else f", not {raw!r}"
        return self.error(key, f"must be {what}{got}")


@dataclass(frozen=True, slots=True)
class _Context(_Where):
    """The file, plus what its steps and expectations are checked against."""

    flavour: FlavourInfo
    arch: arches.ArchProfile
    cpus: int


def _table(
    where: _Where, key: str, raw: object, allowed: tuple[str, ...] | None
) -> dict[str, object]:
    """``raw`` as a table whose keys are all ``allowed`` (None: any, checked later)."""
    if not isinstance(raw, dict):
        raise where.wrong(key, "a table", raw)
    for name in raw:
        if allowed is not None and name not in allowed:
            full = f"{key}.{name}" if key else name
            raise where.error(full, f"unknown key; allowed here: {', '.join(allowed)}")
    return raw


def _str(where: _Where, key: str, raw: object) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise where.wrong(key, "a non-empty string", raw)
    return raw


def _int(where: _Where, key: str, raw: object, low: int | None, high: int | None) -> int:
    # bool is an int in Python; `true` where a number belongs is a mistake.
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise where.wrong(key, "an integer", raw)
    if low is not None and raw < low:
        raise where.error(key, f"{raw} is below the minimum {low}")
    if high is not None and raw > high:
        raise where.error(key, f"{raw} is above the maximum {high}")
    return raw


def _bool(where: _Where, key: str, raw: object) -> bool:
    if not isinstance(raw, bool):
        raise where.wrong(key, "true or false", raw)
    return raw


def _choice(where: _Where, key: str, raw: object, allowed: tuple[_S, ...]) -> _S:
    for value in allowed:
        if raw == value:
            return value
    raise where.wrong(key, f"one of {', '.join(allowed)}", raw)


def _parsed(where: _Where, key: str, raw: object, parse: Callable[[str], _T]) -> _T:
    """``parse`` applied to the string at ``key``, its ConfigError re-keyed."""
    text = _str(where, key, raw)
    try:
        return parse(text)
    except ConfigError as exc:
        raise where.error(key, str(exc)) from exc


def _tables(where: _Where, key: str, raw: object, low: int, high: int) -> list[object]:
    if not isinstance(raw, list):
        raise where.wrong(key, f"an array of tables ([[{key}]])", raw)
    if not low <= len(raw) <= high:
        raise where.error(key, f"has {len(raw)} entries; a scenario has {low}..{high} [[{key}]]")
    return raw


def _guest(where: _Where, raw: object) -> GuestSetup:
    table = _table(where, "guest", raw, _GUEST_KEYS)
    args = table.get("kernel_args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) and a.split() == [a] for a in args):
        raise where.wrong("guest.kernel_args", "a list of one-word strings", args)
    profile = _parsed(where, "guest.arch", table.get("arch", arches.DEFAULT_ARCH), arches.get)
    setup = GuestSetup(
        arch=profile.name,
        accel=_choice(where, "guest.accel", table.get("accel", "tcg"), ACCEL_CHOICES),
        topology=_parsed(where, "guest.topology", table.get("topology"), CpuTopology.parse),
        variant=_parsed(where, "guest.variant", table.get("variant", "default"), check_variant),
        nmi=_choice(where, "guest.nmi", table.get("nmi", "on"), ("on", "off")) == "on",
        kernel_args=tuple(args),
        kernel=_parsed(where, "guest.kernel", table.get("kernel", DEFAULT_VERSION), _version),
    )
    try:  # the check a run makes; the accel does not change it (auto: either)
        MachineSpec(arch=profile, topology=setup.topology, nmi=setup.nmi)
    except ConfigError as exc:
        raise where.error("guest", str(exc)) from exc
    return setup


def _version(text: str) -> str:
    return get_version(text).name


def _agent(where: _Where, raw: object) -> tuple[AgentSpec, bool, int | None]:
    info = _parsed(where, "agent.flavour", _table(where, "agent", raw, None).get("flavour"),
                   flavours.get)  # fmt: skip
    own = tuple(param.name for param in info.params)  # the flavour's load parameters
    table = _table(where, "agent", raw, _AGENT_KEYS + own)

    def text(key: str, default: str) -> str:
        return _str(where, f"agent.{key}", table.get(key, default))

    def number(key: str, default: int) -> int:
        return _int(where, f"agent.{key}", table.get(key, default), None, None)

    spec = AgentSpec(
        flavour=info.name,
        event=text("event", _SPEC.event),
        period=number("period", _SPEC.period),
        drain=text("drain", _SPEC.drain),
        drain_ms=number("drain_ms", _SPEC.drain_ms),
        quirks=_quirks(where, info, table.get("quirks", 0)),
        pmu_produce=_bool(where, "agent.pmu_produce", table.get("pmu_produce", _SPEC.pmu_produce)),
        params=tuple(sorted((name, number(name, 0)) for name in own if name in table)),
    )
    try:
        spec.validate()
    except ConfigError as exc:
        # Hack: validate() words every error "agent spec: <field>=<value> ..."; the
        # field is the key. A message without it still names the [agent] table.
        field = re.match(r"agent spec: (\w+)=", str(exc))
        key = f"agent.{field[1]}" if field else "agent"
        raise where.error(key, str(exc).removeprefix("agent spec: ")) from exc
    throttling = _choice(where, "agent.throttling", table.get("throttling", "off"), ("off", "on"))
    rate = table.get("max_sample_rate")
    if rate is not None and throttling == "off":
        raise where.error("agent.max_sample_rate", 'only with throttling = "on"; off lifts it')
    max_rate = (
        None if rate is None else _int(where, "agent.max_sample_rate", rate, 1, MAX_SAMPLE_RATE)
    )
    return spec, throttling == "on", max_rate


def _quirks(where: _Where, info: FlavourInfo, raw: object) -> int:
    """A quirk mask from an int or a list of the flavour's defect names."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw  # its bits are checked by AgentSpec.validate
    if not isinstance(raw, list):
        raise where.wrong("agent.quirks", "a list of defect names or an integer mask", raw)
    mask = 0
    for i, name in enumerate(raw):
        mask |= _parsed(where, f"agent.quirks[{i}]", name, info.quirk_bit)
    return mask


def _ops(ctx: _Context) -> dict[str, OpRule]:
    """The ops a scenario of this flavour may use: the shared ones and its own."""
    return {**OPS, **behaviour(ctx.flavour.name).ops}


def _step(ctx: _Context, key: str, raw: object) -> Step:
    ops = _ops(ctx)
    named = _table(ctx, key, raw, None).get("op")
    owners = [name for name in flavours.names() if named in behaviour(name).ops]
    if named not in ops and owners:
        raise ctx.error(f"{key}.op", f"{named!r} is an op of flavour {', '.join(owners)}, "
                                     f"not of {ctx.flavour.name}")  # fmt: skip
    op = _choice(ctx, f"{key}.op", named, tuple(ops))
    rule = ops[op]
    table = _table(ctx, key, raw, ("op", *rule.keys()))
    refused = behaviour(ctx.flavour.name).refused_ops.get(op)
    if refused:
        raise ctx.error(f"{key}.op", f"{op!r} is refused for flavour {ctx.flavour.name}: {refused}")
    if op == "inject-nmi" and not ctx.arch.qmp_inject_nmi:
        raise ctx.error(
            f"{key}.op",
            f"QMP inject-nmi does not work on {ctx.arch.name} (QEMU 7.2's "
            f"{ctx.arch.machine.split(',')[0]} machine answers 'not currently supported'); "
            "use op 'inject' for NMI bursts",
        )

    def bounded(name: str, high: int | None) -> int | None:
        return None if high is None else _int(ctx, f"{key}.{name}", table.get(name), 1, high)

    return Step(
        op=op,
        cpu=_step_cpu(ctx, f"{key}.cpu", rule, table.get("cpu", rule.cpu_default)),
        count=bounded("count", rule.count_max),
        ms=bounded("ms", rule.ms_max),
        on=_bool(ctx, f"{key}.on", table.get("on")) if rule.on else None,
    )


def _step_cpu(ctx: _Context, key: str, rule: OpRule, raw: object) -> int | Literal["all"] | None:
    kind = rule.cpu
    if kind is None:
        return None
    if kind == "one-or-all" and raw == "all":
        return "all"
    cpu = _cpu(ctx, key, raw, 'a CPU number or "all"' if kind == "one-or-all" else "a CPU number")
    if kind == "hotplug" and cpu == 0:
        raise ctx.error(
            key, f"CPU 0 cannot go offline: the kernel keeps the boot CPU; use 1..{ctx.cpus - 1}"
        )
    return cpu


def _cpu(ctx: _Context, key: str, raw: object, what: str = "a CPU number") -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        raise ctx.wrong(key, what, raw)
    if raw >= ctx.cpus:
        raise ctx.error(
            key, f"CPU {raw} does not exist in a {ctx.cpus}-CPU topology (0..{ctx.cpus - 1})"
        )
    return raw


def _expectation(ctx: _Context, key: str, raw: object) -> Expectation:
    table = _table(ctx, key, raw, ("oracle", "value", *RELATIONS, "fails", "console", "error"))
    relations = [name for name in RELATIONS if name in table]
    kinds = [name for name in ("oracle", "value", "console", "error") if name in table]
    if len(kinds) != 1:
        found = ", ".join(kinds) or "none"
        raise ctx.error(key, f"name one of oracle, value, console or error (found: {found})")
    if "fails" in table and "oracle" not in table:
        raise ctx.error(f"{key}.fails", "only an oracle expectation takes fails")
    if kinds[0] in ("console", "error"):
        if relations:
            raise ctx.error(f"{key}.{relations[0]}", f"a {kinds[0]} expectation takes no relation")
        text = _str(ctx, f"{key}.{kinds[0]}", table[kinds[0]])
        return Expectation(console=text) if kinds[0] == "console" else Expectation(error=text)
    if "oracle" in table:
        if relations:
            raise ctx.error(f"{key}.{relations[0]}", "an oracle expectation takes no relation")
        oracle = _str(ctx, f"{key}.oracle", table["oracle"])
        known = behaviour(ctx.flavour.name).oracle_names
        if oracle not in known:
            raise ctx.error(
                f"{key}.oracle",
                f"no oracle {oracle!r} for flavour {ctx.flavour.name}; known: {', '.join(known)}",
            )
        fails = _bool(ctx, f"{key}.fails", table["fails"]) if "fails" in table else False
        return Expectation(oracle=oracle, fails=fails)
    if len(relations) != 1:
        found = ", ".join(relations) or "none"
        raise ctx.error(key, f"give exactly one of equals, at_least, at_most (found: {found})")
    value = _check_value(ctx, f"{key}.value", _str(ctx, f"{key}.value", table["value"]))
    relation = relations[0]
    bound = _int(ctx, f"{key}.{relation}", table[relation], 0, None)
    return Expectation(
        value=value,
        equals=bound if relation == "equals" else None,
        at_least=bound if relation == "at_least" else None,
        at_most=bound if relation == "at_most" else None,
    )


def _check_value(ctx: _Context, key: str, value: str) -> str:
    """``value`` if the run produces such a number; else an error listing close names."""
    info = ctx.flavour
    cpu: str | None = None  # the <cpu> part of the name, if it has one
    match value.split("."):
        case ["samples"]:
            known = True
        case ["samples", "cpu", cpu]:
            known = True  # the CPU is checked below
        case ["stats", name]:
            known = name in info.stat_names
        case ["percpu", cpu, name]:
            known = name in info.percpu_names
        case ["core", cpu, name]:
            known = name in CORE_NAMES
        case _:
            known = False
    if known and (cpu is None or re.fullmatch("[0-9]+", cpu)):
        if cpu is not None:
            _cpu(ctx, key, int(cpu))
        return value
    near = re.search(r"\.([0-9]+)(\.|$)", value)
    cpu = near[1] if near else "0"
    names = (
        "samples",
        f"samples.cpu.{cpu}",
        *(f"stats.{name}" for name in info.stat_names),
        *(f"percpu.{cpu}.{name}" for name in info.percpu_names),
        *(f"core.{cpu}.{name}" for name in CORE_NAMES),
    )
    close = difflib.get_close_matches(value, names, n=4, cutoff=0.6)
    hint = f"close names: {', '.join(close)}; " if close else ""
    raise ctx.error(
        key, f"unknown value {value!r} for flavour {info.name}; {hint}the forms: {_VALUE_FORMS}"
    )
