"""The kprof oracles of seeds-spec §7.2 (KP-O1 … KP-O10), as pure checks on one `KprofRun`.

This module is the registry: which oracles there are (`KPROF_ORACLES`), which apply
to a run and which function checks each. The checks live by group in
`harness.agent.flavours.kprof.blocks` (KP-O1, KP-O2, KP-O3, KP-O5, KP-O6), `.stream`
(KP-O4, KP-O10) and `.control` (KP-O7, KP-O8, KP-O9), what each compared in a run (the
n of its PASS) in `.compared`; what the harness knows of a run before reading a counter
(geometry, exactness, its calls) is in `.model`. Each check
returns every way the run breaks its law as readable `Violation` values;
`check_kprof` runs every applicable one::

    violations = check_kprof(run)
    {v.oracle for v in violations}          # {"KP-O3"}

Exact laws count the records from what the harness injected and wrote to kpdata,
never from the agent's own counters. One comparison was replaced for that reason:
KP-O3 compared blocks_dropped with x_hidden_blocks_dropped, two counters the agent
raises together (it checked only the quirk switch); blocks_dropped is now judged
against the harness's count of dropped blocks (`blocks._visible_drops`).
"""

from __future__ import annotations

from collections.abc import Callable

from harness.agent.flavours.kprof import results as res
from harness.agent.flavours.kprof.blocks import (
    check_kp_accounting,
    check_kp_blocks,
    check_kp_limit,
    check_kp_queue,
    check_kp_visibility,
)
from harness.agent.flavours.kprof.compared import compared_kprof
from harness.agent.flavours.kprof.control import check_kp_control, check_kp_discard, check_kp_eof
from harness.agent.flavours.kprof.data import KPROF
from harness.agent.flavours.kprof.model import exact
from harness.agent.flavours.kprof.results import KprofRun
from harness.agent.flavours.kprof.stream import check_kp_kpdata, check_kp_stream
from harness.agent.judging import Laws
from harness.agent.oracles.core import (
    CORE_ORACLES,
    CoreView,
    core_view_of,
)
from harness.agent.oracles.nmi import check_nmi
from harness.agent.values.results import Judged, Violation

#: Its own oracles, after the shared ones, in report order.
_OWN: tuple[tuple[str, str], ...] = (
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
KPROF_ORACLES = (*CORE_ORACLES, *_OWN)


def applicable_kprof_oracles(run: KprofRun) -> frozenset[str]:
    """Names of the oracles `check_kprof` evaluates for ``run`` (`LAWS`: ``_APPLIES``)."""
    return LAWS.applicable(run)


def core_view(run: KprofRun) -> CoreView:
    """What the shared oracles read of a kprof run."""
    return core_view_of(run, run.core)


def check_kprof(run: KprofRun) -> list[Violation]:
    """Every violation of every oracle that applies to ``run``, in `KPROF_ORACLES` order.

    :raise ConfigError: the run's flavour is not kprof.
    """
    return LAWS.check(run)


def judge_kprof(run: KprofRun) -> list[Judged]:
    """What each oracle of the table compared in ``run`` (`harness.agent.oracles.core`).

    Kprof's own laws count what their checks compared (`compared.compared_kprof`).
    """
    return LAWS.judge(run)


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
    "NMI": check_nmi,
}

#: When a law applies (the others always do): each needs the readings, reads or writes
#: its comparison is made with.
_APPLIES: dict[str, Callable[[KprofRun], bool]] = {
    "KP-O2": lambda run: exact(run) and res.BEFORE_STOP in run.readings,
    "KP-O3": lambda run: exact(run) and res.BEFORE_STOP in run.readings,
    "KP-O6": lambda run: {res.VISIBLE_BEFORE, res.VISIBLE_AFTER} <= set(run.readings),
    "KP-O7": lambda run: bool(run.eof),
    "KP-O8": lambda run: bool(run.control),
    "KP-O9": lambda run: {res.QUEUED, res.REOPENED} <= set(run.readings),
    "KP-O10": lambda run: bool(run.kpdata or run.kpdata_idle),
}
LAWS = Laws(name=KPROF.name, oracles=_OWN, checks=_CHECKS, compared=compared_kprof,
            core=core_view, applies=_APPLIES)  # fmt: skip
