"""kprof's oracles on hand-built runs: one that holds every law, and one break per law.

The good run is the exact run on one CPU as the guest produced it: R = 2183
records of L = 30 bytes per 64 KiB block, Q = 100 000 (two blocks fit), 3R + 7
injected records and one kpdata write: three full blocks, two accepted, one
dropped whole, eight records left in the current block.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import pytest

from harness.agent.flavours.kprof import results as res
from harness.agent.flavours.kprof.control import CONTROL_FIXED, CONTROL_KP_D3
from harness.agent.flavours.kprof.data import KPROF, record_size, records_per_block
from harness.agent.flavours.kprof.flavour import FLAVOUR
from harness.agent.flavours.kprof.oracles import applicable_kprof_oracles, check_kprof
from harness.agent.flavours.kprof.report import format_kprof_table
from harness.agent.flavours.kprof.results import KprofRecord, KprofRun, KprofStats
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.evidence import Injections

R, L, Q = 2183, 30, 100_000
PC = 0xFFFF_FFFF_8100_0000
IDLE_PC = 0xFFFF_FFFF_8100_0040
SPEC = AgentSpec(flavour="kprof", pmu_produce=False).with_params(qlimit=Q)
INJECTED = 3 * R + 7
N = INJECTED + 1  # and the kpdata write


def test_the_records_per_block_are_the_specs_numbers() -> None:
    assert (records_per_block(65536, 1), record_size(1)) == (2183, 30)
    assert (records_per_block(65536, 16), record_size(16)) == (433, 151)
    assert KPROF.framed[1].encoded_size(1) == 34  # user, n = 1
    assert records_per_block(16384, 1) == 545  # KP-D1's blocks


def percpu(**values: int) -> dict[str, int]:
    row = dict.fromkeys(KPROF.percpu_names, 0)
    row.update(values)
    return row


def stats(cpu0: Mapping[str, int], **globals_: int) -> KprofStats:
    totals = {name: cpu0[name] for name in KPROF.percpu_names}
    glob = {"qlen": 0, "qlimit": Q, "cpubufsz": 65536, "x_status_bytes": 0, "x_bytes_read": 0,
            "x_eof_reads": 0, "x_eof_epipe": 0, "x_trace_nested_drop": 0,
            "x_trace_truncated": 0}  # fmt: skip
    glob.update(globals_)
    return KprofStats({**totals, **glob}, {0: cpu0})


TRACING = {"x_records_committed": N, "x_records_not_tracing": 1, "x_blocks_full": 3,
           "x_blocks_accepted": 2, "blocks_dropped": 1, "x_hidden_blocks_dropped": 1,
           "x_records_in_dropped_blocks": R, "x_bytes_committed": N * L,
           "x_kpdata_injected": 2}  # fmt: skip
BEFORE = percpu(**TRACING, x_cur_block_records=8, x_cur_block_bytes=8 * L)
STOPPED = percpu(**TRACING, x_blocks_flushed=1, x_records_flushed=8)
READ_BYTES = (2 * R + 8) * L


def good_run() -> KprofRun:
    trace = tuple(
        KprofRecord(type=1, cpu=0, ts_ns=1000 + i, pcs=(PC if i == 2 * R + 7 else PC + 4,), size=L)
        for i in range(2 * R + 8)
    )
    readings = {
        res.VISIBLE_BEFORE: stats(percpu(x_records_committed=R)),
        res.VISIBLE_AFTER: stats(percpu(x_records_committed=R + 1), qlen=R * L),
        res.BEFORE_STOP: stats(BEFORE, qlen=2 * R * L),
        res.AFTER_STOP: stats(STOPPED, qlen=READ_BYTES),
        res.AFTER_READ: stats(STOPPED, x_bytes_read=READ_BYTES, x_eof_reads=5),
        res.AFTER_FLUSH: stats(STOPPED, x_bytes_read=READ_BYTES, x_eof_reads=5),
        res.FINAL: stats(STOPPED, x_bytes_read=READ_BYTES, x_eof_reads=5),
        res.QUEUED: stats(percpu(x_records_committed=1), qlen=L),
        res.REOPENED: stats(percpu()),
    }
    core = {
        0: {
            "x_producer_calls": INJECTED,
            "x_producer_calls_task": INJECTED,
            "x_nmi_total": 10,
            "x_nmi_ctx_ok": 10,
        }
    }
    return KprofRun(
        spec=SPEC, readings=readings, trace=trace, bytes_read=READ_BYTES, undecoded=0,
        status_records=0, online_cpus=(0,), core=core, core_at_final=core,
        nmi_expected=True, injected={0: INJECTED}, kpdata={0: (PC,)}, kpdata_idle=(IDLE_PC,),
        eof=("0",) * 5, control=CONTROL_FIXED,
        injections=Injections(task={0: INJECTED}),
    )  # fmt: skip


def with_reading(run: KprofRun, name: str, cpu0: Mapping[str, int], **globals_: int) -> KprofRun:
    base = run.readings[name]
    row = {**base.percpu[0], **cpu0}
    changed = stats(row, **{**{k: v for k, v in base.stats.items() if k not in row}, **globals_})
    return replace(run, readings={**run.readings, name: changed})


def oracles_of(run: KprofRun) -> set[str]:
    return {v.oracle for v in check_kprof(run)}


def test_the_good_run_holds_every_law_and_every_law_applies() -> None:
    run = good_run()
    assert check_kprof(run) == []
    assert {f"KP-O{i}" for i in range(1, 11)} <= applicable_kprof_oracles(run)
    assert "committed" in format_kprof_table(run)


BREAKS: dict[str, Callable[[KprofRun], KprofRun]] = {
    # a producer call that ends in no counter
    "KP-O1": lambda run: replace(
        run, core_at_final={0: {"x_producer_calls": INJECTED + 1, "x_producer_calls_task": 1}}
    ),
    # one record early: the block handed off at R records, not R + 1
    "KP-O2": lambda run: with_reading(run, res.BEFORE_STOP, {"x_cur_block_records": 11}),
    # a block accepted over the limit
    "KP-O3": lambda run: with_reading(
        run, res.BEFORE_STOP, {"x_blocks_accepted": 3, "x_hidden_blocks_dropped": 0}
    ),
    # a record lost at the flush: the stream is one record short
    "KP-O4": lambda run: replace(run, trace=run.trace[:-2] + run.trace[-1:]),
    # the queue past Q - 1 + B before any flush
    "KP-O5": lambda run: with_reading(run, res.BEFORE_STOP, {}, qlen=Q + 65536),
    # bytes visible before a block filled
    "KP-O6": lambda run: with_reading(run, res.VISIBLE_BEFORE, {}, qlen=L),
    # EPIPE in fixed mode
    "KP-O7": lambda run: replace(run, eof=("0", "0", "0", "EPIPE", "EPIPE")),
    # prof_qlimit refused while stopped (KP-D3's behaviour in fixed mode)
    "KP-O8": lambda run: replace(run, control=CONTROL_KP_D3),
    # unread bytes survive the close
    "KP-O9": lambda run: with_reading(run, res.REOPENED, {}, qlen=L),
    # the kpdata trace twice
    "KP-O10": lambda run: replace(run, trace=(*run.trace, run.trace[2 * R + 7])),
}


@pytest.mark.parametrize("oracle", sorted(BREAKS))
def test_each_law_catches_its_break(oracle: str) -> None:
    found = check_kprof(BREAKS[oracle](good_run()))
    assert oracle in {v.oracle for v in found}, found
    assert all(str(v) for v in found)


def test_quirks_change_the_expected_numbers() -> None:
    quirks = KPROF.quirk_bit("KP-D11") | KPROF.quirk_bit("KP-D3") | KPROF.quirk_bit("KP-D7")
    run = replace(good_run(), spec=replace(SPEC, quirks=quirks),
                  eof=("0", "0", "0", "EPIPE", "EPIPE"), control=CONTROL_KP_D3)  # fmt: skip
    hidden = with_reading(run, res.BEFORE_STOP, {"blocks_dropped": 0}, blocks_dropped=0)
    assert check_kprof(hidden) == []
    assert oracles_of(run) == {"KP-O3"}  # KP-D7 set, yet the drops show


def test_blocks_dropped_is_judged_against_the_harness_count_of_drops() -> None:
    def laws(run: KprofRun) -> list[tuple[str, str]]:
        return [(v.expected, v.observed) for v in check_kprof(run) if v.oracle == "KP-O3"]

    # Unreported (KP-D7's behaviour without its bit): the hidden count alone is right.
    unreported = with_reading(good_run(), res.BEFORE_STOP, {"blocks_dropped": 0})
    assert laws(unreported) == [("stats blocks_dropped = 1", "0")]
    # Both counters agree, yet the harness counted one drop (F = 3, 2 fit).
    both = with_reading(good_run(), res.BEFORE_STOP,
                         {"blocks_dropped": 2, "x_hidden_blocks_dropped": 2})  # fmt: skip
    assert laws(both) == [("Σ x_hidden_blocks_dropped = 1", "2"), ("stats blocks_dropped = 1", "2")]


def test_flush_while_stopped_must_change_nothing() -> None:
    run = with_reading(good_run(), res.AFTER_FLUSH, {"x_blocks_flushed": 2})
    assert oracles_of(run) == {"KP-O8"}


def test_the_exact_laws_do_not_apply_with_a_reader_or_a_flush() -> None:
    run = replace(good_run(), reader_during=True)
    assert not {"KP-O2", "KP-O3"} & applicable_kprof_oracles(run)
    assert not {"KP-O2", "KP-O3"} & applicable_kprof_oracles(replace(good_run(), flushes=1))


def test_nmi_bursts_make_the_records_inexact() -> None:
    """A burst records wherever the CPU was (user code: 34-byte records): no exact laws."""
    run = replace(good_run(), injections=Injections(nmi={0: 5}, bursts={0: 1}))
    assert not {"KP-O2", "KP-O3"} & applicable_kprof_oracles(run)


def test_the_matrix_row_and_the_report_show_the_blocks() -> None:
    (row,) = FLAVOUR.cell_rows(good_run())
    assert (row.cpu, row.recorded, row.overflows) == (0, N, 10)
    assert row.drops == {"records_nospare": 0, "records_nested_drop": 0,
                            "records_not_tracing": 1, "records_in_dropped_blocks": R}  # fmt: skip
    report = FLAVOUR.report(good_run(), [])
    assert "PASS  KP-O3" in report
    assert "130980" in report  # the queue before stop: two blocks of R·L
