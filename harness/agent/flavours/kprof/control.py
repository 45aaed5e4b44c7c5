"""kprof's control oracles (seeds-spec §7.2 KP-O7, KP-O8, KP-O9).

The end of the stream, kpctl's commands and what a close leaves; each check takes a
`KprofRun`::

    check_kp_eof(run)         # KP-O7: 0 forever after stop (quirk KP-D11: 0, 0, 0, EPIPE)
    check_kp_control(run)     # KP-O8: each kpctl probe's outcome; flush while stopped
    check_kp_discard(run)     # KP-O9: after a close and reopen qlen = x_status_bytes
"""

from __future__ import annotations

from harness.agent.flavours.kprof import results as res
from harness.agent.flavours.kprof.data import KPROF
from harness.agent.flavours.kprof.results import KprofRun, KprofStats
from harness.agent.oracles.laws import at_least, equal
from harness.agent.values.results import Violation

_KP_D3 = KPROF.quirk_bit("KP-D3")
_KP_D11 = KPROF.quirk_bit("KP-D11")

#: KP-O8's expected outcome of each probe, fixed mode; quirk KP-D3 changes the qlimit ones.
CONTROL_FIXED = {"cpubufsz_8": "EINVAL", "cpubufsz_2048": "EINVAL", "unknown": "EINVAL",
                 "empty": "EINVAL", "second_open": "EBUSY", "qlimit_stopped": "ok",
                 "start": "ok", "start_again": "ok", "qlimit_profiling": "EBUSY",
                 "stop": "ok"}  # fmt: skip
CONTROL_KP_D3 = {**CONTROL_FIXED, "qlimit_stopped": "EINVAL", "qlimit_profiling": "EINVAL"}


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


def check_kp_control(run: KprofRun) -> list[Violation]:
    """KP-O8: each probe's outcome; ``flush`` while stopped changes no counter."""
    want = CONTROL_KP_D3 if run.spec.quirks & _KP_D3 else CONTROL_FIXED
    out = [Violation("KP-O8", None, f"{name}: {expected}", run.control.get(name, "not run"),
                     "kpctl command outcome")
           for name, expected in want.items() if run.control.get(name) != expected]  # fmt: skip
    before, after = run.readings.get(res.AFTER_READ), run.readings.get(res.AFTER_FLUSH)
    if before is not None and after is not None and before != after:
        changed = sorted(_changed(before, after))
        out.append(
            Violation(
                "KP-O8", None, "no counter changed", ", ".join(changed[:8]), "flush while stopped"
            )
        )
    return out


def _changed(before: KprofStats, after: KprofStats) -> set[str]:
    """Names (``cpu:name`` per CPU) whose value differs between two readings."""
    names = {f"{cpu}:{k}" for cpu, values in after.percpu.items() for k, v in values.items()
             if before.get(cpu, k) != v}  # fmt: skip
    return names | {k for k, v in after.stats.items() if before.stats.get(k) != v}


def check_kp_discard(run: KprofRun) -> list[Violation]:
    """KP-O9: bytes were queued at close; after the reopen qlen = x_status_bytes."""
    queued = run.readings[res.QUEUED].stats.get("qlen", 0)
    reopened = run.readings[res.REOPENED].stats
    out = at_least("KP-O9", None, "qlen before close", bound=1, got=queued,
                   detail="a flushed record was queued")  # fmt: skip
    status = reopened.get("x_status_bytes", 0)
    return out + equal("KP-O9", None, "qlen after reopen", want=status,
                       got=reopened.get("qlen", -1),
                       detail="close discards every unread byte")  # fmt: skip
