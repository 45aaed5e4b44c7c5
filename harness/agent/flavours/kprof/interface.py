"""kprof's control interface for the fuzzer (`harness.agent.controlspec`).

A scenario is one kpctl session: kpctl is opened and ``start`` written before the
steps. A sequence sends kpctl's commands in any order (``start``, ``stop``,
``flush``, ``prof_qlimit``, ``prof_cpubufsz``), writes traces to kpdata, injects in
NMI and task context and runs a background reader. ``fault-queue`` arms a failure
of the next open's queue allocation; ``kpctl-reopen`` opens kpctl again after the
session closed it: the first attempt may fail, the second must open (KP-D5 keeps
the failed one's lock). The model follows whether the profiler is profiling and
predicts ``stats.qlimit``: ``prof_qlimit`` takes a value from 1 MiB up while
stopped and is refused while profiling (KP-D3 refuses it always)::

    INTERFACE.model.expected({"qlimit": 2 << 20})    # {'stats.qlimit': 2097152}
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.agent import profctl
from harness.agent.controlspec import (
    ArgRange,
    ControlInterface,
    Facts,
    Model,
    OpDecl,
    StepLike,
    openers,
    own_ops,
    shared_ops,
    unload_busy,
)
from harness.agent.flavours.kprof.flavour import FLAVOUR
from harness.agent.flavours.kprof.run import KPTRACE
from harness.agent.steps import DEBUGFS

KIB = 1024
#: The control file a session holds open (`harness.agent.flavours.kprof.run.KPCTL`).
KPCTL = f"{DEBUGFS}/kprof/kpctl"
#: prof_qlimit's KiB accepted while stopped: 1 MiB up to totalram / 32. The guests have
#: at least 256 MiB, so up to 8 MiB is valid on every one; above that the model says
#: nothing (-1) rather than guess the guest's memory.
QLIMIT = ArgRange("count", (1024, 8192), edge=(1023, 1024, 8192), invalid=(1, 512))
QLIMIT_SURE_KIB = 8192
CPUBUFSZ = ArgRange("count", (16, 1024), edge=(15, 16, 1024, 1025), invalid=(1,))


#: Ops a sequence takes once: an armed fault stays armed until an open takes it, and
#: the reopen after the session is one pair of attempts.
_ONCE = ("fault-queue", "kpctl-reopen")


def _start(params: Mapping[str, int]) -> dict[str, int]:
    return {"profiling": 1, "qlimit": params.get("qlimit", 64 << 20)}


def _after(facts: Facts, step: StepLike) -> dict[str, int]:
    out = dict(facts)
    if step.op == "kpctl-start":
        out["profiling"] = 1
    elif step.op == "kpctl-stop":
        out["profiling"] = 0
    elif step.op == "kpctl-qlimit" and not facts.get("profiling") and out["qlimit"] >= 0:
        kib = step.count or 0
        if kib > QLIMIT_SURE_KIB:
            out["qlimit"] = -1  # perhaps above totalram / 32: unknown from here on
        elif kib >= QLIMIT.valid[0]:
            out["qlimit"] = kib * KIB
    elif step.op == "reader":
        out["reader"] = int(bool(step.on))
    elif step.op == "kick":
        out["kicks"] = out.get("kicks", 0) + 1
    elif step.op in _ONCE:
        out[step.op] = 1
    return out


def _unjudged(facts: Facts) -> tuple[str, ...]:
    """KP-O2 and KP-O3's block arithmetic has no ``kick`` (a one-CPU flush) in it.

    Measured on the fixed build, fuzz seed 1, 2 vCPUs: inject-task cpu=0 count=1, kick
    cpu=0 → KP-O2 expected the record in the current block, KP-O3 qlen 0; the kick
    had pushed the block: qlen 30, one record's bytes.
    """
    return ("KP-O2", "KP-O3") if facts.get("kicks", 0) else ()


def _allows(facts: Facts, step: StepLike) -> bool:
    """A switch changes; bursts only while profiling.

    KP-O1 counts every injected call as one made while tracing (the executor's
    count); a burst after ``stop`` records nothing (fixed build, fuzz seed 1:
    kpctl-stop, inject all 1 → KP-O1 expected 1, observed 0).
    """
    if step.op in ("inject", "inject-task"):
        return bool(facts.get("profiling", 1))
    if step.op == "reader":
        return bool(step.on) != bool(facts.get("reader", 0))
    if step.op in _ONCE:
        return not facts.get(step.op, 0)
    return True


def _expected(facts: Facts) -> dict[str, int]:
    qlimit = facts.get("qlimit", -1)
    return {} if qlimit < 0 else {"stats.qlimit": qlimit}


INTERFACE = ControlInterface(
    flavour="kprof",
    files=(KPCTL, f"{DEBUGFS}/kprof/kpdata", f"{DEBUGFS}/stats"),
    # kpdata is not given, so declared from its rule and not drawn: the executor counts
    # a kpdata write on CPU 0 (the op names none), but the write lands where profctl
    # runs, so on 2 vCPUs KP-O1 fails on the fixed build (fuzz seed 1: kpdata after
    # inject cpu=0).
    ops=(
        *shared_ops(kick=True, hotplug=True),
        *own_ops(
            FLAVOUR.ops,
            OpDecl("reader", switch=True, blocks=True, what="a background reader of kpdata"),
            OpDecl("kpctl-start", weight=2, what="kpctl start"),
            OpDecl("kpctl-stop", weight=2, what="kpctl stop: blocks flushed, queue hung up"),
            OpDecl("kpctl-flush", what="kpctl flush"),
            OpDecl("kpctl-qlimit", args=(QLIMIT,), weight=2, what="kpctl prof_qlimit <KiB>"),
            OpDecl("kpctl-cpubufsz", args=(CPUBUFSZ,), what="kpctl prof_cpubufsz <KiB>"),
            OpDecl(
                "fault-queue", what="kpctl's next open fails its queue allocation (queue_alloc)"
            ),
            OpDecl(
                "kpctl-reopen",
                blocks=True,
                what="after the session, kpctl opened and closed twice: the second must open",
            ),
            OpDecl(
                "inject-task",
                cpu="one",
                args=(ArgRange("count", (1, 2000), edge=(1,)),),
                what="producer calls in task context",
            ),
        ),
    ),
    model=Model(start=_start, allows=_allows, after=_after, expected=_expected, unjudged=_unjudged),
    # The session holds kpctl: a second open is refused ("Global profiler is already open").
    processes=(unload_busy(), openers(KPCTL, "EBUSY")),
    no_processes={
        "blocked-readers": "kpdata's readers share the one queue: a second reader takes "
        "records KP-O1 counts as read by the session's drain",
    },
)

#: What a failslab or fail_page_alloc op arms failures for (`harness.fuzz.faults`): a
#: kptrace write (its scratch, the ring on first use) and read (the flattened copy).
#: kpctl's own allocations are at its open, which the session holds (a second open is
#: refused before it allocates); the first try may be refused, the second must succeed.
FAULT_CALL = (profctl.write_step(KPTRACE, "fuzz fault call"), profctl.cat_step(KPTRACE))
