"""``invoke mutants``: build each mutant, run it where it shows, and judge the catch.

Quick (``invoke ci``): on one default-kernel guest, for every flavour, the
unmutated control and each quick mutant (the core's and the flavour's own), each
through the flavour's standard run and its exact-count run (quick skips the exact
run of a mutant the standard run already caught; full runs both). Full adds the mutants
that end their guest (an event left armed: one guest each), the debug-kernel
ones (a lock in NMI, a leak), whose catch is the console scan and kmemleak, and the
sanitizer ones (``kasan`` on the debug kernel, ``kcsan`` on the kcsan kernel), whose
catch is the report they name::

    result = run_mutants(MutationRequest(full=False), Cache.default())
    print(format_table(result.rows))           # harness.agent.mutants
    survivors(result.rows)                     # [] when every mutant was caught

Every run's evidence (profctl transcripts, agent runs, the console) stays in
``artifacts/mutants/<time>-<quick|full>/``, with ``mutants.json``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import arches
from harness.agent import flavours, mutants
from harness.agent.driver import Agent
from harness.agent.flavour import AgentRun, Flavour, behaviour
from harness.agent.module.build import build_agent
from harness.agent.module.info import Mutant
from harness.agent.module.spec import AgentSpec
from harness.agent.mutants import MutantRow, merge
from harness.agent.oracles.evidence import kmemleak_command, module_leaks
from harness.agent.oracles.report import unjudged
from harness.agent.overlap import OVERLAP_RUN, OverlapCase, overlap_case
from harness.agent.peer.counts import PeerEvidence, peer_range, stretch_margin
from harness.agent.peer.profile import unjudgeable
from harness.agent.profctl_build import build_profctl
from harness.arches import ArchProfile
from harness.builder.cache import Cache, write_json_atomic
from harness.builder.hostdeps import ensure_host
from harness.builder.images import GuestImages, prepare_images
from harness.builder.kernel import DEFAULT_KERNEL, KernelChoice, Variant
from harness.errors import ConfigError, GuestError, HarnessError
from harness.lanes import run_lanes
from harness.process import build_pool
from harness.scenarios.deterministic_bundle import run_deterministic
from harness.scenarios.load import Scenario, load_scenario, on_kernel
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.console import scan_console
from harness.vm.guest import Guest
from harness.vm.perf import PerfCpu
from harness.vm.record import new_run_dir
from harness.vm.sanitizer import parse_reports
from harness.vm.topology import default_topology

LOG = logging.getLogger(__name__)
CASES = ("standard", "exact")
#: A flavour's (build, cases) runs, the control first, and its peer mutants.
_Plan = tuple[list[tuple[Mutant | None, tuple[str, ...]]], tuple[Mutant, ...]]


@dataclass(frozen=True, slots=True)
class MutationRequest:
    """Which mutants, on how many vCPUs, and where the evidence goes."""

    full: bool = False
    cpus: int = 2
    out: Path | None = None
    flavours: tuple[str, ...] = ()  # only these flavours' runs (empty: every flavour)
    only: tuple[str, ...] = ()  # only these mutants beside the control (empty: all)
    #: CI's share of the quick set: one mutant per oracle (`per_oracle`), not every one
    per_oracle: bool = False
    #: The budget scenarios' cases (`_deterministic_group`); CI leaves them to
    #: tests/scenarios/test_budgets.py, which runs the same cases in the same CI run
    deterministic: bool = True
    kernel: KernelChoice = DEFAULT_KERNEL  # --kernel / --kernel-src


@dataclass(frozen=True, slots=True)
class MutationResult:
    """The judged rows, where they are written, and how long the run took."""

    rows: tuple[MutantRow, ...]
    out: Path
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class _Bench:
    """What every mutation run shares."""

    arch: ArchProfile
    cache: Cache
    cpus: tuple[int, ...]
    timeouts: Timeouts
    out: Path


def run_mutants(request: MutationRequest, cache: Cache) -> MutationResult:
    """Run the quick (or full) mutation set; the rows say what caught what.

    Blocks for minutes (quick: one guest, about 20 runs); builds what is missing.

    :raise InfraError: the host or a guest failed outside a mutant's doing.
    """
    started = time.monotonic()
    ensure_host()
    arch = arches.get("arm64")
    out = request.out or new_run_dir("mutants", "full" if request.full else "quick")
    bench = _Bench(arch, cache, tuple(range(request.cpus)), Timeouts.from_env(), out)
    images = prepare_images(arch, "default", cache, kernel=request.kernel)
    chosen, only = _selection(request)
    rows = _default_group(bench, images, full=request.full, chosen=chosen, only=only)
    if request.deterministic:
        rows += _deterministic_group(bench, request.kernel, full=request.full,
                                     chosen=chosen, only=only)  # fmt: skip
    if request.full:
        # With --mutant, only the groups of the named mutants boot their guests.
        if not request.only or "leave_event_armed" in request.only:
            rows += _armed_group(bench, images, chosen)
        if not request.only or any(mutants.get(n).case == "debug" for n in request.only):
            debug = prepare_images(arch, "debug", cache, kernel=request.kernel)
            rows += _debug_group(bench, debug, chosen[0])
        rows += _sanitizer_group(bench, request.kernel, chosen=chosen, only=request.only)
    elapsed = time.monotonic() - started
    record = {"kernel": images.kernel_name, "full": request.full, "cpus": request.cpus,
              "elapsed_s": round(elapsed, 1), "rows": [row.as_dict() for row in rows]}  # fmt: skip
    write_json_atomic(out / "mutants.json", record)
    return MutationResult(tuple(rows), out, elapsed)


def _selection(request: MutationRequest) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """The flavours ``request`` runs, and per flavour the mutants it names (all: ``()``).

    :raise ConfigError: an unknown flavour or mutant (before any build or guest).
    """
    chosen = tuple(flavours.get(name).name for name in request.flavours) or flavours.names()
    for name in request.only:
        mutants.get(name)
    only = {name: request.only for name in chosen}
    if request.per_oracle:
        only = per_oracle(chosen, full=request.full)
        chosen = tuple(name for name in chosen if only[name])
    return chosen, only


def per_oracle(chosen: Sequence[str], *, full: bool = False) -> dict[str, tuple[str, ...]]:
    """Per flavour, the mutants of the set that show each oracle failing once (CI's share).

    In flavour order, a mutant joins when one of the oracles that must catch it is
    caught by none before it: the shared oracles (IRQ, WHERE, PEER, ...) on the first
    flavour that has a mutant for them, each flavour's own on that flavour. ``invoke
    mutants`` runs the whole set, where every flavour shows every oracle.
    """
    seen: set[str] = set()
    picks: dict[str, tuple[str, ...]] = {}
    for name in chosen:
        mine = []
        for mutant in mutants.for_flavour(name):
            wanted = set(mutant.caught_by) - seen
            if wanted and _runs(mutant, full=full) and mutant.case not in FULL_ONLY_CASES:
                mine.append(mutant.name)
                seen |= wanted
        picks[name] = tuple(mine)
    return picks


#: The cases only the full set runs (their groups boot the debug and sanitizer kernels).
FULL_ONLY_CASES = ("debug", "kasan", "kcsan")


def _runs(mutant: Mutant, *, full: bool) -> bool:
    return (mutant.quick or full) and mutant.name != "leave_event_armed"


def planned(
    flavour: str, *, full: bool, case: str = "standard", only: tuple[str, ...] = ()
) -> tuple[Mutant, ...]:
    """The mutants a group runs for ``flavour`` in ``case``.

    The quick ones (all with ``full``), except the one that leaves its guest unusable;
    with ``only``, just those of them named there.
    """
    return tuple(
        m for m in mutants.for_flavour(flavour)
        if m.case == case and _runs(m, full=full) and (not only or m.name in only)
    )  # fmt: skip


#: Guests the default group runs at once, each on its share of the flavours
#: (`harness.lanes`): alone, one 2-vCPU guest kept the two host cores about 60 % busy
#: (CI's per-oracle set: 8 min 23 s). Never more than the host's cores.
LANES = 2


def _default_group(
    bench: _Bench,
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
    plans = {name: _flavour_plan(name, full=full, only=only[name]) for name in chosen}
    prebuild(bench.cache, images, _builds(plans))  # before any guest shares the cores
    shares = _shares(plans, min(LANES, os.cpu_count() or 1))
    names = ["default"] if len(shares) == 1 else [f"default-{i}" for i in range(len(shares))]
    jobs = [
        functools.partial(_lane, bench, images, {n: plans[n] for n in share}, name=name, full=full)
        for share, name in zip(shares, names, strict=True)
    ]
    rows = [row for found in run_lanes(jobs) for row in found]
    return sorted(rows, key=lambda row: chosen.index(row.flavour))  # stable: plan order kept


def _lane(bench: _Bench, images: GuestImages, plans: Mapping[str, _Plan], *, name: str,
          full: bool) -> list[MutantRow]:  # fmt: skip
    """``plans``' rows on one guest of their own, called ``name``."""
    rows = []
    with _guest(bench, images, name) as guest:
        for flavour_name, (plan, peer) in plans.items():
            flavour = behaviour(flavour_name)
            for mutant, cases_of in plan:
                cases: list[tuple[str, set[str]]] = []
                for case in cases_of:
                    cases.append((case, _case(bench, guest, images, flavour, mutant, case)))
                    if not full and mutant and _caught(mutant, cases):
                        break  # quick: the exact run of a mutant the standard caught is moot
                rows.append(_row(flavour, mutant, cases))
            rows += [_peer_row(bench, guest, images, flavour, m) for m in peer]
    return rows


def _shares(plans: Mapping[str, _Plan], lanes: int) -> list[tuple[str, ...]]:
    """``plans``' flavours shared out among at most ``lanes`` guests, by the runs each makes.

    The heaviest first, each to the lane with the fewest runs so far (a peer run counts
    three: it records beside Linux perf in rounds). No lane is empty.
    """

    def weight(name: str) -> int:
        plan, peer = plans[name]
        return sum(len(cases) for _, cases in plan) + 3 * len(peer)

    loads: list[tuple[int, list[str]]] = [(0, []) for _ in range(min(lanes, len(plans)) or 1)]
    for name in sorted(plans, key=weight, reverse=True):
        index = min(range(len(loads)), key=lambda i: loads[i][0])
        loads[index] = (loads[index][0] + weight(name), [*loads[index][1], name])
    order = list(plans)
    return [tuple(sorted(names, key=order.index)) for _, names in loads if names]


def _builds(plans: Mapping[str, _Plan]) -> list[tuple[str, Mutant | None]]:
    """The (flavour, mutant) agents `_default_group`'s ``plans`` load, the control's too."""
    return [(name, mutant) for name, (plan, peer) in plans.items()
            for mutant in (*(m for m, _ in plan), *peer)]  # fmt: skip


def build_default_group(request: MutationRequest, cache: Cache) -> int:
    """Build every agent the default group of ``request`` loads, boot nothing; how many.

    `harness.cli.prebuild` runs it beside CI's first tier, so the mutant stage after it
    finds them cached (a cold per-oracle set: 43 builds, about 4 minutes of two cores).
    """
    images = prepare_images(arches.get("arm64"), "default", cache, kernel=request.kernel)
    chosen, only = _selection(request)
    builds = _builds({name: _flavour_plan(name, full=request.full, only=only[name])
                      for name in chosen})  # fmt: skip
    prebuild(cache, images, builds)
    return len(set(builds))


def _flavour_plan(name: str, *, full: bool, only: tuple[str, ...]) -> _Plan:
    """``name``'s (build, cases) runs, the control first, and its peer mutants."""
    flavour = behaviour(name)
    peer = planned(name, full=full, case="peer", only=only) if flavour.peer_run else ()
    extra = {case: planned(name, full=full, case=case, only=only) for case in flavour.extra_runs}
    extra = {case: found for case, found in extra.items() if found}
    plan: list[tuple[Mutant | None, tuple[str, ...]]]
    plan = [(None, (*CASES, *(("peer",) if peer else ()), *extra))]
    plan += [(m, CASES) for m in planned(name, full=full, only=only)]
    plan += [(m, (case,)) for case, found in extra.items() for m in found]
    return plan, peer


def prebuild(cache: Cache, images: GuestImages,
             builds: list[tuple[str, Mutant | None]]) -> None:  # fmt: skip
    """Build (or find cached) each (flavour, mutant) agent, one compiler per host core.

    Before any guest boots, so the builds do not share the cores with a guest's vCPUs.
    A cold quick set is about 80 modules of about 4 s each: one at a time, as the runs
    ask for them, they cost over 5 minutes of a CI run's wall time.
    """
    started = time.monotonic()

    def one(build: tuple[str, Mutant | None]) -> None:
        build_agent(AgentSpec(flavour=build[0]), images, cache, mutant=_name(build[1]))

    unique = list(dict.fromkeys(builds))
    with build_pool(os.cpu_count() or 1) as pool:  # Ctrl-C stops every build
        list(pool.map(one, unique))  # the first build error is raised here
    LOG.info("%d agent builds ready in %.1f s", len(unique), time.monotonic() - started)


#: Peer runs a mutant gets while a run could not judge it (see `_peer_row`).
PEER_ATTEMPTS = 3


def _peer_row(bench: _Bench, guest: Guest, images: GuestImages, flavour: Flavour,
              mutant: Mutant) -> MutantRow:  # fmt: skip
    """The peer case, run again (up to `PEER_ATTEMPTS`) while a run could not tell.

    A run that could not judge the mutant neither catches nor clears it; each such
    run is named in the row's notes with its numbers: for PEER, a perf record with
    too few on-time overflows to see a 1/8 stretch (`harness.agent.peer.counts.stretch_margin`
    ≤ 0); for PROFILE, a run where every CPU was left out of the comparison because
    the agent dropped samples there (`harness.agent.peer.pairing`: a thinned profile is
    not compared), so there was nothing to compare.
    """
    notes: list[str] = []
    for attempt in range(1, PEER_ATTEMPTS + 1):
        failed, run = _judged(bench, guest, images, flavour, mutant, "peer")
        peer = getattr(run, "peer", None)  # every flavour's peer run keeps perf's evidence
        if failed & set(mutant.caught_by) or not isinstance(peer, PeerEvidence):
            break
        why = _peer_unjudged(mutant, peer)
        if not why:
            break
        notes.append(f"peer run {attempt} {why}")
    unjudged = len(notes) == PEER_ATTEMPTS  # no run could tell: reported, never a catch
    return _row(flavour, mutant, [("peer", failed)], notes, unjudged=unjudged)


def _peer_unjudged(mutant: Mutant, peer: PeerEvidence) -> str:
    """Why this peer run could not judge ``mutant`` ('' when it could)."""
    if "PEER" in mutant.caught_by:
        margin = stretch_margin(peer.counts, peer.window.bound)  # the run's own edges
        if margin <= 0:
            folded = ", ".join(f"{c.cpu}: {_folded_share(c, peer)}" for c in peer.counts.cpus)
            return (f"could not tell a 1/8 stretch (margin {margin}); periods the emulator "
                    f"folded, per CPU: {folded}")  # fmt: skip
    pair = peer.profiles if "PROFILE" in mutant.caught_by else None
    if pair is None:
        return ""
    if not pair.perf.total:
        return f"compared no profile ({pair.excluded_text() or 'no perf sample'})"
    if not (why := unjudgeable(pair)):
        return ""
    return f"compared {why}" + (f"; {text}" if (text := pair.excluded_text()) else "")


def _folded_share(cpu: PerfCpu, peer: PeerEvidence) -> str:
    """The samples perf took on ``cpu``, and the share of its window's periods that folded."""
    allowed = peer_range(cpu, peer.counts, peer.window.bound)
    periods = cpu.samples + cpu.lost + allowed.folded
    share = allowed.folded / periods if periods else 0.0
    return f"{allowed.folded} of {periods} ({share:.0%}), {cpu.samples} samples"


def _armed_group(bench: _Bench, images: GuestImages, chosen: Sequence[str]) -> list[MutantRow]:
    """The armed-event mutant, once per ``chosen`` flavour, each on a guest of its own.

    The event outlives its module, so nothing may unload it afterwards.
    """
    rows = []
    armed = mutants.get("leave_event_armed")
    for name in chosen:
        flavour, notes = behaviour(name), []
        try:
            with _guest(bench, images, f"armed-{name}") as guest:
                failed = _case(bench, guest, images, flavour, armed, "standard")
        except GuestError as exc:  # leaving it: the armed event's handler after QMP quit
            notes.append(f"the guest failed on the way out, as an armed event may: {exc}")
            failed = set()
        rows.append(_row(flavour, armed, [("standard", failed)], notes))
    return rows


def _deterministic_group(bench: _Bench, kernel: KernelChoice, *, full: bool,
                         chosen: tuple[str, ...],
                         only: Mapping[str, tuple[str, ...]]) -> list[MutantRow]:  # fmt: skip
    """The control and the ``deterministic`` mutants: the flavour's budget scenario, input-free.

    Their oracles (the core's C-3, tprof's TP-O10) judge time, which only a guest whose clock
    counts instructions makes exact (``-icount``): one deterministic run each, one vCPU, on
    ``kernel``'s Debian version (a scenario names no source tree: with ``--kernel-src`` they
    run on the scenario's own kernel).
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
            rows.append(_row(flavour, mutant, [("deterministic", failed)]))
    return rows


def _deterministic_case(bench: _Bench, scenario: Scenario, mutant: Mutant | None) -> set[str]:
    """The oracles the scenario expects that failed (``RUN-ERROR`` when the run failed)."""
    out = bench.out / f"deterministic-{scenario.name}-{_name(mutant)}"
    out.mkdir(parents=True, exist_ok=True)
    try:
        result = run_deterministic(scenario, bench.cache, mode="deterministic", attempts=1,
                                   out=out, mutant=_name(mutant))  # fmt: skip
    except HarnessError as exc:
        LOG.warning("mutant %s, %s, deterministic: the run failed: %s", _name(mutant),
                    scenario.name, exc)  # fmt: skip
        return {"RUN-ERROR"}
    verdicts = result.repro.verdicts[0]
    return {item.oracle for item, verdict in zip(scenario.expect, verdicts, strict=True)
            if item.oracle is not None and not verdict.held}  # fmt: skip


def _debug_group(bench: _Bench, images: GuestImages, name: str) -> list[MutantRow]:
    """The control and the debug mutants on the debug kernel, in flavour ``name``'s runs.

    Their sabotage is in the core, so one flavour carries them: the first one chosen
    (tprof when every flavour is). The lock mutant goes last: lockdep switches itself off
    after its first report.
    """
    rows = []
    flavour = behaviour(name)
    order = sorted(planned(name, full=True, case="debug"),
                   key=lambda m: m.name == "nmi_spinlock")  # fmt: skip
    notes: list[str] = []
    try:
        with _guest(bench, images, "debug", timeout_scale=2) as guest:
            for mutant in (None, *order):
                failed = _debug_case(bench, guest, images, flavour, mutant)
                rows.append(_row(flavour, mutant, [("debug", failed)]))
    except GuestError as exc:  # leaving it: the console holds the lock mutant's splat
        notes.append(f"leaving the debug guest: {exc}")
    if rows and notes:
        rows[-1] = dataclasses.replace(rows[-1], notes=(*rows[-1].notes, *notes))
    return rows


@dataclass(frozen=True, slots=True)
class SanitizerCase:
    """The kernel a sanitizer case runs on, and how its guest is set up.

    ``setup``: shell commands after boot, before the first run. ``overlap``: the runs
    go with a spinner on every CPU and KCSAN's own counters judged (`harness.agent.overlap`).
    Every report is a finding: with an agent frame anywhere ``<tool>``, else
    ``<tool>-KERNEL``; nothing is filtered, in the guest or here. The kcsan kernel
    instruments none of its own code (`harness.vm.sanitizer`), so a KCSAN report there
    has the agent's access on one side even when no agent frame is printed.
    """

    variant: Variant
    boot_args: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    overlap: bool = False


#: The sanitizer cases. KASAN reports only its first bug unless told to go on (a
#: control and several mutants share one guest). KCSAN's watch rate and stalls are set
#: by the overlap case (`harness.vm.kcsan.OVERLAP`, from its model).
SANITIZER_CASES: dict[str, SanitizerCase] = {
    "kasan": SanitizerCase("debug", boot_args=("kasan_multi_shot",)),
    "kcsan": SanitizerCase("kcsan", overlap=True),
}


def _sanitizer_group(bench: _Bench, kernel: KernelChoice, *, chosen: tuple[str, ...],
                     only: tuple[str, ...]) -> list[MutantRow]:  # fmt: skip
    """The control and the ``kasan``/``kcsan`` mutants of each chosen flavour on their kernel.

    Each runs all the flavour's runs (`_sanitizer_case`); what failed is the oracles,
    plus each sanitizer report after the run began: its tool (``KASAN``, ``KCSAN``,
    ``UBSAN``) when an agent frame is in it, ``<tool>-KERNEL`` when none is.
    """
    rows: list[MutantRow] = []
    for case, sanitizer in SANITIZER_CASES.items():
        plans = {name: planned(name, full=True, case=case, only=only) for name in chosen}
        plans = {name: found for name, found in plans.items() if found}
        if not plans:
            continue
        images = prepare_images(bench.arch, sanitizer.variant, bench.cache, kernel=kernel)
        mine: list[MutantRow] = []  # this case's rows
        try:
            with _guest(bench, images, case, timeout_scale=3,
                        kernel_args=sanitizer.boot_args) as guest:  # fmt: skip
                for command in sanitizer.setup:
                    guest.shell.run(command, timeout_s=bench.timeouts.command_s)
                for name, found in plans.items():
                    flavour = behaviour(name)
                    for mutant in (None, *found):
                        failed, notes, unjudged = _sanitizer_case(bench, guest, images, flavour,
                                                                  mutant, sanitizer)  # fmt: skip
                        mine.append(_row(flavour, mutant, [(case, failed)], notes,
                                         unjudged=unjudged))  # fmt: skip
        except GuestError as exc:  # leaving it: the console holds the mutants' reports
            mine = _after_guest_error(mine, plans, case, f"the {case} guest: {exc.reason[:300]}")
        rows += mine
    return rows


def _after_guest_error(rows: list[MutantRow], plans: dict[str, tuple[Mutant, ...]], case: str,
                       what: str) -> list[MutantRow]:  # fmt: skip
    """A guest's rows after it failed: the judged ones, then one per planned build left.

    A build the guest did not live to judge is a row all the same (``RUN-ERROR``: a
    mutant is then not caught, a control is broken), never left out of the table. When
    every build was judged, the failure (leaving the guest) is a note on the last row.
    """
    judged = {(row.flavour, row.mutant) for row in rows}
    left = [(name, mutant) for name, found in plans.items() for mutant in (None, *found)
            if (name, _name(mutant)) not in judged]  # fmt: skip
    if not left:
        last = rows[-1]
        return [*rows[:-1], dataclasses.replace(last, notes=(*last.notes, f"leaving {what}"))]
    return [*rows, *(_row(behaviour(name), mutant, [(case, {"RUN-ERROR"})],
                          [f"not judged: {what}"]) for name, mutant in left)]  # fmt: skip


def _sanitizer_case(bench: _Bench, guest: Guest, images: GuestImages, flavour: Flavour,
                    mutant: Mutant | None,
                    sanitizer: SanitizerCase) -> tuple[set[str], list[str], bool]:  # fmt: skip
    """Every run's failed oracles and the sanitizer reports the runs caused; notes; unjudged.

    The runs: standard, exact and the flavour's extra runs (kprof's offline run takes
    CPUs down, where the hotplug mutant shows). With ``sanitizer.overlap`` they run
    beside a spinner on every CPU (only the flavour's ``overlap`` run, where it has
    one), and KCSAN's counters over them are a note; a case that could not have seen a
    race (`harness.vm.kcsan.KcsanWatch`) is unjudged.
    """
    start = len(guest.vm.console_text().splitlines())
    failed, notes = set(), []

    # The kcsan case: the flavour's overlap run where it has one (every CPU sampling
    # fast beside the spinners: harness.agent.overlap), else every run.
    own = (OVERLAP_RUN,) if sanitizer.overlap and OVERLAP_RUN in flavour.runs else ()
    cases = own or (*CASES, *flavour.extra_runs)

    def runs() -> None:
        for case in cases:
            failed.update(_case(bench, guest, images, flavour, mutant, case))

    unjudged = False
    if sanitizer.overlap:
        _agent(bench, guest, images, flavour.name, mutant)  # profctl deployed for the spinners
        where = OverlapCase(guest.shell, bench.cpus, bench.timeouts.command_s)
        _, watch = overlap_case(where, f"{flavour.name} {_name(mutant)}", runs)
        notes.append(watch.describe())
        LOG.info("%s", watch.describe())
        unjudged = bool(watch.unjudged_reason())
        if watch.races:  # KCSAN's own count: a race it may not have printed
            failed.add("KCSAN")
    else:
        runs()
    for report in parse_reports(guest.vm.console_text(), start_line=start):
        LOG.info("mutant %s, %s: %s", _name(mutant), flavour.name, report.describe())
        failed.add(report.tool if report.in_agent else f"{report.tool}-KERNEL")
    return failed, notes, unjudged


def _case(bench: _Bench, guest: Guest, images: GuestImages, flavour: Flavour,
          mutant: Mutant | None, case: str) -> set[str]:  # fmt: skip
    """The oracles that failed in ``case`` (``RUN-ERROR`` when the run itself failed)."""
    return _judged(bench, guest, images, flavour, mutant, case)[0]


def _judged(bench: _Bench, guest: Guest, images: GuestImages, flavour: Flavour,
            mutant: Mutant | None, case: str) -> tuple[set[str], AgentRun | None]:  # fmt: skip
    """The oracles that failed in ``case``, and the run (None when it failed)."""
    agent = _agent(bench, guest, images, flavour.name, mutant)
    spec = AgentSpec(flavour=flavour.name)
    runner = flavour.peer_run if case == "peer" else flavour.runs.get(case)
    if runner is None:
        raise ConfigError(f"flavour {flavour.name} has no {case} run")
    try:
        run = runner(agent, spec, bench.cpus)
    except HarnessError as exc:
        LOG.warning("mutant %s, %s, %s: the run failed: %s", _name(mutant), flavour.name,
                    case, exc)  # fmt: skip
        return {"RUN-ERROR"}, None
    violations = flavour.check(run)
    failed = {v.oracle for v in violations} | _unjudged(flavour, run, mutant, case)
    # The run's table and verdicts beside its evidence: what a catch or a survivor rests on.
    (agent.workdir / f"report-{case}.txt").write_text(flavour.report(run, violations) + "\n")
    LOG.info("mutant %s, %s, %s: failed %s", _name(mutant), flavour.name, case,
             ", ".join(sorted(failed)) or "none")  # fmt: skip
    return failed, run


def _unjudged(flavour: Flavour, run: AgentRun, mutant: Mutant | None, case: str) -> set[str]:
    """The `unjudged_token` of each oracle the case's UNJUDGED mutants rely on that judged nothing.

    A mutant caught by ``PROFILE:UNJUDGED`` relies on PROFILE comparing something in an
    unmutated run: the control of its case is held to it, and so is the mutant.
    """
    tokens = mutant.caught_by if mutant else tuple(
        t for m in planned(flavour.name, full=True, case=case) for t in m.caught_by)  # fmt: skip
    relied = {o for t in tokens if (o := mutants.unjudged_oracle(t))}
    if not relied:
        return set()
    judged = flavour.judged(run)
    return {mutants.unjudged_token(name) for name in relied if unjudged(judged, (name,))}


def _debug_case(bench: _Bench, guest: Guest, images: GuestImages, flavour: Flavour,
                mutant: Mutant | None) -> set[str]:  # fmt: skip
    """The standard case, then kmemleak (module still loaded) and the console."""
    start = len(guest.vm.console_text().splitlines())
    failed = _case(bench, guest, images, flavour, mutant, "standard")
    report = guest.shell.run(kmemleak_command(), timeout_s=bench.timeouts.command_s).stdout
    if module_leaks(report, "profagent"):
        failed.add("KMEMLEAK")
    if scan_console(guest.vm.console_text(), start_line=start):
        failed.add("CONSOLE")
    return failed


def _agent(bench: _Bench, guest: Guest, images: GuestImages, flavour: str,
           mutant: Mutant | None) -> Agent:  # fmt: skip
    build = build_agent(AgentSpec(flavour=flavour), images, bench.cache, mutant=_name(mutant))
    workdir = bench.out / guest.name / f"{flavour}-{_name(mutant)}"
    workdir.mkdir(parents=True, exist_ok=True)
    agent = Agent(guest.shell, build, build_profctl(bench.arch, bench.cache), workdir,
                  nmi_expected=True, pmu_irq_label=bench.arch.pmu_interrupt_label,
                  cycles_per_ns=bench.arch.cycles_per_ns("tcg"),
                  timeouts=bench.timeouts, vmlinux=images.vmlinux)  # fmt: skip
    agent.deploy()
    return agent


def _guest(bench: _Bench, images: GuestImages, name: str, *, timeout_scale: float = 1,
           kernel_args: tuple[str, ...] = ()) -> Guest:  # fmt: skip
    spec = MachineSpec(arch=bench.arch, topology=default_topology(len(bench.cpus)), nmi=True,
                       accel="tcg", kernel_args=kernel_args)  # fmt: skip
    timeouts = bench.timeouts.scaled_by(timeout_scale)
    return Guest(spec, images, bench.out / name, timeouts=timeouts, name=name)


def _row(flavour: Flavour, mutant: Mutant | None, cases: list[tuple[str, set[str]]],
         notes: Iterable[str] = (), *, unjudged: bool = False) -> MutantRow:  # fmt: skip
    expected = mutant.caught_by if mutant else ()
    return merge(_name(mutant), flavour.name, expected, cases, tuple(notes), unjudged=unjudged)


def _caught(mutant: Mutant, cases: list[tuple[str, set[str]]]) -> bool:
    """Whether ``cases`` already catch ``mutant``, by the row's own rule (`MutantRow.verdict`)."""
    return merge(mutant.name, "", mutant.caught_by, cases).verdict == "caught"


def _name(mutant: Mutant | None) -> str:
    return mutant.name if mutant else mutants.NONE


def write_table(result: MutationResult, table: str) -> Path:
    """Keep the printed table beside ``mutants.json``."""
    path = result.out / "mutants.txt"
    path.write_text(table + "\n")
    return path
