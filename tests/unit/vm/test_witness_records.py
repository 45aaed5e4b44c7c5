"""The witness's pure parts: the kernel's offsets as compiled, and gdbside's lines."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.errors import BuildError, InfraError
from harness.vm.witness.offsets import KernelOffsets, parse_offsets
from harness.vm.witness.records import parse_log

# What 6.1's arm64 build printed for guest/witness/offsets.c (the order is the source's).
ASSEMBLY_6_1 = {
    "TASK_PID": 912, "TASK_TGID": 916, "TASK_STACK": 32, "TASK_PREEMPT_COUNT": 8,
    "TASK_MM": 768, "TASK_FLAGS": 44, "PF_KTHREAD_BITS": 2097152, "MM_PGD": 56,
    "EVENT_COUNT": 176, "REGS_FP": 232, "REGS_SP": 248, "REGS_PC": 256, "REGS_PSTATE": 264,
    "REGS_PMR_SAVE": 296, "REGS_SIZE": 336, "THREAD_SIZE_BYTES": 16384,
    "TASK_SIZE_USER": 549755813888, "NMI_MASK_BITS": 15728640, "PSR_I": 128,
    "PSR_MODE_MASK_BITS": 15, "PSR_MODE_EL0T": 0, "PRIO_IRQON": 224,
}  # fmt: skip


def assembly(values: dict[str, int]) -> str:
    return "".join(f'\t.ascii "->{k} {v} offsetof(...)"\t//\n' for k, v in values.items())


OFFSETS = parse_offsets(assembly(ASSEMBLY_6_1))


def test_every_field_is_read_from_its_line() -> None:
    assert OFFSETS.task_tgid == 916
    assert OFFSETS.prio_irqon == 224
    assert {f.name for f in dataclasses.fields(KernelOffsets)} == {k.lower() for k in ASSEMBLY_6_1}


def test_a_field_the_object_did_not_print_is_refused() -> None:
    without = {k: v for k, v in ASSEMBLY_6_1.items() if k != "TASK_TGID"}
    with pytest.raises(BuildError, match="task_tgid"):
        parse_offsets(assembly(without))


def hit(cpu: int, count: int, *, pc: int = 0xFFFFFFC008010000, pstate: int = 0x5,
        pmr: int = 0x60, preempt: int = 0x110000, tgid: int = 7, pid: int = 8) -> str:  # fmt: skip
    return json.dumps({"cpu": cpu, "pc": pc, "pstate": pstate, "pmr": pmr, "current": 1,
                       "pid": pid, "tgid": tgid, "preempt": preempt, "event": 0xE0,
                       "count": count, "chain": [1, 2], "stop": "end"})  # fmt: skip


def test_a_hit_is_an_overflow_of_the_kernel_tgid_as_pid_and_its_pid_as_tid() -> None:
    log = parse_log(hit(1, 100) + "\n" + json.dumps({"end": 1}) + "\n", OFFSETS, nmi_on=True)
    (overflow,) = log.overflows
    assert (overflow.cpu, overflow.pid, overflow.tid, overflow.user) == (1, 7, 8, False)
    assert overflow.nmi  # preempt count's NMI bits (0x100000) set
    assert overflow.irqs_masked  # PMR 0x60 is not GIC_PRIO_IRQON (0xe0)
    assert overflow.chain == (1, 2)
    assert overflow.frames == 3
    assert log.complete


def test_a_kernel_hit_carries_its_tasks_user_walk_and_a_user_hit_none() -> None:
    line = json.loads(hit(0, 1))
    walked = {**line, "user_walk": [0x400100, 0x401000], "user_stop": "truncated"}
    kthread = {**line, "count": 2, "user_walk": [], "user_stop": "no_regs"}
    text = "\n".join(json.dumps(x) for x in (walked, kthread))
    first, second = parse_log(text, OFFSETS, nmi_on=True).overflows
    assert (first.user_walk, first.user_stop) == ((0x400100, 0x401000), "truncated")
    assert (second.user_walk, second.user_stop) == ((), "no_regs")
    (user,) = parse_log(hit(0, 1, pstate=0x0), OFFSETS, nmi_on=True).overflows
    assert (user.user_walk, user.user_stop) == ((), None)
    with pytest.raises(InfraError, match="unknown stop cause 'lost'"):
        parse_log(json.dumps({**line, "user_walk": [], "user_stop": "lost"}), OFFSETS, nmi_on=True)


def test_a_user_walk_under_a_foreign_ttbr0_is_the_witnesss_own_cause_with_its_evidence() -> None:
    line = json.loads(hit(0, 1))
    foreign = {**line, "user_walk": [], "user_stop": "foreign_ttbr0", "ttbr0": 0x498BF000,
               "pgd_phys": 0x498A4000}  # fmt: skip
    unmapped = {**foreign, "count": 2, "pgd_phys": None}
    text = "\n".join(json.dumps(x) for x in (foreign, unmapped))
    first, second = parse_log(text, OFFSETS, nmi_on=True).overflows
    assert (first.user_stop, first.ttbr0, first.pgd_phys) == (
        "foreign_ttbr0",
        0x498BF000,
        0x498A4000,
    )
    assert (second.user_stop, second.pgd_phys) == ("foreign_ttbr0", None)
    (old,) = parse_log(json.dumps({**line, "user_walk": [], "user_stop": "no_regs"}), OFFSETS,
                       nmi_on=True).overflows  # fmt: skip
    assert (old.ttbr0, old.pgd_phys) == (None, None)
    # The agent's causes never include it: a kernel walk's stop cause may not be it.
    with pytest.raises(InfraError, match="unknown stop cause 'foreign_ttbr0'"):
        parse_log(json.dumps({**line, "stop": "foreign_ttbr0"}), OFFSETS, nmi_on=True)


def test_user_mode_nmi_bits_and_masks_come_from_the_kernel_constants() -> None:
    line = hit(0, 1, pstate=0x0, pmr=224, preempt=0x10000)
    (overflow,) = parse_log(line, OFFSETS, nmi_on=True).overflows
    assert overflow.user
    assert not overflow.nmi
    assert not overflow.irqs_masked
    (masked,) = parse_log(hit(0, 1, pstate=0x80, pmr=224), OFFSETS, nmi_on=False).overflows
    assert masked.irqs_masked


def test_one_handover_reported_twice_is_one_overflow_and_counted() -> None:
    lines = [hit(0, 100), hit(0, 100), hit(1, 100), hit(0, 200), json.dumps({"end": 4})]
    log = parse_log("\n".join(lines), OFFSETS, nmi_on=True)
    assert [(o.cpu, o.count) for o in log.overflows] == [(0, 100), (1, 100), (0, 200)]
    assert log.rereported == 1
    assert log.complete


def test_a_log_cut_short_is_not_complete_and_a_torn_last_line_is_left_out() -> None:
    log = parse_log(hit(0, 1) + "\n" + hit(0, 2)[:20], OFFSETS, nmi_on=True)
    assert len(log.overflows) == 1
    assert not log.complete
    with pytest.raises(InfraError, match="line 1"):
        parse_log("garbage\n" + hit(0, 1), OFFSETS, nmi_on=True)


def test_discovery_and_closed_lines_are_not_overflows() -> None:
    """gdbside's discovery names each handler it broke on; a closed gdbstub is said, once."""
    closed = json.dumps({"closed": "Remote connection closed"})
    text = "\n".join((json.dumps({"handler": 0xFFFFFFC000330A00, "cpu": 0}), hit(0, 100),
                      closed, json.dumps({"end": 1}), ""))  # fmt: skip
    log = parse_log(text, OFFSETS, nmi_on=True)
    assert log.handlers == (0xFFFFFFC000330A00,)
    assert len(log.overflows) == 1
    assert log.complete
