"""Allocation failures injected into the sequence's own process: failslab, fail_page_alloc.

Pure. On a kernel built with fault injection (the debug variant: ``CONFIG_FAILSLAB``,
``CONFIG_FAIL_PAGE_ALLOC``, ``CONFIG_FAULT_INJECTION_DEBUG_FS``) a fault op arms one
capability for the profctl process that holds the agent's files, and for it only
(``task-filter``, ``/proc/self/make-it-fail``; Documentation/fault-injection/
fault-injection.rst): every allocation it makes fails (``probability`` 100,
``interval`` 1) until ``times`` = the step's ``count`` failures were forced; a late op
(``failslab-late``, ``fail-page-alloc-late``) lets ``space`` = ``count`` units of
allocations through first and forces one. Armed, it makes the flavour's fault call
(``FAULT_CALL`` in its interface module: tprof's STOP and START, kprof's kptrace write
and read, an open and close of dt's and hwpmc's device; the stats read otherwise)
inside a ``repeat:2`` whose first round may fail, so a refused call is an outcome the
model accepts; the round then disarms (``probability`` 0, tried until nothing can
fail), and the second round must succeed: the agent unwound what the failure left.
Sanitizers, kmemleak and the laws judge the rest, as after any sequence::

    body = steps_of(FAILSLAB, count=2, call=("cat:/sys/kernel/debug/profagent/stats",))
    fired(body, results)         # {'failslab': (2, 1)}: failures forced, steps refused
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass

from harness.agent import flavours, profctl
from harness.agent.controlspec import STATS, ArgRange, ControlInterface, OpDecl
from harness.errors import ConfigError

#: Where the capabilities' attributes are (``CONFIG_FAULT_INJECTION_DEBUG_FS``).
DEBUGFS = "/sys/kernel/debug"
#: The per-task switch ``task-filter`` reads; /proc/self is profctl itself.
MAKE_IT_FAIL = "/proc/self/make-it-fail"
#: How many failures one op forces at most (``times``); the call's first round takes them.
TIMES = ArgRange("count", (1, 4), edge=(1, 4))
#: A late op's ``space``, in its capability's units: the allocations let through first.
SPACE = ArgRange("count", (1, 32), edge=(1, 32))


@dataclass(frozen=True, slots=True)
class Capability:
    """One fault-injection capability as an op: its debugfs directory, its own attributes.

    ``space_unit`` 0: the op's ``count`` is ``times`` (the call's first allocations fail:
    for an open, the VFS's own file). Otherwise one failure (``times`` 1) after ``space``
    = ``count`` units (bytes of slab objects, or pages) of the call's allocations
    passed (Documentation/fault-injection: ``space``), so it lands further in, in the
    agent's own code (a second open: past the VFS's file, in the driver's open).
    """

    op: str
    name: str  # the debugfs directory, and the name its "forcing a failure" line gives
    extra: tuple[tuple[str, str], ...] = ()
    space_unit: int = 0

    def times_space(self, count: int) -> tuple[int, int]:
        """``times`` and ``space`` for a step's ``count``."""
        return (count, 0) if not self.space_unit else (1, count * self.space_unit)

    @property
    def directory(self) -> str:
        """The capability's debugfs directory."""
        return f"{DEBUGFS}/{self.name}"

    def decl(self) -> OpDecl:
        """The op as the generator draws it: ``count`` is ``times``."""
        return OpDecl(self.op, args=(SPACE if self.space_unit else TIMES,), blocks=True,
                      what=f"{self.name} armed for this process's fault call")  # fmt: skip


#: kmalloc and kmem_cache_alloc; GFP_KERNEL ones too (the default ignores every allocation
#: that may sleep, which is every one the agent's calls make).
FAILSLAB = Capability("failslab", "failslab", (("ignore-gfp-wait", "N"),))
FAILSLAB_LATE = Capability("failslab-late", "failslab", FAILSLAB.extra, space_unit=128)
#: alloc_pages(): order 0 too (the default starts at order 1); highmem pages (user memory,
#: pipe buffers, vmalloc's pages) stay out, so profctl's own output and page faults hold.
FAIL_PAGE_ALLOC = Capability(
    "fail-page-alloc",
    "fail_page_alloc",
    (("ignore-gfp-wait", "N"), ("ignore-gfp-highmem", "Y"), ("min-order", "0")),
)
FAIL_PAGE_ALLOC_LATE = Capability(
    "fail-page-alloc-late", "fail_page_alloc", FAIL_PAGE_ALLOC.extra, space_unit=1
)
CAPABILITIES = (FAILSLAB, FAILSLAB_LATE, FAIL_PAGE_ALLOC, FAIL_PAGE_ALLOC_LATE)
#: The debugfs directories, each once.
DIRECTORIES = (f"{DEBUGFS}/failslab", f"{DEBUGFS}/fail_page_alloc")
#: The guest command that says whether the kernel has fault injection's debugfs files.
PRESENT_COMMAND = f"test -d {FAILSLAB.directory} && test -d {FAIL_PAGE_ALLOC.directory}"

#: The fault call of a flavour that declares none: the core's stats read (single_open).
DEFAULT_CALL = (profctl.cat_step(STATS),)
#: The name of the fault call in a flavour's interface module.
CALL_NAME = "FAULT_CALL"
#: The scenario op the fault call amounts to for the model, if any (tprof: restart).
AS_NAME = "FAULT_CALL_AS"


@dataclass(frozen=True, slots=True)
class FaultCall:
    """A flavour's fault call: profctl steps, and the scenario op they amount to."""

    steps: tuple[str, ...]
    amounts_to: str | None = None


def call_of(interface: ControlInterface) -> FaultCall:
    """The flavour's declared fault call (`DEFAULT_CALL` when it declares none).

    :raise ConfigError: the declared call is empty or holds a repeat (its round is one).
    """
    package = flavours.package(interface.flavour).package
    module = importlib.import_module(f"{package}.interface")
    steps = tuple(getattr(module, CALL_NAME, DEFAULT_CALL))
    amounts_to = getattr(module, AS_NAME, None)
    if not steps or any(step.startswith("repeat:") for step in steps):
        raise ConfigError(f"{package}.interface.{CALL_NAME}: one or more steps, no repeat")
    return FaultCall(steps, amounts_to)


def capability(op: str) -> Capability | None:
    """The capability a fault op arms; None for any other op."""
    return next((c for c in CAPABILITIES if c.op == op), None)


def attribute_steps(cap: Capability, count: int) -> tuple[str, ...]:
    """Set the capability's attributes (nothing fails yet: no process is marked).

    ``verbose`` 1 prints the kernel's "forcing a failure" line for each failure that
    did not ask __GFP_NOWARN (its rate limit raised so that none is left out).
    """
    times, space = cap.times_space(count)
    attrs = (("task-filter", "Y"), ("probability", "100"), ("interval", "1"),
             ("space", str(space)), ("verbose", "1"), ("verbose_ratelimit_burst", "1000"),
             *cap.extra, ("times", str(times)))  # fmt: skip
    return tuple(profctl.write_step(f"{cap.directory}/{k}", v) for k, v in attrs)


def steps_of(cap: Capability, count: int, call: Sequence[str]) -> tuple[str, ...]:
    """The op's steps: twice {mark this process, the call, disarm}; the first round may fail.

    The process is marked inside the repeat: profctl's repeat itself opens /dev/null and
    grows its descriptor table, which fails in a process marked before it (ENOMEM, the
    first guest run). The disarm writes ``probability`` 0; its open allocates too, so
    while ``times`` is left it fails and uses one up: after ``times`` + 1 attempts
    nothing can fail any more (``probability`` or ``times`` is 0), and the second
    round's marking is harmless. Then the process is unmarked and ``times`` read back
    (`fired`).
    """
    times, _ = cap.times_space(count)
    disarm = (profctl.write_step(f"{cap.directory}/probability", "0"),) * (times + 1)
    rounds = (profctl.write_step(MAKE_IT_FAIL, "1"), *call, *disarm)
    after = (profctl.write_step(MAKE_IT_FAIL, "0"), profctl.cat_step(f"{cap.directory}/times"))
    return (*attribute_steps(cap, count), profctl.repeat_step(2, len(rounds)), *rounds, *after)


#: Every capability disarmed, from the harness's shell (between sequences: a sequence that
#: failed half-way may have left ``times``).
RESET_COMMAND = " ; ".join(
    f"echo 0 > {d}/probability ; echo 0 > {d}/times ; echo 0 > {d}/space" for d in DIRECTORIES
)


def fired(
    steps: Sequence[str], results: Sequence[profctl.StepResult]
) -> dict[str, tuple[int, int]]:
    """Per capability: the failures it forced and the steps its first rounds saw fail.

    Forced: ``times`` armed less ``times`` read back after the op (an allocation that
    asked __GFP_NOWARN fails without the kernel's "forcing a failure" line, so the
    console undercounts). Failed steps: the ``repeat`` line's ``failed``.
    """
    out: dict[str, tuple[int, int]] = {}
    armed: dict[str, int] = {}
    for step, result in zip(steps, results, strict=False):
        for directory in DIRECTORIES:
            name = directory.rsplit("/", 1)[1]
            if step.startswith(f"write:{directory}/times:"):
                armed[name] = int(step.rsplit(":", 1)[1])
            elif step == profctl.cat_step(f"{directory}/times") and result.ok:
                left = int(result.lines[0]) if result.lines else armed.get(name, 0)
                forced, failed = out.get(name, (0, 0))
                out[name] = (forced + armed.pop(name, 0) - left, failed)
        if step.startswith("repeat:") and result.ok and armed:
            name = next(iter(armed))
            forced, failed = out.get(name, (0, 0))
            out[name] = (forced, failed + result.int_value("failed"))
    return out
