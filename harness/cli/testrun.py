"""Running the test tiers: ``invoke test`` (guest tier for one guest) and ``invoke ci``.

The harness never imports pytest; it builds pytest's command line and runs it
as a child with the same interpreter. Images are prepared *before* pytest
starts, so build progress is visible even when xdist hides worker output::

    status = run_guest_tier(GuestRequest(cpus=8), Cache.default(), TierOptions(complete=True))
    status = run_ci(Cache.default(), workers=2)
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
from harness.agent.mutants import format_table, survivors, tally
from harness.build.cache import Cache
from harness.build.hostdeps import ensure_host
from harness.build.images import prepare_images
from harness.build.kernel import KernelChoice, KernelRequest, Variant, find_kernel
from harness.cli import checks
from harness.cli.mutantruns import MutationRequest, run_mutants, write_table
from harness.cli.session import GuestRequest, parse_kernel, resolve
from harness.cli.skips import images_command, missing_images, tier_images
from harness.errors import ConfigError
from harness.matrix.load import get_matrix, select, with_flavours
from harness.paths import REPO_ROOT
from harness.process import Terminated, beside, die_with_parent
from harness.vm.record import new_run_dir

LOG = logging.getLogger(__name__)

#: Kernels CI builds first, as (arch, variant, kernel version): those the tiers boot.
#: Not x86_64's: its cold build took 5 min of the cold `.ci/run` of dec3bd8 (74.7 min in
#: all) for two checks of 19 s (a guest with no PMU samples on the software clock; x86_64
#: boots with software events only), which then skip, naming `invoke images --arch
#: x86_64`; the full matrix (nightly) and `invoke test --complete` run them.
CI_IMAGES: tuple[tuple[str, Variant, str], ...] = (
    ("arm64", "default", "6.1"),
    ("arm64", "debug", "6.1"),
    ("arm64", "default", "6.12"),
    ("arm64", "kcsan", "6.1"),
)
#: The part of the guest tier CI also runs on Linux 6.12 (the LTS beside Debian's 6.1):
#: every flavour's agent tests on 2 vCPUs (oracles, Linux perf beside the agent, hwpmc's
#: stall emulation on the moved PMUv3 driver, the crash-defect checks; 50 tests, 170 s
#: measured). The quick matrix adds every flavour on 8 vCPUs with NMIs on 6.12. Not the
#: boot, snapshot, SSH and CLI checks: they test the harness, not the kernel, and take as
#: long again; nor the other topologies, which `invoke test --kernel 6.12` and the full
#: matrix run.
CI_NEWER_KERNEL = GuestRequest(cpus=2, kernel="6.12")
#: The guest tier's layouts on every commit: 1 vCPU and 8 (2s2cl1c2t, which spans
#: sockets, clusters and SMT threads); the tests that need two CPUs or more run on the 8.
#: Not 2 and 4 vCPUs, nor the second 8-vCPU layout (1s2cl2c2t): CI's run of 7cfa0b2,
#: with 1, 2, 4 and 8, spent 2023 s in this tier and did not finish in its 90 minutes;
#: `invoke test` with no --cpus and the full matrix run them all.
CI_TIER_CPUS = (1, 8)
CI_NEWER_KERNEL_TESTS = "agent"
#: The sanitizer share (issue 25): every flavour's standard, exact-count and crash-defect
#: runs (tests/guest/test_sanitizers.py) on the KASAN + UBSAN kernel (``debug``) on 2
#: vCPUs and the KCSAN kernel on 8, where more CPUs race; a report on the console fails
#: its flavour's test. `invoke test --variant debug|kcsan --cpus N` runs the others.
#: On kcsan (strict) the runs go beside the overlap spinners, plus dt's and tprof's
#: overlap run (harness.agent.overlap). Measured on a host busy with two other
#: engineers' guests: 4 flavours on 2 vCPUs 160 s wall; on 8 vCPUs (2 spinners, one a
#: host core) dt and tprof 220 s, kprof and hwpmc 284 s, every flavour clean.
CI_SANITIZER_TESTS = "tests/guest/test_sanitizers.py"
#: The debug guest has 512 MiB: kmemleak's scans (three a flavour) walk every page's
#: struct page, and one took 12.6-13.9 s in a 1024 MiB guest, 8.1-8.6 s in 512 (2 vCPUs,
#: quiet host), where 295 MiB stay free with KASAN's shadow.
CI_SANITIZER_RUNS: tuple[GuestRequest, ...] = (
    GuestRequest(cpus=2, variant="debug", memory_mib=512),
    GuestRequest(cpus=8, variant="kcsan"),
)
#: The guest test that boots the debug kernel whatever the tier's variant: CI runs it
#: in the debug run above, not in the first tier, which starts before that kernel is
#: built (`harness.cli.prebuild` builds it beside the tier; the test skips without it).
CI_DEBUG_KERNEL_TESTS = "tests/guest/test_variants.py"


def sanitizer_workers(request: GuestRequest, workers: int) -> int:
    """The xdist workers of a sanitizer run: ``workers`` up to 2 vCPUs, else one.

    A 2-vCPU debug guest kept 60 % of the two host cores busy (4 flavours in 381 s,
    one worker), so two fit; the kcsan run's 8 vCPUs fill both cores alone, and its
    overlap cases need their CPUs to run at once for races to meet.
    """
    return workers if request.cpus is not None and request.cpus <= 2 else 1


def guest_options(request: GuestRequest) -> list[str]:
    """The tests' own command-line options for ``request``."""
    options = ["--arch", request.arch, "--variant", request.variant, "--accel", request.accel,
               "--nmi", "on" if request.nmi else "off"]  # fmt: skip
    options += ["--memory-mib", str(request.memory_mib)]
    options += [f"--append={arg}" for arg in request.kernel_args]
    options += ["--kernel", request.kernel]
    options += ["--kernel-src", request.kernel_src] if request.kernel_src else []
    if request.topology:
        options += ["--topology", request.topology]
    elif request.cpus:
        options += ["--cpus", str(request.cpus)]
    return options


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


def _run(argv: Sequence[str], *, log: Path | None = None) -> int:
    """Run pytest's ``argv``; its output to ``log`` where given, else to this terminal."""
    LOG.info("running: %s%s", shlex.join(argv), f" (output: {log})" if log else "")
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log.open("w")) if log is not None else None
        proc = subprocess.Popen(list(argv), cwd=REPO_ROOT, env=child_environment(),
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
    flavours: tuple[str, ...] = ()  # only these flavours' tests (pytest --flavour); () all
    ktap: bool = False  # print KTAP on standard output instead of pytest's tables


def run_guest_tier(
    request: GuestRequest, cache: Cache, options: TierOptions = TierOptions()
) -> int:
    """Prepare images for ``request``, then run ``tests/guest`` against that guest.

    The harness's self-checks (marker ``selftest``) run only with ``selftests``;
    with ``complete``, the images the tier's other checks need (debug kernel,
    x86_64) are built first, so none of them skips for want of one. Returns
    pytest's exit status (5, "no tests ran", is a failure too).
    """
    spec, _ = resolve(request, cache)  # validates input and builds before pytest starts
    if options.complete:
        build_tier_images(request, cache)
    junit = new_run_dir("test", spec.name) / "junit.xml"
    workers = options.workers or tier_workers(spec.topology.cpus, request.memory_mib)
    extra = ["-k", options.keyword] if options.keyword else []
    if not options.selftests:
        extra += ["-m", "not selftest"]
    if not options.snapshot:
        extra.append("--no-snapshot")
    extra += [f"--flavour={name}" for name in options.flavours]
    log = junit.with_name("pytest.log") if options.ktap else None
    status = _run(pytest_argv(["tests/guest"], guest_options(request), workers=workers,
                              extra=[*extra, f"--junitxml={junit}"]), log=log)  # fmt: skip
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


def build_tier_images(request: GuestRequest, cache: Cache) -> None:
    """Build (or reuse) every image the guest tier can use for ``request``."""
    requested = parse_kernel(request.kernel, request.kernel_src)

    def kernel_for(arch: str) -> KernelChoice:  # the no-PMU check boots x86_64's 6.1
        return requested if arch == request.arch else KernelChoice()

    def cached(arch: str, variant: Variant) -> bool:
        wanted = KernelRequest(arch=arches.get(arch), variant=variant, kernel=kernel_for(arch))
        return find_kernel(wanted, cache) is not None

    wanted = tier_images(request)
    for image in missing_images(wanted, present=cached):
        LOG.info("--complete: building %s %s images for the checks that need them (as `%s`)",
                 *image, images_command(image))  # fmt: skip
    for arch, variant in wanted:
        prepare_images(arches.get(arch), variant, cache, kernel=kernel_for(arch))


def run_ci(cache: Cache, *, workers: int = 2) -> int:
    """Everything CI checks: lint, types, the unit and guest tiers, the quick matrix.

    The first tier needs only the first of `CI_IMAGES`. The others, then the mutant
    stage's agents, build beside every stage at idle priority (`harness.cli.prebuild`),
    in the order the stages need them, on the CPU time the stages' guests leave (a
    2-vCPU guest kept 60 % of the two cores busy); a stage that needs one waits for
    it (`prepare_images` waits on the cache's lock). A cold run that built the four
    kernels one after another first spent 36 of its 92 minutes there.
    """
    ensure_host()
    _prepare(CI_IMAGES[0], cache)
    prebuild = [sys.executable, "-m", "harness.cli.prebuild"]
    log = new_run_dir("ci", "prebuild") / "prebuild.log"
    with beside(prebuild, log=log, what="prebuild (later kernels, mutant agents)",
                cwd=REPO_ROOT) as finish:  # fmt: skip
        static_ok = checks.run_checks(checks.static_checks())  # the unit tier shuffled
        junit = new_run_dir("ci", "all") / "junit.xml"
        layouts = [f"--cpus={cpus}" for cpus in CI_TIER_CPUS]
        extra = [f"--junitxml={junit}", f"--ignore={CI_DEBUG_KERNEL_TESTS}"]
        status = _run(pytest_argv(["tests/guest", "tests/scenarios"], layouts,
                                  workers=workers, extra=extra))  # fmt: skip
        LOG.info("guest and scenario tiers: exit status %d; JUnit: %s", status, junit)
        write_ktap(junit)
        debug, kcsan = CI_SANITIZER_RUNS  # in CI_IMAGES' order: the order prebuild builds
        status = run_sanitizer(debug, cache, workers) or status
        status = run_newer_kernel_tier(cache, workers) or status  # whatever 6.1's said
        status = run_sanitizer(kcsan, cache, workers) or status
        matrix_status = run_matrix("quick", cache, MatrixOptions(workers=str(workers)))
        if finish() != 0:
            LOG.warning("prebuild failed (log: %s): the mutant stage builds what it left", log)
    mutant_status = run_quick_mutants(cache)
    if not static_ok:
        LOG.error("static checks failed (see above)")
        return status or matrix_status or mutant_status or 1
    return status or matrix_status or mutant_status


def _prepare(image: tuple[str, Variant, str], cache: Cache) -> None:
    """One of `CI_IMAGES`, ready before the pytest that boots it starts.

    It may wait there for prebuild to finish it, a wait no test's timeout should count.
    """
    arch, variant, kernel = image
    prepare_images(arches.get(arch), variant, cache, kernel=KernelChoice(kernel))


def _prepare_for(request: GuestRequest, cache: Cache) -> None:
    """`_prepare` the one of `CI_IMAGES` that ``request`` boots.

    :raise ConfigError: ``request`` boots none of them.
    """
    for image in CI_IMAGES:
        if image == (request.arch, request.variant, request.kernel):
            _prepare(image, cache)
            return
    raise ConfigError(f"CI builds no {request.arch} {request.variant} {request.kernel} kernel")


def run_newer_kernel_tier(cache: Cache, workers: int = 1) -> int:
    """`CI_NEWER_KERNEL_TESTS` of the guest tier on `CI_NEWER_KERNEL`: pytest's exit status."""
    request = CI_NEWER_KERNEL
    _prepare_for(request, cache)
    junit = new_run_dir("ci", f"linux{request.kernel}") / "junit.xml"
    extra = ["-k", CI_NEWER_KERNEL_TESTS, "-m", "not selftest", f"--junitxml={junit}"]
    status = _run(pytest_argv(["tests/guest"], guest_options(request), workers=workers,
                              extra=extra))  # fmt: skip
    LOG.info("guest tier on Linux %s (-k %s): exit status %d; JUnit: %s", request.kernel,
             CI_NEWER_KERNEL_TESTS, status, junit)  # fmt: skip
    write_ktap(junit)
    return status


def run_sanitizer(request: GuestRequest, cache: Cache, workers: int = 1) -> int:
    """`CI_SANITIZER_TESTS` on one of `CI_SANITIZER_RUNS`: pytest's exit status.

    The debug run also takes `CI_DEBUG_KERNEL_TESTS`.
    """
    _prepare_for(request, cache)
    junit = new_run_dir("ci", f"{request.variant}-{request.cpus}cpu") / "junit.xml"
    paths = [CI_SANITIZER_TESTS]
    if request.variant == "debug":
        paths.append(CI_DEBUG_KERNEL_TESTS)  # a selftest: no "-m 'not selftest'" here
    extra = [f"--junitxml={junit}"]
    count = sanitizer_workers(request, workers)
    found = _run(pytest_argv(paths, guest_options(request), workers=count, extra=extra))
    LOG.info("sanitizer tier, %s kernel, %d vCPUs: exit status %d; JUnit: %s",
             request.variant, request.cpus, found, junit)  # fmt: skip
    write_ktap(junit)
    return found


#: CI's mutant stage: one mutant per oracle of the quick set (`mutants.per_oracle`).
#: The budget scenarios' cases (C-3's ``slow_producer``, TP-O10's
#: ``stop_waits``, beside their control) are left to tests/scenarios/test_budgets.py,
#: which runs the same input-free cases in CI's first tier and asserts that exactly the
#: mutant's oracle fails: twice was about a minute of CI's two cores.
CI_MUTANTS = MutationRequest(full=False, per_oracle=True, deterministic=False)


def run_quick_mutants(cache: Cache) -> int:
    """CI's share of the quick mutation set: one mutant per oracle (`mutants.per_oracle`).

    0 when every mutant was caught and every control clean. CI's run of 7cfa0b2 timed
    out in the whole quick set (123 rows, 2940 s on a busy host); `invoke mutants` runs it.
    """
    result = run_mutants(CI_MUTANTS, cache)
    table = format_table(result.rows)
    for line in table.splitlines():
        LOG.info("mutants: %s", line)
    LOG.info("mutants: %d rows: %s", len(result.rows), tally(result.rows))
    write_table(result, table)
    missed = survivors(result.rows)
    for row in missed:
        LOG.error("mutant %s on %s: %s (failed: %s)", row.mutant, row.flavour, row.verdict,
                  ", ".join(row.failed) or "nothing")  # fmt: skip
    return 1 if missed else 0


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
