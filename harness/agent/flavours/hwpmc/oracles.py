"""The hwpmc oracles of seeds-spec §7.4 (HW-O1 … HW-O10), as pure checks on one run.

This module is the registry: which oracles there are (`HWPMC_ORACLES`), which apply to
a run and which function checks each. The checks live by group in
`harness.agent.flavours.hwpmc.conservation` (HW-O1 … HW-O3), `.stalls` (HW-O4, HW-O5,
HW-O8), `.lifecycle` (HW-O6, HW-O7, HW-O9) and `.readback` (HW-O10, HW-SC). Each
takes an `HwpmcRun` and returns every way the run breaks its law as readable
`Violation` values; `check_hwpmc` runs every applicable one. Beside each check a
``judge_*`` says what it compared (`Judged`: the calls, entries, records, PMCs or ops
held to its law, never CPUs alone; 0 and why when there were none), and
`judge_hwpmc` gives every applicable oracle's::

    violations = check_hwpmc(run)
    {v.oracle for v in violations}        # {"HW-O6"} for HW-D1 on 40 vCPUs
    judge_hwpmc(run)                      # [..., Judged("HW-O1", 20, "producer calls …"), …]

The shared oracles (IRQ, CALLS, RELEASED, …) run first: they tie the producer calls
HW-O1 starts from to the kernel's own interrupt count and the injections sent.
HW-O2's full rings, HW-O4, HW-O5 and HW-O8 compare with what the harness injected or
ran, HW-O3's log failures with the faults it injected, HW-O9 with the errors §4.4
prescribes and the calls the harness made, HW-O10 with the PMC ids the harness
allocated; none balances with a number the agent derived from the one checked.

Three of the spec's comparisons are not made as the spec words them, because the
port makes them true whatever it does (seeds-spec §7.4; each is explained beside
the check that replaces it):

* HW-O2 ``x_inring ≤ n``: x_inring counts the ring's n slots. Replaced by the ring's
  capacity against the harness's calls: after N calls with sweeps suppressed the ring
  holds min(N, n) (`conservation._full_rings`; mutant ``ring_one_short``).
* HW-O3 ``Σ x_log_failed ≤ buffer_requests_failed``: each failed write is counted
  right after its refused reservation. Replaced by both counts against the
  ``hwpmc_log`` faults the harness injected (`conservation._log_failures`; mutant
  ``log_fail_as_discard``).
* HW-O6 ``log_sweeps ≥ CPUs that recorded``: a machine-wide sum against a count of
  CPUs. Removed: per CPU, HW-O2 and HW-O6's empty rings already say every CPU that
  recorded was swept (`lifecycle.check_coverage`).
"""

from __future__ import annotations

from collections.abc import Callable

from harness.agent.flavours.hwpmc.conservation import (
    check_interrupts,
    check_outcomes,
    check_rings,
    judge_interrupts,
    judge_outcomes,
    judge_rings,
)
from harness.agent.flavours.hwpmc.lifecycle import (
    check_control,
    check_coverage,
    check_release,
    judge_control,
    judge_coverage,
    judge_release,
)
from harness.agent.flavours.hwpmc.readback import (
    check_counting,
    check_records,
    judge_counting,
    judge_records,
)
from harness.agent.flavours.hwpmc.results import HwpmcRun, total
from harness.agent.flavours.hwpmc.stalls import (
    check_fill,
    check_independence,
    check_restart,
    judge_fill,
    judge_independence,
    judge_restart,
)
from harness.agent.judging import Laws
from harness.agent.oracles.core import (
    CORE_ORACLES,
    CoreView,
    core_view_of,
)
from harness.agent.oracles.nmi import check_nmi
from harness.agent.values.results import Judged, Violation

#: Its own oracles, after the shared ones, in report order.
_OWN: tuple[tuple[str, str], ...] = (
    ("HW-O1", "producer calls = ignored + recorded + bufferfull + stalled NMIs, sums match"),
    ("HW-O2", "recorded = swept + in ring; with sweeps suppressed a full ring holds n"),
    ("HW-O3", "swept = logged + log failed + discarded; log = Σ logged; failures = faults"),
    ("HW-O4", "exact fill: min(N, n) recorded, the rest bufferfull; one stall per restart"),
    ("HW-O5", "a sweep with progress empties the ring and restarts; sampling resumes"),
    ("HW-O6", "at quiescence every CPU's ring is empty"),
    ("HW-O7", "runcount 0 after STOP and sweeps; RELEASE: 1 sweep tick per CPU; no stray NMI"),
    ("HW-O8", "stall state per (PMC, CPU): A stays stalled while B sweeps, then restarts"),
    ("HW-O9", "every op gives its §4.4 errno; syscalls and syscall_errors counted exactly"),
    ("HW-O10", "log records: seq 1..N, producing CPU, user flag, pid, 1 ≤ depth ≤ callchaindepth"),
    ("HW-SC", "an SC PMC counts its CPU's cycles from START to STOP, then holds its value"),
    ("NMI", "producer calls in NMI context iff the guest booted with pseudo-NMI"),
)
HWPMC_ORACLES = (*CORE_ORACLES, *_OWN)


def core_view(run: HwpmcRun) -> CoreView:
    """What the shared oracles read of ``run``."""
    return core_view_of(run, run.counters.core, throttling_disabled=run.throttling_disabled)


def applicable_hwpmc_oracles(run: HwpmcRun) -> frozenset[str]:
    """The oracles `check_hwpmc` judges ``run`` by (`LAWS`: ``_APPLIES``)."""
    return LAWS.applicable(run)


def check_hwpmc(run: HwpmcRun) -> list[Violation]:
    """Every violation of every applicable oracle, in `HWPMC_ORACLES` order."""
    return LAWS.check(run)


def judge_hwpmc(run: HwpmcRun) -> list[Judged]:
    """What each applicable oracle of the table compared in ``run``.

    The shared ones as `harness.agent.oracles.core` counts them, the own ones as
    `compared_hwpmc` does.
    """
    return LAWS.judge(run)


def compared_hwpmc(run: HwpmcRun) -> list[Judged]:
    """What each own law of `HWPMC_ORACLES` compared in ``run``, applicable or not."""
    return [judge(run) for judge in _JUDGES.values()]


def judge_nmi(run: HwpmcRun) -> Judged:
    """NMI compared each overflow handler entry and each producer call with its context."""
    core = run.counters.core
    contexts = ("x_producer_calls_nmi", "x_producer_calls_irq", "x_producer_calls_task")
    entries = total(core, "x_nmi_total")
    calls = sum(total(core, name) for name in contexts)
    mode = "on" if run.nmi_expected else "off"
    what = (f"overflow entries and producer calls on {len(core)} CPUs ({entries} and {calls}), "
            f"each held to its context, pseudo-NMI {mode}")  # fmt: skip
    return Judged("NMI", entries + calls, what, why="no overflow and no producer call")


_CHECKS: dict[str, Callable[[HwpmcRun], list[Violation]]] = {
    "HW-O1": check_interrupts,
    "HW-O2": check_rings,
    "HW-O3": check_outcomes,
    "HW-O4": check_fill,
    "HW-O5": check_restart,
    "HW-O6": check_coverage,
    "HW-O7": check_release,
    "HW-O8": check_independence,
    "HW-O9": check_control,
    "HW-O10": check_records,
    "HW-SC": check_counting,
    "NMI": check_nmi,
}


_JUDGES: dict[str, Callable[[HwpmcRun], Judged]] = {
    "HW-O1": judge_interrupts,
    "HW-O2": judge_rings,
    "HW-O3": judge_outcomes,
    "HW-O4": judge_fill,
    "HW-O5": judge_restart,
    "HW-O6": judge_coverage,
    "HW-O7": judge_release,
    "HW-O8": judge_independence,
    "HW-O9": judge_control,
    "HW-O10": judge_records,
    "HW-SC": judge_counting,
    "NMI": judge_nmi,
}

#: When a law applies (which laws its kind exercises; the others always apply). HW-O4
#: judges the fills the plan makes (a busy loop's is the host's timing); a counting run
#: has no sampling PMC, so no producer call whose context NMI could judge.
_APPLIES: dict[str, Callable[[HwpmcRun], bool]] = {
    "HW-O4": lambda run: bool(run.fill),
    "HW-O5": lambda run: bool(run.resume),
    "HW-O6": lambda run: run.spec.drain == "auto",
    "HW-O8": lambda run: run.pair is not None,
    "HW-O9": lambda run: bool(run.ops),
    "HW-SC": lambda run: run.counting is not None,
    "NMI": lambda run: run.kind != "counting",
}
LAWS = Laws(name="hwpmc", oracles=_OWN, checks=_CHECKS, compared=compared_hwpmc,
            core=core_view, applies=_APPLIES)  # fmt: skip
