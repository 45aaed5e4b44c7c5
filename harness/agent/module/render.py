"""Render the agent's sources from its spec: C, Kbuild and the Python decoder.

Every decision is made here, on validated values; the templates under
``guest/agent/`` only substitute and loop::

    rendered = render_agent(AgentSpec(period=200_000))
    rendered.write(out_dir)          # profagent_abi.h, profagent.h, core.c, <flavour>.c, ...
    rendered.key                     # content hash: the build cache key's source part
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from harness.agent import flavours, mutants
from harness.agent.module.spec import AgentSpec
from harness.agent.values.info import CORE_PERCPU, FlavourInfo, Param
from harness.builder.cache import content_key
from harness.errors import ConfigError
from harness.templates import render, shown_name, template_lines

#: Rendered file → template under guest/agent/, for the core; each flavour adds
#: ``<name>.c`` from ``guest/agent/flavours/<name>/<name>.c.j2`` (one outside the tree:
#: from ``<name>.c.j2`` in its package, `harness.agent.flavours.discovery`).
CORE_SOURCES: dict[str, str] = {
    "compat.h": "agent/compat.h.j2",  # every kernel-version shim, and only there
    "profagent_abi.h": "agent/profagent_abi.h.j2",
    "profagent.h": "agent/profagent.h.j2",
    "core.c": "agent/core.c.j2",
    "Kbuild": "agent/Kbuild.j2",
    "profagent_records.py": "agent/profagent_records.py.j2",
}
DECODER = "profagent_records.py"


def sources() -> dict[str, str]:
    """Every rendered file → its template: the core's, then each flavour's C."""
    flavour_files = {f"{name}.c": flavours.package(name).template for name in flavours.names()}
    core = dict(CORE_SOURCES)
    decoder = core.pop(DECODER)
    kbuild = core.pop("Kbuild")
    return {**core, **flavour_files, "Kbuild": kbuild, DECODER: decoder}


def fault_points() -> tuple[str, ...]:
    """Every flavour's fault-injection points, in registry order (debugfs ``fault``)."""
    return tuple(p for name in flavours.names() for p in flavours.get(name).fault_points)


@dataclass(frozen=True, slots=True)
class RenderedAgent:
    """The agent's generated sources, by file name (``mutant``: the sabotage built in)."""

    spec: AgentSpec
    files: Mapping[str, str]
    mutant: str = mutants.NONE

    @property
    def key(self) -> str:
        """A hash of every rendered byte."""
        return content_key(dict(self.files))

    def write(self, out: Path) -> Path:
        """Write every file into ``out`` (created); return ``out``."""
        out.mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            (out / name).write_text(text)
        return out


#: The core's own load parameters (core.c.j2); a flavour's may not reuse a name.
CORE_PARAMS = (
    "flavour", "event", "period", "drain", "drain_ms", "quirks", "pmu_produce", "burst_wait_ms",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class FlavourParam:
    """One flavour load parameter as the templates declare it."""

    flavour: str
    param: Param
    value: int


def render_agent(spec: AgentSpec, *, mutant: str = mutants.NONE) -> RenderedAgent:
    """Render all sources for ``spec`` (validated first).

    ``mutant`` builds one deliberate sabotage in (`harness.agent.mutants`); only the
    mutation runs pass it.

    :raise ConfigError: the spec is impossible, the mutant unknown, or a template broken.
    """
    spec.validate()
    if mutant != mutants.NONE:
        mutants.get(mutant)
    context = {**_context(spec), "mutants": mutants.all_mutants(), "mutant": mutant}
    files = {name: render(template, context) for name, template in sources().items()}
    return RenderedAgent(spec=spec, files=files, mutant=mutant)


def template_of(rendered: RenderedAgent, file: str) -> tuple[str, tuple[int | None, ...] | None]:
    """Where generated ``file`` comes from, and each of its lines.

    Its template as a person finds it, and for each of its lines the template's line
    (`harness.templates.template_lines`; None: not known).

    :raise KeyError: ``file`` is not one of the agent's.
    """
    template = sources()[file]
    context = {**_context(rendered.spec), "mutants": mutants.all_mutants(),
               "mutant": rendered.mutant}  # fmt: skip
    return shown_name(template), template_lines(template, context)


def render_flavour(spec: AgentSpec) -> str:
    """The C of ``spec.flavour``'s own template alone, as `render_agent` renders it.

    :raise ConfigError: the spec is impossible, or the template does not render.
    """
    spec.validate()
    context = {**_context(spec), "mutants": mutants.all_mutants(), "mutant": mutants.NONE}
    return render(flavours.package(spec.flavour).template, context)


def _context(spec: AgentSpec) -> dict[str, object]:
    """What the templates read.

    The core's values, each flavour's data under its name, and each flavour's own
    template values (`FlavourInfo.template_context`).
    """
    infos = [flavours.get(name) for name in flavours.names()]
    context: dict[str, object] = {
        "spec": spec,
        "pmu_produce": "true" if spec.pmu_produce else "false",
        "flavour_names": flavours.names(),
        "objects": ("core.o", *(f"{info.name}.o" for info in infos)),
        "core_percpu": CORE_PERCPU,
        "fault_points": fault_points(),
        "layouts": tuple(layout for info in infos for layout in info.layouts),
        "ioctls": tuple(ioctl for info in infos for ioctl in info.ioctls),
        "framed": tuple(record for info in infos for record in info.framed),
        "flavour_params": _flavour_params(spec, infos),
    }
    for info in infos:
        if info.name in context:
            raise ConfigError(f"flavour {info.name}'s name is already a template value")
        context[info.name] = info
        clash = set(context) & set(info.template_context)
        if clash:
            raise ConfigError(f"flavour {info.name}'s template values clash: {sorted(clash)}")
        context.update(info.template_context)
    return context


def _flavour_params(spec: AgentSpec, infos: list[FlavourInfo]) -> tuple[FlavourParam, ...]:
    """Every flavour's load parameters, valued from ``spec`` for its own flavour.

    All flavours are compiled into one module, so all their parameters exist;
    the flavour the spec selects gets the spec's values as C defaults.

    :raise ConfigError: two flavours (or a flavour and the core) share a name.
    """
    rows: list[FlavourParam] = []
    for info in infos:
        for param in info.params:
            value = spec.param(param.name) if info.name == spec.flavour else param.default
            rows.append(FlavourParam(info.name, param, value))
    names = [row.param.name for row in rows]
    clash = {n for n in names if names.count(n) > 1} | (set(names) & set(CORE_PARAMS))
    if clash:
        raise ConfigError(f"flavour load parameters clash: {sorted(clash)}")
    return tuple(rows)


def load_decoder(path: Path) -> ModuleType:
    """Import a rendered ``profagent_records.py`` from ``path``.

    :raise ConfigError: the file is missing or does not import.
    """
    spec = importlib.util.spec_from_file_location("profagent_records", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load the agent's record decoder from {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except (OSError, SyntaxError) as exc:
        raise ConfigError(f"the agent's record decoder {path} does not import: {exc}") from exc
    return module
