"""Evidence the agent does not produce: the kernel's interrupt counts and what the harness sent.

The oracles in `harness.agent.oracles.core` balance the agent's counters against
these, never against numbers the agent derived from what is being checked::

    before = parse_interrupts(lines, "arm-pmu")      # CPU → PMU interrupts handled so far
    KernelEvidence("arm-pmu", before, after, idle, idle_ms=300)
    injections_of(steps, online=(0, 1))              # what the steps injected, per CPU

The kernel counts every PMU interrupt it handles per CPU in ``/proc/interrupts``
(the IRQ core does, before the PMU driver runs), so the delta over a run is an
exact count of delivered overflows wherever the agent is the only PMU user.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from harness.agent.module.spec import AgentSpec
from harness.agent.peer.counts import PeerEvidence
from harness.agent.steps import DEBUGFS
from harness.agent.truth.nmigraph import NmiGraph
from harness.agent.truth.program import TruthEvidence
from harness.errors import InfraError

PROC_INTERRUPTS = "/proc/interrupts"
#: How long the harness watches the PMU stay quiet after STOP (oracle RELEASED).
IDLE_MS = 300
#: Steps that make producer calls: ``inject`` (ctx nmi: one burst; ctx task) and a
#: flavour's ``nest`` hook (one burst inside a held-open window).
_INJECT = re.compile(
    rf"^write:{re.escape(DEBUGFS)}/(?:inject|nest):cpu=(\w+) count=(\d+)(?: ctx=(\w+))?$"
)
_HOTPLUG = re.compile(r"^write:/sys/devices/system/cpu/cpu(\d+)/online:([01])$")


@dataclass(frozen=True, slots=True)
class KernelEvidence:
    """PMU interrupts the guest kernel handled, per CPU, read around one run.

    ``before`` is read before the agent's sources start, ``after`` right after they
    stopped, ``idle`` ``idle_ms`` later. A CPU offline at a read has no column then.
    ``pmu_shared`` says another PMU user (the perf peer) ran beside the agent, so
    interrupts are not the agent's alone.
    """

    label: str
    before: Mapping[int, int]
    after: Mapping[int, int]
    idle: Mapping[int, int]
    idle_ms: int = IDLE_MS
    pmu_shared: bool = False

    def delta(self, cpu: int) -> int | None:
        """Interrupts handled on ``cpu`` between START and STOP; None if it was offline."""
        if cpu not in self.before or cpu not in self.after:
            return None
        return self.after[cpu] - self.before[cpu]

    def after_stop(self, cpu: int) -> int | None:
        """Interrupts handled on ``cpu`` in the idle window after STOP; None if offline."""
        if cpu not in self.after or cpu not in self.idle:
            return None
        return self.idle[cpu] - self.after[cpu]


@dataclass(frozen=True, slots=True)
class Injections:
    """What the harness's inject steps asked for, per CPU.

    ``nmi`` counts producer calls injected as NMI bursts, ``bursts`` the bursts
    themselves (each rides one overflow, which then produces the burst instead of
    its own sample), ``task`` the calls injected in task context.
    """

    nmi: Mapping[int, int] = field(default_factory=dict)
    bursts: Mapping[int, int] = field(default_factory=dict)
    task: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunEvidence:
    """What every flavour's run carries beside its own records: its spec, and evidence.

    Each flavour's run type (``harness/agent/flavours/<name>/results.py``) extends it
    with its records and counters; the shared oracles (`harness.agent.oracles.core`)
    read only this part. The evidence fields are keyword-only: they come after every
    flavour's own fields.
    """

    spec: AgentSpec
    #: PMU interrupts the guest kernel counted around the run (None: not read).
    kernel: KernelEvidence | None = field(default=None, kw_only=True)
    #: What the harness's steps injected, per CPU (the CALLS oracle's evidence).
    injections: Injections = field(default_factory=Injections, kw_only=True)
    #: The guest's clocks counted instructions (-icount shift=0): time budgets (C-3) apply.
    instruction_clock: bool = field(default=False, kw_only=True)
    #: Linux perf beside the agent: its counts in the agent's window, both profiles
    #: (None: no peer ran).
    peer: PeerEvidence | None = field(default=None, kw_only=True)
    #: The ground-truth workloads, their image and the module's functions (None: none ran).
    truth: TruthEvidence | None = field(default=None, kw_only=True)
    #: What the built module's NMI entry reaches (C-2's graph; None: not read).
    nmi_graph: NmiGraph | None = field(default=None, kw_only=True)


def parse_interrupts(lines: Sequence[str], label: str) -> dict[int, int]:
    """CPU → count of the ``/proc/interrupts`` line whose name ends with ``label``.

    :raise InfraError: no header, no such line, or a count that is not a number.
    """
    if not lines or not lines[0].split():
        raise InfraError(f"{PROC_INTERRUPTS} has no header line")
    cpus = [int(name.removeprefix("CPU")) for name in lines[0].split()]
    for line in lines[1:]:
        fields = line.split()
        if len(fields) <= len(cpus) or not " ".join(fields[1 + len(cpus) :]).endswith(label):
            continue
        counts = fields[1 : 1 + len(cpus)]
        if not all(c.isdigit() for c in counts):
            raise InfraError(f"malformed {PROC_INTERRUPTS} line: {line!r}")
        return dict(zip(cpus, map(int, counts), strict=True))
    raise InfraError(f"{PROC_INTERRUPTS} has no {label!r} line: is the PMU driver bound?")


def is_injection(step: str) -> bool:
    """Whether ``step`` makes producer calls (``inject`` or a flavour's ``nest``)."""
    return _INJECT.match(step) is not None


def injections_of(steps: Iterable[str], online: Iterable[int]) -> Injections:
    """The injections ``steps`` make, with ``cpu=all`` meaning the CPUs online then.

    Online CPUs are followed through the steps' hotplug writes.
    """
    up = set(online)
    nmi: dict[int, int] = {}
    bursts: dict[int, int] = {}
    task: dict[int, int] = {}
    for step in steps:
        if hotplug := _HOTPLUG.match(step):
            cpu = int(hotplug[1])
            (up.add if hotplug[2] == "1" else up.discard)(cpu)
        elif inject := _INJECT.match(step):
            targets = sorted(up) if inject[1] == "all" else [int(inject[1])]
            count = int(inject[2])
            for cpu in targets:
                if inject[3] == "task":
                    task[cpu] = task.get(cpu, 0) + count
                else:
                    nmi[cpu] = nmi.get(cpu, 0) + count
                    bursts[cpu] = bursts.get(cpu, 0) + 1
    return Injections(nmi=nmi, bursts=bursts, task=task)


def interrupt_reads(
    lines: Sequence[Sequence[str]], label: str, *, pmu_shared: bool = False
) -> KernelEvidence:
    """`KernelEvidence` from the three ``/proc/interrupts`` reads of a run, in order.

    :raise InfraError: the run did not read it three times.
    """
    if len(lines) != 3:
        raise InfraError(f"a run reads {PROC_INTERRUPTS} 3 times, this one {len(lines)}")
    before, after, idle = (parse_interrupts(text, label) for text in lines)
    return KernelEvidence(label, before, after, idle, pmu_shared=pmu_shared)


KMEMLEAK = "/sys/kernel/debug/kmemleak"
#: kmemleak reports nothing younger than this (its jiffies_min_age, 5 s), so a scan
#: waits that long after the last allocation it must judge.
KMEMLEAK_MIN_AGE_S = 5


def kmemleak_command() -> str:
    """A guest command that prints kmemleak's report, then clears it.

    Run it while the module is still loaded, so the backtraces can name it. It
    waits out kmemleak's minimum age and scans twice: an object is reported only
    once its checksum held still for one scan.
    """
    return (
        f"sleep {KMEMLEAK_MIN_AGE_S + 1} && echo scan > {KMEMLEAK} && echo scan > {KMEMLEAK} "
        f"&& cat {KMEMLEAK} && echo clear > {KMEMLEAK}"
    )


def module_leaks(report: str, module: str) -> list[str]:
    """Each ``unreferenced object`` block of a kmemleak report that names ``module``.

    The kernel prints a loaded module's symbols as ``name+0x../0x.. [module]``.
    """
    blocks = [f"unreferenced object{part}" for part in report.split("unreferenced object")[1:]]
    return [block.strip() for block in blocks if f"[{module}]" in block]
