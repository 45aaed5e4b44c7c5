"""The dt oracles of seeds-spec §7.3, as pure checks on one `DtRun`.

Each ``check_dt_*`` returns every way the run breaks its law as readable `Violation`
values (an empty list means pass); `check_dt` runs every applicable one, so a broken
law never hides the others::

    violations = check_dt(run)
    {v.oracle for v in violations}          # {"DT-O3"}
    for name, description in DT_ORACLES:    # report order
        ...

Here: the table, which oracles apply to a run, and the readers' laws (DT-O8, DT-O10).
The laws over the counters (DT-O1 … DT-O7, DT-INJ), and the checks removed from them
and why, are `harness.agent.flavours.dt.counters`; those over the events read are
`harness.agent.flavours.dt.stream`. What each of dt's own laws compared (the n of its
PASS) is `harness.agent.flavours.dt.compared`'s.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.agent.flavours.dt.compared import compared_dt
from harness.agent.flavours.dt.counters import (
    check_dt_conservation,
    check_dt_drain,
    check_dt_gstats,
    check_dt_injection,
    check_dt_no_reader,
    check_dt_recursion,
    check_dt_skipticks,
)
from harness.agent.flavours.dt.data import DT
from harness.agent.flavours.dt.results import DtRun
from harness.agent.flavours.dt.stream import (
    CANARY,
    PROBE_PROFILE,
    canary_of,
    readers_share,
)
from harness.agent.judging import Laws
from harness.agent.oracles.core import (
    CORE_ORACLES,
    CoreView,
    core_view_of,
)
from harness.agent.oracles.nmi import check_nmi
from harness.agent.values.results import Judged, Violation

__all__ = ["CANARY", "PROBE_PROFILE", "canary_of"]  # re-exported: the stream's constants

#: Oracle names and one-line descriptions, in report order.
#: Its own oracles, after the shared ones, in report order.
_OWN: tuple[tuple[str, str], ...] = (
    ("DT-O1", "conservation: E = the core's producer calls (+ nested windows); every get "
              "recurs, drops or commits; committed = read + inring"),
    ("DT-O2", "no reader before the read: committed = min(E - recurevt, 15), the rest dropped"),
    ("DT-O3", "drain: every committed event read once, whole, in seq order, canary intact"),
    ("DT-O4", "GSTATS: sums of the per-CPU counters (DT-D1: skiptick, recurevt of the last CPU)"),
    ("DT-O6", "recursion: calls inside a nested window count as recurevt, nothing else does"),
    ("DT-O7", "skipped ticks: forced skips, plus with profile ticks the periods the PMU "
              "counted that the kernel never delivered (DT-L5)"),
    ("DT-O8", "a reader racing the producers never gets 0 bytes: it ends at its time limit"),
    ("DT-O10", "readers racing on one open: each committed event reaches exactly one"),
    ("DT-INJ", "injection: get calls = injected + nested + one outer get per nested window"),
    ("NMI", "overflow context matches the pseudo-NMI mode the guest booted with"),
)  # fmt: skip
DT_ORACLES = (*CORE_ORACLES, *_OWN)


def applicable_dt_oracles(run: DtRun) -> frozenset[str]:
    """Names of the oracles `check_dt` evaluates for ``run`` (`LAWS`: ``_APPLIES``)."""
    return LAWS.applicable(run)


def check_dt(run: DtRun) -> list[Violation]:
    """Every violation of every oracle that applies to ``run``, in `DT_ORACLES` order.

    :raise ConfigError: the run's flavour is not dt (these are dt's oracles).
    """
    return LAWS.check(run)


def judge_dt(run: DtRun) -> list[Judged]:
    """What each applicable oracle of the table compared in ``run``.

    The core's as `harness.agent.oracles.core` counts them, dt's own as
    `harness.agent.flavours.dt.compared` does (n = 0: UNJUDGED, with why).
    """
    return LAWS.judge(run)


def core_view(run: DtRun) -> CoreView:
    """What the shared oracles (`harness.agent.oracles.core`) read of a dt run.

    PROFILE compares paired samples for dt (`harness.agent.flavours.dt.flavour`'s
    `PAIR_WITHIN_NS`): dt wakes its reader after every event, and perf's samples of
    later interrupts show that wakeup (2 vCPUs: gic_ipi_send_mask 5.7 % against the
    agent's 0.3 %); over whole profiles the unmutated agent failed in 4 of 10 runs.
    """
    return core_view_of(run, run.core)


def check_dt_reader(run: DtRun) -> list[Violation]:
    """DT-O8: the background reader ended at its time limit, never on a 0-byte read.

    dt has no EOF: while recording, a read blocks until events come. A read that
    returns 0 bytes (DT-D5: the count went below zero) ends profctl's reader early.
    """
    end = run.background_errno
    if end == "EINTR":
        return []
    detail = "profctl's reader stops at a 0-byte read (errno 0) or a failure"
    return [Violation("DT-O8", None, "reader ended by its time limit (EINTR)", f"{end}", detail)]


def check_dt_readers(run: DtRun) -> list[Violation]:
    """DT-O10: readers racing on one open: `stream.readers_share`."""
    return readers_share(run)


_CHECKS: dict[str, Callable[[DtRun], list[Violation]]] = {
    "DT-O1": check_dt_conservation,
    "DT-O2": check_dt_no_reader,
    "DT-O3": check_dt_drain,
    "DT-O4": check_dt_gstats,
    "DT-O6": check_dt_recursion,
    "DT-O7": check_dt_skipticks,
    "DT-O8": check_dt_reader,
    "DT-O10": check_dt_readers,
    "DT-INJ": check_dt_injection,
    "NMI": check_nmi,
}

#: When a law applies (the others always do). DT-INJ needs an injection run without
#: PMU-produced ticks (``pmu_produce`` off); DT-O2 (no reader) does not hold when a
#: reader ran while recording; DT-O8 needs that reader, DT-O10 readers racing each
#: other on the drain.
_APPLIES: dict[str, Callable[[DtRun], bool]] = {
    "DT-O2": lambda run: not run.reader_during_recording,
    "DT-O8": lambda run: run.reader_during_recording,
    "DT-O10": lambda run: run.concurrent_readers >= 2,
    "DT-INJ": lambda run: run.injected is not None and not run.spec.pmu_produce,
}
LAWS = Laws(name=DT.name, oracles=_OWN, checks=_CHECKS, compared=compared_dt, core=core_view,
            applies=_APPLIES)  # fmt: skip
