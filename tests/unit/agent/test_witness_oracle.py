"""WITNESS, pure: pairing by position, the drop allowance, every field, the walk, the counts."""

from __future__ import annotations

import dataclasses

from harness.agent.oracles.witness import (
    WitnessInput,
    WitnessVerdict,
    format_witness,
    judge_witness,
)
from harness.agent.values.samples import Sample
from harness.agent.witnessed import witnessed_period, witnessed_rate
from harness.vm.witness.records import Overflow, WitnessLog

K = 0xFFFFFFC008000000


def seen(cpu: int, pc: int, *, chain: tuple[int, ...] = (), stop: str = "end",
         user: bool = False, nmi: bool = True) -> Overflow:  # fmt: skip
    return Overflow(cpu, pc, user, 9, 10, nmi, False, chain, stop)


def recorded(o: Overflow, **changes: object) -> Sample:
    sample = Sample(
        o.cpu, o.pc, o.pid, o.tid, o.user, chain=o.chain, truncated=o.stop == "truncated"
    )
    return dataclasses.replace(sample, **changes)  # type: ignore[arg-type]


def judge(samples: list[Sample], overflows: list[Overflow], *, drops: dict[int, int] | None = None,
          depth: int | None = None, interrupts: dict[int, int] | None = None,
          ) -> WitnessVerdict:  # fmt: skip
    log = WitnessLog(tuple(overflows), len(overflows))
    return judge_witness(WitnessInput(tuple(samples), log, drops or {}, depth, True, True,
                                      interrupts=interrupts))  # fmt: skip


OVERFLOWS = [seen(0, K + 4 * i) for i in range(6)] + [seen(1, K + 0x100 + 4 * i) for i in range(4)]


def test_records_equal_to_what_was_seen_pass_and_count_every_pair() -> None:
    verdict = judge([recorded(o) for o in OVERFLOWS], OVERFLOWS, interrupts={0: 6, 1: 4})
    assert verdict.violations() == []
    assert verdict.compared == 10
    assert verdict.interrupts_compared == 2
    assert [j.n for j in verdict.judged()][:1] == [10]


def test_each_wrong_field_is_named_and_shown() -> None:
    samples = [recorded(o) for o in OVERFLOWS]
    samples[1] = dataclasses.replace(samples[1], tid=samples[1].pid)  # the tgid as tid
    samples[2] = dataclasses.replace(samples[2], pc=samples[2].pc + 4)  # one instruction late
    samples[7] = dataclasses.replace(samples[7], pid=1)  # another task's
    verdict = judge(samples, OVERFLOWS)
    assert verdict.by_field["tid"] == 1
    assert verdict.by_field["pc"] == 1
    assert verdict.by_field["pid"] == 1
    (violation,) = verdict.violations()
    assert "3 of 10 samples differ" in violation.observed
    assert "CPU 0 #1 (tid)" in violation.detail
    assert "CPU 1 #1 (pid)" in violation.detail


def test_an_unrecorded_overflow_is_a_gap_unless_a_drop_was_counted_there() -> None:
    samples = [recorded(o) for i, o in enumerate(OVERFLOWS) if i != 2]
    gap = judge(samples, OVERFLOWS)
    assert gap.by_field["pc"] == 3  # without an allowance, the pairing stays by position
    allowed = judge(samples, OVERFLOWS, drops={0: 1})
    assert allowed.violations() == []
    assert allowed.skipped == 1
    assert allowed.compared == 9


def test_overflows_left_over_beyond_the_drops_fail_and_so_do_samples_never_seen() -> None:
    short = judge([recorded(o) for o in OVERFLOWS[:4]], OVERFLOWS[:6])
    assert any("2 overflows no sample records" in v.observed for v in short.violations())
    cpus = {o.cpu for o in OVERFLOWS[4:6]}
    dropped = judge([recorded(o) for o in OVERFLOWS[:4]], OVERFLOWS[:6],
                    drops={cpu: 2 for cpu in cpus})  # fmt: skip
    assert (dropped.violations(), dropped.left, dropped.skipped) == ([], 2, 0)
    assert "0 overflows skipped, 2 after the last record" in format_witness(dropped)
    extra = [recorded(o) for o in OVERFLOWS[:6]] + [recorded(OVERFLOWS[5])]
    assert any("1 samples after" in v.observed for v in judge(extra, OVERFLOWS[:6]).violations())


def test_a_chain_is_the_witnessed_walk_cut_to_the_depth() -> None:
    deep = seen(0, K, chain=(K + 8, K + 16, K + 24, K + 32))
    good = recorded(deep, chain=(K + 8, K + 16), truncated=True)
    assert judge([good], [deep], depth=3).violations() == []
    ended = recorded(deep, chain=(K + 8, K + 16), truncated=False)  # cut, said to have ended
    assert judge([ended], [deep], depth=3).by_field["truncated"] == 1
    stack = recorded(deep, chain=(K + 8, 0xFFFF800012345678), truncated=True)
    assert judge([stack], [deep], depth=3).by_field["chain"] == 1


def test_a_walk_the_agent_says_faulted_may_stop_short_but_not_differ() -> None:
    deep = seen(0, 0x400000, chain=(0x401000, 0x402000, 0x403000), user=True)
    faulted = recorded(deep, chain=(0x401000,), stop=4)  # enum pa_chain_stop: PA_CHAIN_FAULT
    assert judge([faulted], [deep], depth=8).violations() == []
    wrong = recorded(deep, chain=(0x401004,), stop=4)
    assert judge([wrong], [deep], depth=8).by_field["chain"] == 1
    silent = recorded(deep, chain=(0x401000,), stop=0)  # "ended" where the stack goes on
    assert judge([silent], [deep], depth=8).by_field["chain"] == 1


def test_a_kernel_samples_user_stack_is_the_walk_from_the_tasks_saved_registers() -> None:
    """dt's ustack: the user PC at the task's kernel entry, then its callers (stop: enum
    pa_chain_stop, 0 end, 1 truncated, 4 fault, 5 no regs)."""
    walk = (0x400100, 0x401000, 0x402000, 0x403000)
    hit = dataclasses.replace(seen(0, K, chain=(K + 8,)), user_walk=walk, user_stop="end")
    same = recorded(hit, user_walk=walk, user_stop=0)
    verdict = judge([same], [hit], depth=8)
    assert verdict.violations() == []
    assert verdict.frames == 2 + 4  # the kernel PC and its caller, the user walk's four
    assert verdict.user_stacks == 1
    assert (
        judge([recorded(hit, user_walk=walk[:3], user_stop=1)], [hit], depth=3).violations() == []
    )
    wrong = {
        "another task's": recorded(hit, user_walk=(0x400100, 0x7FFFF000), user_stop=0),
        "cut, said ended": recorded(hit, user_walk=walk[:2], user_stop=0),
        "one frame late": recorded(hit, user_walk=walk[1:], user_stop=0),
        "no regs claimed": recorded(hit, user_walk=(), user_stop=5),
        "said cut at the depth": recorded(hit, user_walk=walk, user_stop=1),
        "a fault, off the walk": recorded(hit, user_walk=(0x400100, 0x401004), user_stop=4),
    }
    for why, sample in wrong.items():
        assert judge([sample], [hit], depth=8).by_field["ustack"] == 1, why
    assert (
        judge([recorded(hit, user_walk=walk[:2], user_stop=4)], [hit], depth=8).violations() == []
    )
    kthread = dataclasses.replace(hit, user_walk=(), user_stop="no_regs")
    assert (
        judge([recorded(kthread, user_walk=(), user_stop=5)], [kthread], depth=8).violations() == []
    )
    assert judge([recorded(kthread, user_walk=(), user_stop=0)], [kthread],
                 depth=8).by_field["ustack"] == 1  # fmt: skip
    assert judge([recorded(kthread, user_walk=walk, user_stop=0)], [kthread],
                 depth=8).by_field["ustack"] == 1  # fmt: skip
    # A record with no user walk of its own (hwpmc, a user sample) is not judged on one.
    assert judge([recorded(hit)], [hit], depth=8).violations() == []


def test_a_user_stack_read_under_another_tasks_ttbr0_is_counted_not_judged() -> None:
    """6.12's CI sample at cpu_do_switch_mm: current still the old task, TTBR0 another table.

    The witness saw TTBR0 not hold the task's pgd (foreign_ttbr0) and walked nothing; the
    agent's walk read on through that other address space. Not judged, counted, never
    equal; the same hit with the task's own table in TTBR0 is judged, and that walk fails.
    """
    agents = (0xFFFFA31D65A8, 0x402000, 0x402000, 0x402490, 0x400A4C)
    hit = dataclasses.replace(seen(0, K + 0x10, chain=(K + 8,)), user_walk=(),
                              user_stop="foreign_ttbr0", ttbr0=0x498BF000,
                              pgd_phys=0x498A4000)  # fmt: skip
    sample = recorded(hit, user_walk=agents, user_stop=4)
    verdict = judge([sample], [hit], depth=8)
    assert verdict.violations() == []
    assert (verdict.user_paired, verdict.user_foreign, verdict.user_stacks) == (1, 1, 0)
    assert verdict.user_foreign_read == 1  # the agent read on: five frames
    assert verdict.frames == 2  # the kernel PC and its caller: no user frame held equal
    assert "1 of 1 not judged (100.0 %): TTBR0 not the task's table" in format_witness(verdict)
    # Its own table loaded: the witness walked the task's stack and found no frame record.
    own = dataclasses.replace(hit, user_walk=agents[:1], user_stop="fault",
                              ttbr0=0x498A4000)  # fmt: skip
    judged = judge([sample], [own], depth=8)
    assert judged.by_field["ustack"] == 1
    assert (judged.user_paired, judged.user_foreign, judged.user_stacks) == (1, 0, 0)
    equal = judge([recorded(own, user_walk=agents[:1], user_stop=4)], [own], depth=8)
    assert equal.violations() == []
    assert (equal.user_paired, equal.user_foreign, equal.user_stacks) == (1, 0, 1)
    # Mixed: one foreign among three kernel records with a user stack, its share reported.
    hits = [dataclasses.replace(own, pc=K + 4 * i) for i in range(2)] + [
        dataclasses.replace(hit, pc=K + 8)]  # fmt: skip
    mixed = judge([recorded(o, user_walk=agents[:1], user_stop=4) for o in hits], hits, depth=8)
    assert mixed.violations() == []
    assert (mixed.user_paired, mixed.user_foreign, mixed.user_stacks) == (3, 1, 2)
    assert "1 of 3 not judged (33.3 %)" in format_witness(mixed)
    assert mixed.user_foreign_read == 0  # the agent's walk there ended at its user PC
    # Part ustack: UNJUDGED where every paired user stack was foreign, never PASS on none.
    ustack = {j.part: j for j in verdict.judged()}["ustack"]
    assert (ustack.n, ustack.judged, ustack.why) == (0, False, "each under a foreign TTBR0")
    assert {j.part: j.n for j in mixed.judged()}["ustack"] == 2
    # A flavour that records no kernel user stack (user_stop None) has no such part.
    assert "ustack" not in {j.part for j in judge([recorded(hit)], [hit], depth=8).judged()}


def test_the_witness_must_have_seen_what_the_kernel_counted_and_in_nmi() -> None:
    verdict = judge([recorded(o) for o in OVERFLOWS], OVERFLOWS, interrupts={0: 7, 1: 4})
    assert [v.cpu for v in verdict.missed] == [0]
    assert verdict.interrupts_compared == 1
    outside = [dataclasses.replace(o, nmi=False) for o in OVERFLOWS]
    assert judge([recorded(o) for o in outside], outside).nmi


def test_nothing_witnessed_is_unjudged() -> None:
    verdict = judge([], [])
    assert all(not j.judged for j in verdict.judged())


def test_a_record_without_a_stop_cause_may_end_short_only_as_often_as_the_core_counted() -> None:
    deep = [seen(0, 0x400000 + 4 * i, chain=(0x401000, 0x402000), user=True) for i in range(2)]
    short = [dataclasses.replace(recorded(o, chain=(0x401000,)), stop=None) for o in deep]
    log = WitnessLog(tuple(deep), 2)

    def verdict(faults: int) -> WitnessVerdict:
        return judge_witness(WitnessInput(tuple(short), log, {}, 8, True, True,
                                          faults={0: faults}))  # fmt: skip

    assert verdict(2).violations() == []
    assert verdict(1).by_field["chain"] == 1


def test_past_a_drop_a_sample_pairs_with_the_overflow_it_equals_not_the_first_at_its_pc() -> None:
    other = dataclasses.replace(seen(0, K), pid=1, tid=1)  # a kernel thread, same PC, dropped
    mine = seen(0, K)
    verdict = judge([recorded(mine)], [other, mine], drops={0: 1})
    assert verdict.violations() == []
    assert verdict.skipped == 1


def test_a_witnessed_run_shares_its_overflows_among_the_host_cores() -> None:
    # 60 overflows a guest second over all vCPUs, 30 a vCPU, a quarter for 8 vCPUs on 2 cores.
    assert witnessed_rate(1, host_cores=2) == 30  # one vCPU: its own cap
    assert witnessed_rate(2, host_cores=2) == 60
    assert witnessed_rate(8, host_cores=2) == 15  # a quarter of 60: 8 threads on 2 cores
    assert witnessed_period(2, 1.0, host_cores=2) == 1_000_000_000 * 2 // 60
