"""The groups of a mutation campaign: which guest each mutant's cases run on.

- `default_group`: the control and the quick (or full) mutants through the standard,
  exact, peer and extra runs, on `LANES` default-kernel guests at once, after
  `prebuild` built every agent they load;
- `armed_group`: the mutant that leaves its event armed, on a guest of its own per flavour;
- `deterministic_group`: the budget scenario's mutants, one input-free run each;
- `debug_group`: the lock and leak mutants on the debug kernel (console scan, kmemleak).

The sanitizer group is `harness.mutation.sanitizers`::

    rows = default_group(bench, images, full=False, chosen=chosen, only=only)
    rows += debug_group(bench, prepare_images(arch, "debug", cache), chosen[0])
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import time
from collections.abc import Mapping, Sequence

from harness.agent import mutants
from harness.agent.flavour import Flavour, behaviour
from harness.agent.module.build import build_agent
from harness.agent.module.spec import AgentSpec
from harness.agent.mutants import MutantRow
from harness.agent.oracles.evidence import kmemleak_command, module_leaks
from harness.agent.truth.nmitrace import TRACED_CASE
from harness.agent.values.info import Mutant
from harness.builder.cache import Cache
from harness.builder.images import GuestImages
from harness.builder.kernel import KernelChoice
from harness.errors import GuestError, HarnessError
from harness.lanes import run_lanes
from harness.mutation.cases import (
    Bench,
    caught,
    compared,
    judge_case,
    mutant_row,
    mutation_guest,
    name_of,
    relied_on,
    run_case,
)
from harness.mutation.peer import peer_row
from harness.mutation.plan import LANES, Plan, agent_builds, flavour_plan, planned, shares
from harness.process import build_pool
from harness.scenarios.deterministic_bundle import run_deterministic
from harness.scenarios.load import Scenario, load_scenario, on_kernel
from harness.vm.guest import Guest

LOG = logging.getLogger(__name__)


def default_group(
    bench: Bench,
    images: GuestImages,
    *,
    full: bool,
    chosen: tuple[str, ...],
    only: Mapping[str, tuple[str, ...]],
) -> list[MutantRow]:
    """The control and the standard mutants through CASES, the others through their case.

    Peer mutants run the peer case; those of a flavour's extra run (hwpmc's
    "counting") run that. The control runs the peer and extra cases too where a mutant
    of theirs runs, so a catch there is judged against a clean run of the same case and
    build. ``chosen``: the flavours run, shared out among `LANES` guests at once; the
    rows come back in ``chosen``'s order.
    """
    plans = {name: flavour_plan(name, full=full, only=only[name]) for name in chosen}
    prebuild(bench.cache, images, agent_builds(plans))  # before any guest shares the cores
    lanes = shares(plans, min(LANES, os.cpu_count() or 1))
    names = ["default"] if len(lanes) == 1 else [f"default-{i}" for i in range(len(lanes))]
    jobs = [
        functools.partial(_lane, bench, images, {n: plans[n] for n in share}, name=name, full=full)
        for share, name in zip(lanes, names, strict=True)
    ]
    rows = [row for found in run_lanes(jobs) for row in found]
    return sorted(rows, key=lambda row: chosen.index(row.flavour))  # stable: plan order kept


def _lane(bench: Bench, images: GuestImages, plans: Mapping[str, Plan], *, name: str,
          full: bool) -> list[MutantRow]:  # fmt: skip
    """``plans``' rows on one guest of their own, called ``name``."""
    rows = []
    with mutation_guest(bench, images, name) as guest:
        for flavour_name, (plan, peer) in plans.items():
            flavour = behaviour(flavour_name)
            for mutant, cases_of in plan:
                cases: list[tuple[str, set[str]]] = []
                seen: set[str] = set()  # the control's: the oracles that compared something
                relied = relied_on(plan, cases_of) if mutant is None else set()
                for case in cases_of:
                    failed, _, judged = judge_case(bench, guest, images, flavour, mutant, case)
                    cases.append((case, failed))
                    seen |= compared(judged, relied)
                    if not full and mutant and caught(mutant, cases):
                        break  # quick: the exact run of a mutant the standard caught is moot
                rows.append(mutant_row(flavour, mutant, _held_to(cases, relied - seen)))
            rows += [peer_row(bench, guest, images, flavour, m) for m in peer]
    return rows


def _held_to(cases: list[tuple[str, set[str]]],
             missing: set[str]) -> list[tuple[str, set[str]]]:  # fmt: skip
    """A control's cases, its last failing too on each relied-on oracle that judged nothing."""
    if not missing or not cases:
        return cases
    LOG.warning("control: %s compared nothing in %s", ", ".join(sorted(missing)),
                "+".join(case for case, _ in cases))  # fmt: skip
    last, failed = cases[-1]
    return [*cases[:-1], (last, failed | {mutants.unjudged_token(o) for o in sorted(missing)})]


def prebuild(cache: Cache, images: GuestImages,
             builds: list[tuple[str, Mutant | None]]) -> None:  # fmt: skip
    """Build (or find cached) each (flavour, mutant) agent, one compiler per host core.

    Before any guest boots, so the builds do not share the cores with a guest's vCPUs.
    A cold quick set is about 80 modules of about 4 s each: one at a time, as the runs
    ask for them, they cost over 5 minutes of a CI run's wall time.
    """
    started = time.monotonic()

    def one(build: tuple[str, Mutant | None]) -> None:
        build_agent(AgentSpec(flavour=build[0]), images, cache, mutant=name_of(build[1]))

    unique = list(dict.fromkeys(builds))
    with build_pool(os.cpu_count() or 1) as pool:  # Ctrl-C stops every build
        list(pool.map(one, unique))  # the first build error is raised here
    LOG.info("%d agent builds ready in %.1f s", len(unique), time.monotonic() - started)


def armed_group(bench: Bench, images: GuestImages, chosen: Sequence[str]) -> list[MutantRow]:
    """The armed-event mutant, once per ``chosen`` flavour, each on a guest of its own.

    The event outlives its module, so nothing may unload it afterwards.
    """
    rows = []
    armed = mutants.get("leave_event_armed")
    for name in chosen:
        flavour, notes = behaviour(name), []
        try:
            with mutation_guest(bench, images, f"armed-{name}") as guest:
                failed = run_case(bench, guest, images, flavour, armed, "standard")
        except GuestError as exc:  # leaving it: the armed event's handler after QMP quit
            notes.append(f"the guest failed on the way out, as an armed event may: {exc}")
            failed = set()
        rows.append(mutant_row(flavour, armed, [("standard", failed)], notes))
    return rows


def deterministic_group(bench: Bench, kernel: KernelChoice, *, full: bool,
                        chosen: tuple[str, ...],
                        only: Mapping[str, tuple[str, ...]]) -> list[MutantRow]:  # fmt: skip
    """The control and the ``deterministic`` mutants: the flavour's budget scenario, input-free.

    Their oracles (the core's C-3, tprof's TP-O10) judge time, which only a guest whose clock
    counts instructions (``-icount``) measures free of the host: one deterministic run each,
    one vCPU, on ``kernel``'s Debian version (a scenario names no source tree: with
    ``--kernel-src`` they run on the scenario's own kernel).
    """
    rows = []
    for name in chosen:
        flavour = behaviour(name)
        found = planned(name, full=full, case="deterministic", only=only[name])
        if not found or flavour.budget_scenario is None:
            continue
        scenario = load_scenario(flavour.budget_scenario)
        if kernel.tree is None:
            scenario = on_kernel(scenario, kernel.version)
        for mutant in (None, *found):
            failed = _deterministic_case(bench, scenario, mutant)
            rows.append(mutant_row(flavour, mutant, [("deterministic", failed)]))
    return rows


def _deterministic_case(bench: Bench, scenario: Scenario, mutant: Mutant | None) -> set[str]:
    """The oracles the scenario expects that failed (``RUN-ERROR`` when the run failed)."""
    out = bench.out / f"deterministic-{scenario.name}-{name_of(mutant)}"
    out.mkdir(parents=True, exist_ok=True)
    try:
        result = run_deterministic(scenario, bench.cache, kind="deterministic", attempts=1,
                                   out=out, mutant=name_of(mutant))  # fmt: skip
    except HarnessError as exc:
        LOG.warning("mutant %s, %s, deterministic: the run failed: %s", name_of(mutant),
                    scenario.name, exc)  # fmt: skip
        return {"RUN-ERROR"}
    verdicts = result.repro.verdicts[0]
    return {item.oracle for item, verdict in zip(scenario.expect, verdicts, strict=True)
            if item.oracle is not None and not verdict.held}  # fmt: skip


def debug_group(bench: Bench, images: GuestImages, name: str) -> list[MutantRow]:
    """The control and the debug mutants on the debug kernel, in flavour ``name``'s runs.

    Their sabotage is in the core, so one flavour carries them: the first one chosen
    (tprof when every flavour is). The lock mutants go last, the one lockdep must catch
    first: lockdep switches itself off after its first report (the kernel's tracer, which
    catches the other, does not).
    """
    rows = []
    flavour = behaviour(name)
    last = ("nmi_spinlock", "nmi_lock_via_pointer")
    order = sorted(planned(name, full=True, case="debug"),
                   key=lambda m: last.index(m.name) + 1 if m.name in last else 0)  # fmt: skip
    notes: list[str] = []
    try:
        with mutation_guest(bench, images, "debug", timeout_scale=2) as guest:
            for mutant in (None, *order):
                failed = _debug_case(bench, guest, images, flavour, mutant)
                rows.append(mutant_row(flavour, mutant, [("debug", failed)]))
    except GuestError as exc:  # leaving it: the console holds the lock mutant's splat
        notes.append(f"leaving the debug guest: {exc}")
    if rows and notes:
        rows[-1] = dataclasses.replace(rows[-1], notes=(*rows[-1].notes, *notes))
    return rows


def _debug_case(bench: Bench, guest: Guest, images: GuestImages, flavour: Flavour,
                mutant: Mutant | None) -> set[str]:  # fmt: skip
    """The standard case, the exact case, kmemleak (module still loaded), the console.

    In the exact case the kernel's tracer follows the NMI entry (C-2: `judge_case`).
    """
    start = guest.console_lines()
    failed = run_case(bench, guest, images, flavour, mutant, "standard")
    failed |= run_case(bench, guest, images, flavour, mutant, TRACED_CASE)
    report = guest.shell.run(kmemleak_command(), timeout_s=bench.timeouts.command_s).stdout
    if module_leaks(report, "profagent"):
        failed.add("KMEMLEAK")
    if guest.judge_console(start):  # kmemleak's own lines too
        failed.add("CONSOLE")
    return failed
