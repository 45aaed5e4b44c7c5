"""What the witness saw of one overflow, parsed from the lines `gdbside` writes.

::

    log = parse_log(text, offsets, nmi_on=True)
    log.overflows[0]    # Overflow(cpu=1, pc=0xffff..., user=False, pid=212, tid=212, ...)
    log.per_cpu()       # {cpu: (Overflow, ...)} in the order each vCPU took them

Pure: no guest, no gdb.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from harness.errors import InfraError
from harness.vm.witness.offsets import KernelOffsets

#: The walk's stop causes, as `gdbside` names them (the agent's enum pa_chain_stop's, in
#: its order): a walk from registers ends by one of the first five, and a user walk of a
#: task with no user context is ``no_regs``.
STOPS = ("end", "truncated", "bad_fp", "off_stack", "fault", "no_regs")
#: The witness's own cause for a user walk it did not make: the CPU's TTBR0_EL1 did not
#: hold the task's page table (mid ``switch_mm``, say), so its user addresses were not
#: the task's. The agent has no such cause; WITNESS does not judge that user stack.
FOREIGN_TTBR0 = "foreign_ttbr0"


@dataclass(frozen=True, slots=True)
class Overflow:
    """One overflow as the kernel handed it to the agent, read from outside the guest.

    ``pid`` is the process (the kernel's tgid), ``tid`` the thread (the kernel's pid),
    as the agent's samples name them. ``nmi``: the handler was entered in NMI context
    (the preempt count's NMI bits, set by the kernel's ``nmi_enter``). ``irqs_masked``:
    the interrupted context had IRQs masked (PSTATE.I, or with pseudo-NMI a priority
    mask above IRQs in the saved PMR), so only an NMI could interrupt it.
    ``user_walk`` and ``user_stop``: for an overflow in the kernel, its task's user PC
    at its last kernel entry then that PC's callers, and why that walk ended (None: an
    overflow in user mode, whose chain is its user walk). ``ttbr0`` and ``pgd_phys``:
    where the task has a user context, the CPU's TTBR0_EL1 and the physical address of
    the task's ``mm->pgd`` the witness held it against (None: not read, or unmapped).
    """

    cpu: int
    pc: int
    user: bool
    pid: int
    tid: int
    nmi: bool
    irqs_masked: bool
    chain: tuple[int, ...]
    stop: str
    event: int = 0  # the overflowing perf_event's address
    count: int = 0  # its count as the driver left it before the handler ran
    user_walk: tuple[int, ...] = ()
    user_stop: str | None = None
    ttbr0: int | None = None
    pgd_phys: int | None = None

    @property
    def frames(self) -> int:
        """The walk's frames, the PC included (the agent's ``length``)."""
        return len(self.chain) + 1


@dataclass(frozen=True, slots=True)
class WitnessLog:
    """Every overflow one armed witness saw, in the order it saw them."""

    overflows: tuple[Overflow, ...]
    hits: int  # what gdbside counted at detach (-1: it never wrote its last line)
    #: Hits that were one handover reported again (same vCPU, event and count as the
    #: hit before it there): gdb's step over the breakpoint, cut short by another vCPU's
    #: stop, reports it twice. Not overflows; counted so the report can say so.
    rereported: int = 0
    #: Overflow handlers gdbside found passed to ``perf_event_create_kernel_counter`` and
    #: broke on (discovery mode; empty where the harness gave the address).
    handlers: tuple[int, ...] = ()

    def per_cpu(self) -> dict[int, tuple[Overflow, ...]]:
        """CPU → its overflows, in the order the vCPU took them."""
        cpus: dict[int, list[Overflow]] = {}
        for overflow in self.overflows:
            cpus.setdefault(overflow.cpu, []).append(overflow)
        return {cpu: tuple(seen) for cpu, seen in sorted(cpus.items())}

    @property
    def complete(self) -> bool:
        """Whether gdbside detached cleanly and every hit it counted is in the log."""
        return self.hits == len(self.overflows) + self.rereported


def overflow_of(line: Mapping[str, object], offsets: KernelOffsets, *, nmi_on: bool) -> Overflow:
    """One of `gdbside`'s hit lines as an `Overflow` (``nmi_on``: the guest uses pseudo-NMI)."""
    pstate, pmr, preempt = (int(str(line[k])) for k in ("pstate", "pmr", "preempt"))
    masked = bool(pstate & offsets.psr_i) or (nmi_on and pmr != offsets.prio_irqon)
    chain = line["chain"]
    if not isinstance(chain, list):
        raise InfraError(f"witness line without a chain list: {dict(line)}")
    stop = str(line["stop"])
    user_stop = None if line.get("user_stop") is None else str(line["user_stop"])
    for cause, known in ((stop, STOPS), (user_stop, (*STOPS, FOREIGN_TTBR0))):
        if cause is not None and cause not in known:
            raise InfraError(f"witness line with an unknown stop cause {cause!r}")
    user_walk = line.get("user_walk", [])
    if not isinstance(user_walk, list):
        raise InfraError(f"witness line whose user walk is not a list: {dict(line)}")
    return Overflow(
        cpu=int(str(line["cpu"])),
        pc=int(str(line["pc"])),
        user=(pstate & offsets.psr_mode_mask_bits) == offsets.psr_mode_el0t,
        pid=int(str(line["tgid"])),
        tid=int(str(line["pid"])),
        nmi=bool(preempt & offsets.nmi_mask_bits),
        irqs_masked=masked,
        chain=tuple(int(a) for a in chain),
        stop=stop,
        event=int(str(line.get("event", 0))),
        count=int(str(line.get("count", 0))),
        user_walk=tuple(int(a) for a in user_walk),
        user_stop=user_stop,
        ttbr0=_optional_int(line.get("ttbr0")),
        pgd_phys=_optional_int(line.get("pgd_phys")),
    )


def _optional_int(value: object) -> int | None:
    return None if value is None else int(str(value))


def parse_log(text: str, offsets: KernelOffsets, *, nmi_on: bool) -> WitnessLog:
    """Every overflow `gdbside` wrote, each once; a last line cut short by a kill is left out.

    Discovery lines (``handler``) name the handlers broken on; a ``closed`` line (the
    gdbstub went away under gdb) is skipped.

    A hit with the vCPU, event and count of that vCPU's hit before it is one handover
    reported again (`WitnessLog.rereported`): the driver advances the count by a period
    at every overflow before calling the handler.

    :raise InfraError: a line is not one gdbside writes.
    """
    overflows: list[Overflow] = []
    handlers: list[int] = []
    last: dict[int, Overflow] = {}
    hits, rereported = -1, 0
    lines = text.splitlines()
    for number, raw in enumerate(lines, 1):
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:
            if number == len(lines):  # gdb was killed mid-write
                break
            raise InfraError(f"witness line {number} is not JSON: {raw[:80]!r}") from None
        if "end" in line:
            hits = int(line["end"])
            continue
        if "handler" in line:
            handlers.append(int(line["handler"]))
            continue
        if "closed" in line:  # the gdbstub went away under gdb (the guest powered off)
            continue
        overflow = overflow_of(line, offsets, nmi_on=nmi_on)
        before = last.get(overflow.cpu)
        if before is not None and (before.event, before.count) == (overflow.event, overflow.count):
            rereported += 1
            continue
        last[overflow.cpu] = overflow
        overflows.append(overflow)
    return WitnessLog(tuple(overflows), hits, rereported, tuple(handlers))
