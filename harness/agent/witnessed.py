"""A run the emulator witnessed: the flavour's standard run, WITNESS beside its oracles.

The witness (`harness.vm.witness`) is armed on the agent's overflow handler at the run's
load (`Agent.witness`), sees every overflow from outside the guest before the agent
does, and WITNESS (`harness.agent.oracles.witness`) holds every record equal to it::

    done = witnessed_run(agent, guest, cache, behaviour("dt"), (0, 1))
    done.violations          # () when every oracle and WITNESS hold
    done.verdict.compared    # samples paired with witnessed overflows

Each witnessed overflow stops the VM for a gdb round trip, and gdb's step over the
breakpoint removes and re-inserts it, each of which makes QEMU invalidate translated code
(the guest slows: measured, not read in 7.2's source), so the run samples at a period
that keeps few witnessed overflows a guest second (`witnessed_rate`, `witnessed_period`).
The guest tests (tests/guest/test_witness.py) and the mutation campaign's ``witness``
case run it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

from harness import timing
from harness.agent.driver import Agent
from harness.agent.flavour import AgentRun, Flavour
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.witness import (
    ORACLE,
    WitnessedRun,
    WitnessVerdict,
    format_witness,
    judge_witness,
    witness_against_truth,
    witness_input,
)
from harness.agent.truth.program import TruthIncomplete
from harness.agent.values.results import Judged, Violation
from harness.builder.cache import Cache
from harness.errors import InfraError
from harness.vm.guest import Guest
from harness.vm.witness.offsets import kernel_offsets
from harness.vm.witness.records import WitnessLog
from harness.vm.witness.session import Witness

#: The mutation campaign's name for this run (`harness.agent.mutants`' ``case``).
WITNESS_CASE = "witness"
#: Overflows per guest second over all vCPUs: 1000 on 2 vCPUs (period 2M) took 94 s of
#: host time for 22 361 overflows, the guest slowed (re-translating, as we read it); 200 took
#: 25 s for 2223 (tprof, 2 vCPUs, one guest on the host), and beside another guest kprof's
#: mix workload once made no call in its 1.1 s phase (its worker never ran): 100; at 100
#: on 6.12 beside CI's 8-vCPU kcsan guest, twice its mix printed nothing in time: 60.
OVERFLOWS_PER_S = 60
#: And at most this many a vCPU: each one stops the vCPU it lands on and slows it. One
#: vCPU at 100 (CI's 1-vCPU tier, kprof, beside another guest): twice its mix workload had
#: not printed its first line when its output was read, 1.5 s after it started; 50 then
#: passed beside CI, and failed so on 6.12 beside its kcsan stage: 30.
PER_VCPU_PER_S = 30
#: Frames the witness walks: the deepest any flavour records (hwpmc's 32) and one more.
WITNESS_DEPTH = 33
#: Oracles a witnessed run does not hold, WITNESS judging those same samples exactly:
#: WHERE's kernel half bounds where the zero workload's kernel time lies, and every
#: witnessed overflow stops the VM, which moves that time into the timer tick (measured,
#: tprof on 2 vCPUs: 36 of 3754 kernel samples in __arch_clear_user, the bound 814);
#: PLACE and PROBE expect a sample on each busy CPU and in each 200 ms IRQ-off window, a
#: density the standard period gives and the witnessed one (10 to 320 times longer) does
#: not (tprof, 8 vCPUs at 25 overflows a second: a busy CPU with none, a probe with none).
MODELLED_ASIDE = ("WHERE", "PLACE", "PROBE")
#: Runs made while a workload had not finished its phase when read (`TruthIncomplete`):
#: the witness slows the guest, and beside other guests one kprof run read its chain
#: workload's output before its phase ended; or where no overflow landed in the
#: workloads' text (`witnessed_run`). The run is repeated; a verdict never is.
ATTEMPTS = 3
LOG = logging.getLogger(__name__)


TRUTH_PART = "witnessed overflows in the workload's text held to its pid and threads (WHO)"


@dataclass(frozen=True, slots=True)
class Witnessed:
    """A witnessed run: the flavour's run, WITNESS's verdict, what failed, the report."""

    run: AgentRun
    verdict: WitnessVerdict
    violations: tuple[Violation, ...]
    judged: tuple[Judged, ...]
    report: str
    armed_s: float  # host seconds the guest ran with the breakpoint in


def witnessed_rate(cpus: int, host_cores: int) -> float:
    """Overflows per guest second a witnessed run of ``cpus`` vCPUs aims at, all together.

    `OVERFLOWS_PER_S`, at most `PER_VCPU_PER_S` each, shared by the host's cores where
    the vCPUs outnumber them: every
    gdb stop pauses each vCPU thread and waits for it, and a thread the host has
    descheduled is waited for longest (measured, 8 vCPUs on 2 cores at 100 a second,
    beside another guest: 131 s for kprof's run, two command budgets spent).
    """
    return min(PER_VCPU_PER_S * cpus, OVERFLOWS_PER_S * min(1.0, host_cores / cpus))


def witnessed_period(cpus: int, cycles_per_ns: float, host_cores: int | None = None) -> int:
    """The sampling period that keeps ``cpus`` vCPUs at `witnessed_rate` together."""
    cores = host_cores if host_cores is not None else os.cpu_count() or 1
    return int(cycles_per_ns * 1e9 * cpus / witnessed_rate(cpus, cores))


def witnessed_run(agent: Agent, guest: Guest, cache: Cache, flavour: Flavour,
                  cpus: Sequence[int]) -> Witnessed:  # fmt: skip
    """``flavour``'s standard run on ``cpus`` with the witness armed, judged by all.

    A run is made again, up to `ATTEMPTS` in all, while its evidence is missing: a
    workload had not finished its phase (`TruthIncomplete`), or, with nothing failed,
    the witness saw no overflow in the workloads' text, so its truth part compared
    nothing. At the witnessed rate that is a draw of a few, not a verdict (8 vCPUs on 2
    cores, 15 overflows a second: kprof's workloads' text held 0 of 56 and 5 of 64
    overflows in two runs on 6.1, and 0 on 6.12); a run with a violation is never made
    again.

    :raise InfraError: the guest's clock rate is unknown, or the run is not one WITNESS reads.
    """
    if agent.cycles_per_ns is None:
        raise InfraError("a witnessed run needs the cycle counter's rate (arm64 under TCG)")
    spec = AgentSpec(flavour=flavour.name, period=witnessed_period(len(cpus), agent.cycles_per_ns))
    offsets = kernel_offsets(guest.images, cache)
    for attempt in range(1, ATTEMPTS + 1):
        with timing.stage(timing.WITNESS), Witness(
            guest.vm.qmp, offsets, agent.workdir / f"witness-{attempt}", guest.timeouts,
            depth=WITNESS_DEPTH, nmi_on=guest.spec.nmi,
        ) as witness:  # fmt: skip
            agent.witness = witness
            try:
                run = flavour.standard_run(agent, spec, tuple(cpus))
            except TruthIncomplete as exc:  # evidence missing, not a verdict: once more
                if attempt == ATTEMPTS:
                    raise
                LOG.warning("witnessed %s run, attempt %d: %s", flavour.name, attempt, exc)
                continue
            finally:
                agent.witness = None
            log = witness.disarm()
        timing.tally(timing.WITNESS, len(log.overflows))  # every attempt's, as its time
        done = _judged(agent, flavour, spec, run, log, armed_s=witness.armed_s, attempt=attempt)
        if not again(done, attempt):
            return done
        LOG.warning("witnessed %s run, attempt %d: no witnessed overflow in the workloads' "
                    "text (WITNESS's truth part compared nothing): once more",
                    flavour.name, attempt)  # fmt: skip
    raise AssertionError("unreachable: the last attempt returns")


def again(done: Witnessed, attempt: int) -> bool:
    """Whether a witnessed run is made again: its truth part compared nothing.

    And nothing failed, and `ATTEMPTS` are not used up. Chosen by the witness's own
    evidence (its overflows in the workloads' text), never by the agent's values.
    """
    truth = [j for j in done.judged if j.oracle == "WITNESS" and j.part == "truth"]
    return not done.violations and not any(j.n for j in truth) and attempt < ATTEMPTS


def _judged(agent: Agent, flavour: Flavour, spec: AgentSpec, run: AgentRun, log: WitnessLog, *,
            armed_s: float, attempt: int) -> Witnessed:  # fmt: skip
    """One witnessed run judged: its flavour's oracles (`MODELLED_ASIDE` aside) and WITNESS."""
    if not isinstance(run, WitnessedRun):
        raise InfraError(f"{flavour.name}'s standard run has no samples or counters to witness")
    verdict = judge_witness(witness_input(run, log, info=flavour.info,
                                          nmi_expected=agent.nmi_expected_for(spec)))  # fmt: skip
    truth, truth_n = witness_against_truth(log, run.content())
    held = [v for v in flavour.check(run) if v.oracle not in MODELLED_ASIDE]
    violations = (*held, *verdict.violations(), *truth)
    judged = (*(j for j in flavour.judged(run) if j.oracle not in MODELLED_ASIDE),
              *verdict.judged(),
              Judged(ORACLE, truth_n, TRUTH_PART, "none in its text", part="truth"))  # fmt: skip
    cost = (f"witness: armed {armed_s:.1f} s for {verdict.overflows} overflows"
            f" ({1000 * armed_s / max(verdict.overflows, 1):.1f} s per 1000), attempt {attempt}"
            f" of at most {ATTEMPTS}")  # fmt: skip
    report = f"{flavour.report(run, list(violations))}\n{format_witness(verdict)}\n{cost}"
    (agent.workdir / "report-witness.txt").write_text(report + "\n")
    return Witnessed(run, verdict, violations, judged, report, armed_s)
