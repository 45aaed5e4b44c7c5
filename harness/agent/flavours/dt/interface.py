"""dt's control interface for the fuzzer (`harness.agent.controlspec`).

dt's device takes DTIOCRECORD on and off around the steps; between them a sequence
injects bursts, nests a burst in a held-open get, forces skipped ticks, runs a
background reader, disables and re-enables the profile probe (``reprobe``: DT-D10's
no-op disable makes the re-enable fail, a finding of kind "guest"), and picks once
each the read size of the final drain, the readers racing on the rings after RECORD
off (``racers``: DT-D6's unserialised readers read an event twice, DT-O10) and the
copy-out that fails (``copy-fault``, in a racer's read: DT-D7 loses the events copied
before it). The law: every event DTIOCGSTATS counts as read arrived whole in the
reads (DT-D2 consumes a partial one, DT-D7 a fault's copied ones)::

    INTERFACE.op("read-size").arg("count").edge      # (368, 369, 552, 735, 3072)
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.agent import profctl
from harness.agent.controlspec import (
    ArgRange,
    ControlInterface,
    Facts,
    Law,
    Model,
    OpDecl,
    StepLike,
    blocked_readers,
    own_ops,
    shared_ops,
    unload_busy,
)
from harness.agent.flavours.dt.data import DT_EVT
from harness.agent.flavours.dt.flavour import FLAVOUR
from harness.agent.steps import DEBUGFS, DEVICE

EVENT = DT_EVT.size
#: The final drain's read: from one whole event to its default of 64.
READ = ArgRange(
    "count", (EVENT, EVENT * 64), edge=(EVENT, EVENT + 1, EVENT * 3 // 2, EVENT * 2 - 1, EVENT * 64)
)


#: Ops the plan takes one value of (`DtPlan`'s settings): each is given once, with the fact
#: that remembers it.
ONCE = {"read-size": "read_size", "racers": "racers", "copy-fault": "copy_fault"}


def _allows(facts: Facts, step: StepLike) -> bool:
    if step.op in ONCE:
        return not facts.get(ONCE[step.op], 0)  # the op is given once
    if step.op == "reader":
        return bool(step.on) != bool(facts.get("reader", 0))
    return True


def _after(facts: Facts, step: StepLike) -> dict[str, int]:
    out = dict(facts)
    if step.op == "skip":
        out[f"skip.{step.cpu}"] = 1
    elif step.op in ("inject", "nest"):  # a producer call takes the CPU's forced skips
        for key in [k for k in out if k.startswith("skip.")]:
            if step.cpu in ("all", int(key.split(".")[1])):
                out[key] = 0
    elif step.op in ONCE:
        out[ONCE[step.op]] = step.count or 0
    elif step.op == "reader":
        out["reader"] = int(bool(step.on))
    return out


def _closing(facts: Facts) -> tuple[Mapping[str, int | str], ...]:
    """A one-call burst on every CPU whose forced skips no producer call took yet.

    The skip hook counts at the CPU's next producer call (DT-O7 expects every forced
    skip counted); with only injected bursts recording, none may come otherwise.
    """
    return tuple(
        {"op": "inject", "cpu": int(key.split(".")[1]), "count": 1}
        for key, pending in sorted(facts.items())
        if key.startswith("skip.") and pending
    )


INTERFACE = ControlInterface(
    flavour="dt",
    files=(DEVICE, f"{DEBUGFS}/stats"),
    # Every own op is drawn, inside its rule (`FLAVOUR.ops`) and narrower where the
    # rule is a scenario's limit: skip 1..100 and 2^32 - 1 (rule: up to 2^32 - 1),
    # nest 1..64 (100000), racers 2..3 (3: one races nothing), copy-fault 1..12 (1000).
    ops=(
        *shared_ops(kick=False, hotplug=False),
        *own_ops(
            FLAVOUR.ops,
            OpDecl("reader", switch=True, blocks=True, what="a background reader on or off"),
            OpDecl(
                "skip",
                cpu="one",
                args=(ArgRange("count", (1, 100), edge=(1, 2**32 - 1)),),
                what="forced skipped profile ticks",
            ),
            OpDecl(
                "nest",
                cpu="one",
                args=(ArgRange("count", (1, 64), edge=(1,)),),
                what="a burst inside a held-open get",
            ),
            OpDecl("read-size", args=(READ,), what="bytes each read of the final drain asks"),
            OpDecl(
                "racers",
                args=(ArgRange("count", (2, 3)),),
                blocks=True,
                what="readers racing each other on the rings after RECORD off",
            ),
            OpDecl(
                "copy-fault",
                args=(ArgRange("count", (1, 12), edge=(1, 2)),),
                what="the nth copy-out of a racer's reads fails as on an unmapped page",
            ),
            OpDecl("reprobe", what="RECORD off, the profile probe disabled and enabled, RECORD on"),
        ),
    ),
    laws=(
        Law(
            "DT-readevt",
            "samples",
            "stats.readevt",
            "events DTIOCGSTATS counts as read are the whole events the reads returned",
        ),
    ),
    model=Model(allows=_allows, after=_after, closing=_closing),
    # Each open has its own rings, and one that never records has nothing to read.
    processes=(unload_busy(), blocked_readers(DEVICE, EVENT * 16)),
    unjudged={
        "DT-O6": "it counts every call of a nested window as recursion, but a window whose "
        "get finds the ring full holds none (fixed build, fuzz seed 1: inject all 415, nest "
        "cpu=1 count=9 → recurevt 0, expected 9)",
    },
)

#: What a failslab or fail_page_alloc op arms failures for (`harness.fuzz.faults`): a
#: second open of the device, which allocates its rings (each open has its own), and
#: its close; the body holds only the session's descriptor, so the open's is fd 4. The
#: first try may be refused, the second must open.
FAULT_CALL = (profctl.open_step(DEVICE), profctl.close_step(4))
