"""profbench command line: each task parses its options and calls one harness function.

``invoke --list`` shows the tasks; ``invoke --help TASK`` their options. Harness
errors end the command with one readable message and an exit status that says
who is to blame: 2 bad input, 3 host or QEMU, 4 the guest kernel.
"""

from __future__ import annotations

import functools
import logging
import os
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
from harness.cli import checks, mutantruns, taskhelp, testrun, texts
from harness.cli import ci as cimod
from harness.cli import fuzz as fuzzcli
from harness.cli import judge as judgemod
from harness.cli.cachelist import format_listing, prune_cache, survey_cache
from harness.cli.session import guest_request, interactive_shell, parse_kernel
from harness.errors import ConfigError, HarnessError
from harness.fuzz import search as fuzzsearch
from harness.process import handle_sigterm
from harness.scenarios import deterministic_bundle as bundles
from harness.scenarios import repro as reprolib
from harness.scenarios.load import find_scenario, load_scenario
from harness.timeouts import Timeouts
from harness.vm.argv import DeterministicKind
from harness.vm.record import new_run_dir

P = ParamSpec("P")
R = TypeVar("R")


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


def _use_flavours(paths: list[str] | None) -> None:
    """``--flavour-path``: add those flavours, then check every one from outside the tree."""
    use_flavours(Path(path) for path in paths or ())


@task
@cli
def setup(c: Context) -> None:
    """Check the host; install missing Debian packages (as root) or say how."""
    report = hostdeps.ensure_host(install=True)
    print("host ready" + (f"; installed {' '.join(report.installed)}" if report.installed else ""))


@task(help=taskhelp.KERNEL)
@cli
def kernel(c: Context, arch: str = "arm64", variant: str = "default", jobs: int = 0,
           kernel: str = "6.1", kernel_src: str | None = None) -> None:  # fmt: skip
    """Build (or reuse) the guest kernel; prints the cache entry."""
    request = KernelRequest(arch=arches.get(arch), variant=check_variant(variant), jobs=jobs,
                            kernel=parse_kernel(kernel, kernel_src))  # fmt: skip
    hostdeps.ensure_host()
    entry = build_kernel(request, Cache.default())
    print(f"{entry.path / entry.manifest['image']}\n  build tree: {entry.path / 'build'}")


@task(help=taskhelp.ROOTFS)
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


@task(help=taskhelp.IMAGES)
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


@task(help=taskhelp.TEST, iterable=["flavour", "flavour_path"])
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
    chosen = tuple(flavour or ())  # checked by the tier's request or the matrix, before a boot
    if matrix:
        status = testrun.run_matrix(matrix, Cache.default(), testrun.MatrixOptions(
            workers=n or "auto", keyword=k, snapshot=not no_snapshot, flavours=chosen))  # fmt: skip
        if status != 0:
            raise Exit(code=status)
        return
    request = guest_request(cpus=cpus, topology=topology, arch=arch, variant=variant,
                            accel=accel, nmi=nmi, append=append, memory=memory, kernel=kernel,
                            kernel_src=kernel_src)  # fmt: skip
    count = testrun.worker_budget(n) if n else (workers or None)  # None: one per core
    options = testrun.TierOptions(workers=count, keyword=k, selftests=selftests,
                                  complete=complete, snapshot=not no_snapshot,
                                  flavours=chosen, ktap=ktap)  # fmt: skip
    status = testrun.run_guest_tier(request, Cache.default(), options)
    if status != 0:
        raise Exit(code=status)


@task(help=taskhelp.SHELL)
@cli
def shell(c: Context, cpus: str | None = None, topology: str | None = None, arch: str = "arm64",
          variant: str = "default", accel: str = "auto", nmi: str = "on", append: str = "",
          memory: int = 1024, kernel: str = "6.1",
          kernel_src: str | None = None) -> None:  # fmt: skip
    """An interactive root shell in a fresh guest; the guest stops when the shell exits."""
    request = guest_request(cpus=cpus, topology=topology, arch=arch, variant=variant,
                            accel=accel, nmi=nmi, append=append, memory=memory, kernel=kernel,
                            kernel_src=kernel_src)  # fmt: skip
    status = interactive_shell(request, Cache.default(), Timeouts.from_env())
    if status != 0:
        raise Exit(code=status)


@task(help=taskhelp.BENCH)
@cli
def bench(c: Context, out: str | None = None, cold: bool = True, repeats: int = 3,
          matrix: str = "quick", test_wall: bool = False, only_boots: bool = False,
          against: str | None = None, k: str | None = None, rounds: int = 1,
          warmup: bool = False, kernel: str = "6.1",
          kernel_src: str | None = None) -> None:  # fmt: skip
    """Measure build, boot, restore, agent and matrix times; write JSON and print a table."""
    if against is not None:
        wall = againstmod.TestWall(keyword=k, rounds=rounds, warmup=warmup)
        found = benchmod.run_against(against, wall, Path(out) if out else None)
        print(benchmod.format_against(found))
        return
    result = benchmod.run_bench(benchmod.BenchRequest(
        out=Path(out) if out else None, cold=cold, repeats=repeats,
        matrix=matrix if matrix != "none" else None, test_wall=test_wall,
        only_boots=only_boots, kernel=parse_kernel(kernel, kernel_src)))  # fmt: skip
    print(f"bench on Linux {result.get('kernel', '?')}")
    print(benchmod.format_table(result))


@task(help=taskhelp.AGENT, iterable=["param", "flavour_path"])
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
    print(texts.format_export(target, build, images))


@task(positional=["name"], help=taskhelp.NEW_FLAVOUR)
@cli
def new_flavour(c: Context, name: str, out: str | None = None) -> None:
    """Write a working flavour package: an NMI-safe port, its laws, tests, a README."""
    made = scaffold_flavour(name, Path(out) if out else Path(f"profbench-{name}"))
    print(texts.format_new_flavour(made))


@task(help=taskhelp.MATRIX, iterable=["flavour", "flavour_path"])
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
    print(texts.format_matrix(name, format, keyword=k, flavours=tuple(flavour or ())))


@task(positional=["scenario"], help=taskhelp.REPRO, iterable=["flavour_path"])
@cli
def repro(c: Context, scenario: str, repeat: int = 0, bundle: bool = False,
          dump_memory: bool = False, deterministic: bool = False, record: bool = False,
          replay: bool = False, gdb: bool = False, no_snapshot: bool = False,
          witness: bool = False, flavour_path: list[str] | None = None) -> None:  # fmt: skip
    """Run a reproduction scenario into a bundle, or (--bundle DIR) replay a bundle."""
    _use_flavours(flavour_path)
    if deterministic or record or replay or gdb:
        if deterministic and record:
            raise ConfigError("--record is already deterministic; give one of the two")
        kind: DeterministicKind = "replay" if replay else "record" if record else "deterministic"
        announce = functools.partial(print, flush=True)
        outcome = bundles.repro_deterministic(
            scenario, Cache.default(), bundle=bundle, kind=kind, repeat=repeat, gdb=gdb,
            witness=witness, announce=announce)  # fmt: skip
        print(texts.format_deterministic(outcome))
        if texts.deterministic_failed(outcome):
            raise Exit(code=4)
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
    print(texts.format_verdicts(result))
    if (across := texts.format_across(result)) is not None:
        print(across)
    if result.reproduced != result.attempts:
        raise Exit(code=4)


@task(help=taskhelp.CACHE)
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


@task(help=taskhelp.FUZZ, iterable=["quirk", "flavour_path"])
@cli
def fuzz(c: Context, flavour: str, variant: str = "default", cpus: int = 2, budget: float = 5.0,
         shrink: float = 2.0, seed: int = 0, quirk: list[str] | None = None, max_steps: int = 24,
         flavour_path: list[str] | None = None) -> None:  # fmt: skip
    """Fuzz a flavour's control interface in one guest; a finding becomes a scenario."""
    _use_flavours(flavour_path)
    request = fuzzcli.fuzz_request(fuzzcli.FuzzOptions(
        flavour=flavour, variant=variant, cpus=cpus, budget_min=budget, shrink_min=shrink,
        seed=seed, quirk=tuple(quirk or ()), max_steps=max_steps))  # fmt: skip
    announce = functools.partial(print, flush=True)
    result = fuzzsearch.fuzz(request, Cache.default(), announce=announce)
    print(fuzzcli.format_result(result))
    if result.scenario is not None:
        raise Exit(code=1)


@task(help=taskhelp.MUTANTS, iterable=["flavour", "mutant", "flavour_path"])
@cli
def mutants(c: Context, full: bool = False, cpus: int = 2, flavour: list[str] | None = None,
            mutant: list[str] | None = None, kernel: str = "6.1", kernel_src: str | None = None,
            flavour_path: list[str] | None = None, per_oracle: bool = False) -> None:  # fmt: skip
    """Build each deliberately broken agent and show which oracle catches it."""
    _use_flavours(flavour_path)
    request = mutantruns.MutationRequest(full=full, cpus=cpus, flavours=tuple(flavour or ()),
                                         only=tuple(mutant or ()), per_oracle=per_oracle,
                                         kernel=parse_kernel(kernel, kernel_src))  # fmt: skip
    result = mutantruns.run_mutants(request, Cache.default())
    table = format_mutants(result.rows)
    print(f"mutants on Linux {describe_kernel(request.kernel)}")
    print(table)
    print(f"{len(result.rows)} rows ({tally(result.rows)}) in {result.elapsed_s:.0f} s; "
          f"evidence: {mutantruns.write_table(result, table).parent}")  # fmt: skip
    if survivors(result.rows):
        raise Exit(code=1)


@task(help=taskhelp.JUDGE, iterable=["flavour_path"])
@cli
def judge(c: Context, flavour: str, flavour_path: list[str] | None = None) -> None:
    """Judge one port completely: tier, 8 vCPUs, sanitizer kernels, mutants; a report card."""
    _use_flavours(flavour_path)
    (name,) = flavours.known((flavour,))  # an unknown name: one line, before any build
    rows = judgemod.judge_flavour(name, Cache.default(), paths=tuple(flavour_path or ()))
    print(judgemod.render_card(name, rows))
    if not all(row.ok for row in rows):
        raise Exit(code=1)


@task(help=taskhelp.CI)
@cli
def ci(c: Context, workers: int = 2) -> None:
    """The project's tests: setup, images, lint, types, unit tier and the full guest tier."""
    status = cimod.run_ci(Cache.default(), workers=workers)
    if status != 0:
        raise Exit(code=status)
