"""Render and build the agent against the cached kernel tree, cached by content.

::

    build = build_agent(AgentSpec(), images, Cache.default())
    build.ko                  # <cache>/agent/<key>/profagent.ko
    build.source_dir          # the generated C, Kbuild and decoder, kept beside it
    build.decode(data)        # tprof records → tuple[Sample, ...]

The key covers every rendered byte and the kernel build, so a template change
or a new kernel rebuilds, and anything else is a cache hit. A compiler error
raises `BuildError` naming each error's template file and line, beside the generated
file's, with the generated sources and the build log kept (`compile_error`).
"""

from __future__ import annotations

import logging
import re
import shlex
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import ModuleType

from harness.agent.module.render import (
    DECODER,
    RenderedAgent,
    load_decoder,
    render_agent,
    template_of,
)
from harness.agent.module.spec import AgentSpec
from harness.agent.mutants import NONE
from harness.builder.cache import Cache, content_key, file_sha256
from harness.builder.images import GuestImages
from harness.builder.modules import build_module
from harness.errors import BuildError
from harness.timing import BUILD, timed
from harness.vm.record import new_run_dir

LOG = logging.getLogger(__name__)

#: Bump when the build steps change in a way the inputs do not show.
AGENT_RECIPE = 1


@dataclass(frozen=True)
class AgentBuild:
    """A built agent: the module, its generated sources and its decoder."""

    rendered: RenderedAgent
    source_dir: Path
    ko: Path
    key: str

    @cached_property
    def decoder(self) -> ModuleType:
        """The rendered ``profagent_records.py``, imported."""
        return load_decoder(self.source_dir / DECODER)

    def record(self) -> dict[str, object]:
        """Identities for run.json."""
        return {
            "agent_key": self.key,
            "agent_sources": self.rendered.key,
            "agent_ko_sha256": file_sha256(self.ko),
            "agent_spec": self.rendered.spec.describe(),
            "agent_mutant": self.rendered.mutant,
        }


def agent_key(spec: AgentSpec, kernel_key: str, *, mutant: str = NONE) -> str:
    """The cache key of ``spec`` (with ``mutant``) built for the kernel with ``kernel_key``."""
    sources = render_agent(spec, mutant=mutant).key
    return content_key({"sources": sources, "kernel": kernel_key, "recipe": AGENT_RECIPE})


@timed(BUILD)
def build_agent(
    spec: AgentSpec, images: GuestImages, cache: Cache, *, mutant: str = NONE
) -> AgentBuild:
    """Render ``spec`` and build it for ``images``' kernel (cached).

    ``mutant`` builds a deliberate sabotage in (only mutation runs pass it).
    Blocks while the module compiles (seconds).

    :raise ConfigError: the spec is impossible (nothing is built).
    :raise BuildError: the generated code does not compile.
    """
    rendered = render_agent(spec, mutant=mutant)
    key = agent_key(spec, images.kernel_key, mutant=mutant)
    entry = cache.entry("agent", key)

    def build(path: Path) -> dict[str, object]:
        source = rendered.write(path / "src")
        try:
            ko = build_module(source, images, path / "build")
        except BuildError as exc:  # the entry is removed: keep what a person needs first
            raise compile_error(exc, rendered, path, key) from None
        LOG.info("agent %s built: %s", key, ko)
        return {"sources": rendered.key, "kernel_key": images.kernel_key, "ko": ko.name}

    entry = cache.obtain(entry, build)
    return AgentBuild(
        rendered=rendered,
        source_dir=entry.path / "src",
        ko=entry.path / "build" / "profagent.ko",
        key=key,
    )


#: A compiler diagnostic: ``<dir>/badport.c:82:22: error: ...``.
_DIAGNOSTIC = re.compile(r"^(?:\S*/)?(?P<file>[\w.-]+):(?P<line>\d+):(?P<col>\d+): "
                         r"(?P<kind>error|warning|note): (?P<text>.*)$")  # fmt: skip
#: Diagnostics shown in the error at most; the kept log has them all.
SHOWN_DIAGNOSTICS = 12


def compile_error(exc: BuildError, rendered: RenderedAgent, path: Path, key: str) -> BuildError:
    """``exc`` (the module did not compile) in template coordinates, its files kept.

    The cache entry ``path`` is removed when its build fails, so the generated sources
    and the build log go to ``artifacts/agent-build/<time>-<key>/`` first; each
    compiler error names its template file and line (`render.template_of`), with the
    generated file and line beside it.
    """
    kept = new_run_dir("agent-build", key[:12])
    shutil.copytree(path / "src", kept / "src", dirs_exist_ok=True)
    log = kept / "build.log"
    built_log = path / "build" / "build.log"
    text = built_log.read_text(errors="replace") if built_log.is_file() else exc.tail
    log.write_text(text)
    maps: dict[str, tuple[str, tuple[int | None, ...] | None]] = {}
    found = []
    for line in text.splitlines():
        match = _DIAGNOSTIC.match(line)
        if match is None or match["kind"] == "note" or match["file"] not in rendered.files:
            continue
        file, number = match["file"], int(match["line"])
        if file not in maps:
            maps[file] = template_of(rendered, file)
        template, lines = maps[file]
        at = lines[number - 1] if lines is not None and 0 < number <= len(lines) else None
        where = f"{template}:{at}:{match['col']}" if at is not None else f"{file}:{number}"
        found.append(f"{where}: {match['kind']}: {match['text']} (generated {file}:{number})")
    if not found:
        return BuildError(f"{exc.what} (generated sources kept: {kept / 'src'})", log=log,
                          tail=exc.tail)  # fmt: skip
    more = len(found) - SHOWN_DIAGNOSTICS
    shown = found[:SHOWN_DIAGNOSTICS] + ([f"... and {more} more"] if more > 0 else [])
    return BuildError(f"the generated agent does not compile ({len(found)} diagnostics); "
                      f"generated sources kept: {kept / 'src'}", log=log,
                      tail="\n".join(shown))  # fmt: skip


def export_agent(
    spec: AgentSpec, images: GuestImages, cache: Cache, out: Path, *, mutant: str = NONE
) -> AgentBuild:
    """Build ``spec`` (cached) and copy its generated sources and module into ``out``.

    For a developer who wants to read, diff or hand-load the generated C (and for
    deterministic runs, which ship it; ``mutant`` as for `build_agent`).

    :raise ConfigError: the spec is impossible (nothing is built).
    :raise BuildError: the generated code does not compile.
    """
    build = build_agent(spec, images, cache, mutant=mutant)
    shutil.copytree(build.source_dir, out / "src", dirs_exist_ok=True)
    shutil.copy2(build.ko, out / build.ko.name)
    (out / "insmod.txt").write_text(
        shlex.join(["insmod", build.ko.name, *spec.module_params()]) + "\n"
    )
    return build
