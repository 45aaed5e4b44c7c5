"""Render the agent's sources from its spec: C, Kbuild and the Python decoder.

Every decision is made here, on validated values; the templates under
``guest/agent/`` only substitute and loop::

    rendered = render_agent(AgentSpec(period=200_000))
    rendered.write(out_dir)          # profagent_abi.h, profagent.h, core.c, tprof.c, ...
    rendered.key                     # content hash: the build cache key's source part
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from harness.agent import flavours
from harness.agent.layouts import (
    DT_EVT,
    DT_IOCTLS,
    DT_PCPU_HDR,
    DT_REQ,
    DT_STAT,
    TPROF_IOCTLS,
    TPROF_PARAM,
    TPROF_STAT,
    TPROF_VERSION,
)
from harness.agent.spec import AgentSpec
from harness.build.cache import content_key
from harness.errors import ConfigError
from harness.templates import render

#: Rendered file → template under guest/agent/.
SOURCES: dict[str, str] = {
    "profagent_abi.h": "agent/profagent_abi.h.j2",
    "profagent.h": "agent/profagent.h.j2",
    "core.c": "agent/core.c.j2",
    "tprof.c": "agent/tprof.c.j2",
    "dt.c": "agent/dt.c.j2",
    "Kbuild": "agent/Kbuild.j2",
    "profagent_records.py": "agent/profagent_records.py.j2",
}
FAULT_POINTS = ("wq_create", "buf_alloc")
DECODER = "profagent_records.py"
#: Global tprof statistics that are sums of a per-CPU one under another name.
_TPROF_PERCPU_ALIASES = {
    "sample": "x_sample",
    "overflow": "x_overflow",
    "dropbuf_sample": "x_dropbuf_sample",
}


@dataclass(frozen=True, slots=True)
class RenderedAgent:
    """The agent's generated sources, by file name."""

    spec: AgentSpec
    files: Mapping[str, str]

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


def render_agent(spec: AgentSpec) -> RenderedAgent:
    """Render all sources for ``spec`` (validated first).

    :raise ConfigError: the spec is impossible, or a template is broken.
    """
    spec.validate()
    context = _context(spec)
    files = {name: render(template, context) for name, template in SOURCES.items()}
    return RenderedAgent(spec=spec, files=files)


def _context(spec: AgentSpec) -> dict[str, object]:
    tprof = flavours.TPROF
    percpu = set(tprof.percpu_names)
    sources = []
    for name in tprof.stat_names:
        alias = _TPROF_PERCPU_ALIASES.get(name, name)
        sources.append((name, f"TP_PC_{alias.upper()}" if alias in percpu else "-1"))
    return {
        "spec": spec,
        "pmu_produce": "true" if spec.pmu_produce else "false",
        "flavour_names": tuple(flavours.FLAVOURS),
        "objects": ("core.o", *(f"{name}.o" for name in flavours.FLAVOURS)),
        "core_percpu": flavours.CORE_PERCPU,
        "fault_points": FAULT_POINTS,
        "layouts": (tprof.record, TPROF_STAT, TPROF_PARAM, DT_EVT, DT_STAT, DT_REQ, DT_PCPU_HDR),
        "ioctls": (*TPROF_IOCTLS, *DT_IOCTLS),
        "dt": flavours.DT,
        "dt_open_stats": flavours.DT_OPEN_STATS,
        "dt_ring_slots": flavours.DT_RING_SLOTS,
        "tprof_version": TPROF_VERSION,
        "quirks": tprof.quirks,
        "stats": tprof.stats,
        "stats_percpu": tprof.stats_percpu,
        "stat_sources": tuple(sources),
        "record": tprof.record,
    }


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
