"""The search: Hypothesis draws sequences into one `FuzzSession` until the budget ends.

The first sequence that breaks an invariant ends Hypothesis's generation; it is
shrunk by step deletion (`harness.fuzz.shrink`, for at most ``shrink_s`` more) and
the shortest failing sequence is kept as a scenario in ``request.scenario_dir``,
every finding's console and dmesg in the run dir::

    result = fuzz(FuzzRequest(flavour="kprof", quirks=("KP-D3",), seed=1), Cache.default(),
                  announce=print)
    result.scenario, result.first_found_s, result.shrunk_steps
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed

from harness.builder.cache import Cache, write_json_atomic
from harness.fuzz import generate, shrink
from harness.fuzz.invariants import Finding
from harness.fuzz.session import (
    FuzzRequest,
    FuzzResult,
    FuzzSession,
    _BudgetOverError,
    _FoundError,
)
from harness.scenarios.types import Step

LOG = logging.getLogger(__name__)
#: Enough examples that the budget, not the count, ends the search.
MAX_EXAMPLES = 1_000_000


def fuzz(request: FuzzRequest, cache: Cache, announce: Callable[[str], None]) -> FuzzResult:
    """Fuzz ``request.flavour`` in one guest for ``request.budget_s`` (plus shrinking).

    Blocks for the builds and the guest's start, then the budget and the shrinking.
    ``announce`` gets a progress line after every sequence (sequences, calls, findings).

    :raise ConfigError: the flavour declares no interface, or a sequence's scenario
        is refused by the loader (a fuzzer bug).
    :raise InfraError: the guest could not be started.
    """
    session = FuzzSession(request, cache, announce)
    try:
        session.prepare()
        _search(session)
    finally:
        session.close()
    return _result(session)


def _search(session: FuzzSession) -> None:
    """Generate until the first finding or the budget's end, then shrink the finding."""
    request, tally = session.request, session.tally
    budget_end = tally.started + request.budget_s

    def probe(steps: tuple[Step, ...]) -> None:
        # Hypothesis replays a failing example once to confirm it. A finding in hand ends
        # the search without running again: a replay that did not recur raised
        # FlakyFailure out of CI's fuzz stage (hwpmc, seed 1, at sequence 28).
        if tally.best is not None:
            raise _FoundError
        if time.monotonic() > budget_end:
            raise _BudgetOverError
        findings = session.execute(steps)
        _progress(session, findings)
        if findings:
            tally.first_s = time.monotonic() - tally.started
            tally.first_sequence = tally.sequences
            tally.best = (steps, findings)
            raise _FoundError

    test = settings(
        database=None,
        deadline=None,
        max_examples=MAX_EXAMPLES,
        derandomize=False,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        print_blob=False,
        verbosity=Verbosity.quiet,
    )(given(generate.sequences(session.target, request.max_steps))(probe))
    with contextlib.suppress(_FoundError, _BudgetOverError):
        hypothesis_seed(request.seed)(test)()
    if tally.best is not None:
        _shrink(session)


def _shrink(session: FuzzSession) -> None:
    """Delete steps while the same invariant still breaks, for ``shrink_s`` at most."""
    tally = session.tally
    if tally.best is None:
        return
    steps, first = tally.best
    kinds = {_kind(f) for f in first}
    until = time.monotonic() + session.request.shrink_s
    found: dict[tuple[Step, ...], tuple[Finding, ...]] = {steps: first}

    def fails(candidate: tuple[Step, ...]) -> bool:
        findings = session.execute(candidate)
        _progress(session, findings)
        if kinds & {_kind(f) for f in findings}:
            found[candidate] = findings
            return True
        return False

    best = shrink.shrink(session.target, steps, fails, lambda: time.monotonic() > until)
    tally.best = (best, found[best])


def _kind(finding: Finding) -> str:
    """What makes two findings the same defect: kind and the law, oracle or first words."""
    return f"{finding.kind}:{finding.what.split(':')[0]}"


def _progress(session: FuzzSession, findings: tuple[object, ...]) -> None:
    tally = session.tally
    tally.found += bool(findings)
    elapsed = time.monotonic() - tally.started
    phase = "shrinking" if tally.first_s is not None else "searching"
    forced = sum(forced for forced, _ in tally.injected.values())
    injected = f", {forced} failures injected" if session.target.fault_call else ""
    session.announce(
        f"fuzz {session.request.flavour}: {tally.sequences} sequences, "
        f"{tally.calls} calls, {tally.found} findings{injected}, {elapsed:.0f} s ({phase})"
    )


def _result(session: FuzzSession) -> FuzzResult:
    request, tally = session.request, session.tally
    scenario = None
    if tally.best is not None:
        steps, found = tally.best
        quirks = "-".join(q.lower() for q in request.quirks) or "fixed"
        variant = "" if request.variant == "default" else f"-{request.variant}"
        name = f"fuzz-{request.flavour}-{quirks}-s{request.seed}{variant}"
        scenario = session.scenario_of(steps, name, found, request.scenario_dir).path
    result = FuzzResult(
        run_dir=session.run_dir,
        sequences=tally.sequences,
        calls=tally.calls,
        findings=tally.best[1] if tally.best else (),
        scenario=scenario,
        first_found_s=tally.first_s,
        first_found_sequence=tally.first_sequence,
        shrunk_steps=len(tally.best[0]) if tally.best else None,
        elapsed_s=time.monotonic() - tally.started,
        injected=dict(tally.injected) if session.target.fault_call else None,
    )
    write_json_atomic(
        session.run_dir / "fuzz.json",
        {
            "flavour": request.flavour,
            "quirks": list(request.quirks),
            "seed": request.seed,
            "variant": request.variant,
            "cpus": request.cpus,
            "budget_s": request.budget_s,
            "sequences": result.sequences,
            "calls": result.calls,
            "first_found_s": result.first_found_s,
            "first_found_sequence": result.first_found_sequence,
            "shrunk_steps": result.shrunk_steps,
            "scenario": str(scenario) if scenario else None,
            "findings": [f"{f.kind}: {f.what}" for f in result.findings],
            "notes": tally.notes,
            "injected": {
                name: {"forced": forced, "refused_steps": failed}
                for name, (forced, failed) in (result.injected or {}).items()
            },
            "fault_injection": session.target.fault_call is not None,
            "elapsed_s": result.elapsed_s,
        },
    )
    return result
