"""The witness's breakpoint, run inside ``gdb-multiarch`` (``gdb -batch -x gdbside.py``).

Not imported by the harness: gdb runs it with its own Python and its ``gdb`` module.
It reads its configuration from the JSON file named by ``$PROFBENCH_WITNESS`` (written
by `harness.vm.witness.session`): the gdbstub's port, the handler's address, the
kernel's layouts (`harness.vm.witness.offsets`), the walk's depth, the output file.

At each hit on the handler's first instruction (``x2`` is the ``struct pt_regs *`` the
perf core passes an overflow handler) it writes one JSON line, before any instruction
of the handler runs::

    {"cpu": 1, "pc": ..., "pstate": ..., "pmr": ..., "current": ..., "pid": 212,
     "tgid": 212, "preempt": 1114113, "event": ..., "count": 52000113,
     "chain": [...], "stop": "end"}

``pid`` is the kernel's (the thread id), ``tgid`` the process id. ``event`` (``x0``) and
its ``count``, which the PMU driver updated before calling the handler, tell a second
report of one hit from a new overflow (`harness.vm.witness.records`). ``chain``: the
callers' return addresses read from the frame records, innermost first, walked by the
contract's rule (``guest/agent/README.md``): the PC counts as the first of ``depth``
frames; a zero frame pointer or return address ends the walk; a misaligned or
non-ascending one, or a user one above the user address space, is ``bad_fp``; a kernel
frame outside the task's stack is ``off_stack``; an unreadable one ``fault``; reaching
``depth`` frames is ``truncated``. A hit in the kernel also walks its task's user
stack, as the kernel saved it at the task's last entry (``task_pt_regs``: the top of its
kernel stack), by the same rule: ``user_walk`` is that user PC, then its callers, and
``user_stop`` why it ended, ``no_regs`` for a task with no user context (no ``mm``, or
``PF_KTHREAD``; the agent's third case, a 32-bit task, is not read: the guest's rootfs
has none). That walk reads the task's user memory only where the CPU's loaded
``TTBR0_EL1`` holds the task's own page table (``ttbr0`` beside ``pgd_phys``, the
physical address of its ``mm->pgd``); elsewhere it is ``foreign_ttbr0``, with no frames:
the user addresses there are another address space's. It then returns False, so gdb
resumes the guest.

SIGINT (from the session, to gdb's own PID) interrupts the guest: the breakpoint is
deleted, gdb detaches (the guest runs on) and writes its last line, ``{"end": hits}``.
A guest that powers off ends the session the same way (QEMU closes the gdbstub).

**Discovery** (``"address": null`` and ``"discover": {"at": ..., "image": [lo, hi]}``):
an input-free guest cannot be told the handler's address after the module loaded, so
gdb breaks on the kernel's ``perf_event_create_kernel_counter`` (``at``, from
vmlinux) and reads its fourth argument, ``x3``, the overflow handler the caller passes.
A non-NULL one outside the kernel image (``[lo, hi)``: a module's) becomes the overflow
breakpoint from then on, and its line says so: ``{"handler": ..., "cpu": 0}``. The
kernel hands over that address, not the agent. A Python ``stop`` may not add a
breakpoint (gdb's manual), so the discovery stops the guest and the main loop adds it.
"""

import json
import os
import struct
from typing import IO, Any

import gdb  # type: ignore[import-untyped]

with open(os.environ["PROFBENCH_WITNESS"]) as _config:
    CONFIG: dict[str, Any] = json.load(_config)
OFF: dict[str, int] = CONFIG["offsets"]
DEPTH = int(CONFIG["depth"])
MASK = (1 << 64) - 1
#: TTBR0_EL1's table base: its ASID (bits 63:48) and CnP (bit 0) masked off.
TABLE_BASE = ((1 << 48) - 1) & ~1
HITS = [0]


def _u64(value: Any) -> int:
    return int(value) & MASK


def _read(address: int, size: int) -> bytes:
    return bytes(gdb.selected_inferior().read_memory(address, size))


def _frame_rule(fp: int, user: bool, stack: int) -> str | None:
    """Why no frame record can be read at ``fp`` (None: it may)."""
    if fp == 0:
        return "end"
    if fp % 8 or (user and fp >= OFF["task_size_user"] - 16):
        return "bad_fp"
    if not user and not (stack <= fp and fp + 16 <= stack + OFF["thread_size_bytes"]):
        return "off_stack"
    return None


def _walk(fp: int, user: bool, stack: int) -> tuple[list[int], str]:
    """The callers' return addresses from frame pointer ``fp``, and why the walk ended."""
    chain: list[int] = []
    while len(chain) + 1 < DEPTH:
        why = _frame_rule(fp, user, stack)
        if why is not None:
            return chain, why
        try:
            following, ret = struct.unpack("<QQ", _read(fp, 16))
        except gdb.MemoryError:
            return chain, "fault"
        if ret == 0:
            return chain, "end"
        chain.append(ret)
        if following and following <= fp:
            return chain, "bad_fp"
        fp = following
    return chain, "truncated"


def _physical(address: int, cpu: int) -> int | None:
    """Where QEMU's own MMU walk on ``cpu`` puts ``address`` (None: unmapped).

    HMP's ``gva2gpa`` through the gdbstub's monitor, on the CPU that hit (at EL1 in the
    handler, so a kernel address translates); measured at about 0.25 ms a call on 6.1.
    """
    gdb.execute(f"monitor cpu {cpu}", to_string=True)
    said = gdb.execute(f"monitor gva2gpa {address:#x}", to_string=True).split()
    return int(said[1], 16) if len(said) == 2 and said[0] == "gpa:" else None


def _user_walk(current: int, stack: int, cpu: int) -> dict[str, Any]:
    """The task's user PC and callers at its last kernel entry, why the walk ended, TTBR0.

    Walked only where TTBR0_EL1 holds the task's own table (its ``mm->pgd``, translated
    by `_physical`): else ``foreign_ttbr0``, as mid ``switch_mm`` (TTBR0 is the next
    task's while ``current`` is still the previous one), and ``ttbr0``/``pgd_phys`` say why.
    """
    (mm,) = struct.unpack("<Q", _read(current + OFF["task_mm"], 8))
    (flags,) = struct.unpack("<I", _read(current + OFF["task_flags"], 4))
    if not mm or flags & OFF["pf_kthread_bits"]:
        return {"user_walk": [], "user_stop": "no_regs"}
    (pgd,) = struct.unpack("<Q", _read(mm + OFF["mm_pgd"], 8))
    ttbr0 = _u64(gdb.selected_frame().read_register("TTBR0_EL1"))
    found: dict[str, Any] = {"ttbr0": ttbr0, "pgd_phys": _physical(pgd, cpu)}
    if ttbr0 & TABLE_BASE != found["pgd_phys"]:
        return found | {"user_walk": [], "user_stop": "foreign_ttbr0"}
    raw = _read(stack + OFF["thread_size_bytes"] - OFF["regs_size"], OFF["regs_size"])
    pc, fp = (struct.unpack_from("<Q", raw, OFF[name])[0] for name in ("regs_pc", "regs_fp"))
    callers, why = _walk(fp, True, stack)
    return found | {"user_walk": [pc, *callers], "user_stop": why}


class Overflow(gdb.Breakpoint):  # type: ignore[misc]
    """The breakpoint on the handler's first instruction: one line per hit, never a stop."""

    def __init__(self, address: int, out: IO[str]) -> None:
        super().__init__(f"*{address:#x}", internal=True)
        self.out = out

    def stop(self) -> bool:
        """Record this hit; False: gdb resumes the guest at once."""
        frame = gdb.selected_frame()
        event, regs = _u64(frame.read_register("x0")), _u64(frame.read_register("x2"))
        (count,) = struct.unpack("<Q", _read(event + OFF["event_count"], 8))
        raw = _read(regs, OFF["regs_size"])
        pc, pstate, pmr, fp = (
            struct.unpack_from("<Q", raw, OFF[name])[0]
            for name in ("regs_pc", "regs_pstate", "regs_pmr_save", "regs_fp")
        )
        current = _u64(frame.read_register("SP_EL0"))
        pid, tgid = struct.unpack("<ii", _read(current + OFF["task_pid"], 8))
        (preempt,) = struct.unpack("<I", _read(current + OFF["task_preempt_count"], 4))
        (stack,) = struct.unpack("<Q", _read(current + OFF["task_stack"], 8))
        user = (pstate & OFF["psr_mode_mask_bits"]) == OFF["psr_mode_el0t"]
        chain, why = _walk(fp, user, stack) if DEPTH > 1 else ([], "truncated")
        cpu = gdb.selected_thread().ptid[1] - 1
        record = {
            "cpu": cpu,
            "pc": pc,
            "pstate": pstate,
            "pmr": pmr,
            "current": current,
            "pid": pid,
            "tgid": tgid,
            "preempt": preempt,
            "event": event,
            "count": count,
            "chain": chain,
            "stop": why,
        }
        if not user and DEPTH > 1:
            record.update(_user_walk(current, stack, cpu))
        self.out.write(json.dumps(record, separators=(",", ":")) + "\n")
        HITS[0] += 1
        return False


class Discovery(gdb.Breakpoint):  # type: ignore[misc]
    """The breakpoint on ``perf_event_create_kernel_counter``: a module's handler, once each."""

    def __init__(self, at: int, image: tuple[int, int], out: IO[str]) -> None:
        super().__init__(f"*{at:#x}", internal=True)
        self.text, self.out = image, out
        self.seen_handlers: set[int] = set()
        self.new_handlers: list[int] = []

    def stop(self) -> bool:
        """True (the guest stops) for a handler not seen before: the main loop breaks on it."""
        handler = _u64(gdb.selected_frame().read_register("x3"))
        if is_new_handler(handler, self.text, self.seen_handlers):
            self.seen_handlers.add(handler)
            self.new_handlers.append(handler)
            cpu = gdb.selected_thread().ptid[1] - 1
            self.out.write(json.dumps({"handler": handler, "cpu": cpu}) + "\n")
            return True
        return False


def is_new_handler(handler: int, image: tuple[int, int], known: set[int]) -> bool:
    """Whether ``handler`` is a module's overflow handler not broken on yet.

    NULL (a counting event) and the kernel's own (its watchdog's) are not.
    """
    return handler != 0 and not image[0] <= handler < image[1] and handler not in known


def _run(out: IO[str], points: list[gdb.Breakpoint]) -> None:
    """Break (into ``points``), signal ready, run until the guest is interrupted or gone."""
    address, discover = CONFIG.get("address"), CONFIG.get("discover")
    if address is not None:
        points.append(Overflow(int(address), out))
    finder = None
    if discover is not None:
        image = (int(discover["image"][0]), int(discover["image"][1]))
        finder = Discovery(int(discover["at"]), image, out)
        points.append(finder)
    with open(CONFIG["ready"], "w") as ready:  # inserted: the guest may START
        ready.write("ready\n")
    while True:
        gdb.execute("continue")
        if finder is None or not finder.new_handlers:  # SIGINT, or the guest powered off
            return
        points += [Overflow(handler, out) for handler in finder.new_handlers]
        finder.new_handlers.clear()


def main() -> None:
    """Attach, break, run until SIGINT or power-off, say how many, then delete and detach."""
    for command in (
        "set pagination off",
        "set confirm off",
        "set architecture aarch64",
        "set breakpoint always-inserted on",
    ):
        gdb.execute(command)
    gdb.execute(f"target remote 127.0.0.1:{CONFIG['port']}")
    points: list[gdb.Breakpoint] = []
    with open(CONFIG["out"], "w") as out:
        try:
            _run(out, points)
        except gdb.error as exc:  # the gdbstub closed under a running continue
            out.write(json.dumps({"closed": str(exc)}) + "\n")
        finally:
            out.write(json.dumps({"end": HITS[0]}) + "\n")
    try:  # a guest that powered off has no gdbstub left to delete them from
        for point in points:
            point.delete()
        gdb.execute("detach")
    except gdb.error:
        pass


main()
