"""Running the test tiers: ``invoke test`` (guest tier for one guest, or a matrix).

The harness never imports pytest; it builds pytest's command line and runs it
as a child with the same interpreter. Images are prepared *before* pytest
starts, so build progress is visible even when xdist hides worker output. The
guest tier's request is resolved once (`resolve_request`) and reaches pytest and
its workers as that object: ``request.json`` beside the JUnit (`save_request`), named
by `REQUEST_ENV`; CI's stages pass theirs the same way. Every run writes KTAP beside its
JUnit (`write_ktap`).
``invoke ci`` is `harness.cli.ci`'s::

    status = run_guest_tier(GuestRequest(cpus=8), Cache.default(), TierOptions(complete=True))
    status = run_matrix("quick", Cache.default())
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import arches, ktap
from harness.agent.flavours import child_environment
from harness.builder.cache import Cache
from harness.builder.hostdeps import ensure_host
from harness.builder.images import prepare_images
from harness.builder.kernel import KernelChoice, KernelRequest, Variant, find_kernel
from harness.cli.session import (
    REQUEST_ENV,
    GuestRequest,
    ResolvedRequest,
    prepare,
    request_json,
    resolve_request,
)
from harness.cli.skips import images_command, missing_images, tier_images
from harness.errors import ConfigError
from harness.matrix.load import get_matrix, select, with_flavours
from harness.paths import REPO_ROOT
from harness.process import Terminated, die_with_parent
from harness.vm.record import new_run_dir

LOG = logging.getLogger(__name__)
REQUEST_FILE = "request.json"  # a guest tier's `ResolvedRequest`, beside its JUnit


def save_request(resolved: ResolvedRequest, junit: Path) -> Path:
    """Write ``resolved`` as `REQUEST_FILE` beside ``junit``: what `_run` hands pytest."""
    saved = junit.with_name(REQUEST_FILE)
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(request_json(resolved))
    return saved


def pytest_argv(
    paths: Sequence[str], options: Sequence[str], *, workers: int, extra: Sequence[str] = ()
) -> list[str]:
    """A pytest command line; xdist only when more than one worker is asked for."""
    argv = [sys.executable, "-m", "pytest", *paths, *options, *extra]
    if workers > 1:
        argv += ["-n", str(workers), "--dist", "loadgroup"]
    return argv


def write_ktap(junit: Path) -> Path | None:
    """KTAP version 1 (`harness.ktap`) of a pytest run, beside its JUnit: ``ktap.txt``.

    None when pytest wrote no JUnit (it stopped before its first test).
    """
    if not junit.is_file():
        return None
    out = junit.with_name(ktap.FILE)
    out.write_text(ktap.render(ktap.from_junit(junit.read_text())))
    LOG.info("KTAP: %s (read it with the kernel's parser: kunit.py parse %s)", out, out)
    return out


def _run(argv: Sequence[str], *, log: Path | None = None, request: Path | None = None) -> int:
    """Run pytest's ``argv``; its output to ``log`` where given, else to this terminal.

    ``request``: the `ResolvedRequest` file its guests come from (else its options).
    """
    LOG.info("running: %s%s", shlex.join(argv), f" (output: {log})" if log else "")
    env = child_environment()
    env.pop(REQUEST_ENV, None)  # never one inherited: this run's, or none
    if request is not None:
        env[REQUEST_ENV] = str(request)
        LOG.info("guests as requested in %s", request)
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log.open("w")) if log is not None else None
        proc = subprocess.Popen(list(argv), cwd=REPO_ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT if out else None,
                                preexec_fn=die_with_parent)  # noqa: PLW1509  # fmt: skip
        return _wait(proc)


def _wait(proc: subprocess.Popen[bytes]) -> int:
    try:
        return proc.wait()
    except BaseException as exc:
        # Ctrl-C reached pytest too (same process group): let it stop its guests and
        # report. Anything else (SIGTERM to us) is forwarded; pytest unwinds on it.
        if not isinstance(exc, KeyboardInterrupt) or isinstance(exc, Terminated):
            proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


@dataclass(frozen=True, slots=True)
class TierOptions:
    """How to run the guest tier (``invoke test``), beside which guest."""

    workers: int | None = None  # None: `tier_workers` for the guest asked for
    keyword: str | None = None  # pytest -k
    selftests: bool = False  # also the harness's own failure-path and CLI checks
    complete: bool = False  # first build every image the tier can use (see `tier_images`)
    snapshot: bool = True  # restore a snapshot per test; False: boot cold, reuse guests
    flavours: tuple[str, ...] = ()  # only these flavours' tests (in the request); () all
    ktap: bool = False  # print KTAP on standard output instead of pytest's tables
    junit: Path | None = None  # where the JUnit goes (None: a new run directory's)


def run_guest_tier(
    request: GuestRequest, cache: Cache, options: TierOptions = TierOptions()
) -> int:
    """Prepare images for ``request``, then run ``tests/guest`` against that guest.

    The harness's self-checks (marker ``selftest``) run only with ``selftests``;
    with ``complete``, the images the tier's other checks need (debug kernel,
    x86_64) are built first, so none of them skips for want of one. pytest and its
    workers read ``request`` resolved, from `REQUEST_FILE` beside the JUnit. Returns
    pytest's exit status (5, "no tests ran", is a failure too).
    """
    # The only validation (the flavours' names too): pytest is given this object.
    resolved = resolve_request(request, flavours=options.flavours)
    spec, _ = prepare(resolved, cache)  # builds before pytest starts
    if options.complete:
        build_tier_images(resolved, cache)
    junit = options.junit or new_run_dir("test", spec.name) / "junit.xml"
    saved = save_request(resolved, junit)
    workers = options.workers or tier_workers(spec.topology.cpus, request.memory_mib)
    extra = ["-k", options.keyword] if options.keyword else []
    if not options.selftests:
        extra += ["-m", "not selftest"]
    if not options.snapshot:
        extra.append("--no-snapshot")
    log = junit.with_name("pytest.log") if options.ktap else None
    status = _run(pytest_argv(["tests/guest"], [], workers=workers,
                              extra=[*extra, f"--junitxml={junit}"]), log=log,
                  request=saved)  # fmt: skip
    LOG.info("guest tier %s (exit status %d); JUnit: %s",
             "passed" if status == 0 else "FAILED", status, junit)  # fmt: skip
    written = write_ktap(junit)
    if options.ktap and written is not None:
        sys.stdout.write(written.read_text())
        sys.stdout.flush()
    return status


#: The most vCPUs of a guest the tier runs beside another by default. CI's tier runs
#: two 8-vCPU guests at once on two cores and its verdicts hold there; a larger guest's
#: hang budgets (`harness.timeouts`) assume one TCG guest per host.
SHARED_HOST_VCPUS = 8
#: Host memory a guest of ``memory_mib`` takes: its RAM twice (QEMU's translation
#: cache and its own heap beside the guest's RAM).
GUEST_MEMORY_FACTOR = 2


def tier_workers(vcpus: int, memory_mib: int, *, cores: int | None = None,
                 available_mib: int | None = None) -> int:  # fmt: skip
    """The guest tier's xdist workers when ``--workers`` is not given.

    One per host core (`worker_budget`'s ``auto``), where the guest has at most
    `SHARED_HOST_VCPUS`; as many as the host's free memory holds. Half of a tier's
    test time is waiting (SSH round trips, host analysis, restores), which a second
    guest fills: ``invoke test --cpus 8`` took 327 s with one worker and 267 s with
    two on this 2-core host.
    """
    if vcpus > SHARED_HOST_VCPUS:
        return 1
    free = _available_mib() if available_mib is None else available_mib
    fits = max(1, free // (memory_mib * GUEST_MEMORY_FACTOR))
    return min(worker_budget("auto", cores), fits)


def _available_mib() -> int:
    """MemAvailable of /proc/meminfo in MiB (a large number where there is none)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 1 << 20


def build_tier_images(request: ResolvedRequest, cache: Cache) -> None:
    """Build (or reuse) every image the guest tier can use for ``request``."""

    def kernel_for(arch: str) -> KernelChoice:  # the no-PMU check boots x86_64's 6.1
        return request.kernel if arch == request.asked.arch else KernelChoice()

    def cached(arch: str, variant: Variant) -> bool:
        wanted = KernelRequest(arch=arches.get(arch), variant=variant, kernel=kernel_for(arch))
        return find_kernel(wanted, cache) is not None

    wanted = tier_images(request.asked)
    for image in missing_images(wanted, present=cached):
        LOG.info("--complete: building %s %s images for the checks that need them (as `%s`)",
                 *image, images_command(image))  # fmt: skip
    for arch, variant in wanted:
        prepare_images(arches.get(arch), variant, cache, kernel=kernel_for(arch))


def worker_budget(requested: str, cpus: int | None = None) -> int:
    """Workers for a matrix run: ``auto`` or a number, capped at the host's cores.

    Each worker runs one guest at a time (`GuestPool`), and a TCG guest keeps a
    host core busy per running vCPU; more workers than cores only makes the
    vCPU threads of different guests starve each other (and time out), so the
    budget is one worker per host core.

    :raise ConfigError: ``requested`` is neither ``auto`` nor a positive number.
    """
    cores = cpus or os.cpu_count() or 1
    if requested == "auto":
        return cores
    if not requested.isdigit() or int(requested) < 1:
        raise ConfigError(f"-n takes 'auto' or a positive number of workers, not {requested!r}")
    if int(requested) > cores:
        LOG.warning("-n %s is more than the %d host cores: using %d workers (one guest each)",
                    requested, cores, cores)  # fmt: skip
    return min(int(requested), cores)


@dataclass(frozen=True, slots=True)
class MatrixOptions:
    """How to run a matrix (``invoke test --matrix NAME``)."""

    workers: str = "auto"  # `worker_budget`'s text: auto or a number
    keyword: str | None = None  # pytest -k, on the cell ids
    snapshot: bool = True  # restore each cell's guest; False: boot cold, share guests
    flavours: tuple[str, ...] = ()  # these flavours' cells (`with_flavours`); () the matrix's


def run_matrix(name: str, cache: Cache, options: MatrixOptions = MatrixOptions()) -> int:
    """Run matrix ``name`` (tests/matrix.toml) under pytest-xdist; JUnit, JSON and HTML out.

    Each cell restores its guest from a snapshot; ``snapshot=False`` boots cold and
    shares a guest between the cells that can. With ``flavours``, the cells are those
    flavours' on the matrix's guests (`harness.matrix.load.with_flavours`): one from
    outside the tree gets a cell on each of them.

    Returns pytest's exit status. The report directory is logged.
    """
    # Bad names fail here, before anything starts.
    matrix = with_flavours(get_matrix(name), options.flavours)
    ensure_host()
    count = worker_budget(options.workers)
    out = new_run_dir("matrix", name)
    extra = ["--matrix", matrix.name, f"--matrix-report={out}", f"--junitxml={out / 'junit.xml'}",
             f"--matrix-workers={count}"]  # fmt: skip
    extra += [f"--flavour={flavour}" for flavour in options.flavours]
    if options.keyword:
        extra += ["-k", options.keyword]
    if not options.snapshot:
        extra.append("--no-snapshot")
    LOG.info("matrix %s: %d cells, %d worker(s); report in %s", matrix.name,
             len(select(matrix, options.keyword)), count, out)  # fmt: skip
    status = _run(pytest_argv(["tests/matrix"], [], workers=count, extra=extra))
    write_ktap(out / "junit.xml")
    LOG.info("matrix %s %s (exit status %d): %s", matrix.name,
             "passed" if status == 0 else "FAILED", status, out / "report.html")  # fmt: skip
    return status
