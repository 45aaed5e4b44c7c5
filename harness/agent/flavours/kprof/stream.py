"""kprof's stream oracles (seeds-spec §7.2 KP-O4, KP-O10): what a reader of kpdata gets.

Each check takes a `KprofRun` whose trace the harness read to EOF and decoded::

    check_kp_stream(run)      # KP-O4: every record not in a dropped block, read once, whole
    check_kp_kpdata(run)      # KP-O10: one kernel record per kpdata write while tracing
"""

from __future__ import annotations

from collections import Counter

from harness.agent.flavours.kprof import results as res
from harness.agent.flavours.kprof.results import KprofRun
from harness.agent.oracles.laws import equal
from harness.agent.values.results import Violation

#: Kernel addresses have the top bit set on arm64 and x86_64.
KERNEL_BASE = 1 << 63


def check_kp_stream(run: KprofRun) -> list[Violation]:
    """KP-O4 after reading to EOF: every record not dropped is in the stream, whole.

    Bytes: what was read decodes completely, ``x_bytes_read`` = bytes read,
    status bytes + Σ record sizes = bytes read. Per CPU: records with that cpu =
    committed - in dropped blocks (blocks flushed to a closed queue are lost too,
    so that law is judged only when there were none). Records: type 1 iff kernel
    PC, cpu online, timestamps non-decreasing per CPU.
    """
    after = run.readings.get(res.AFTER_READ, run.last)
    traced = sum(r.size for r in run.trace)
    status = after.stats.get("x_status_bytes", 0)
    out = equal("KP-O4", None, "undecoded bytes", want=0, got=run.undecoded,
                detail="the stream ends on a record")  # fmt: skip
    out += equal("KP-O4", None, "x_bytes_read", want=run.bytes_read,
                 got=after.stats.get("x_bytes_read", -1),
                 detail="bytes the reads returned")  # fmt: skip
    out += equal("KP-O4", None, "bytes read", want=status + traced, got=run.bytes_read,
                 detail=f"x_status_bytes {status} + the trace records' {traced} bytes")  # fmt: skip
    counts = Counter(r.cpu for r in run.trace)
    if after.total("x_blocks_flushed_closed") == 0:
        for cpu in sorted(set(after.percpu) | set(counts)):
            want = after.get(cpu, "x_records_committed")
            want -= after.get(cpu, "x_records_in_dropped_blocks")
            out += equal("KP-O4", cpu, "records read", want=want, got=counts[cpu],
                         detail="committed - in dropped blocks")  # fmt: skip
    return out + _record_fields(run)


def _record_fields(run: KprofRun) -> list[Violation]:
    """Type 1 iff kernel PC, an online CPU, per-CPU time order; the first 20 violations."""
    out, last = [], dict[int, int]()
    for index, record in enumerate(run.trace):
        where = f"record {index}"
        kernel = record.pcs[0] >= KERNEL_BASE if record.pcs else False
        if (record.type == 1) != kernel:
            out.append(Violation("KP-O4", record.cpu, "type 1 iff kernel PC",
                                 f"type {record.type}, pc {record.pcs[0]:#x}", where))  # fmt: skip
        if record.cpu not in run.online_cpus:
            out.append(Violation("KP-O4", record.cpu, "an online CPU", f"cpu {record.cpu}", where))
        if record.ts_ns < last.get(record.cpu, 0):
            out.append(Violation("KP-O4", record.cpu, f"ts ≥ {last[record.cpu]}",
                                 f"{record.ts_ns}", f"{where}: per-CPU order"))  # fmt: skip
        last[record.cpu] = max(last.get(record.cpu, 0), record.ts_ns)
    return out[:20]


def check_kp_kpdata(run: KprofRun) -> list[Violation]:
    """KP-O10: one kernel record with each PC written while tracing, on the writer's CPU."""
    found = Counter((r.cpu, r.type, r.pcs[0]) for r in run.trace if r.pcs)
    anywhere = Counter(r.pcs[0] for r in run.trace if r.pcs)
    out = []
    for cpu, pcs in sorted(run.kpdata.items()):
        for value in pcs:
            out += equal(
                "KP-O10",
                cpu,
                f"kernel records with pc {value:#x}",
                want=1,
                got=found[(cpu, 1, value)],
                detail="written to kpdata while tracing",
            )
            out += equal("KP-O10", cpu, f"records with pc {value:#x}, any CPU", want=1,
                         got=anywhere[value], detail="exactly one")  # fmt: skip
        idle = len(run.kpdata_idle) if cpu == 0 else 0
        out += equal("KP-O10", cpu, "x_kpdata_injected", want=len(pcs) + idle,
                     got=run.last.get(cpu, "x_kpdata_injected"),
                     detail="kpdata writes from this CPU")  # fmt: skip
    for value in run.kpdata_idle:
        out += equal("KP-O10", None, f"records with pc {value:#x}", want=0, got=anywhere[value],
                     detail="written while not tracing")  # fmt: skip
    return out
