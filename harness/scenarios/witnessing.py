"""The witness in a deterministic run: gdb on QEMU's gdbstub from the first instruction.

An input-free guest takes no input, so the harness cannot hand the witness the agent's
handler address once the module is loaded (`harness.agent.witnessed` does that in an SSH
run). Instead QEMU opens its gdbstub from its command line and gdb attaches while the
guest is still stopped (``-S``); gdbside breaks on the kernel's
``perf_event_create_kernel_counter`` and takes the handler the caller passes (``x3``),
then breaks on that as usual (`harness.vm.witness.gdbside`, discovery). After the run
the witnessed overflows are judged against the run's own counts::

    plan = witness_plan(images, cache, spec)               # vmlinux symbols, layouts
    report = judge_witnessed(run, log, spec=scenario.agent, info=flavour.info,
                             nmi_expected=True)
    report.status                                          # "PASS", "FAIL" or "UNJUDGED"

Parts, each a `Judged` with how many it compared: ``counts`` (per CPU, overflows
witnessed = the agent's ``x_nmi_total``), ``complete`` (= the kernel's PMU interrupts
between START and STOP, where the run read them and the PMU was the agent's alone),
``log`` (gdbside's hit count = the overflows logged), and where each overflow produced
exactly one record (PMU sampling on, no injected burst: the harness knows from the
steps), WITNESS's pairing of every record (`harness.agent.oracles.witness`). A report
that compared nothing is UNJUDGED, never PASS.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.agent.flavour import AgentRun
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.evidence import KernelEvidence
from harness.agent.oracles.witness import (
    ORACLE,
    WitnessedRun,
    WitnessVerdict,
    format_witness,
    judge_witness,
    witness_input,
)
from harness.agent.truth.placement import kernel_table
from harness.agent.values.info import FlavourInfo
from harness.agent.values.results import Judged, Violation
from harness.agent.witnessed import WITNESS_DEPTH
from harness.builder.cache import Cache
from harness.builder.images import GuestImages
from harness.vm.witness.offsets import KernelOffsets, kernel_offsets
from harness.vm.witness.records import WitnessLog
from harness.vm.witness.session import Discovery

#: The kernel function whose fourth argument is the overflow handler gdbside breaks on.
CREATE_COUNTER = "perf_event_create_kernel_counter"
Status = Literal["PASS", "FAIL", "UNJUDGED"]

#: vCPUs up to which witnessed attempts are compared with each other (see `WITNESS_ASIDE`).
WITNESSED_CPUS_MAX = 1


def witnessed_attempts(witness: bool, cpus: int) -> tuple[bool, bool]:
    """(every compared attempt witnessed, one more witnessed apart) for a guest of ``cpus``."""
    each = witness and cpus <= WITNESSED_CPUS_MAX
    return each, witness and not each


#: Why a guest of more vCPUs is witnessed in an attempt of its own, not compared.
WITNESS_ASIDE = (
    "the attempts compared ran unwitnessed and one more (witnessed/) was witnessed and judged "
    "apart: with several vCPUs a gdb stop is not deterministic (QEMU 7.2's single TCG thread "
    "runs the next vCPU until the main loop's vm_stop kicks it, a host-timed moment), "
    "measured: two witnessed runs of dt-d1-fixed-4cpu differed in 34 of 196 numbers and in "
    "their witness logs, where two of tprof-tp-d1-quirk (1 vCPU) were identical"
)


@dataclass(frozen=True, slots=True)
class WitnessPlan:
    """What a witnessed deterministic run gives gdbside: where to look, how to read."""

    offsets: KernelOffsets
    discovery: Discovery
    depth: int
    nmi_on: bool


def witness_plan(images: GuestImages, cache: Cache, *, nmi_on: bool) -> WitnessPlan:
    """The plan for ``images``' kernel: `CREATE_COUNTER`'s address, its text, its layouts.

    :raise InfraError: vmlinux has no such function (stripped, or another kernel).
    :raise BuildError: the layouts did not compile.
    """
    table = kernel_table(images.vmlinux)
    discovery = Discovery(at=table.named(CREATE_COUNTER).start, image=table.span)
    return WitnessPlan(kernel_offsets(images, cache), discovery, WITNESS_DEPTH, nmi_on)


@dataclass(frozen=True, slots=True)
class WitnessReport:
    """One witnessed attempt judged: what the witness counted and what held."""

    overflows: Mapping[int, int]  # CPU → overflows witnessed
    agent: Mapping[int, int]  # CPU → the agent's x_nmi_total
    kernel: Mapping[int, int] | None  # CPU → PMU interrupts START..STOP (None: not judged)
    handlers: tuple[int, ...]
    judged: tuple[Judged, ...]
    violations: tuple[Violation, ...]
    pairing: WitnessVerdict | None
    unpaired: str  # why WITNESS's pairing did not apply ("" where it did)
    hits: int
    rereported: int

    @property
    def status(self) -> Status:
        """FAIL on any violation; UNJUDGED where nothing was compared; else PASS."""
        if self.violations:
            return "FAIL"
        return "PASS" if self.compared else "UNJUDGED"

    @property
    def compared(self) -> int:
        """Everything compared, over every part."""
        return sum(j.n for j in self.judged)

    def numbers(self) -> dict[str, int]:
        """The witness's own numbers, beside the run's in the deterministic table."""
        found = {f"witness.{cpu}.overflows": n for cpu, n in self.overflows.items()}
        found["witness.hits"] = self.hits
        found["witness.compared"] = self.compared
        found["witness.violations"] = len(self.violations)
        return found

    def as_dict(self) -> dict[str, object]:
        """``witness.json``: the verdict, its parts and every count, by CPU."""
        return {
            "status": self.status, "compared": self.compared,
            "overflows": {str(c): n for c, n in self.overflows.items()},
            "agent_x_nmi_total": {str(c): n for c, n in self.agent.items()},
            "kernel_pmu_interrupts": None if self.kernel is None
            else {str(c): n for c, n in self.kernel.items()},
            "handlers": [hex(a) for a in self.handlers], "hits": self.hits,
            "rereported": self.rereported,
            "judged": [{"part": j.part, "n": j.n, "what": j.what, "why_none": j.why}
                       for j in self.judged],
            "violations": [str(v) for v in self.violations],
            "pairing": format_witness(self.pairing) if self.pairing else self.unpaired,
        }  # fmt: skip

    def summary(self) -> str:
        """One line for the run's output."""
        cpus = ", ".join(f"CPU {c} {n}" for c, n in self.overflows.items()) or "none"
        parts = ", ".join(f"{j.part or 'pairs'} {j.n}" for j in self.judged)
        return (f"witness: {self.status}: overflows witnessed {cpus}; compared {parts}; "
                f"{len(self.violations)} violation(s)"
                + (f"; records not paired: {self.unpaired}" if self.unpaired else ""))  # fmt: skip


def unjudged_witness(why: str) -> WitnessReport:
    """The report of a witnessed attempt that compared nothing, and ``why``."""
    nothing = Judged(ORACLE, 0, "overflows witnessed", why, part="counts")
    return WitnessReport({}, {}, None, (), (nothing,), (), None, why, -1, 0)


def pairing_applies(spec: AgentSpec, run: AgentRun) -> str:
    """Why WITNESS cannot pair this run's records one to one ("" where it can).

    Chosen by what the harness arranged (the module's parameters, the steps it sent),
    never by the records: each record must be one overflow's.
    """
    if not spec.pmu_produce:
        return "PMU sampling off (pmu_produce = false): records come from injected bursts"
    injections = getattr(run, "injections", None)
    if injections is None or injections.nmi:
        return "the steps inject bursts: one overflow carries several records"
    if not isinstance(run, WitnessedRun):
        return "the run has no samples or counters WITNESS reads"
    return ""


def judge_witnessed(run: AgentRun, log: WitnessLog, *, spec: AgentSpec, info: FlavourInfo,
                    nmi_expected: bool) -> WitnessReport:  # fmt: skip
    """The witnessed overflows against the run's own counts, and its records where they pair."""
    seen = {cpu: len(o) for cpu, o in log.per_cpu().items()}
    numbers = run.numbers()
    agent = {int(name.split(".")[1]): value for name, value in numbers.items()
             if name.startswith("core.") and name.endswith(".x_nmi_total")}  # fmt: skip
    kernel = _kernel_counts(getattr(run, "kernel", None))
    violations: list[Violation] = []
    judged = [_compare("counts", seen, agent, "the agent's x_nmi_total", violations)]
    if kernel is not None:
        judged.append(_compare("complete", seen, kernel, "the kernel's PMU interrupts",
                               violations))  # fmt: skip
    logged = len(log.overflows) + log.rereported
    judged.append(Judged(ORACLE, logged if log.complete else 0, "hits logged as counted",
                         "no overflow logged", part="log"))  # fmt: skip
    if not log.complete:
        violations.append(Violation(ORACLE, None, f"{log.hits} hits logged by gdbside",
                                    f"{logged}", "the witness's log is cut short"))  # fmt: skip
    why = pairing_applies(spec, run)
    verdict = None
    if not why:
        assert isinstance(run, WitnessedRun)
        found = witness_input(run, log, info=info, nmi_expected=nmi_expected)
        verdict = judge_witness(dataclasses.replace(found, interrupts=None))  # judged above
        judged += verdict.judged()
        violations += verdict.violations()
    return WitnessReport(seen, agent, kernel, log.handlers, tuple(judged), tuple(violations),
                         verdict, why, log.hits, log.rereported)  # fmt: skip


def _kernel_counts(kernel: object) -> dict[int, int] | None:
    """CPU → PMU interrupts between START and STOP (None: not read, or the PMU was shared)."""
    if not isinstance(kernel, KernelEvidence) or kernel.pmu_shared:
        return None
    deltas = {cpu: kernel.delta(cpu) for cpu in kernel.before}
    return {cpu: d for cpu, d in sorted(deltas.items()) if d is not None}


def _compare(part: str, seen: Mapping[int, int], theirs: Mapping[int, int], what: str,
             violations: list[Violation]) -> Judged:  # fmt: skip
    """Per CPU, overflows witnessed = ``theirs``; a `Judged` of the overflows that met.

    ``n`` counts overflows on CPUs whose counts met, not CPUs: a run in which no
    overflow happened compared nothing (UNJUDGED).
    """
    met = 0
    for cpu in sorted(set(seen) | set(theirs)):
        if cpu not in theirs:
            violations.append(Violation(ORACLE, cpu, f"{what} read", "none", part))
        elif seen.get(cpu, 0) != theirs[cpu]:
            violations.append(Violation(ORACLE, cpu, f"{theirs[cpu]} overflows witnessed "
                                        f"({what})", f"{seen.get(cpu, 0)}", part))  # fmt: skip
        else:
            met += theirs[cpu]
    return Judged(ORACLE, met, f"overflows witnessed, per CPU = {what}",
                  "no overflow on a CPU whose count met", part=part)  # fmt: skip


def witness_logs_identical(workdirs: Sequence[Path]) -> bool | None:
    """Whether every attempt's witness log holds the same bytes (None: fewer than two)."""
    logs = [w / "witness" / "witness-01.jsonl" for w in workdirs]
    texts = {log.read_bytes() for log in logs if log.is_file()}
    return len(texts) == 1 if len([log for log in logs if log.is_file()]) > 1 else None
