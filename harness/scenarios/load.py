"""Scenario files: one reproducible agent run as data, checked before any guest boots.

A scenario (``scenarios/<name>.toml``; the format is in ``scenarios/FORMAT.md``)
names the guest, the agent spec, the steps run between START and STOP (or, with
``run``, one of the flavour's whole-module runs) and what must hold afterwards.
Loading checks unknown keys, types, ranges, CPUs the topology lacks, ops the
flavour or arch cannot run, and value and oracle names.
Every error is a `ConfigError` naming the file, the key and the reason::

    scenario = load_scenario(find_scenario("tprof-tp-d1-quirk"))
    scenario.agent.module_params()              # ('flavour=tprof', 'event=cycles', ...)
    [e.describe() for e in scenario.expect]     # ['oracle TP-O1 holds', 'stats.sample == 16']
    json.dumps(scenario_record(scenario))       # for the run's bundle
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace
from pathlib import Path

from harness import arches
from harness.agent import flavours
from harness.agent.flavour import behaviour
from harness.agent.module.spec import AgentSpec
from harness.builder.kernels import DEFAULT_VERSION, get_version
from harness.errors import ConfigError
from harness.paths import REPO_ROOT
from harness.scenarios.checks import (
    _agent,
    _Context,
    _expectation,
    _guest,
    _int,
    _step,
    _str,
    _table,
    _tables,
    _Where,
)
from harness.scenarios.types import (
    ACCEL_CHOICES,
    MAX_COUNT,
    MAX_MS,
    MAX_PROBE_MS,
    MAX_SAMPLE_RATE,
    OPS,
    RELATIONS,
    Expectation,
    GuestSetup,
    Op,
    Relation,
    Step,
)
from harness.tomlfile import read_toml

#: The public API, the vocabulary from `harness.scenarios.types` included.
__all__ = [
    "ACCEL_CHOICES",
    "MAX_COUNT",
    "MAX_EXPECT",
    "MAX_MS",
    "MAX_PROBE_MS",
    "MAX_REPEAT",
    "MAX_SAMPLE_RATE",
    "MAX_STEPS",
    "OPS",
    "RELATIONS",
    "SCENARIOS_DIR",
    "Expectation",
    "GuestSetup",
    "Op",
    "Relation",
    "Scenario",
    "Step",
    "find_scenario",
    "load_all",
    "load_scenario",
    "on_kernel",
    "scenario_record",
    "scenario_source",
]

SCENARIOS_DIR = REPO_ROOT / "scenarios"
MAX_REPEAT = 100
MAX_STEPS = 200
MAX_EXPECT = 200
_NAME = re.compile(r"[a-z0-9-]+")
_TOP_KEYS = ("name", "description", "seed", "repeat", "guest", "agent", "run", "steps", "expect")


@dataclass(frozen=True, slots=True)
class Scenario:
    """One validated scenario file."""

    name: str
    description: str
    seed: int
    repeat: int
    guest: GuestSetup
    agent: AgentSpec
    throttling: bool  # False: perf throttling disabled, exact counts
    max_sample_rate: int | None  # only with throttling; None: the kernel's default
    steps: tuple[Step, ...]
    expect: tuple[Expectation, ...]
    path: Path
    #: One of the flavour's whole-module runs (`Flavour.runs`: ``standard``, ``exact``, …)
    #: instead of steps; None: the steps, between START and STOP.
    run: str | None = None


def load_scenario(path: Path) -> Scenario:
    """Read and validate one scenario file.

    :raise ConfigError: unreadable file, bad TOML or any invalid key; the message
        names the file, the key and the reason.
    """
    where = _Where(path)
    data = _table(where, "", read_toml(path, "scenario"), _TOP_KEYS)
    name = _str(where, "name", data.get("name"))
    if not _NAME.fullmatch(name) or name != path.stem:
        raise where.error(
            "name", f"{name!r} must be [a-z0-9-]+ and equal the file stem {path.stem!r}"
        )
    guest = _guest(where, data.get("guest"))
    agent, throttling, max_rate = _agent(where, data.get("agent"))
    ctx = _Context(path, flavours.get(agent.flavour), arches.get(guest.arch), guest.topology.cpus)
    steps = _tables(where, "steps", data.get("steps", []), 0, MAX_STEPS)
    run = _run(ctx, data.get("run"), bool(steps))
    expect = _tables(where, "expect", data.get("expect"), 1, MAX_EXPECT)
    return Scenario(
        name=name,
        description=_str(where, "description", data.get("description")),
        seed=_int(where, "seed", data.get("seed"), 0, None),
        repeat=_int(where, "repeat", data.get("repeat", 1), 1, MAX_REPEAT),
        guest=guest,
        agent=agent,
        throttling=throttling,
        max_sample_rate=max_rate,
        steps=tuple(_step(ctx, f"steps[{i}]", raw) for i, raw in enumerate(steps)),
        expect=tuple(_expectation(ctx, f"expect[{i}]", raw) for i, raw in enumerate(expect)),
        path=path,
        run=run,
    )


def _run(ctx: _Context, raw: object, has_steps: bool) -> str | None:
    """The ``run`` key: one of the flavour's runs by name, never beside steps."""
    if raw is None:
        return None
    name = _str(ctx, "run", raw)
    known = tuple(behaviour(ctx.flavour.name).runs)
    if name not in known:
        raise ctx.error("run", f"no run {name!r} for flavour {ctx.flavour.name}; "
                        f"known: {', '.join(known)}")  # fmt: skip
    if has_steps:
        raise ctx.error("run", "a scenario names a run or lists steps, not both")
    return name


def load_all(directory: Path = SCENARIOS_DIR) -> tuple[Scenario, ...]:
    """Every ``*.toml`` scenario in ``directory``, sorted by name.

    :raise ConfigError: as `load_scenario`, for the first invalid file.
    """
    loaded = (load_scenario(path) for path in directory.glob("*.toml"))
    return tuple(sorted(loaded, key=lambda scenario: scenario.name))


def find_scenario(text: str, directory: Path = SCENARIOS_DIR) -> Path:
    """The scenario file ``text`` means: a path to a file, or a name in ``directory``.

    :raise ConfigError: neither; the message lists the known names.
    """
    if Path(text).is_file():
        return Path(text)
    if _NAME.fullmatch(text) and (directory / f"{text}.toml").is_file():
        return directory / f"{text}.toml"
    known = sorted(path.stem for path in directory.glob("*.toml"))
    close = difflib.get_close_matches(text, known, n=3)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise ConfigError(
        f"no scenario file or name {text!r} (looked in {directory}); "
        f"{hint}known: {', '.join(known) or 'none'}"
    )


def on_kernel(scenario: Scenario, version: str) -> Scenario:
    """``scenario`` on Debian's kernel ``version``, unless it names a non-default one itself.

    How ``pytest tests/scenarios --kernel 6.12`` and ``invoke mutants --kernel 6.12`` replay
    the shipped scenarios (none names a kernel) on another version.

    :raise ConfigError: no such version.
    """
    get_version(version)
    if scenario.guest.kernel != DEFAULT_VERSION:
        return scenario
    return replace(scenario, guest=replace(scenario.guest, kernel=version))


_TABLE_HEADER = re.compile(r"^\s*\[")
_KERNEL_KEY = re.compile(r"^\s*kernel\s*=")


def scenario_source(scenario: Scenario) -> str:
    """The text of ``scenario``'s file as it ran: with the kernel `on_kernel` switched to.

    A bundle keeps this as its ``scenario.toml``, so that its replay boots the kernel
    the run booted, not the file's default. The ``[guest]`` table's ``kernel`` key is
    set (replaced or added) only when the file says another kernel.
    """
    text = scenario.path.read_text()
    if load_scenario(scenario.path).guest.kernel == scenario.guest.kernel:
        return text
    line = f'kernel = "{scenario.guest.kernel}"  # as run (--kernel {scenario.guest.kernel})'
    out: list[str] = []
    in_guest = placed = False
    for row in text.splitlines():  # every scenario has a [guest] table (the loader's rule)
        if _TABLE_HEADER.match(row):
            if in_guest and not placed:
                out.append(line)
                placed = True
            in_guest = row.strip() == "[guest]"
        elif in_guest and _KERNEL_KEY.match(row):
            out.append(line)
            placed = True
            continue
        out.append(row)
    if in_guest and not placed:
        out.append(line)
    return "\n".join(out) + "\n"


def scenario_record(s: Scenario) -> dict[str, object]:
    """The scenario as plain JSON data, keyed as in the file (quirks as a mask)."""
    agent: dict[str, object] = {**s.agent.describe(), "throttling": _word(s.throttling)}
    if s.max_sample_rate is not None:
        agent["max_sample_rate"] = s.max_sample_rate
    expect = [
        {k: v for k, v in (("oracle", e.oracle), ("value", e.value)) if v is not None}
        | ({} if (rel := e.relation()) is None else {rel[0]: rel[1]})
        for e in s.expect
    ]
    return {
        "name": s.name,
        "description": s.description,
        "path": str(s.path),
        "seed": s.seed,
        "repeat": s.repeat,
        "guest": {
            "arch": s.guest.arch,
            "accel": s.guest.accel,
            "topology": s.guest.topology.name,
            "variant": s.guest.variant,
            "nmi": _word(s.guest.nmi),
            "kernel_args": list(s.guest.kernel_args),
        },
        "agent": agent,
        **({} if s.run is None else {"run": s.run}),
        "steps": [{"op": step.op, **step.params()} for step in s.steps],
        "expect": expect,
    }


def _word(flag: bool) -> str:
    return "on" if flag else "off"
