"""The kprof oracles of seeds-spec §7.2 (KP-O1 … KP-O10), as pure checks on one `KprofRun`.

Each ``check_kp_*`` returns every way the run breaks its law as readable
`Violation` values; `check_kprof` runs every applicable one::

    violations = check_kprof(run)
    {v.oracle for v in violations}          # {"KP-O3"}

The block arithmetic uses B = ``cpubufsz`` and Q = ``qlimit`` from the spec (the
harness's own numbers) and uniform kernel records of depth d: s = 20 + 8d,
L = s + 1 + (1 if s < 128 else 2), R = floor((B - s - 20) / L) + 1
(`harness.agent.flavours.kprof.data.records_per_block`). Exact laws count the
records from what the harness injected and wrote to kpdata, never from the
agent's own counters.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

from harness.agent.core_oracles import CORE_ORACLES, CoreView, applicable_core, check_core
from harness.agent.core_oracles import check_nmi_context as nmi_context
from harness.agent.flavours.kprof import results as res
from harness.agent.flavours.kprof.data import KPROF, record_size, records_per_block
from harness.agent.flavours.kprof.results import KprofRun, KprofStats
from harness.agent.results import Violation
from harness.errors import ConfigError

KPROF_ORACLES: tuple[tuple[str, str], ...] = (
    *CORE_ORACLES,
    (
        "KP-O1",
        "commit accounting: every producer call is committed, nospare, nested or not tracing",
    ),
    ("KP-O2", "block arithmetic: blocks_full = floor((N-1)/R), current block = (N - R·full)·L"),
    ("KP-O3", "queue acceptance: min(F, ceil(Q/(R·L))) blocks accepted, the rest dropped whole"),
    ("KP-O4", "stream: every record not in a dropped block is read once, whole, well-formed"),
    ("KP-O5", "limit bound: qlen < Q + B by qpass, ≤ Q - 1 + (ncpu+1)·B after flush/stop"),
    ("KP-O6", "visibility: nothing readable until a CPU committed R + 1 records"),
    ("KP-O7", "EOF after stop: 0 forever (quirk KP-D11: 0, 0, 0, then EPIPE)"),
    ("KP-O8", "control: kpctl's errors and the qlimit rule (quirk KP-D3: always refused)"),
    ("KP-O9", "close discards: after a reopen qlen = x_status_bytes"),
    ("KP-O10", "kpdata: a write while tracing adds one kernel record with its PC; idle: none"),
    ("NMI", "overflow context matches the pseudo-NMI mode the guest booted with"),
)

_KP_D3 = KPROF.quirk_bit("KP-D3")
_KP_D7 = KPROF.quirk_bit("KP-D7")
_KP_D11 = KPROF.quirk_bit("KP-D11")
#: Kernel addresses have the top bit set on arm64 and x86_64.
KERNEL_BASE = 1 << 63


def geometry(run: KprofRun) -> tuple[int, int, int, int]:
    """(B, Q, L, R) of ``run``'s spec, for uniform kernel records of its depth."""
    block, depth = run.spec.param("cpubufsz"), run.spec.param("trace_depth")
    return block, run.spec.param("qlimit"), record_size(depth), records_per_block(block, depth)


def uniform(run: KprofRun) -> bool:
    """Whether every record has the same size: depth 1, or padded to the depth."""
    return run.spec.param("trace_depth") == 1 or run.spec.param("trace_pad") == 1


def exact(run: KprofRun) -> bool:
    """An exact run: task injections only, uniform records, no reader, no flush, no status.

    An NMI burst records wherever the CPU was, user code included (type 2, 4 bytes
    longer): its records are not uniform, so bursts make a run inexact.
    """
    return (run.injected is not None and not run.spec.pmu_produce and uniform(run)
            and not run.injections.nmi
            and not run.reader_during and run.flushes == 0
            and run.spec.param("status") == 0)  # fmt: skip


def calls_while_tracing(run: KprofRun) -> dict[int, int]:
    """CPU → producer calls the harness made while tracing: injections and kpdata writes."""
    calls = dict(run.injected or {})
    for cpu, pcs in run.kpdata.items():
        calls[cpu] = calls.get(cpu, 0) + len(pcs)
    return calls


def applicable_kprof_oracles(run: KprofRun) -> frozenset[str]:
    """Names of the oracles `check_kprof` evaluates for ``run``."""
    core = {name for name, _ in CORE_ORACLES}
    names = {name for name, _ in KPROF_ORACLES} - core | applicable_core(core_view(run))
    if not exact(run) or res.BEFORE_STOP not in run.snapshots:
        names -= {"KP-O2", "KP-O3"}
    if not {res.VISIBLE_BEFORE, res.VISIBLE_AFTER} <= set(run.snapshots):
        names.discard("KP-O6")
    if not run.eof:
        names.discard("KP-O7")
    if not run.control:
        names.discard("KP-O8")
    if not {res.QUEUED, res.REOPENED} <= set(run.snapshots):
        names.discard("KP-O9")
    if not run.kpdata and not run.kpdata_idle:
        names.discard("KP-O10")
    return frozenset(names)


def core_view(run: KprofRun) -> CoreView:
    """What the shared oracles read of a kprof run."""
    return CoreView(spec=run.spec, core=run.core, kernel=run.kernel,
                    injections=run.injections, throttling_disabled=True)  # fmt: skip


def check_kprof(run: KprofRun) -> list[Violation]:
    """Every violation of every oracle that applies to ``run``, in `KPROF_ORACLES` order.

    :raise ConfigError: the run's flavour is not kprof.
    """
    if run.spec.flavour != KPROF.name:
        raise ConfigError(f"check_kprof holds kprof's oracles; the run is {run.spec.flavour!r}")
    applicable = applicable_kprof_oracles(run)
    own = [v for name, _ in KPROF_ORACLES if name in applicable and name in _CHECKS
           for v in _CHECKS[name](run)]  # fmt: skip
    return [*check_core(core_view(run)), *own]


def _law(oracle: str, cpu: int | None, name: str, want: int, got: int, why: str) -> list[Violation]:
    return [] if want == got else [Violation(oracle, cpu, f"{name} = {want}", f"{got}", why)]


def check_kp_accounting(run: KprofRun) -> list[Violation]:
    """KP-O1 at the end: calls + kpdata writes = committed + not tracing + nospare + nested.

    In an exact run, the calls while tracing (injected + kpdata, the harness's
    count) = committed + nospare + nested on each CPU.
    """
    final, out = run.last, []
    for cpu in sorted(final.percpu):
        calls = run.core_at_final.get(cpu, {}).get("x_producer_calls", 0)
        calls += final.get(cpu, "x_kpdata_injected")
        parts = ("x_records_committed", "x_records_not_tracing", "x_records_nospare",
                 "x_records_nested_drop")  # fmt: skip
        got = sum(final.get(cpu, p) for p in parts)
        out += _law(
            "KP-O1",
            cpu,
            "committed + not_tracing + nospare + nested",
            calls,
            got,
            "every producer call (core x_producer_calls + kpdata) ends in one counter",
        )
    if run.injected is not None and not run.spec.pmu_produce:
        for cpu, want in sorted(calls_while_tracing(run).items()):
            got = sum(final.get(cpu, p) for p in ("x_records_committed", "x_records_nospare",
                                                   "x_records_nested_drop"))  # fmt: skip
            out += _law(
                "KP-O1",
                cpu,
                "committed + nospare + nested",
                want,
                got,
                "calls while tracing: injected + kpdata writes (harness count)",
            )
    return out


def check_kp_blocks(run: KprofRun) -> list[Violation]:
    """KP-O2 before stop: per CPU, from N = injected + kpdata (the harness's count)."""
    stats, (_, _, size, per_block) = run.snapshots[res.BEFORE_STOP], geometry(run)
    out = []
    for cpu, n in sorted(calls_while_tracing(run).items()):
        full = (n - 1) // per_block if n else 0
        held = n - per_block * full
        why = f"N = {n} records, R = {per_block}, L = {size}"
        out += _law("KP-O2", cpu, "x_blocks_full", full, stats.get(cpu, "x_blocks_full"), why)
        out += _law(
            "KP-O2", cpu, "x_cur_block_records", held, stats.get(cpu, "x_cur_block_records"), why
        )
        out += _law(
            "KP-O2", cpu, "x_cur_block_bytes", held * size, stats.get(cpu, "x_cur_block_bytes"), why
        )
    return out


def check_kp_queue(run: KprofRun) -> list[Violation]:
    """KP-O3 before stop: accepted = min(F, ceil(Q/(R·L))), dropped whole, qlen exact.

    F = Σ floor((N_c - 1)/R) from the harness's counts. Every block qpass saw
    holds R records, so the total is exact on any number of CPUs.
    """
    stats, (_, limit, size, per_block) = run.snapshots[res.BEFORE_STOP], geometry(run)
    full = sum((n - 1) // per_block for n in calls_while_tracing(run).values() if n)
    room = math.ceil(limit / (per_block * size))
    accepted = min(full, room)
    dropped = full - accepted
    why = f"F = {full} full blocks, Q = {limit}, R·L = {per_block * size}: {room} fit"
    out = _law(
        "KP-O3", None, "Σ x_blocks_accepted", accepted, stats.total("x_blocks_accepted"), why
    )
    out += _law(
        "KP-O3",
        None,
        "Σ x_hidden_blocks_dropped",
        dropped,
        stats.total("x_hidden_blocks_dropped"),
        why,
    )
    out += _law(
        "KP-O3",
        None,
        "Σ x_records_in_dropped_blocks",
        per_block * dropped,
        stats.total("x_records_in_dropped_blocks"),
        why,
    )
    out += _law(
        "KP-O3", None, "qlen", accepted * per_block * size, stats.stats.get("qlen", -1), why
    )
    return out + _visible_drops(run, stats)


def _visible_drops(run: KprofRun, stats: KprofStats) -> list[Violation]:
    """blocks_dropped shows the drops (KP-D7 fixed) or 0 (quirk KP-D7), per CPU and summed."""
    hidden = bool(run.spec.quirks & _KP_D7)
    out = []
    for cpu in sorted(stats.percpu):
        want = 0 if hidden else stats.get(cpu, "x_hidden_blocks_dropped")
        why = "quirk KP-D7 hides the drops" if hidden else "the drops are reported"
        out += _law("KP-O3", cpu, "blocks_dropped", want, stats.get(cpu, "blocks_dropped"), why)
    total = 0 if hidden else stats.total("x_hidden_blocks_dropped")
    return out + _law(
        "KP-O3",
        None,
        "stats blocks_dropped",
        total,
        stats.stats.get("blocks_dropped", -1),
        "the stats file's sum",
    )


def check_kp_stream(run: KprofRun) -> list[Violation]:
    """KP-O4 after reading to EOF: every record not dropped is in the stream, whole.

    Bytes: what was read decodes completely, ``x_bytes_read`` = bytes read,
    status bytes + Σ record sizes = bytes read. Per CPU: records with that cpu =
    committed - in dropped blocks (blocks flushed to a closed queue are lost too,
    so that law is judged only when there were none). Records: type 1 iff kernel
    PC, cpu online, timestamps non-decreasing per CPU.
    """
    after = run.snapshots.get(res.AFTER_READ, run.last)
    traced = sum(r.size for r in run.trace)
    status = after.stats.get("x_status_bytes", 0)
    out = _law("KP-O4", None, "undecoded bytes", 0, run.undecoded, "the stream ends on a record")
    out += _law(
        "KP-O4",
        None,
        "x_bytes_read",
        run.bytes_read,
        after.stats.get("x_bytes_read", -1),
        "bytes the reads returned",
    )
    out += _law(
        "KP-O4",
        None,
        "bytes read",
        status + traced,
        run.bytes_read,
        f"x_status_bytes {status} + the decoded trace records' {traced} bytes",
    )
    counts = Counter(r.cpu for r in run.trace)
    if after.total("x_blocks_flushed_closed") == 0:
        for cpu in sorted(set(after.percpu) | set(counts)):
            want = after.get(cpu, "x_records_committed") - after.get(
                cpu, "x_records_in_dropped_blocks"
            )
            out += _law(
                "KP-O4", cpu, "records read", want, counts[cpu], "committed - in dropped blocks"
            )
    return out + _record_fields(run)


def _record_fields(run: KprofRun) -> list[Violation]:
    out, last = [], dict[int, int]()
    for index, record in enumerate(run.trace):
        kernel = record.pcs[0] >= KERNEL_BASE if record.pcs else False
        if (record.type == 1) != kernel:
            out.append(
                Violation(
                    "KP-O4",
                    record.cpu,
                    "type 1 iff kernel PC",
                    f"type {record.type}, pc {record.pcs[0]:#x}",
                    f"record {index}",
                )
            )
        if record.cpu not in run.online_cpus:
            out.append(
                Violation(
                    "KP-O4", record.cpu, "an online CPU", f"cpu {record.cpu}", f"record {index}"
                )
            )
        if record.ts_ns < last.get(record.cpu, 0):
            out.append(
                Violation(
                    "KP-O4",
                    record.cpu,
                    f"ts ≥ {last[record.cpu]}",
                    f"{record.ts_ns}",
                    f"record {index}: per-CPU order",
                )
            )
        last[record.cpu] = max(last.get(record.cpu, 0), record.ts_ns)
    return out[:20]


def check_kp_limit(run: KprofRun) -> list[Violation]:
    """KP-O5: qlen ≤ Q - 1 + B by qpass alone; ≤ Q - 1 + (ncpu + 1)·B once flushed."""
    block, limit = run.spec.param("cpubufsz"), run.spec.param("qlimit")
    out = []
    ncpu = len(run.online_cpus)
    for name, stats in sorted(run.snapshots.items()):
        flushed = name != res.BEFORE_STOP or run.flushes > 0
        bound = limit - 1 + ((ncpu + 1) * block if flushed else block)
        qlen = stats.stats.get("qlen", 0)
        if name in (res.QUEUED, res.REOPENED) or qlen <= bound:
            continue
        text = "(ncpu + 1)·B after flush/stop" if flushed else "B by qpass alone"
        out.append(
            Violation(
                "KP-O5", None, f"qlen ≤ {bound}", f"{qlen}", f"snapshot {name}: Q - 1 + {text}"
            )
        )
    return out


def check_kp_visibility(run: KprofRun) -> list[Violation]:
    """KP-O6: after R records on one CPU qlen = 0; after one more, one block's R·L bytes."""
    _, _, size, per_block = geometry(run)
    before = run.snapshots[res.VISIBLE_BEFORE].stats.get("qlen", -1)
    after = run.snapshots[res.VISIBLE_AFTER].stats.get("qlen", -1)
    why = f"R = {per_block} records, then one more"
    return (_law("KP-O6", None, "qlen after R", 0, before, why)
            + _law("KP-O6", None, "qlen after R + 1", per_block * size, after, why))  # fmt: skip


def check_kp_eof(run: KprofRun) -> list[Violation]:
    """KP-O7: after stop and drain every read returns 0 (quirk KP-D11: 0, 0, 0, EPIPE...)."""
    if run.spec.quirks & _KP_D11:
        want = tuple("0" if i < 3 else "EPIPE" for i in range(len(run.eof)))
        why = "quirk KP-D11: three zero reads, then EPIPE"
    else:
        want, why = ("0",) * len(run.eof), "fixed: the end of the stream reads 0 forever"
    if run.eof == want and len(run.eof) >= 4:
        return []
    return [Violation("KP-O7", None, " ".join(want) + " (≥ 4 reads)", " ".join(run.eof), why)]


#: KP-O8's expected outcome of each probe, fixed mode; quirk KP-D3 changes the qlimit ones.
CONTROL_FIXED = {"cpubufsz_8": "EINVAL", "cpubufsz_2048": "EINVAL", "unknown": "EINVAL",
                 "empty": "EINVAL", "second_open": "EBUSY", "qlimit_stopped": "ok",
                 "start": "ok", "start_again": "ok", "qlimit_profiling": "EBUSY",
                 "stop": "ok"}  # fmt: skip
CONTROL_KP_D3 = {**CONTROL_FIXED, "qlimit_stopped": "EINVAL", "qlimit_profiling": "EINVAL"}


def check_kp_control(run: KprofRun) -> list[Violation]:
    """KP-O8: each probe's outcome; ``flush`` while stopped changes no counter."""
    want = CONTROL_KP_D3 if run.spec.quirks & _KP_D3 else CONTROL_FIXED
    out = [Violation("KP-O8", None, f"{name}: {expected}", run.control.get(name, "not run"),
                     "kpctl command outcome")
           for name, expected in want.items() if run.control.get(name) != expected]  # fmt: skip
    before, after = run.snapshots.get(res.AFTER_READ), run.snapshots.get(res.AFTER_FLUSH)
    if before is not None and after is not None and before != after:
        changed = sorted(_changed(before, after))
        out.append(
            Violation(
                "KP-O8", None, "no counter changed", ", ".join(changed[:8]), "flush while stopped"
            )
        )
    return out


def _changed(before: KprofStats, after: KprofStats) -> set[str]:
    """Names (``cpu:name`` per CPU) whose value differs between two snapshots."""
    names = {f"{cpu}:{k}" for cpu, values in after.percpu.items() for k, v in values.items()
             if before.get(cpu, k) != v}  # fmt: skip
    return names | {k for k, v in after.stats.items() if before.stats.get(k) != v}


def check_kp_discard(run: KprofRun) -> list[Violation]:
    """KP-O9: bytes were queued at close; after the reopen qlen = x_status_bytes."""
    queued = run.snapshots[res.QUEUED].stats.get("qlen", 0)
    reopened = run.snapshots[res.REOPENED].stats
    out = [] if queued > 0 else [Violation("KP-O9", None, "qlen > 0 before close", "0",
                                           "a flushed record was queued")]  # fmt: skip
    return out + _law(
        "KP-O9",
        None,
        "qlen after reopen",
        reopened.get("x_status_bytes", 0),
        reopened.get("qlen", -1),
        "close discards every unread byte",
    )


def check_kp_kpdata(run: KprofRun) -> list[Violation]:
    """KP-O10: one kernel record with each PC written while tracing, on the writer's CPU."""
    found = Counter((r.cpu, r.type, r.pcs[0]) for r in run.trace if r.pcs)
    anywhere = Counter(r.pcs[0] for r in run.trace if r.pcs)
    out = []
    for cpu, pcs in sorted(run.kpdata.items()):
        for value in pcs:
            out += _law(
                "KP-O10",
                cpu,
                f"kernel records with pc {value:#x}",
                1,
                found[(cpu, 1, value)],
                "written to kpdata while tracing",
            )
            out += _law(
                "KP-O10",
                cpu,
                f"records with pc {value:#x}, any CPU",
                1,
                anywhere[value],
                "exactly one",
            )
        got = run.last.get(cpu, "x_kpdata_injected")
        out += _law("KP-O10", cpu, "x_kpdata_injected", len(pcs) + (len(run.kpdata_idle)
                    if cpu == 0 else 0), got, "kpdata writes from this CPU")  # fmt: skip
    for value in run.kpdata_idle:
        out += _law(
            "KP-O10",
            None,
            f"records with pc {value:#x}",
            0,
            anywhere[value],
            "written while not tracing",
        )
    return out


def check_kp_nmi(run: KprofRun) -> list[Violation]:
    """NMI: `harness.agent.core_oracles.check_nmi_context` on the run's core counters."""
    return nmi_context(run.core, run.nmi_expected)


_CHECKS: dict[str, Callable[[KprofRun], list[Violation]]] = {
    "KP-O1": check_kp_accounting,
    "KP-O2": check_kp_blocks,
    "KP-O3": check_kp_queue,
    "KP-O4": check_kp_stream,
    "KP-O5": check_kp_limit,
    "KP-O6": check_kp_visibility,
    "KP-O7": check_kp_eof,
    "KP-O8": check_kp_control,
    "KP-O9": check_kp_discard,
    "KP-O10": check_kp_kpdata,
    "NMI": check_kp_nmi,
}
