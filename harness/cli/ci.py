"""``invoke ci``: everything CI checks, stage by stage, on every kernel it ships.

Static checks and the unit tier (shuffled) first, beside the first tier (guest and
scenario tests on Debian's 6.1 at 1 and 8 vCPUs); then one stage per later kernel,
each when `harness.cli.prebuild` has built it beside the stages before; the quick
matrix; the fuzz stage (every flavour's fixed agent); the mutant stage::

    status = run_ci(Cache.default(), workers=2)
    [stage.name for stage in CI_STAGES]
    # ['debug', 'linux6.12', 'kcsan', 'kcsan-2cpu', 'kcsan-rare']
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from harness import arches, ktap
from harness.agent.mutants import format_table, survivors, tally
from harness.builder.cache import Cache
from harness.builder.hostdeps import ensure_host
from harness.builder.images import prepare_images
from harness.builder.kernel import KernelChoice, Variant
from harness.cli import checks
from harness.cli.fuzz import run_fuzz_stage
from harness.cli.mutantruns import MutationRequest, run_mutants, write_table
from harness.cli.session import GuestRequest, resolve_request, tier_topologies
from harness.cli.testrun import (
    MatrixOptions,
    _run,
    pytest_argv,
    run_matrix,
    save_request,
    write_ktap,
)
from harness.errors import ConfigError
from harness.paths import REPO_ROOT
from harness.process import beside
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
#: The guest tier's layouts on every commit: 1 vCPU and 8 (2s2cl1c2t, which spans
#: sockets, clusters and SMT threads); the tests that need two CPUs or more run on the 8.
#: Not 2 and 4 vCPUs, nor the second 8-vCPU layout (1s2cl2c2t): CI's run of 7cfa0b2,
#: with 1, 2, 4 and 8, spent 2023 s in this tier and did not finish in its 90 minutes;
#: `invoke test` with no --cpus and the full matrix run them all.
CI_TIER_CPUS = (1, 8)
#: The sanitizer share (issue 25): every flavour's standard, exact-count and crash-defect
#: runs (tests/guest/test_sanitizers.py) on the KASAN + UBSAN kernel (``debug``) on 2
#: vCPUs and the KCSAN kernel on 8, where more CPUs race; a report on the console fails
#: its flavour's test. On kcsan (strict) the runs go beside the overlap spinners, plus
#: dt's and tprof's overlap run (harness.agent.overlap). Measured on a host busy with two
#: other engineers' guests: 4 flavours on 2 vCPUs 160 s wall; on 8 vCPUs (2 spinners,
#: one a host core) dt and tprof 220 s, kprof and hwpmc 284 s, every flavour clean.
SANITIZER_TESTS = "tests/guest/test_sanitizers.py"
#: The shared stress plan (full buffers, each drop cause alone, a reader racing the
#: producers, stop and start under them): on the debug kernel too, where a record past a
#: full ring, a use after free at STOP or a lock in the reader's race is a KASAN,
#: UBSAN or lockdep report on the console, which the ``guest`` fixture fails on.
STRESS_TESTS = "tests/guest/test_stress.py"
#: The guest test that boots the debug kernel whatever the tier's variant: CI runs it
#: in the debug stage, not in the first tier, which starts before that kernel is built
#: (`harness.cli.prebuild` builds it beside the tier; the test skips without it).
DEBUG_KERNEL_TESTS = "tests/guest/test_variants.py"
#: The main tier's tests that hold what the agent recorded against the truth (issue 48):
#: the content tests (every flavour's samples against the ground-truth workload), every
#: flavour's run beside Linux perf (PEER, PROFILE; tprof's is in test_agent.py) and the
#: outside flavour's round trip. CI runs them on every kernel and variant it ships: on
#: 6.1 in the first tier, on 6.12, debug and kcsan in their stages, at 2 vCPUs.
TRUTH_TESTS = (
    "tests/guest/test_content.py",
    "tests/guest/test_profile.py",
    "tests/guest/test_outside.py",
    "tests/guest/test_agent.py::test_linux_perf_beside_the_agent_agrees",
)
#: On Linux 6.12 (the LTS beside Debian's 6.1): every flavour's agent tests (oracles,
#: Linux perf beside the agent, hwpmc's stall emulation on the moved PMUv3 driver, the
#: crash-defect checks; 50 tests, 170 s measured), the truth tests and the witnessed runs
#: (the witness's offsets compiled against 6.12's own layouts), on 2 vCPUs, and the
#: fuzzer's guest test, which runs in a 2-vCPU tier only (its guest is its own). The
#: quick matrix adds every flavour on 8 vCPUs with NMIs on 6.12. Not the boot, snapshot,
#: SSH and CLI checks: they test the harness, not the kernel, and take as long again;
#: nor the other topologies, which `invoke test --kernel 6.12` and the full matrix run.
NEWER_KERNEL_TESTS = (
    "agent or test_content or test_profile or test_outside or test_witness or test_fuzz"
    " or test_stress"
)


@dataclass(frozen=True, slots=True)
class CiStage:
    """One later stage of CI: a guest, the tests it runs there, and how they are chosen.

    ``keyword``: pytest ``-k``; ``selftests``: also the harness's own checks (else
    ``-m 'not selftest'``); ``alone``: one test at a time, no other guest beside it (one
    xdist worker). Its xdist workers otherwise: `stage_workers`.
    """

    name: str
    request: GuestRequest
    paths: tuple[str, ...]
    keyword: str | None = None
    selftests: bool = True
    alone: bool = False


#: The stages after the first tier, in the order `CI_IMAGES` builds their kernels.
#: The debug guest has 512 MiB: kmemleak's scans (three a flavour) walk every page's
#: struct page, and one took 12.6-13.9 s in a 1024 MiB guest, 8.1-8.6 s in 512 (2 vCPUs,
#: quiet host), where 295 MiB stay free with KASAN's shadow. The kcsan kernel's truth
#: tests run on 2 vCPUs beside each other, not in its 8-vCPU sanitizer stage, whose one
#: guest fills both host cores; so does its sanitizer test again, where each vCPU has a
#: core and the rare-writer rounds run (`harness.agent.rarerounds.drive_rare_writers`; on
#: 8 vCPUs they would take 653 s and meet nothing), alone: beside a second guest the
#: spinners read a fifth as often (390 reads a second, 2170 alone) and kprof's block
#: hand-off stayed UNJUDGED, its model expecting 31 rounds of 16 s; alone every pair was
#: met: kprof's 3 after 7 rounds (94 s), dt's 4 after 2, hwpmc's 3 after 1, tprof's 3 after 2
#: (273.6 s for the 4 tests, one worker).
CI_STAGES: tuple[CiStage, ...] = (
    CiStage("debug", GuestRequest(cpus=2, variant="debug", memory_mib=512),
            (SANITIZER_TESTS, STRESS_TESTS, DEBUG_KERNEL_TESTS, *TRUTH_TESTS)),
    CiStage("linux6.12", GuestRequest(cpus=2, kernel="6.12"), ("tests/guest",),
            keyword=NEWER_KERNEL_TESTS, selftests=False),
    CiStage("kcsan", GuestRequest(cpus=8, variant="kcsan"), (SANITIZER_TESTS,)),
    CiStage("kcsan-2cpu", GuestRequest(cpus=2, variant="kcsan"), TRUTH_TESTS),
    CiStage("kcsan-rare", GuestRequest(cpus=2, variant="kcsan"), (SANITIZER_TESTS,), alone=True),
)  # fmt: skip


def stage_workers(request: GuestRequest, workers: int) -> int:
    """The xdist workers of a later stage: ``workers`` up to 2 vCPUs, else one.

    A 2-vCPU debug guest kept 60 % of the two host cores busy (4 flavours in 381 s,
    one worker), so two fit; the kcsan stage's 8 vCPUs fill both cores alone, and its
    overlap watches need their CPUs to run at once for races to meet.
    """
    return workers if request.cpus is not None and request.cpus <= 2 else 1


def run_ci(cache: Cache, *, workers: int = 2) -> int:
    """Everything CI checks: lint, types, the unit and guest tiers, the quick matrix.

    The first tier needs only the first of `CI_IMAGES`. The others, then the mutant
    stage's agents, build beside every stage at idle priority (`harness.cli.prebuild`),
    in the order the stages need them, on the CPU time the stages' guests leave (a
    2-vCPU guest kept 60 % of the two cores busy); a stage that needs one waits for
    it (`prepare_images` waits on the cache's lock). A cold run that built the four
    kernels one after another first spent 36 of its 92 minutes there. It ends with
    `summary`: each stage's status and failed tests, where a long log's reader looks.
    """
    ensure_host()
    _prepare(CI_IMAGES[0], cache)
    prebuild = [sys.executable, "-m", "harness.cli.prebuild"]
    log = new_run_dir("ci", "prebuild") / "prebuild.log"
    results: list[StageResult] = []
    with beside(prebuild, log=log, what="prebuild (later kernels, mutant agents)",
                cwd=REPO_ROOT) as finish:  # fmt: skip
        static_ok = checks.run_checks(checks.static_checks())  # the unit tier shuffled
        results.append(StageResult("static", 0 if static_ok else 1))
        junit = new_run_dir("ci", "all") / "junit.xml"
        tier = resolve_request(GuestRequest(), tier=tier_topologies(CI_TIER_CPUS, ()))
        extra = [f"--junitxml={junit}", f"--ignore={DEBUG_KERNEL_TESTS}"]
        status = _run(pytest_argv(["tests/guest", "tests/scenarios"], [], workers=workers,
                                  extra=extra), request=save_request(tier, junit))  # fmt: skip
        LOG.info("guest and scenario tiers: exit status %d; JUnit: %s", status, junit)
        write_ktap(junit)
        results.append(StageResult("first tier", status, junit))
        for stage in CI_STAGES:  # in CI_IMAGES' order: the order prebuild builds
            results.append(run_stage(stage, cache, workers))
        matrix_status = run_matrix("quick", cache, MatrixOptions(workers=str(workers)))
        results.append(StageResult("quick matrix", matrix_status))
        results.append(StageResult("fuzz", run_fuzz_stage(cache)))
        if finish() != 0:
            LOG.warning("prebuild failed (log: %s): the mutant stage builds what it left", log)
    results.append(StageResult("mutants", run_quick_mutants(cache)))
    for line in summary(results):
        (LOG.info if all(r.status == 0 for r in results) else LOG.error)("ci: %s", line)
    return next((r.status for r in results if r.status != 0), 0)


@dataclass(frozen=True, slots=True)
class StageResult:
    """What one stage of `run_ci` ended with: its exit status and its JUnit, if any."""

    name: str
    status: int
    junit: Path | None = None


def summary(results: list[StageResult]) -> list[str]:
    """One line per stage (status, test counts) and one per failed test, by stage."""
    lines = []
    for result in results:
        verdict = "ok" if result.status == 0 else f"FAILED (exit status {result.status})"
        text = result.junit.read_text() if result.junit and result.junit.is_file() else ""
        counts = ktap.junit_counts(text) if text else None
        tally = ", ".join(f"{n} {k}" for k, n in counts.items()) if counts else ""
        lines.append(f"{result.name:<14} {verdict}" + (f": {tally}" if tally else ""))
        lines += [
            f"{'':<14}   failed: {name}" for name in (ktap.junit_failures(text) if text else ())
        ]
    return lines


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


def run_stage(stage: CiStage, cache: Cache, workers: int = 1) -> StageResult:
    """One of `CI_STAGES`, once its kernel is built: pytest's exit status, its JUnit."""
    request = stage.request
    _prepare_for(request, cache)
    junit = new_run_dir("ci", stage.name) / "junit.xml"
    extra = ["-k", stage.keyword] if stage.keyword else []
    extra += [] if stage.selftests else ["-m", "not selftest"]
    extra.append(f"--junitxml={junit}")
    count = 1 if stage.alone else stage_workers(request, workers)
    saved = save_request(resolve_request(request), junit)  # pytest resolves nothing again
    found = _run(pytest_argv(list(stage.paths), [], workers=count, extra=extra), request=saved)
    LOG.info("stage %s (%s kernel %s, %d vCPUs): exit status %d; JUnit: %s", stage.name,
             request.variant, request.kernel, request.cpus, found, junit)  # fmt: skip
    write_ktap(junit)
    return StageResult(stage.name, found, junit)


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
