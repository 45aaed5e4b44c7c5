"""kprof's block and queue oracles (seeds-spec §7.2 KP-O1, KP-O2, KP-O3, KP-O5, KP-O6).

Where each producer call ends, how records fill blocks and how the queue takes them.
Each check takes a `KprofRun` and counts from what the harness injected and wrote to
kpdata (`harness.agent.flavours.kprof.model`), never from the agent's own counters::

    check_kp_accounting(run)  # KP-O1: every call committed, nospare, nested or not tracing
    check_kp_blocks(run)      # KP-O2: blocks_full = floor((N-1)/R), the current block's rest
    check_kp_queue(run)       # KP-O3: min(F, ceil(Q/(R·L))) accepted, the rest dropped whole
    check_kp_limit(run)       # KP-O5: qlen below Q - 1 + B (qpass), + ncpu·B after flushes
    check_kp_visibility(run)  # KP-O6: nothing readable before R + 1 records on a CPU
"""

from __future__ import annotations

import math

from harness.agent.flavours.kprof import results as res
from harness.agent.flavours.kprof.data import KPROF
from harness.agent.flavours.kprof.model import calls_while_tracing, geometry
from harness.agent.flavours.kprof.results import KprofRun, KprofStats
from harness.agent.oracles.laws import at_most, equal
from harness.agent.values.results import Violation

_KP_D7 = KPROF.quirk_bit("KP-D7")


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
        out += equal(
            "KP-O1",
            cpu,
            "committed + not_tracing + nospare + nested",
            want=calls,
            got=sum(final.get(cpu, p) for p in parts),
            detail="every producer call (core x_producer_calls + kpdata) ends in one counter",
        )
    if run.injected is not None and not run.spec.pmu_produce:
        tracing = ("x_records_committed", "x_records_nospare", "x_records_nested_drop")
        for cpu, want in sorted(calls_while_tracing(run).items()):
            out += equal(
                "KP-O1",
                cpu,
                "committed + nospare + nested",
                want=want,
                got=sum(final.get(cpu, p) for p in tracing),
                detail="calls while tracing: injected + kpdata writes (harness count)",
            )
    return out


def check_kp_blocks(run: KprofRun) -> list[Violation]:
    """KP-O2 before stop: per CPU, from N = injected + kpdata (the harness's count)."""
    stats, (_, _, size, per_block) = run.readings[res.BEFORE_STOP], geometry(run)
    out = []
    for cpu, n in sorted(calls_while_tracing(run).items()):
        full = (n - 1) // per_block if n else 0
        held = n - per_block * full
        why = f"N = {n} records, R = {per_block}, L = {size}"
        for name, want in (("x_blocks_full", full), ("x_cur_block_records", held),
                           ("x_cur_block_bytes", held * size)):  # fmt: skip
            out += equal("KP-O2", cpu, name, want=want, got=stats.get(cpu, name), detail=why)
    return out


def check_kp_queue(run: KprofRun) -> list[Violation]:
    """KP-O3 before stop: accepted = min(F, ceil(Q/(R·L))), dropped whole, qlen exact.

    F = Σ floor((N_c - 1)/R) from the harness's counts. Every block qpass saw
    holds R records, so the total holds with no slack on any number of CPUs.
    """
    stats, (_, limit, size, per_block) = run.readings[res.BEFORE_STOP], geometry(run)
    full = sum((n - 1) // per_block for n in calls_while_tracing(run).values() if n)
    room = math.ceil(limit / (per_block * size))
    accepted = min(full, room)
    dropped = full - accepted
    why = f"F = {full} full blocks, Q = {limit}, R·L = {per_block * size}: {room} fit"
    laws = (
        ("Σ x_blocks_accepted", accepted, stats.total("x_blocks_accepted")),
        ("Σ x_hidden_blocks_dropped", dropped, stats.total("x_hidden_blocks_dropped")),
        ("Σ x_records_in_dropped_blocks", per_block * dropped,
         stats.total("x_records_in_dropped_blocks")),
        ("qlen", accepted * per_block * size, stats.stats.get("qlen", -1)),
    )  # fmt: skip
    out = [v for name, want, got in laws
           for v in equal("KP-O3", None, name, want=want, got=got, detail=why)]  # fmt: skip
    return out + _visible_drops(run, stats, dropped)


def _visible_drops(run: KprofRun, stats: KprofStats, dropped: int) -> list[Violation]:
    """The stats file's blocks_dropped: the harness's count of drops, or 0 (quirk KP-D7).

    Compared with the drops the harness counted (F - accepted), not with the agent's
    x_hidden_blocks_dropped: the agent raises both at once, so comparing them only
    checked the quirk switch. Per CPU the drops are not predictable (which CPU's
    block meets the full queue depends on the order the CPUs hand off), so only the
    sum is judged; mutant ``drops_unreported`` shows it fail.
    """
    hidden = bool(run.spec.quirks & _KP_D7)
    why = "quirk KP-D7 hides the drops" if hidden else "the drops the harness counted"
    return equal("KP-O3", None, "stats blocks_dropped", want=0 if hidden else dropped,
                 got=stats.stats.get("blocks_dropped", -1), detail=why)  # fmt: skip


def check_kp_limit(run: KprofRun) -> list[Violation]:
    """KP-O5: qlen ≤ Q - 1 + B by qpass alone; ≤ Q - 1 + (ncpu + 1)·B once flushed."""
    block, limit = run.spec.param("cpubufsz"), run.spec.param("qlimit")
    out = []
    ncpu = len(run.online_cpus)
    for name, stats in sorted(run.readings.items()):
        if name in (res.QUEUED, res.REOPENED):
            continue
        flushed = name != res.BEFORE_STOP or run.flushes > 0
        bound = limit - 1 + ((ncpu + 1) * block if flushed else block)
        text = "(ncpu + 1)·B after flush/stop" if flushed else "B by qpass alone"
        out += at_most("KP-O5", None, "qlen", bound=bound, got=stats.stats.get("qlen", 0),
                       detail=f"reading {name}: Q - 1 + {text}")  # fmt: skip
    return out


def check_kp_visibility(run: KprofRun) -> list[Violation]:
    """KP-O6: after R records on one CPU qlen = 0; after one more, one block's R·L bytes."""
    _, _, size, per_block = geometry(run)
    before = run.readings[res.VISIBLE_BEFORE].stats.get("qlen", -1)
    after = run.readings[res.VISIBLE_AFTER].stats.get("qlen", -1)
    why = f"R = {per_block} records, then one more"
    return (equal("KP-O6", None, "qlen after R", want=0, got=before, detail=why)
            + equal("KP-O6", None, "qlen after R + 1", want=per_block * size, got=after,
                    detail=why))  # fmt: skip
