"""profbench command line: each task parses its options and calls one harness function.

``invoke --list`` shows the tasks; ``invoke --help TASK`` their options. Harness
errors end the command with one readable message and an exit status that says
who is to blame: 2 bad input, 3 host or QEMU, 4 the guest kernel.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import Task
from invoke.tasks import task as invoke_task

from harness import arches
from harness.agent import flavours
from harness.agent.external import use_flavours
from harness.agent.module.build import export_agent
from harness.agent.module.spec import AgentSpec, parse_params, parse_quirks
from harness.agent.mutants import format_table as format_mutants
from harness.agent.mutants import survivors, tally
from harness.agent.scaffold import new_flavour as scaffold_flavour
from harness.builder import hostdeps
from harness.builder import rootfs as rootfsmod
from harness.builder.cache import Cache
from harness.builder.images import describe_kernel, prepare_images
from harness.builder.kernel import KernelRequest, build_kernel, check_variant, kernel_key
from harness.builder.keys import ensure_keypair
from harness.cli import against as againstmod
from harness.cli import bench as benchmod
from harness.cli import checks, mutantruns, testrun
from harness.cli import ci as cimod
from harness.cli.cachelist import format_listing, prune_cache, survey_cache
from harness.cli.session import (
    GuestRequest,
    interactive_shell,
    parse_cpus,
    parse_kernel,
    parse_nmi,
)
from harness.errors import ConfigError, HarnessError
from harness.matrix.load import get_matrix, github_images, github_matrix, select, with_flavours
from harness.process import handle_sigterm
from harness.scenarios import deterministic_bundle as bundles
from harness.scenarios import repro as reprolib
from harness.scenarios.deterministic import DeterministicResult
from harness.scenarios.identity import differing, format_rows
from harness.scenarios.load import find_scenario, load_scenario
from harness.timeouts import Timeouts
from harness.vm.argv import DeterministicMode
from harness.vm.record import new_run_dir

P = ParamSpec("P")
R = TypeVar("R")

GUEST_HELP = {
    "cpus": "number of vCPUs (default layout spreads them over sockets, clusters, SMT)",
    "topology": "explicit layout, e.g. sockets=2,clusters=2,cores=1,threads=2 or 2s2cl1c2t",
    "arch": "guest architecture: arm64 (default; vPMU under TCG) or x86_64",
    "variant": "kernel variant: default, debug (lockdep, kmemleak, KASAN, UBSAN) or kcsan",
    "accel": "auto (KVM only where a real boot probe works), kvm or tcg",
    "nmi": "on: PMU interrupts as (pseudo-)NMIs; off: as ordinary IRQs (arm64 only)",
    "append": "extra guest kernel arguments, e.g. 'nokaslr loglevel=8'",
    "memory": "guest memory in MiB (default 1024)",
    "kernel": "guest kernel version from Debian's linux-source packages: 6.1 (default) or 6.12",
    "kernel_src": "build and boot this kernel source tree instead (clean or dirty checkout)",
}


class _LetterShortFlags(Task[Callable[..., None]]):
    """invoke's Task, whose short flags are letters only.

    invoke 3.0 gives an option the first character of its name that no other option
    took: for ``--no-snapshot`` beside ``-n`` and ``-o`` that was ``-``, and ``invoke test
    --help`` showed it as ``--,``; the next free one would be ``h``, which means help.
    """

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        """Invoke's options for argument ``name``: ``-`` and ``-h`` (help) are no short flags."""
        return super().arg_opts(name, default, {*taken_names, "-", "h"})


def task(*args: Any, **kwargs: Any) -> Callable[..., Any]:
    """Invoke's ``@task``, building `_LetterShortFlags` tasks."""
    return invoke_task(*args, klass=_LetterShortFlags, **kwargs)


def _help_instead(name: str, values: tuple[object, ...]) -> None:
    """Show task ``name``'s help if a positional argument took ``--help`` or ``-h``.

    invoke gives a task's missing positional argument the next word before it looks
    for flags, so ``invoke repro --help`` ran repro with scenario ``--help``; its own
    ``invoke --help repro`` prints the help, so that runs instead (this process ends).
    """
    if any(value in ("--help", "-h") for value in values):
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-m", "invoke", "--help", name])


def cli(func: Callable[P, R]) -> Callable[P, R]:
    """Logging, SIGTERM handling, and harness errors as one message plus exit status."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        _help_instead(func.__name__.replace("_", "-"), (*args, *kwargs.values()))
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                            datefmt="%H:%M:%S", stream=sys.stderr)  # fmt: skip
        for chatty in ("paramiko", "qemu.qmp"):  # their INFO lines are per-connection noise
            logging.getLogger(chatty).setLevel(logging.WARNING)
        handle_sigterm()
        try:
            return func(*args, **kwargs)
        except HarnessError as exc:
            print(f"\nerror ({type(exc).__name__}): {exc}", file=sys.stderr)
            raise Exit(code=exc.exit_status) from None

    return wrapper


def _request(cpus: str | None, topology: str | None, arch: str, variant: str, accel: str,
             nmi: str, append: str, memory: int, kernel: str = "6.1",
             kernel_src: str | None = None) -> GuestRequest:  # fmt: skip
    return GuestRequest(arch=arch, cpus=parse_cpus(cpus), topology=topology, variant=variant,
                        accel=accel, nmi=parse_nmi(nmi), memory_mib=memory,
                        kernel_args=tuple(shlex.split(append)), kernel=kernel,
                        kernel_src=kernel_src)  # fmt: skip


FLAVOUR_PATH_HELP = (
    "a flavour package outside the tree, or the checkout holding one (its pyproject.toml "
    "declares it), repeatable; exported as PROFBENCH_FLAVOUR_PATH to the tests"
)


def _use_flavours(paths: list[str] | None) -> None:
    """``--flavour-path``: add those flavours, then check every one from outside the tree."""
    use_flavours(Path(path) for path in paths or ())


@task
@cli
def setup(c: Context) -> None:
    """Check the host; install missing Debian packages (as root) or say how."""
    report = hostdeps.ensure_host(install=True)
    print("host ready" + (f"; installed {' '.join(report.installed)}" if report.installed else ""))


@task(help={"arch": GUEST_HELP["arch"], "variant": GUEST_HELP["variant"],
            "jobs": "parallel make jobs (default: one per host CPU)",
            "kernel": GUEST_HELP["kernel"], "kernel_src": GUEST_HELP["kernel_src"]})  # fmt: skip
@cli
def kernel(c: Context, arch: str = "arm64", variant: str = "default", jobs: int = 0,
           kernel: str = "6.1", kernel_src: str | None = None) -> None:  # fmt: skip
    """Build (or reuse) the guest kernel; prints the cache entry."""
    request = KernelRequest(arch=arches.get(arch), variant=check_variant(variant), jobs=jobs,
                            kernel=parse_kernel(kernel, kernel_src))  # fmt: skip
    hostdeps.ensure_host()
    entry = build_kernel(request, Cache.default())
    print(f"{entry.path / entry.manifest['image']}\n  build tree: {entry.path / 'build'}")


@task(help={"arch": GUEST_HELP["arch"],
            "relock": "pin today's Debian versions in guest/rootfs/<arch>.lock.json"})  # fmt: skip
@cli
def rootfs(c: Context, arch: str = "arm64", relock: bool = False) -> None:
    """Build (or reuse) the guest initramfs from the locked Debian packages."""
    profile, cache = arches.get(arch), Cache.default()
    hostdeps.ensure_host()
    if relock:
        pins = rootfsmod.relock(profile, cache)
        print(f"locked {len(pins)} packages in {rootfsmod.lock_path(profile)}")
    entry = rootfsmod.build_rootfs(profile, cache, ensure_keypair(cache.root / "ssh"))
    print(f"{entry.path / rootfsmod.ROOTFS_FILE}  sha256 {entry.manifest['sha256']}")


@task(help={"arch": GUEST_HELP["arch"], "variant": GUEST_HELP["variant"],
            "kernel": GUEST_HELP["kernel"], "kernel_src": GUEST_HELP["kernel_src"],
            "key": "only print the kernel's cache key (CI's actions/cache key)"})  # fmt: skip
@cli
def images(c: Context, arch: str = "arm64", variant: str = "default", kernel: str = "6.1",
           kernel_src: str | None = None, key: bool = False) -> None:  # fmt: skip
    """Build (or reuse) kernel and rootfs; link them under images/."""
    choice = parse_kernel(kernel, kernel_src)
    hostdeps.ensure_host()
    if key:
        request = KernelRequest(arch=arches.get(arch), variant=check_variant(variant),
                                kernel=choice)  # fmt: skip
        print(kernel_key(request, Cache.default()))
        return
    built = prepare_images(arches.get(arch), check_variant(variant), Cache.default(),
                           kernel=choice)  # fmt: skip
    print(f"{built.files.kernel}\n{built.files.initrd}")


@task(
    help={**GUEST_HELP, "workers": "pytest-xdist workers (default: one per host core, "
                                    "one for a guest of over 8 vCPUs)",
          "k": "only tests (or matrix cells) matching this pytest -k expression",
          "selftests": "also run the harness's own failure-path and CLI checks",
          "complete": "first build the images the tier's other checks need (debug kernel, "
                      "x86_64), so none skips for want of one",
          "matrix": "run a named matrix from tests/matrix.toml (quick, full) instead",
          "n": "matrix workers: auto (one per host core) or a number",
          "no_snapshot": "boot guests cold instead of restoring them from snapshots",
          "flavour": "only this flavour's tests (with --matrix: its cells on the matrix's "
                     "guests); repeatable, one outside the tree too",
          "flavour_path": FLAVOUR_PATH_HELP,
          "ktap": "print the run's KTAP (also written beside its JUnit as ktap.txt) on "
                  "standard output instead of pytest's tables"},
    iterable=["flavour", "flavour_path"],
)  # fmt: skip
@cli
def test(c: Context, n: str | None = None, cpus: str | None = None,
         topology: str | None = None, arch: str = "arm64", variant: str = "default",
         accel: str = "auto", nmi: str = "on", workers: int = 0, k: str | None = None,
         selftests: bool = False, append: str = "", memory: int = 1024,
         matrix: str | None = None, complete: bool = False,
         no_snapshot: bool = False, kernel: str = "6.1",
         kernel_src: str | None = None, flavour: list[str] | None = None,
         flavour_path: list[str] | None = None, ktap: bool = False) -> None:  # fmt: skip
    """Boot the requested guest and run the guest test tier; or run a matrix."""
    _use_flavours(flavour_path)
    chosen = flavours.known(flavour or ())  # an unknown name: one line, before any boot
    if matrix:
        status = testrun.run_matrix(matrix, Cache.default(), testrun.MatrixOptions(
            workers=n or "auto", keyword=k, snapshot=not no_snapshot, flavours=chosen))  # fmt: skip
        if status != 0:
            raise Exit(code=status)
        return
    request = _request(cpus, topology, arch, variant, accel, nmi, append, memory, kernel,
                       kernel_src)  # fmt: skip
    count = testrun.worker_budget(n) if n else (workers or None)  # None: one per core
    options = testrun.TierOptions(workers=count, keyword=k, selftests=selftests,
                                  complete=complete, snapshot=not no_snapshot,
                                  flavours=chosen, ktap=ktap)  # fmt: skip
    status = testrun.run_guest_tier(request, Cache.default(), options)
    if status != 0:
        raise Exit(code=status)


@task(help=GUEST_HELP)
@cli
def shell(c: Context, cpus: str | None = None, topology: str | None = None, arch: str = "arm64",
          variant: str = "default", accel: str = "auto", nmi: str = "on", append: str = "",
          memory: int = 1024, kernel: str = "6.1",
          kernel_src: str | None = None) -> None:  # fmt: skip
    """An interactive root shell in a fresh guest; the guest stops when the shell exits."""
    request = _request(cpus, topology, arch, variant, accel, nmi, append, memory, kernel,
                       kernel_src)  # fmt: skip
    status = interactive_shell(request, Cache.default(), Timeouts.from_env())
    if status != 0:
        raise Exit(code=status)


@task(help={"out": "JSON output path (default artifacts/bench/bench-<time>.json)",
            "cold": "also time a cold kernel and rootfs build in a scratch cache (~4 min)",
            "repeats": "boots per vCPU count (the median is reported)",
            "matrix": "matrix timed with 1 worker and the CPU budget (none: skip)",
            "test_wall": "also time `invoke test --cpus 8` with and without snapshots (minutes)",
            "only_boots": "only cold boot and restore times (and --test-wall)",
            "against": "time `invoke test` of this tree and of commit REV alternately, side "
                       "by side (with or without --test-wall; nothing else is measured)",
            "k": "with --against: the tests to time (pytest -k; default the whole tier)",
            "rounds": "with --against: REV-then-this-tree rounds",
            "kernel": GUEST_HELP["kernel"], "kernel_src": GUEST_HELP["kernel_src"]})  # fmt: skip
@cli
def bench(c: Context, out: str | None = None, cold: bool = True, repeats: int = 3,
          matrix: str = "quick", test_wall: bool = False, only_boots: bool = False,
          against: str | None = None, k: str | None = None, rounds: int = 1,
          kernel: str = "6.1", kernel_src: str | None = None) -> None:  # fmt: skip
    """Measure build, boot, restore, agent and matrix times; write JSON and print a table."""
    if against is not None:
        wall = againstmod.TestWall(keyword=k, rounds=rounds)
        found = benchmod.run_against(against, wall, Path(out) if out else None)
        print(benchmod.format_against(found))
        return
    result = benchmod.run_bench(benchmod.BenchRequest(
        out=Path(out) if out else None, cold=cold, repeats=repeats,
        matrix=matrix if matrix != "none" else None, test_wall=test_wall,
        only_boots=only_boots, kernel=parse_kernel(kernel, kernel_src)))  # fmt: skip
    print(f"bench on Linux {result.get('kernel', '?')}")
    print(benchmod.format_table(result))


@task(
    help={"flavour": "agent flavour: " + ", ".join(flavours.FLAVOURS)
          + ", or one outside the tree (--flavour-path)",
          "event": "cycles, instructions or cpu-clock",
          "period": "events between overflows", "drain": "auto (periodic) or manual (kicks)",
          "drain-ms": "auto drain period", "out": "output directory "
          "(default artifacts/agent/<time>-<flavour>)",
          "quirks": "seed defects to reproduce: a mask (0x3) or names (TP-D1,TP-D2)",
          "param": "a flavour's own load parameter, NAME=VALUE, repeatable "
          "(tprof: est_freq, buffer_samples, list_limit; see its data.py)",
          "arch": GUEST_HELP["arch"], "variant": GUEST_HELP["variant"],
          "kernel": GUEST_HELP["kernel"], "kernel_src": GUEST_HELP["kernel_src"],
          "flavour_path": FLAVOUR_PATH_HELP},
    iterable=["param", "flavour_path"],
)  # fmt: skip
@cli
def agent(c: Context, flavour: str = "tprof", event: str = "cycles", period: int = 1_000_000,
          drain: str = "auto", drain_ms: int = 1000, quirks: str = "0",
          param: list[str] | None = None, arch: str = "arm64", variant: str = "default",
          out: str | None = None, kernel: str = "6.1", kernel_src: str | None = None,
          flavour_path: list[str] | None = None) -> None:  # fmt: skip
    """Render and build the profiling agent alone, to read the generated C."""
    _use_flavours(flavour_path)
    mask = parse_quirks(flavour, quirks)
    spec = AgentSpec(flavour=flavour, event=event, period=period, drain=drain,
                     drain_ms=drain_ms, quirks=mask,
                     params=parse_params(flavour, param or ())).validate()  # fmt: skip
    profile = arches.get(arch)
    images = prepare_images(profile, check_variant(variant), Cache.default(),
                            kernel=parse_kernel(kernel, kernel_src))  # fmt: skip
    target = Path(out) if out else new_run_dir("agent", flavour)
    build = export_agent(spec, images, Cache.default(), target)
    print(f"generated sources: {target / 'src'}")
    print(f"module:            {target / build.ko.name}  (for {images.kernel_release})")
    print(f"load it with:      {(target / 'insmod.txt').read_text().strip()}")


@task(positional=["name"],
      help={"name": "the new flavour's name: lower-case letters, digits and _",
            "out": "the directory to write (new or empty; default ./profbench-NAME)"})  # fmt: skip
@cli
def new_flavour(c: Context, name: str, out: str | None = None) -> None:
    """Write a working flavour package: an NMI-safe port, its laws, tests, a README."""
    made = scaffold_flavour(name, Path(out) if out else Path(f"profbench-{name}"))
    for path in made.files:
        print(f"  {path}")
    print(f"wrote flavour {made.name} (package {made.package}) into {made.out}")
    print(f"its unit tests:    python -m pytest {made.out / 'tests'}")
    print(f"in a guest:        invoke test --cpus 2 --flavour {made.name} "
          f"--flavour-path {made.out}")  # fmt: skip
    print(f"its mutants:       invoke mutants --flavour-path {made.out} --flavour {made.name}")


@task(help={"name": "a matrix in tests/matrix.toml (quick, full)",
            "format": "text (one cell id a line), github (a strategy matrix as JSON) or "
                      "images (the kernels its cells boot, once each, as a strategy matrix)",
            "k": "only cells whose id contains this",
            "flavour": "only this flavour's cells (repeatable; one outside the tree: a cell "
                       "on each of the matrix's guests)",
            "flavour_path": FLAVOUR_PATH_HELP},
      iterable=["flavour", "flavour_path"])  # fmt: skip
@cli
def matrix(
    c: Context,
    name: str,
    format: str = "text",
    k: str | None = None,
    flavour: list[str] | None = None,
    flavour_path: list[str] | None = None,
) -> None:
    """List a matrix's cells, or print it as a GitHub Actions strategy matrix."""
    _use_flavours(flavour_path)
    chosen = with_flavours(get_matrix(name), tuple(flavour or ()))
    if format == "github":
        print(json.dumps(github_matrix(chosen, select(chosen, k))))
    elif format == "images":
        print(json.dumps(github_images(chosen, select(chosen, k))))
    elif format == "text":
        print("\n".join(cell.id for cell in select(chosen, k)))
    else:
        raise ConfigError(f"--format takes text, github or images, not {format!r}")


def _print_deterministic(outcome: DeterministicResult) -> None:
    """Print a deterministic run's verdicts and number table; exit 4 if a number differs.

    :raise Exit: code 4, a number differed or an attempt's verdicts failed.
    """
    _print_verdicts(outcome.repro)
    for note in outcome.notes:
        print(f"note: {note}")
    print(format_rows(outcome.rows, outcome.headers))
    print(f"wall time per run: {', '.join(f'{s:.1f}s' for s in outcome.wall_s)}; "
          f"bundle: {outcome.repro.bundle}")  # fmt: skip
    different = differing(outcome.rows)
    excluded = sum(row.status == "excluded" for row in outcome.rows)
    print(
        f"numbers identical: {len(outcome.rows) - len(different) - excluded} of "
        f"{len(outcome.rows)}; differing: {len(different)}; excluded by name: {excluded}"
    )
    if different or outcome.repro.reproduced != outcome.repro.attempts:
        raise Exit(code=4)


@task(
    positional=["scenario"],
    help={"scenario": "a scenario name in scenarios/ or a path to a .toml file "
                      "(with --bundle: a bundle directory)",
          "repeat": "attempts (default: the scenario's own count; --deterministic: 2)",
          "bundle": "replay the bundle directory given instead, and compare verdicts",
          "dump_memory": "on a guest failure, save the guest's memory (QMP dump-guest-memory)",
          "deterministic": "run input-free, deterministic instruction for instruction (one TCG "
                           "thread, icount, fixed seed and clock, no network); every number "
                           "must repeat",
          "record": "1-vCPU scenarios: run input-free and keep QEMU's record/replay log",
          "replay": "with --bundle: replay a recording (or re-run a --deterministic bundle) "
                    "and compare every number with the recorded one",
          "gdb": "with --replay: start stopped, with QEMU's gdbstub on a port it prints",
          "no_snapshot": "boot each attempt's guest cold instead of restoring its snapshot "
                         "(deterministic runs never use snapshots)",
          "flavour_path": FLAVOUR_PATH_HELP},
    iterable=["flavour_path"],
)  # fmt: skip
@cli
def repro(c: Context, scenario: str, repeat: int = 0, bundle: bool = False,
          dump_memory: bool = False, deterministic: bool = False, record: bool = False,
          replay: bool = False, gdb: bool = False, no_snapshot: bool = False,
          flavour_path: list[str] | None = None) -> None:  # fmt: skip
    """Run a reproduction scenario into a bundle, or (--bundle DIR) replay a bundle."""
    _use_flavours(flavour_path)
    if deterministic or record or replay or gdb:
        if deterministic and record:
            raise ConfigError("--record is already deterministic; give one of the two")
        mode: DeterministicMode = "replay" if replay else "record" if record else "deterministic"
        announce = functools.partial(print, flush=True)
        _print_deterministic(bundles.repro_deterministic(
            scenario, Cache.default(), bundle=bundle, mode=mode, repeat=repeat, gdb=gdb,
            announce=announce))  # fmt: skip
        return
    if bundle:
        result, notes = reprolib.replay_bundle(Path(scenario), Cache.default(),
                                               snapshot=False if no_snapshot else None)  # fmt: skip
        for note in notes:
            print(f"note: {note}")
        if not notes:
            print("replay: same images, same verdicts")
    else:
        loaded = load_scenario(find_scenario(scenario))
        result = reprolib.run_scenario(loaded, Cache.default(), repeat=repeat or None,
                                       dump_memory=dump_memory,
                                       snapshot=not no_snapshot)  # fmt: skip
    _print_verdicts(result)
    across = json.loads((result.bundle / "bundle.json").read_text())["across_attempts"]
    if result.attempts > 1:
        differing_names = list(across["differing"])
        shown = ", ".join(differing_names[:8])
        if len(differing_names) > 8:
            shown += f" and {len(differing_names) - 8} more"
        print(
            f"numbers identical across attempts: {across['identical']} of "
            f"{across['numbers']}; differing: {shown or 'none'} (all in bundle.json)"
        )
    if result.reproduced != result.attempts:
        raise Exit(code=4)


def _print_verdicts(result: reprolib.ReproResult) -> None:
    for number, verdicts in enumerate(result.verdicts, 1):
        for verdict in verdicts:
            mark = "held  " if verdict.held else "FAILED"
            print(f"attempt {number}: {mark} {verdict.expectation} (observed {verdict.observed})")
    print(f"reproduced in {result.reproduced} of {result.attempts} attempt(s); "
          f"bundle: {result.bundle}")  # fmt: skip


@task(help={"prune": "remove entries the current tree no longer builds, and unfinished ones"})
@cli
def cache(c: Context, prune: bool = False) -> None:
    """List the build cache: size, finished, current or stale; --prune removes stale ones."""
    store = Cache.default()
    items = prune_cache(store) if prune else survey_cache(store)
    print(format_listing(items, store.root, pruned=prune))


@task
@cli
def check(c: Context) -> None:
    """Lint, types and the unit tier, in parallel (no guests)."""
    if not checks.run_checks(checks.static_checks()):
        raise Exit(code=1)


@task(help={"full": "also the mutants that end their guest and the debug-kernel ones",
            "cpus": "vCPUs of the mutation guests (default 2)",
            "flavour": "only this flavour's standard and exact runs (repeatable; default all)",
            "mutant": "only this mutant beside the control (repeatable; default all)",
            "kernel": GUEST_HELP["kernel"], "kernel_src": GUEST_HELP["kernel_src"],
            "flavour_path": FLAVOUR_PATH_HELP},
      iterable=["flavour", "mutant", "flavour_path"])  # fmt: skip
@cli
def mutants(c: Context, full: bool = False, cpus: int = 2, flavour: list[str] | None = None,
            mutant: list[str] | None = None, kernel: str = "6.1", kernel_src: str | None = None,
            flavour_path: list[str] | None = None) -> None:  # fmt: skip
    """Build each deliberately broken agent and show which oracle catches it."""
    _use_flavours(flavour_path)
    request = mutantruns.MutationRequest(full=full, cpus=cpus, flavours=tuple(flavour or ()),
                                         only=tuple(mutant or ()),
                                         kernel=parse_kernel(kernel, kernel_src))  # fmt: skip
    result = mutantruns.run_mutants(request, Cache.default())
    table = format_mutants(result.rows)
    print(f"mutants on Linux {describe_kernel(request.kernel)}")
    print(table)
    print(f"{len(result.rows)} rows ({tally(result.rows)}) in {result.elapsed_s:.0f} s; "
          f"evidence: {mutantruns.write_table(result, table).parent}")  # fmt: skip
    if survivors(result.rows):
        raise Exit(code=1)


@task(help={"workers": "xdist workers for the guest tier (default 2: this machine's cores)"})
@cli
def ci(c: Context, workers: int = 2) -> None:
    """The project's tests: setup, images, lint, types, unit tier and the full guest tier."""
    status = cimod.run_ci(Cache.default(), workers=workers)
    if status != 0:
        raise Exit(code=status)
