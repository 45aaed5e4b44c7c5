"""dt's laws over the events a run read: counts per CPU, seq order, canaries.

The part of DT-O3 that reads the decoded stream, and DT-O10's two readers of one
open. Pure functions of one `DtRun`, used by `harness.agent.flavours.dt.counters` (DT-O3)
and `harness.agent.flavours.dt.oracles` (DT-O10)::

    violations = [*event_counts(run), *event_seqs(run), *event_fields(run)]
    violations += readers_share(run)       # DT-O10: each committed event read once

A stream is judged against the counters the agent keeps per CPU (``x_committed``):
what the reader actually received is evidence those counters do not produce.
"""

from __future__ import annotations

from collections import Counter

from harness.agent.flavours.dt.results import DtEvent, DtOpenStats, DtRun
from harness.agent.oracles.laws import Law, all_equal
from harness.agent.values.results import Violation

#: The canary of an event with seq 0; each event's is this ^ the low 32 bits of its seq.
CANARY = 0xD7E7C0DE
PROBE_PROFILE = 1


def canary_of(seq: int) -> int:
    """The canary the module writes last into the event with sequence number ``seq``."""
    return CANARY ^ (seq & 0xFFFFFFFF)


def event_counts(run: DtRun) -> list[Violation]:
    """DT-O3: the events read whose cpu is c number ``x_committed_c``."""
    counts = Counter(event.cpu for event in run.events)
    stats, violations = run.after_read, []
    for cpu in sorted(set(stats.percpu) | set(counts)):
        committed = _get(stats, cpu, "x_committed")
        law = Law("events", committed, counts[cpu], f"x_committed = {committed}")
        violations += all_equal("DT-O3", cpu, [law], "events read whose cpu is this CPU")
    return violations


def event_seqs(run: DtRun) -> list[Violation]:
    """DT-O3, one reader: per CPU, seqs in read order are 1, 2, 3, … (no gap, repeat, decrease)."""
    last: dict[int, int] = {}
    violations = []
    for index, event in enumerate(run.events):
        prev = last.get(event.cpu, 0)
        last[event.cpu] = max(prev, event.seq)
        if event.seq == prev + 1:
            continue
        if event.seq <= prev:
            what = "a repeat" if event.seq == prev else "a decrease"
        else:
            what = f"a gap: seq {prev + 1}..{event.seq - 1} missing"
        detail = f"event {index} of the stream is {what} after seq {prev}"
        violations.append(
            Violation("DT-O3", event.cpu, f"seq {prev + 1}", f"seq {event.seq}", detail)
        )
    return violations


def event_fields(run: DtRun) -> list[Violation]:
    """DT-O3: every event's canary matches its seq, its probe is profile, its CPU was online."""
    violations = [
        found
        for event in run.events
        for found in (_torn(event), _probe(event))
        if found is not None
    ]
    online = ",".join(map(str, sorted(run.online_cpus)))
    strays = Counter(e.cpu for e in run.events if e.cpu not in run.online_cpus)
    violations += [
        Violation("DT-O3", cpu, f"cpu in {online}", f"cpu {cpu} in {n} events", "not online")
        for cpu, n in sorted(strays.items())
    ]
    return violations


def readers_share(run: DtRun) -> list[Violation]:
    """DT-O10: readers racing on one open got each committed event exactly once.

    Per CPU c the seqs all readers received together are 1 … ``x_committed_c``,
    each once: a seq read twice is a duplicate (two readers copied one slot, DT-D6),
    a missing one an event consumed that reached no reader.
    """
    seen = Counter((event.cpu, event.seq) for event in run.events)
    violations = []
    for cpu in sorted(run.after_read.percpu):
        committed = _get(run.after_read, cpu, "x_committed")
        twice = sorted(seq for (c, seq), n in seen.items() if c == cpu and n > 1)
        missing = [seq for seq in range(1, committed + 1) if (cpu, seq) not in seen]
        detail = f"{run.concurrent_readers} readers of one open"
        if twice:
            observed = f"{len(twice)} seqs read twice or more ({_some(twice)})"
            violations.append(Violation("DT-O10", cpu, "every seq read once", observed, detail))
        if missing:
            observed = f"{len(missing)} of 1..{committed} never read ({_some(missing)})"
            violations.append(Violation("DT-O10", cpu, "every seq read", observed, detail))
    return violations


def _some(seqs: list[int]) -> str:
    shown = ", ".join(map(str, seqs[:5]))
    return shown + (", …" if len(seqs) > 5 else "")


def _torn(event: DtEvent) -> Violation | None:
    want = canary_of(event.seq)
    if event.canary == want:
        return None
    detail = f"torn event: seq {event.seq}'s canary does not match"
    expected, observed = f"canary {want:#010x}", f"canary {event.canary:#010x}"
    return Violation("DT-O3", event.cpu, expected, observed, detail)


def _probe(event: DtEvent) -> Violation | None:
    if event.probe == PROBE_PROFILE:
        return None
    expected, observed = f"probe {PROBE_PROFILE}", f"probe {event.probe}"
    return Violation("DT-O3", event.cpu, expected, observed, f"event seq {event.seq}")


def _get(stats: DtOpenStats, cpu: int, name: str) -> int:
    return stats.percpu.get(cpu, {}).get(name, 0)
