"""``invoke judge --flavour NAME``: every check a port needs, built and run, one report card.

A port's own ``invoke test`` runs the default kernel only; the sanitizer kernels are
where a plain index instead of acquire/release (KCSAN), a use after free (KASAN) or a
lock taken where it must not be (lockdep) show. This builds whatever is missing and
runs, in order (`CHECKS`): the tier on 2 vCPUs; on 8 vCPUs spread over sockets,
clusters and SMT threads; the debug kernel's sanitizer runs; the kcsan kernel's
overlap watch; one mutant per oracle beside a clean control. Each check is the very
command its card row names, so a failure reruns on its own::

    card = judge_flavour("myport", Cache.default())
    print(render_card(card))        # check, verdict, what it counted, time, rerun
"""

from __future__ import annotations

import json
import logging
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass

from harness import ktap
from harness.agent.mutants import survivors, tally
from harness.agent.rarerounds import PAIRS_PROPERTY
from harness.builder.cache import Cache
from harness.cli.mutantruns import MutationRequest, run_mutants
from harness.cli.session import GuestRequest
from harness.cli.testrun import TierOptions, run_guest_tier
from harness.vm.record import new_run_dir

LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Check:
    """One row of the card: a guest tier run (``request``) or the mutants (None).

    ``estimate_s``: its wall time for a scaffolded port on this machine kind (2 cores,
    TCG), its kernel built, rounded up from the measured (tier 48 s, 8 vCPUs 22 s, debug
    194 s, kcsan 122 s, mutants 416 s); an in-tree flavour's own tests take longer.
    ``proves``: what a pass of it says. The kcsan check runs on 2 vCPUs, one a host core:
    on 8 vCPUs of 2 cores a vCPU shares its core (co-scheduled share 0.036), the
    rare-writer rounds do not run and a scaffolded port's one pair went unmet (p 0.009,
    UNJUDGED) under a card that said ok; on 2 its rounds met 10 of the in-tree flavours'
    11 pairs. CI's kcsan stages run both.
    """

    name: str
    request: GuestRequest | None
    keyword: str | None
    estimate_s: int
    proves: str


#: The sanitizer tests (`tests/guest/test_sanitizers.py`) by name.
SANITIZERS = "test_sanitizers"
CHECKS: tuple[Check, ...] = (
    Check("tier", GuestRequest(cpus=2), None, 90,
          "every shared and own oracle: standard, exact, content, beside Linux perf, and "
          "the shared stress plan (full buffers, each drop cause, a concurrent reader)"),
    Check("8 vCPUs", GuestRequest(cpus=8), "agent or test_content or test_outside or test_stress",
          60,
          "the same at 2 sockets x 2 clusters x SMT 2"),
    Check("debug", GuestRequest(cpus=2, variant="debug", memory_mib=512),
          f"{SANITIZERS} or test_stress", 240,
          "no KASAN, UBSAN, lockdep or kmemleak report in its runs and its stress plan"),
    Check("kcsan", GuestRequest(cpus=2, variant="kcsan"), SANITIZERS, 300,
          "no KCSAN report while spinners race the producers (overlap watch), and each "
          "declared pair met by a watch or UNJUDGED by name"),
    Check("mutants", None, None, 480,
          "one mutant per oracle, shared and its own, each caught beside a clean control"),
)  # fmt: skip
#: A kernel variant not yet in the cache is built first: about this long each (cold).
KERNEL_BUILD_S = 300


@dataclass(frozen=True, slots=True)
class Row:
    """What one check ended with."""

    check: Check
    ok: bool
    counted: str
    failed: tuple[str, ...]
    elapsed_s: float
    rerun: str


def rerun_command(check: Check, flavour: str, paths: Sequence[str]) -> str:
    """The ``invoke`` command that runs ``check`` alone for ``flavour``."""
    where = [f"--flavour-path={p}" for p in paths]
    if check.request is None:
        return shlex.join(["invoke", "mutants", f"--flavour={flavour}", "--per-oracle", *where])
    request = check.request
    argv = ["invoke", "test", f"--cpus={request.cpus}", f"--flavour={flavour}", *where]
    argv += [f"--variant={request.variant}"] if request.variant != "default" else []
    argv += [f"--memory={request.memory_mib}"] if request.memory_mib != 1024 else []
    argv += ["-k", check.keyword] if check.keyword else []
    return shlex.join(argv)


def estimate(checks: Sequence[Check]) -> str:
    """The time estimate printed before anything runs."""
    total = sum(c.estimate_s for c in checks)
    build = KERNEL_BUILD_S // 60
    return (f"about {total // 60} min for {len(checks)} checks with their kernels built "
            f"(each kernel variant not yet built adds about {build} min)")  # fmt: skip


def judge_flavour(flavour: str, cache: Cache, *, paths: Sequence[str] = ()) -> list[Row]:
    """Run every check of `CHECKS` for ``flavour``, in order; one row each."""
    LOG.info("judge %s: %s", flavour, estimate(CHECKS))
    rows = []
    for index, check in enumerate(CHECKS, 1):
        LOG.info("judge %s: [%d/%d] %s (about %d min): %s", flavour, index, len(CHECKS),
                 check.name, check.estimate_s // 60 or 1, check.proves)  # fmt: skip
        started = time.monotonic()
        ok, counted, failed = _run_check(check, flavour, cache)
        row = Row(check, ok, counted, failed, time.monotonic() - started,
                  rerun_command(check, flavour, paths))  # fmt: skip
        LOG.info("judge %s: [%d/%d] %s %s in %.0f s: %s", flavour, index, len(CHECKS),
                 check.name, "ok" if ok else "FAILED", row.elapsed_s, counted)  # fmt: skip
        rows.append(row)
    return rows


def _run_check(check: Check, flavour: str, cache: Cache) -> tuple[bool, str, tuple[str, ...]]:
    if check.request is None:
        result = run_mutants(MutationRequest(flavours=(flavour,), per_oracle=True), cache)
        missed = survivors(result.rows)
        return (not missed, f"{len(result.rows)} rows: {tally(result.rows)}",
                tuple(f"{r.mutant} ({r.verdict})" for r in missed))  # fmt: skip
    junit = new_run_dir("judge", f"{flavour}-{check.name.replace(' ', '')}") / "junit.xml"
    options = TierOptions(workers=1 if (check.request.cpus or 0) > 2 else 2,
                          keyword=check.keyword, flavours=(flavour,), junit=junit)  # fmt: skip
    status = run_guest_tier(check.request, cache, options)
    text = junit.read_text() if junit.is_file() else ""
    if not text:
        return False, f"pytest wrote no JUnit (exit status {status})", ()
    counts = ktap.junit_counts(text)
    counted = ", ".join(f"{n} {k}" for k, n in counts.items())
    if pairs := ktap.junit_properties(text, PAIRS_PROPERTY):
        counted += "; " + pairs_met(pairs)
    ran = counts["passed"] + counts["failed"] > 0  # every test skipped judged nothing
    return status == 0 and ran, counted, ktap.junit_failures(text)


def pairs_met(properties: Sequence[str]) -> str:
    """The KCSAN pairs met, out of those declared, and each unmet one UNJUDGED by name.

    ``properties``: the sanitizer tests' `PAIRS_PROPERTY` values (JSON ``{name: met}``).
    """
    outcome: dict[str, bool] = {}
    for value in properties:
        outcome.update(json.loads(value))
    unmet = [name for name, met in outcome.items() if not met]
    return (f"KCSAN pairs met {len(outcome) - len(unmet)} of {len(outcome)}"
            + (f" (UNJUDGED: {', '.join(unmet)})" if unmet else ""))  # fmt: skip


def render_card(flavour: str, rows: Sequence[Row]) -> str:
    """The report card: one line per check, its failed tests under it, then the reruns."""
    width = max(len(r.check.name) for r in rows)
    lines = [f"report card: {flavour}"]
    for row in rows:
        verdict = "ok    " if row.ok else "FAILED"
        lines.append(f"  {row.check.name:<{width}}  {verdict}  {row.elapsed_s:5.0f} s  "
                     f"{row.counted}")  # fmt: skip
        lines += [f"  {'':<{width}}    failed: {name}" for name in row.failed]
    lines.append("rerun one:")
    lines += [f"  {row.check.name:<{width}}  {row.rerun}" for row in rows]
    return "\n".join(lines)
