"""The hwpmc oracles on hand-built runs: a healthy run passes, each broken law is named."""

from __future__ import annotations

import struct
from dataclasses import replace

from harness.agent.flavours.hwpmc.conservation import check_outcomes
from harness.agent.flavours.hwpmc.data import HW_MAX_DEPTH, HWPMC, HWPMC_LOG_REC
from harness.agent.flavours.hwpmc.oracles import applicable_hwpmc_oracles, check_hwpmc
from harness.agent.flavours.hwpmc.results import Counting, HwpmcRun, LogRecord, OpOutcome, PmcLine
from harness.agent.flavours.hwpmc.run import SC_INITIAL, decode_op, parse_pmcs, pmc_id, pmc_op_bytes
from harness.agent.judging import content_samples as profile_samples
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.evidence import Injections, KernelEvidence
from harness.agent.values.info import CORE_PERCPU
from harness.agent.values.results import AgentCounters, Violation

N = 32
KPC = 0xFFFF800080001000
SPEC = AgentSpec(flavour="hwpmc")


def brief(violations: list[Violation]) -> list[tuple[str, int | None, str, str]]:
    return [(v.oracle, v.cpu, v.expected, v.observed) for v in violations]


def core(**values: int) -> dict[str, int]:
    return {**dict.fromkeys((name for name, _ in CORE_PERCPU), 0), **values}


def percpu(**values: int) -> dict[str, int]:
    return {**dict.fromkeys(HWPMC.percpu_names, 0), **values}


def log(cpus: dict[int, int]) -> tuple[LogRecord, ...]:
    records, seq = [], 0
    for cpu, count in cpus.items():
        for _ in range(count):
            seq += 1
            records.append(LogRecord(seq, seq, KPC, pmc_id(cpu, "SS"), cpu, 0xFFFFFFFF, 0, 0, 1))
    return tuple(records)


def healthy() -> HwpmcRun:
    """Two CPUs, 10 overflows each: 10 recorded, 9 logged, 1 discarded after STOP."""
    pc = {
        c: percpu(x_recorded=10, x_swept=10, x_logged=9, x_discarded_stopped=1, x_sweeps=3)
        for c in (0, 1)
    }
    stats = {**dict.fromkeys(HWPMC.stat_names, 0), "intr_processed": 20, "log_sweeps": 6}
    nmi = {
        c: core(x_nmi_total=10, x_producer_calls=10, x_producer_calls_nmi=10, x_nmi_ctx_ok=10)
        for c in (0, 1)
    }
    snap = AgentCounters(info={"stall": "hardware"}, stats=stats, stats_percpu=pc, core=nmi)
    kernel = KernelEvidence("arm-pmu", {0: 0, 1: 0}, {0: 10, 1: 10}, {0: 10, 1: 10})
    pmcs = tuple(PmcLine(pmc_id(c, "SS"), "SS", str(c), "stopped", 0, {c: 0}) for c in (0, 1))
    return HwpmcRun(
        spec=SPEC,
        kind="standard",
        counters=snap,
        online_cpus=(0, 1),
        nmi_expected=True,
        stopped=pc,
        stopped_pmcs=pmcs,
        stats_later=stats,
        log=log({0: 9, 1: 9}),
        releases=("ok", "ok"),
        kernel=kernel,
    )


def with_percpu(run: HwpmcRun, cpu: int, **values: int) -> HwpmcRun:
    pc = {**run.counters.stats_percpu, cpu: {**run.counters.stats_percpu[cpu], **values}}
    return replace(run, counters=replace(run.counters, stats_percpu=pc))


def test_a_healthy_run_passes_every_applicable_oracle() -> None:
    run = healthy()
    assert check_hwpmc(run) == []
    assert {"HW-O1", "HW-O2", "HW-O3", "HW-O6", "HW-O7", "HW-O10"} <= applicable_hwpmc_oracles(run)
    assert not {"HW-O5", "HW-O8", "HW-O9"} & applicable_hwpmc_oracles(run)


def test_hw_o1_a_producer_call_without_an_outcome() -> None:
    run = with_percpu(healthy(), 1, x_recorded=9, x_swept=9, x_logged=8)
    found = [v for v in check_hwpmc(replace(run, log=log({0: 9, 1: 8}))) if v.oracle == "HW-O1"]
    assert ("HW-O1", 1, "x_producer_calls = 10", "x_recorded 9 = 9") in brief(found)


def test_hw_o1_stalled_nmis_impossible_with_the_hardware_stall() -> None:
    run = with_percpu(healthy(), 0, x_recorded=9, x_swept=9, x_logged=8, x_stalled_nmi=1)
    run = replace(run, log=log({0: 8, 1: 9}))
    assert ("HW-O1", 0, "x_stalled_nmi = 0", "x_stalled_nmi = 1") in brief(check_hwpmc(run))


def test_hw_o2_and_o6_an_entry_left_in_the_ring() -> None:
    run = healthy()
    stopped = {**run.stopped, 1: {**run.stopped[1], "x_inring": 1}}
    found = brief(check_hwpmc(replace(run, stopped=stopped)))
    assert ("HW-O6", 1, "x_inring = 0", "x_inring = 1") in found
    assert ("HW-O2", 1, "x_recorded = 10", "x_swept 10 + x_inring 1 = 11") in found


def test_hw_o3_an_entry_swept_and_lost() -> None:
    run = with_percpu(healthy(), 0, x_logged=8)
    found = brief(check_hwpmc(replace(run, log=log({0: 8, 1: 9}))))
    assert ("HW-O3", 0, "x_swept = 10", "x_logged 8 + x_discarded_stopped 1 = 9") in found


def test_hw_o3_the_log_misses_a_logged_record() -> None:
    found = brief(check_hwpmc(replace(healthy(), log=log({0: 9, 1: 8}))))
    assert ("HW-O3", None, "records in hwpmc/log = 17", "Σ x_logged 18 = 18") in found


def test_hw_o3_log_failures_are_the_faults_the_harness_injected() -> None:
    # One injected fault: a log with room refuses exactly that write, counted twice.
    failed = with_percpu(healthy(), 0, x_logged=8, x_log_failed=1)
    stats = {**failed.counters.stats, "buffer_requests_failed": 1}
    failed = replace(failed, log=log({0: 8, 1: 9}), log_faults=1,
                     counters=replace(failed.counters, stats=stats))  # fmt: skip
    assert check_hwpmc(failed) == []
    # The refused write counted as a discard: every sum still balances, the count does not.
    hidden = with_percpu(failed, 0, x_log_failed=0, x_discarded_stopped=2)
    assert brief(check_hwpmc(hidden)) == [("HW-O3", None, "Σ x_log_failed = 1", "0")]
    # No fault, no failure: a write refused by a log with room is the agent's doing.
    assert [v[2:] for v in brief(check_hwpmc(replace(failed, log_faults=0)))] == [
        ("Σ x_log_failed = 0", "1"),
        ("buffer_requests_failed = 0", "1"),
    ]
    # A full log (4 KiB: 13 records of 304 bytes) refuses for room too: no failure law then.
    cap = 4096 // HWPMC_LOG_REC.size
    full = with_percpu(healthy(), 0, x_recorded=cap + 3, x_swept=cap + 3, x_logged=cap,
                       x_log_failed=3, x_discarded_stopped=0)  # fmt: skip
    full = with_percpu(full, 1, x_recorded=0, x_swept=0, x_logged=0, x_discarded_stopped=0)
    full = replace(full, log=log({0: cap}), spec=SPEC.with_params(log_kib=4))
    assert (len(full.log), full.log_capacity) == (cap, cap) == (13, 13)
    assert check_outcomes(full) == []


def test_hw_o2_a_full_ring_holds_n_entries() -> None:
    fill = {c: percpu(x_recorded=N - c, x_inring=N - c, x_bufferfull=5 + c) for c in (0, 1)}
    run = replace(healthy(), fill={0: N + 5, 1: N + 5}, checkpoints={"fill": fill})
    found = [v for v in brief(check_hwpmc(run)) if v[0] == "HW-O2"]
    assert found == [("HW-O2", 1, "x_inring at the fill = 32", "31")]


def test_hw_o4_fill_and_one_stall_per_restart() -> None:
    fill = {0: percpu(x_recorded=N, x_bufferfull=4), 1: percpu(x_recorded=N - 1, x_bufferfull=6)}
    run = replace(
        healthy(),
        fill={0: N + 5, 1: N + 5},
        checkpoints={"fill": fill},
        injections=Injections(nmi={0: N + 5, 1: N + 5}, bursts={0: 1, 1: 1}),
    )
    found = [v for v in brief(check_hwpmc(run)) if v[0] == "HW-O4"]
    assert found == [
        ("HW-O4", 0, "x_bufferfull = 5", "4"),
        ("HW-O4", 1, "x_recorded = 32", "31"),
        ("HW-O4", 1, "x_bufferfull = 5", "6"),
    ]
    # The gating law holds where the plan fills rings (HW-O4 applies), on the other CPUs.
    gated = replace(with_percpu(healthy(), 0, x_bufferfull=3, x_restarts=1, x_recorded=7),
                    fill={1: 1}, injections=Injections(nmi={1: 1}))  # fmt: skip
    assert "HW-O4" not in applicable_hwpmc_oracles(replace(gated, fill={}))
    assert ("HW-O4", 0, "x_bufferfull ≤ 2", "x_bufferfull = 3") in brief(check_hwpmc(gated))


def test_hw_o5_a_sweep_that_does_not_restart() -> None:
    fill = {0: percpu(x_recorded=N, x_bufferfull=5)}
    restart = {0: percpu(x_recorded=N, x_swept=N, x_restarts=0)}
    resumed = {0: percpu(x_recorded=N)}
    run = replace(
        healthy(),
        fill={0: N + 5},
        resume={0: 3},
        checkpoints={"fill": fill, "restart": restart, "resumed": resumed},
    )
    found = [v for v in brief(check_hwpmc(run)) if v[0] == "HW-O5"]
    assert found == [("HW-O5", 0, "x_restarts = 1", "0"), ("HW-O5", 0, "x_recorded = 35", "32")]


def test_hw_o7_runcount_release_and_a_counter_left_running() -> None:
    run = healthy()
    pmcs = (replace(run.stopped_pmcs[0], runcount=2), run.stopped_pmcs[1])
    stats = {**run.counters.stats, "x_release_max_ticks": 3}
    later = {**stats, "intr_ignored": 40}
    run = replace(
        run,
        stopped_pmcs=pmcs,
        releases=("ok", "ETIMEDOUT"),
        stats_later=later,
        counters=replace(run.counters, stats=stats),
    )
    found = [v[2:] for v in brief(check_hwpmc(run)) if v[0] == "HW-O7"]
    assert found == [
        (f"PMC {pmc_id(0, 'SS'):#x} runcount = 0", f"PMC {pmc_id(0, 'SS'):#x} runcount = 2"),
        ("RELEASE returns 0", "ETIMEDOUT"),
        ("x_release_max_ticks ≤ 1", "x_release_max_ticks = 3"),
        ("intr_ignored after RELEASE and 5 sweep periods of spinning = 0", "40"),
    ]


def test_hw_o8_a_cpu_that_never_restarts() -> None:
    stalled = {0: percpu(x_recorded=4, x_inring=4), 1: percpu(x_recorded=50)}
    resumed = {0: percpu(x_recorded=4), 1: percpu(x_recorded=90)}
    run = replace(
        healthy(),
        pair=(0, 1),
        checkpoints={"a_stalled": stalled, "a_resumed": resumed},
        spec=SPEC.with_params(nsamples=4),
    )
    found = [v for v in brief(check_hwpmc(run)) if v[0] == "HW-O8"]
    assert found == [
        ("HW-O8", 0, "x_restarts ≥ 1", "x_restarts = 0"),
        ("HW-O8", 0, "x_recorded ≥ 5", "x_recorded = 4"),
    ]


def test_hw_o9_errno_and_syscall_counts() -> None:
    ops = (OpOutcome("start-running", "ok", "ok"), OpOutcome("row-out-of-range", "EINVAL", "ok"))
    run = replace(
        healthy(),
        ops=ops,
        driver_before={"syscalls": 5, "syscall_errors": 0},
        driver_after={"syscalls": 8, "syscall_errors": 1},
        ss_around_offline_start=(1, 2),
    )
    found = [v[2:] for v in brief(check_hwpmc(run)) if v[0] == "HW-O9"]
    assert found == [
        ("row-out-of-range: EINVAL", "ok"),
        ("Δsyscall_errors = 0", "1"),
        ("x_ss_running after START on an offline CPU = 1", "2"),
    ]


def test_hw_o10_wrong_cpu_gap_and_user_flag() -> None:
    records = list(log({0: 9, 1: 9}))
    records[3] = replace(records[3], cpu=1)
    records[5] = replace(records[5], flags=1)
    records[7] = replace(records[7], seq=99)
    found = [
        (v.cpu, v.observed, v.detail)
        for v in check_hwpmc(replace(healthy(), log=tuple(records)))
        if v.oracle == "HW-O10"
    ]
    assert found == [
        (None, "seq 99", "torn, lost or duplicated records"),
        (0, "1 records", "user flag disagrees with the PC"),
        (0, "1 records", "user-mode sample without a pid"),
        (1, "1 records", "cpu ≠ its SS PMC's CPU 0"),
    ]


def test_pmc_op_round_trip_and_pmcs_lines() -> None:
    op = decode_op(pmc_op_bytes("PMCSTART", id=pmc_id(3, "SS")))
    assert (op["op"], op["id"], op["cpu"]) == (14, 3 << 12, 0xFFFFFFFF)
    line = "id=0x1200 mode=TS row=0 cpus=0-1 state=running runcount=4 reload=1 stalled=0:1,1:0"
    (pmc,) = parse_pmcs([line])
    assert (pmc.id, pmc.mode, pmc.runcount, dict(pmc.stalled)) == (0x1200, "TS", 4, {0: 1, 1: 0})


def counting(**changes: object) -> Counting:
    """An SC PMC on CPU 1: START bracketed by 1.000..1.001 s, STOP by 2.500..2.501 s of
    guest time, at 1 count per ns: any count in [1.499 s, 1.501 s] (± the slack) holds."""
    base = Counting(
        cpu=1,
        initial=SC_INITIAL,
        clocks=(1_000_000_000, 1_001_000_000, 2_500_000_000, 2_501_000_000),
        running=SC_INITIAL + 700_000_000,
        stopped=SC_INITIAL + 1_500_000_000,
        later=SC_INITIAL + 1_500_000_000,
        events_per_ns=1.0,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_hw_sc_applies_only_with_an_sc_pmc_and_holds_for_a_count_in_its_window() -> None:
    assert "HW-SC" not in applicable_hwpmc_oracles(healthy())
    run = replace(healthy(), counting=counting())
    assert "HW-SC" in applicable_hwpmc_oracles(run)
    assert check_hwpmc(run) == []


def test_hw_sc_a_counter_that_never_ran_or_ran_too_long() -> None:
    never = replace(healthy(), counting=counting(running=SC_INITIAL, stopped=SC_INITIAL,
                                                  later=SC_INITIAL))  # fmt: skip
    (v,) = check_hwpmc(never)
    assert (v.oracle, v.cpu) == ("HW-SC", 1)
    assert v.observed.startswith("counted 0 ")
    # Counted beyond the outer bracket (1.501 s): the window cannot hold it.
    long = SC_INITIAL + 1_502_000_000
    assert [x.oracle for x in check_hwpmc(replace(healthy(), counting=counting(
        stopped=long, later=long)))] == ["HW-SC"]  # fmt: skip
    # A SETCOUNT that was lost: the count starts at 0, far below the value it was given.
    lost = counting(running=700_000_000, stopped=1_500_000_000, later=1_500_000_000)
    assert len(check_hwpmc(replace(healthy(), counting=lost))) == 2


def test_hw_sc_a_stopped_counter_that_moves_and_a_running_read_out_of_order() -> None:
    run = replace(healthy(), counting=counting(later=SC_INITIAL + 1_500_000_100))
    assert brief(check_hwpmc(run)) == [
        ("HW-SC", 1, f"a stopped PMC holds {SC_INITIAL + 1_500_000_000}",
         f"{SC_INITIAL + 1_500_000_100} after the idle phase"),
    ]  # fmt: skip
    late = replace(healthy(), counting=counting(running=SC_INITIAL + 1_600_000_000))
    assert [v.oracle for v in check_hwpmc(late)] == ["HW-SC"]


def test_hw_sc_without_a_fixed_rate_only_asks_for_a_count() -> None:
    unknown = counting(events_per_ns=None, stopped=SC_INITIAL + 5, later=SC_INITIAL + 5,
                       running=SC_INITIAL + 1)  # fmt: skip
    assert check_hwpmc(replace(healthy(), counting=unknown)) == []
    none = counting(events_per_ns=None, stopped=SC_INITIAL, later=SC_INITIAL, running=SC_INITIAL)
    assert [v.oracle for v in check_hwpmc(replace(healthy(), counting=none))] == ["HW-SC"]


def test_a_record_holds_a_chain_as_deep_as_callchaindepth_allows() -> None:
    # seeds-spec §4.1: kern.hwpmc.callchaindepth 1-32, default 8; a record has room for 32.
    assert HWPMC.param("callchaindepth").default == 8
    assert HWPMC.param("callchaindepth").high == HW_MAX_DEPTH == 32
    callers = tuple(0xFFFF_8000_0000_1000 + 8 * i for i in range(1, 32))
    values = {"seq": 1, "ts_ns": 2, "pc": KPC, "pmcid": 3, "cpu": 0, "pid": 7, "tid": 7,
              "flags": 0, "depth": 32, "chain_stop": 1, "pad": 0,
              **{f"chain[{i}]": pc for i, pc in enumerate(callers)}}  # fmt: skip
    data = struct.pack(HWPMC_LOG_REC.struct_format, *(values[n] for n in HWPMC_LOG_REC.names))
    fields = dict(zip(HWPMC_LOG_REC.names, struct.unpack(HWPMC_LOG_REC.struct_format, data),
                      strict=True))  # fmt: skip
    deepest = LogRecord.decoded(fields)
    assert (deepest.depth, deepest.callers) == (32, callers)
    assert LogRecord.decoded({**fields, "depth": 10}).callers == callers[:9]


def test_the_flame_graph_gets_each_records_chain_and_profile_its_time() -> None:
    callers = (KPC + 0x40, KPC + 0x80)
    record = replace(log({1: 1})[0], depth=3, chain=(*callers, 0, 0), ts_ns=1234)
    (sample,) = profile_samples(replace(healthy(), log=(record,)))
    assert (sample.cpu, sample.pc, sample.user, sample.time_ns) == (1, KPC, False, 1234)
    assert sample.chain == callers
