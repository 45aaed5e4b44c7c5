"""kprof as data: its counters, quirk bits, stream records, parameters, mutants.

The port of Akaros kprof (seeds-spec §2, §6.3-§6.6): per-CPU blocks of
``cpubufsz`` bytes filled with varint-framed trace records, handed to a byte
queue limited to ``qlimit``. Everything here is read by the C template
(``guest/agent/flavours/kprof/kprof.c.j2``), the decoder and the oracles::

    KPROF.percpu_names                  # ('x_records_committed', ...)
    KTRACE.encoded_size(1)              # 30: L of a depth-1 kernel record
    records_per_block(65536, 1)         # 2183 (R of seeds-spec §2.2)
"""

from __future__ import annotations

import dataclasses

from harness.agent.values.info import FlavourInfo, Mutant, Param, Quirk
from harness.agent.values.layouts import Field, FramedRecord, RecordLayout

#: The seed's worst-case envelope reserved on top of the payload (§2.2 step 3).
ENVELOPE_RESERVE = 20
#: The seed's PROFILER_BT_DEPTH: PCs in one trace at most.
MAX_DEPTH = 16
KIB = 1024
MIB = 1024 * KIB

KTRACE = FramedRecord(
    type_id=1,
    header=RecordLayout(
        c_name="kprof_ktrace_hdr",
        py_name="KprofKtraceHdr",
        doc="kprof type 1, kernel trace: this header, then n PCs (u64), innermost first.",
        fields=(
            Field("info", "u64", "the event descriptor (0 for kpdata injections)"),
            Field("ts_ns", "u64", "ktime_get_mono_fast_ns() when the sample was taken"),
            Field("cpu", "u16", "CPU that took the sample"),
            Field("n", "u16", "PCs that follow: 1 + frames of the kernel walk, at most 16"),
        ),
    ),
    tail="u64s",
    count="n",
)
UTRACE = FramedRecord(
    type_id=2,
    header=RecordLayout(
        c_name="kprof_utrace_hdr",
        py_name="KprofUtraceHdr",
        doc="kprof type 2, user trace: this header, then n PCs (u64): the user PC, then its "
        "callers by frame pointers (padded with zeros to the depth when trace_pad=1).",
        fields=(
            Field("info", "u64", "the event descriptor (0 for kpdata injections)"),
            Field("ts_ns", "u64", "ktime_get_mono_fast_ns() when the sample was taken"),
            Field("pid", "u32", "thread group id of the interrupted task"),
            Field("cpu", "u16", "CPU that took the sample"),
            Field("n", "u16", "PCs that follow"),
        ),
    ),
    tail="u64s",
    count="n",
)
NEWPROC = FramedRecord(
    type_id=4,
    header=RecordLayout(
        c_name="kprof_newproc_hdr",
        py_name="KprofNewprocHdr",
        doc="kprof type 4, new process (a status record at kpctl open): this header, "
        "then the process's name, the rest of the payload.",
        fields=(
            Field("ts_ns", "u64", "when the record was written"),
            Field("pid", "u32", "thread group id"),
        ),
    ),
    tail="text",
)
FRAMED = (KTRACE, UTRACE, NEWPROC)

KPROF_PERCPU: tuple[tuple[str, str], ...] = (
    ("x_records_committed", "records written into this CPU's blocks"),
    ("x_records_not_tracing", "producer calls while this CPU was not tracing (or no kpctl)"),
    ("x_records_nospare", "producer calls that found the block full and no spare block"),
    ("x_records_nested_drop", "producer calls nested in another on this CPU"),
    ("x_blocks_full", "full blocks handed off (pushed to the lock-free list)"),
    ("x_blocks_accepted", "full blocks the irq_work's qpass put on the queue"),
    ("blocks_dropped", "full blocks qpass dropped (seed dropped_data_cnt; 0 with KP-D7)"),
    ("x_hidden_blocks_dropped", "full blocks qpass dropped, whatever quirk KP-D7 shows"),
    ("x_records_in_dropped_blocks", "records in the blocks qpass dropped"),
    ("x_blocks_flushed", "blocks pushed by flush/stop onto the open queue (no limit)"),
    ("x_blocks_flushed_closed", "blocks flush/stop freed against a closed queue"),
    ("x_records_flushed", "records in the blocks flush/stop pushed onto the open queue"),
    ("x_bytes_committed", "bytes of records written into this CPU's blocks"),
    ("x_cur_block_bytes", "bytes in this CPU's current block"),
    ("x_cur_block_records", "records in this CPU's current block"),
    ("x_kpdata_injected", "producer calls made by kpdata writes on this CPU"),
    ("x_spare_refills", "spare blocks allocated or recycled by the irq_work"),
)
#: Global-only statistics, after the per-CPU sums in the `stats` file.
KPROF_GLOBAL: tuple[tuple[str, str], ...] = (
    ("qlen", "bytes on the queue now (the seed's kpdata length)"),
    ("qlimit", "the queue's limit in bytes"),
    ("cpubufsz", "bytes of a block allocated now"),
    ("x_status_bytes", "bytes of status records written at kpctl open"),
    ("x_bytes_read", "bytes kpdata reads returned"),
    ("x_eof_reads", "kpdata reads that returned 0 or EPIPE after the hang-up"),
    ("x_eof_epipe", "of those, the reads that failed with EPIPE (quirk KP-D11)"),
    ("x_trace_nested_drop", "kptrace writes dropped: the CPU's scratch was in use"),
    ("x_trace_truncated", "kptrace writes cut to the scratch size (KP-D9 fixed)"),
)

KPROF = FlavourInfo(
    name="kprof",
    flavour_id=3,
    records_chains=True,
    sample_drops=(
        "x_records_not_tracing",
        "x_records_nospare",
        "x_records_nested_drop",
        "x_records_in_dropped_blocks",
    ),
    records_tid=False,  # a trace record carries a pid (user traces) and no tid
    kernel_pids=False,  # a kernel trace carries no pid at all
    stats=(*KPROF_PERCPU, *KPROF_GLOBAL),
    stats_percpu=KPROF_PERCPU,
    quirks=(
        Quirk(8, "KP-D3", "prof_qlimit is refused (EINVAL) whenever kpctl is open"),
        Quirk(9, "KP-D5", "a failed kpctl open keeps its lock: later opens warn, EDEADLK"),
        Quirk(10, "KP-D8", "start enables tracing 250 ms before the queue reopens"),
        Quirk(11, "KP-D11", "after the hang-up and drain: three 0-byte reads, then EPIPE"),
        Quirk(12, "KP-D7", "blocks_dropped reads 0 in stats and stats_percpu"),
    ),
    record=KTRACE.header,
    layouts=tuple(record.header for record in FRAMED),
    framed=FRAMED,
    fault_points=("queue_alloc", "status_emit", "spare_alloc", "log_alloc"),
    params=(
        Param("cpubufsz", 64 * KIB, 16 * KIB, MIB, "kprof: bytes per block (B)"),
        Param("qlimit", 64 * MIB, 4 * KIB, 1 << 30, "kprof: the queue's limit in bytes (Q)"),
        Param("trace_depth", 1, 1, MAX_DEPTH, "kprof: PCs per trace at most (d)"),
        Param("trace_pad", 0, 0, 1, "kprof: 1 pads every trace to d PCs (uniform records)"),
        Param("status", 0, 0, 1, "kprof: 1 writes a new-process status record at kpctl open"),
    ),
    mutants=(
        Mutant(
            "accept_over_limit",
            "qpass accepts a full block while qlen < qlimit + one block",
            ("KP-O3", "KP-O5"),
        ),
        Mutant(
            "early_handoff",
            "a block is handed off one record early (the reservation is 20 + L bytes larger)",
            ("KP-O2", "KP-O6"),
        ),
        Mutant(
            "drops_unreported",
            "a dropped block is counted in x_hidden_blocks_dropped only (KP-D7 without its bit)",
            ("KP-O3",),
        ),
        Mutant(
            "uncounted_commit",
            "every 13th record of a block is committed without counting it",
            ("KP-O1",),
        ),
        Mutant(
            "close_keeps_queue",
            "closing kpctl keeps the queue and its unread bytes for the next open",
            ("KP-O9",),
        ),
        Mutant(
            "lose_flushed_record",
            "flush and stop push every block one record short",
            ("KP-O4",),
        ),
        Mutant(
            "offline_keeps_block",
            "a CPU going offline keeps its partial block instead of handing it on",
            ("KP-O4",),
            case="offline",
        ),
        Mutant(
            "kpdata_twice",
            "a kpdata write injects its trace twice",
            ("KP-O10",),
        ),
        # Control-plane sabotage: run by `invoke mutants --full` (CI time), shown caught.
        Mutant(
            "eof_epipe",
            "the second read at the end of the stream fails with EPIPE, quirk or not",
            ("KP-O7",),
            quick=False,
        ),
        Mutant(
            "qlimit_while_profiling",
            "prof_qlimit is accepted while profiling",
            ("KP-O8",),
            quick=False,
        ),
        # Memory safety (issue 25): the standard run on the KASAN kernel, its console judged.
        Mutant(
            "record_past_full",
            "the record that no longer fits is written at the full block's end",
            ("KASAN",),
            case="kasan",
            quick=False,
        ),
        Mutant(
            "stop_frees_live_block",
            "STOP frees each CPU's block before the IPIs that stop it tracing (the "
            "teardown's synchronisation removed); overflows in a 50 ms window write it",
            ("KASAN",),
            case="kasan",
            quick=False,
        ),
        Mutant(
            "offline_free_armed",
            "an outgoing CPU's block is freed before its event is disarmed (the core calls "
            "the flavour first); its overflows in a 50 ms window write it",
            ("KASAN",),
            case="kasan",
            quick=False,
        ),
    ),
)


def payload_size(depth: int) -> int:
    """S of a kernel trace of ``depth`` PCs: 20 + 8d."""
    return KTRACE.payload_size(depth)


def record_size(depth: int) -> int:
    """L of a kernel trace of ``depth`` PCs: s + 1 + (1 if s < 128 else 2)."""
    return KTRACE.encoded_size(depth)


def records_per_block(block: int, depth: int) -> int:
    """R = floor((B - s - 20) / L) + 1 for uniform kernel traces of ``depth`` PCs (§2.2)."""
    s = payload_size(depth)
    return (block - s - ENVELOPE_RESERVE) // record_size(depth) + 1


KPROF = dataclasses.replace(
    KPROF,
    template_context={
        "kprof_global": KPROF_GLOBAL,
        "kprof_reserve": ENVELOPE_RESERVE,
        "kprof_max_depth": MAX_DEPTH,
    },
)
