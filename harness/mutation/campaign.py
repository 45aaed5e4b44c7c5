"""A whole mutation campaign: every group in turn, its rows kept in ``mutants.json``.

`run_mutants` is ``invoke mutants`` and CI's mutant stage; `build_default_group` is
CI's prebuild of the agents the default group loads (`harness.cli.prebuild`)::

    result = run_mutants(MutationRequest(full=False), Cache.default())
    survivors(result.rows)                     # harness.agent.mutants: [] when all caught
    write_table(result, format_table(result.rows))
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from harness import arches
from harness.agent.mutants import MutantRow
from harness.builder.cache import Cache, write_json_atomic
from harness.builder.hostdeps import ensure_host
from harness.builder.images import prepare_images
from harness.mutation.cases import Bench
from harness.mutation.groups import (
    armed_group,
    debug_group,
    default_group,
    deterministic_group,
    prebuild,
)
from harness.mutation.plan import MutationRequest, agent_builds, flavour_plan, resolve_selection
from harness.mutation.sanitizers import sanitizer_group
from harness.timeouts import Timeouts
from harness.vm.record import new_run_dir


@dataclass(frozen=True, slots=True)
class MutationResult:
    """The judged rows, where they are written, and how long the run took."""

    rows: tuple[MutantRow, ...]
    out: Path
    elapsed_s: float


def run_mutants(request: MutationRequest, cache: Cache) -> MutationResult:
    """Run the quick (or full) mutation set; the rows say what caught what.

    Blocks for minutes (quick: one guest, about 20 runs); builds what is missing.

    :raise ConfigError: an unknown flavour or mutant, before anything is built.
    :raise InfraError: the host or a guest failed outside a mutant's doing.
    """
    started = time.monotonic()
    selected = resolve_selection(request)  # the names, once: every group reads this
    chosen, only = selected.flavours, selected.by_flavour()
    ensure_host()
    arch = arches.get("arm64")
    out = request.out or new_run_dir("mutants", "full" if request.full else "quick")
    bench = Bench(arch, cache, tuple(range(request.cpus)), Timeouts.from_env(), out)
    images = prepare_images(arch, "default", cache, kernel=request.kernel)
    rows = default_group(bench, images, full=request.full, chosen=chosen, only=only)
    if request.deterministic:
        rows += deterministic_group(bench, request.kernel, full=request.full,
                                    chosen=chosen, only=only)  # fmt: skip
    if request.full:
        # With --mutant, only the groups of the named mutants boot their guests.
        named = selected.named
        if not named or any(m.name == "leave_event_armed" for m in named):
            rows += armed_group(bench, images, chosen)
        if not named or any(m.case == "debug" for m in named):
            debug = prepare_images(arch, "debug", cache, kernel=request.kernel)
            rows += debug_group(bench, debug, chosen[0])
        rows += sanitizer_group(bench, request.kernel, chosen=chosen,
                                only=tuple(m.name for m in named))  # fmt: skip
    elapsed = time.monotonic() - started
    record = {"kernel": images.kernel_name, "full": request.full, "cpus": request.cpus,
              "elapsed_s": round(elapsed, 1), "rows": [row.as_dict() for row in rows]}  # fmt: skip
    write_json_atomic(out / "mutants.json", record)
    return MutationResult(tuple(rows), out, elapsed)


def build_default_group(request: MutationRequest, cache: Cache) -> int:
    """Build every agent the default group of ``request`` loads, boot nothing; how many.

    `harness.cli.prebuild` runs it beside CI's first tier, so the mutant stage after it
    finds them cached (a cold per-oracle set: 43 builds, about 4 minutes of two cores).
    """
    selected = resolve_selection(request)  # before anything is built
    images = prepare_images(arches.get("arm64"), "default", cache, kernel=request.kernel)
    builds = agent_builds({name: flavour_plan(name, full=request.full,
                                              only=selected.only_for(name))
                           for name in selected.flavours})  # fmt: skip
    prebuild(cache, images, builds)
    return len(set(builds))


def write_table(result: MutationResult, table: str) -> Path:
    """Keep the printed table beside ``mutants.json``."""
    path = result.out / "mutants.txt"
    path.write_text(table + "\n")
    return path
