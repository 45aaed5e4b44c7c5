"""tprof's control interface for the fuzzer (`harness.agent.controlspec`).

A scenario opens ``/dev/tprof`` and STARTs before the steps, STOPs and reads the
stream to its end after them; between, a sequence injects bursts, drains by hand
(``kick``, with ``drain = "manual"``), busy-loops, probes with interrupts off, takes
CPUs offline and back, arms a one-shot fault at START's workqueue creation or buffer
allocation (the agent's ``fault`` file) and STOPs and STARTs again (``restart``: a
first START that fails is an outcome, the second must succeed). tprof's own oracles
(TP-O1's sample conservation among them) judge every sequence::

    [op.op for op in INTERFACE.ops]    # ['inject', 'spin', 'wait', 'idle', 'probe', 'kick', ...]
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.agent.controlspec import (
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
from harness.agent.flavours.tprof.data import TPROF_PARAM
from harness.agent.flavours.tprof.flavour import FLAVOUR
from harness.agent.flavours.tprof.run import ioctl_step
from harness.agent.steps import DEBUGFS, DEVICE

_FAULTS = ("fault-wq", "fault-buf")


#: Ops that allocate a buffer (a swap's fresh one): an armed buf_alloc fault fails them,
#: as it should (fixed build, fuzz seed 1: fault-buf, kick cpu=1 → ENOMEM).
_ALLOCATING = ("kick", "offline", "online")
#: invoke fuzz's fault-injection ops (`harness.fuzz.faults`): their first START may fail
#: before it reaches the armed fault point, which then fails the second (fixed build,
#: debug kernel, seed 1: fault-buf, then failslab count=4 → the second START ENOMEM).
_INJECTED = ("failslab", "failslab-late", "fail-page-alloc", "fail-page-alloc-late")


def _allows(facts: Facts, step: StepLike) -> bool:
    """One fault armed at a time, nothing allocating a buffer while one is armed.

    Two faults would fail both STARTs of one restart; only ``restart`` takes a fault.
    """
    if not facts.get("armed", 0):
        return True
    return step.op not in (*_FAULTS, *_ALLOCATING, *_INJECTED)


def _closing(facts: Facts) -> tuple[Mapping[str, int | str], ...]:
    """A fault still armed is taken by a restart, not by the collect's STOP."""
    return ({"op": "restart"},) if facts.get("armed", 0) else ()


def _after(facts: Facts, step: StepLike) -> dict[str, int]:
    out = dict(facts)
    if step.op in _FAULTS:
        out["armed"] = 1
    elif step.op == "restart":
        out["armed"] = 0  # the first START took the fault
        out["restarts"] = out.get("restarts", 0) + 1
    elif step.op == "offline":
        out["hotplugs"] = out.get("hotplugs", 0) + 1
    return out


def _unjudged(facts: Facts) -> tuple[str, ...]:
    """TP-O2 counts a swap per CPU at START, per kick and at STOP, none for others.

    A restart's STOPs and STARTs and a CPU's offline swap are not in that count
    (tprof-hotplug.toml expects no TP-O2 either). Measured on the fixed build, fuzz
    seed 1, 2 vCPUs: one ``restart``: expected 4 swaps, observed 12; ``offline`` and
    ``online`` of CPU 1: expected 4, observed 5.
    """
    return ("TP-O2",) if facts.get("restarts", 0) or facts.get("hotplugs", 0) else ()


INTERFACE = ControlInterface(
    flavour="tprof",
    files=(DEVICE, f"{DEBUGFS}/stats", f"{DEBUGFS}/fault"),
    ops=(
        *shared_ops(kick=True, hotplug=True),
        *own_ops(
            FLAVOUR.ops,
            OpDecl(
                "fault-wq", what="START's next workqueue creation fails (fault point wq_create)"
            ),
            OpDecl(
                "fault-buf", what="START's next buffer allocation fails (fault point buf_alloc)"
            ),
            OpDecl("restart", weight=2, blocks=True, what="STOP and START twice; the second holds"),
        ),
    ),
    model=Model(allows=_allows, after=_after, unjudged=_unjudged, closing=_closing),
    agent={"drain": "manual"},  # kicks are the only drains, so TP-O1 counts them
    processes=(unload_busy(), openers(DEVICE, "EBUSY")),
    no_processes={
        "blocked-readers": "one owner: a second open is refused (EBUSY, the openers op), "
        "and a reader sharing the owner's open would take records the oracles count",
    },
)

#: What a failslab or fail_page_alloc op arms failures for (`harness.fuzz.faults`): STOP,
#: then START, which allocates the buffers and creates the workqueue; the first try may
#: be refused, the second must START. The model counts it as a ``restart``.
FAULT_CALL = (ioctl_step("TPROF_IOC_STOP"), ioctl_step("TPROF_IOC_START", bytes(TPROF_PARAM.size)))
FAULT_CALL_AS = "restart"
