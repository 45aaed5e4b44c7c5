"""hwpmc's control interface for the fuzzer (`harness.agent.controlspec`).

A scenario allocates and starts one SS PMC on every CPU before the steps (``pmc`` and
``process`` only place them, so the fuzzer declares them from their rules and draws
neither). A sequence starts, stops and releases those PMCs, suppresses and resumes the
sweeping timer per CPU, holds an entry pending and injects bursts. The model keeps
each PMC's state, since a START, STOP or RELEASE step must succeed: a stopped PMC is
started, a released one is never touched again::

    INTERFACE.model.allows({"pmc.0": RELEASED}, Step("pmc-start", cpu=0))   # False
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.agent import profctl
from harness.agent.controlspec import (
    OK,
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
from harness.agent.flavours.hwpmc.data import HWPMC
from harness.agent.flavours.hwpmc.flavour import FLAVOUR
from harness.agent.steps import DEBUGFS, DEVICE

RUNNING, STOPPED, RELEASED = 1, 0, 2
#: Which PMC state each PMC op needs.
_NEEDS = {"pmc-start": (STOPPED,), "pmc-stop": (RUNNING,), "pmc-release": (RUNNING, STOPPED)}
_MAKES = {"pmc-start": RUNNING, "pmc-stop": STOPPED, "pmc-release": RELEASED}


def _start(params: Mapping[str, int]) -> dict[str, int]:
    # Every PMC runs: a missing pmc.<cpu> reads RUNNING. A ring holds nsamples entries.
    return {"nsamples": params.get("nsamples", HWPMC.param("nsamples").default)}


def _filled(facts: Facts, cpu: int) -> int:
    """Entries injected on ``cpu`` since its sweeps last resumed, or since the start.

    An upper bound on what its ring holds: a sweep that still ran may have emptied it.
    """
    return facts.get(f"filled.{cpu}", 0) + facts.get("filled.all", 0) - facts.get(f"mark.{cpu}", 0)


def _allows(facts: Facts, step: StepLike) -> bool:
    """A PMC op in the state it needs; a switch that changes; bursts while all PMCs run.

    A burst lands through the PMCs' overflows: with one stopped or released it waits
    out its deadline (ETIMEDOUT) or finds the sources off (EAGAIN). Measured on the
    fixed build, fuzz seed 1: pmc-release cpu=1, inject cpu=1 count=4000 → ETIMEDOUT.
    So does a burst on a CPU whose ring fills while its sweeps are suppressed: the full
    ring stalls the counter, and nothing sweeps it to restart (seed 7: suppress cpu=1,
    inject cpu=1 count=2106, inject cpu=all count=1 → ETIMEDOUT after 30 s).
    """
    cpu = step.cpu
    if step.op == "inject":
        suppressed = [
            int(k.split(".")[1]) for k, on in facts.items() if k.startswith("suppressed.") and on
        ]
        hit = suppressed if step.cpu == "all" else [c for c in suppressed if c == step.cpu]
        room = all(_filled(facts, c) + int(step.count or 0) < facts["nsamples"] for c in hit)
        return room and all(
            state == RUNNING for key, state in facts.items() if key.startswith("pmc.")
        )
    if step.op in _NEEDS:
        return facts.get(f"pmc.{cpu}", RUNNING) in _NEEDS[step.op]
    if step.op in ("suppress", "resume"):
        return bool(facts.get(f"suppressed.{cpu}", 0)) == (step.op == "resume")
    return True


def _after(facts: Facts, step: StepLike) -> dict[str, int]:
    out = dict(facts)
    if step.op in _MAKES:
        out[f"pmc.{step.cpu}"] = _MAKES[step.op]
    elif step.op in ("suppress", "resume"):
        out[f"suppressed.{step.cpu}"] = int(step.op == "suppress")
        if step.op == "resume":  # its sweeps empty the ring: count from here
            out[f"filled.{step.cpu}"], out[f"mark.{step.cpu}"] = 0, facts.get("filled.all", 0)
    elif step.op == "inject":
        key = f"filled.{step.cpu}"  # filled.all for every CPU's
        out[key] = facts.get(key, 0) + int(step.count or 0)
    return out


def _closing(facts: Facts) -> tuple[Mapping[str, int | str], ...]:
    """Every CPU whose sweeps were suppressed is resumed before the collect.

    The collect's RELEASE waits for the PMC's entries to be swept (bounded by
    release_ms): left suppressed, an entry in the ring ends it in ETIMEDOUT, and HW-O6
    and HW-O7 fail on the fixed build (CI's fuzz stage, seed 1: inject cpu=1 count=537,
    suppress cpu=1, pmc-release cpu=0, kick cpu=0 → x_inring 1, runcount 1, ETIMEDOUT).
    """
    return tuple(
        {"op": "resume", "cpu": int(key.split(".")[1])}
        for key, suppressed in sorted(facts.items())
        if key.startswith("suppressed.") and suppressed
    )


INTERFACE = ControlInterface(
    flavour="hwpmc",
    files=(DEVICE, f"{DEBUGFS}/stats"),
    ops=(
        *shared_ops(kick=True, hotplug=False),
        # pmc and process are not given: declared from their rules, never drawn.
        *own_ops(
            FLAVOUR.ops,
            OpDecl("suppress", cpu="one", what="the timer stops sweeping the CPU's ring"),
            OpDecl("resume", cpu="one", what="the timer sweeps the CPU's ring again"),
            OpDecl("pmc-start", cpu="one", weight=2, what="PMCSTART of the CPU's SS PMC"),
            OpDecl("pmc-stop", cpu="one", weight=2, what="PMCSTOP of the CPU's SS PMC"),
            OpDecl("pmc-release", cpu="one", what="PMCRELEASE of the CPU's SS PMC"),
            OpDecl("pending", cpu="one", what="the next entry recorded stays pending"),
        ),
    ),
    model=Model(start=_start, allows=_allows, after=_after, closing=_closing),
    # Every open is an owner of its own: others open and close beside the scenario's.
    processes=(unload_busy(), openers(DEVICE, OK)),
    no_processes={
        "blocked-readers": "no read blocks: /dev/hwpmc has no read, its debugfs log "
        "returns what it holds at once",
    },
)

#: What a failslab or fail_page_alloc op arms failures for (`harness.fuzz.faults`): a
#: second open of the device, which allocates its owner, and its close; the
#: body holds only the session's descriptor, so the open's is fd 4. The first try may
#: be refused, the second must open.
FAULT_CALL = (profctl.open_step(DEVICE), profctl.close_step(4))
