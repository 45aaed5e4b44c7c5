"""One CPU for the harness's own tasks: every other user task moved off it, and back.

WHO's exclusive half (`harness.agent.oracles.who.check_exclusive`) needs a CPU on
which only the ground-truth workload (and the busy loops the harness pinned beside it)
ran user code. The harness arranges it instead of trusting anything the agent says:
before the run, profctl's ``isolate`` step moves every user task of the guest (every
thread of every process with a non-empty ``/proc/PID/cmdline``: dropbear's listener,
so later logins inherit the mask, the shell, profctl itself) off that CPU and saves
each one's mask; after the run, ``masks`` reads every user task's Cpus_allowed_list
(one that appeared later must exclude the CPU too) and ``restore`` puts the masks back,
also when the run failed (the pooled guest serves later tests)::

    run = isolated(agent, launches, lambda: tprof_run(agent, spec, plan, launches))
    run.truth.isolation      # (Isolation(cpu=1, tasks=9, moved=9, ...),)

Each step is its own profctl process, so the whole run's sequence (START to STOP)
lies inside the arrangement. Pure but for `isolated`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from harness.agent import profctl
from harness.agent.steps import GUEST_DIR
from harness.errors import InfraError

LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Isolation:
    """What ``isolate`` did to ``cpu`` and what ``masks`` found after the run.

    ``intruders``: ``TID`` of each live user task (not the harness's own on ``cpu``)
    whose mask held the CPU after the run; ``failed``: tasks ``isolate`` could not move.
    """

    cpu: int
    tasks: int
    moved: int
    failed: int
    first_failed: str
    checked: int
    intruders: tuple[int, ...]
    intruder_name: str = ""

    @property
    def exclusive(self) -> bool:
        """Whether only the harness's own tasks could run user code on the CPU."""
        return self.failed == 0 and not self.intruders

    def describe(self) -> str:
        """One phrase: how the CPU was arranged, or why it is not exclusive."""
        moved = f"{self.moved} of {self.tasks} user tasks moved off, {self.checked} checked after"
        if self.failed:
            return f"not exclusive: {self.failed} task(s) could not be moved ({self.first_failed})"
        if self.intruders:
            tids = ",".join(map(str, self.intruders))
            return f"not exclusive: tid(s) {tids} ({self.intruder_name}) allowed on it ({moved})"
        return f"exclusive ({moved})"


def saved_path(cpu: int) -> str:
    """The guest file the masks before ``isolate`` of ``cpu`` go to."""
    return f"{GUEST_DIR}/isolation-{cpu}.masks"


def isolation_cpu(cpus: Sequence[int], chain_cpu: int) -> int | None:
    """The CPU to isolate for a chain workload on ``chain_cpu`` (None: no other CPU)."""
    return chain_cpu if any(c != chain_cpu for c in cpus) else None


def isolation_of(
    cpu: int, isolate: profctl.StepResult, masks: profctl.StepResult, own: frozenset[int]
) -> Isolation:
    """The evidence of ``isolate`` and ``masks`` steps; ``own``: tids the harness pinned there.

    :raise InfraError: a step failed or lacks its counts.
    """
    for result in (isolate, masks):
        if not result.ok:
            raise InfraError(f"CPU isolation failed: {result.describe()}")
    listed = masks.values.get("tids", "")
    tids = tuple(int(t) for t in listed.split(",") if t)
    intruders = tuple(t for t in tids if t not in own)
    return Isolation(
        cpu=cpu,
        tasks=isolate.int_value("tasks"),
        moved=isolate.int_value("moved"),
        failed=isolate.int_value("failed"),
        first_failed=isolate.values.get("first", ""),
        checked=masks.int_value("tasks"),
        intruders=intruders,
        intruder_name=masks.values.get("first", "") if intruders else "",
    )


class _Steps(Protocol):
    def run_steps(
        self, steps: Sequence[str], *, timeout_s: float | None = None
    ) -> tuple[profctl.StepResult, ...]: ...


class _Truthful(Protocol):
    @property
    def truth(self) -> Any: ...


R = TypeVar("R", bound=_Truthful)


def _input_free(agent: object) -> bool:
    """Whether ``agent`` drives an input-free guest (`harness.scenarios.inputfree`).

    Such a guest runs one planned profctl sequence from init's script, with no login
    to keep off a CPU, and its plan ends at the first profctl command: the isolate
    step would end it before the run. The exclusive-CPU law then does not apply, as
    with one vCPU.
    """
    return bool(getattr(getattr(agent, "shell", None), "input_free", False))


def isolated(agent: _Steps, cpu: int | None, run: Callable[[], R]) -> R:
    """``run()`` with every user task but the harness's off ``cpu``; its truth gets the evidence.

    ``cpu`` None, or an input-free guest: ``run()`` as it is (no CPU to spare, or a
    plan with no room for the steps). The masks are restored after the run, also
    when it raised. The run's ``truth`` (a `harness.agent.truth.program.TruthEvidence`)
    gains the `Isolation`; the tasks the harness pinned to ``cpu`` (its workloads and
    busy loops, by pid and tid) do not count as intruders.

    :raise InfraError: isolate, masks or restore failed (the run's own errors pass through).
    """
    if cpu is None or _input_free(agent):
        return run()
    path = saved_path(cpu)
    isolate = agent.run_steps((profctl.isolate_step(cpu, path),))[0]
    if not isolate.ok:
        raise InfraError(f"CPU isolation failed: {isolate.describe()}")
    try:
        result = run()
    except BaseException:
        agent.run_steps((profctl.restore_step(cpu, path),))
        raise
    masks, restore = agent.run_steps((profctl.masks_step(cpu), profctl.restore_step(cpu, path)))
    if not restore.ok or restore.int_value("failed"):
        raise InfraError(f"CPU masks not restored: {restore.describe()}")
    evidence = result.truth
    if evidence is None:
        return result
    pinned = [w for w in evidence.workloads if w.cpu == cpu]
    own = frozenset(t for w in pinned for t in (w.pid, w.tid, *w.neighbours))
    found = isolation_of(cpu, isolate, masks, own)
    LOG.info("CPU %d for the harness's tasks: %s", cpu, found.describe())
    truth = dataclasses.replace(evidence, isolation=(*evidence.isolation, found))
    return cast(R, dataclasses.replace(cast(Any, result), truth=truth))
