"""One view of a sample, whatever flavour recorded it: what the content oracles read.

Each flavour turns its own records into `Sample` values (its run's ``content()`` view);
`harness.agent.oracles.content` judges them::

    Sample(cpu=1, pc=0x51000878, pid=212, tid=212, user=True,
           chain=(0x51000970, 0x510009AC, 0x510006CC), truncated=False)

**The chain rule**, the one every decoder and oracle keeps: ``chain`` holds the
callers' return addresses, innermost first, after the sampled PC (not including it),
and ``length`` counts the frames *with* the PC. The records hold walks as the core's
``pa_chain`` writes them, PC first (kprof's ``pcs``, dt's ``kstack``/``ustack``, with
``*_n`` counting the PC; hwpmc's ``chain`` holds only the callers while its ``depth``
counts the PC): each decoder splits the PC off with `callers` (or its record's own
``callers``), here at the edge. A flavour that records no call chain leaves ``chain``
empty and its run says so (`chain_depth` None).

Other sample types are other things: each flavour's decoded record (tprof's
``TprofRecord``, dt's events, kprof's trace records, hwpmc's ``LogRecord``) is its wire
format, turned into `Sample` by its run's ``content()``; `harness.vm.perf.PerfSample` is
Linux perf's sample (frames with their DSOs and symbols, as perf printed them), which
PROFILE folds beside the agent's samples.

``truncated``: the walk stopped because it reached the depth asked for, not because
the stack ended. ``time_ns``: the record's own
timestamp (``ktime_get_mono_fast_ns``), which the content oracles use only to choose
the samples of a workload's phase, never as a value under test. ``length`` and
``stop``: the walk's frame count (PC included) and stop cause (enum pa_chain_stop)
where the record holds them beside its PCs (dt, hwpmc); None where it does not (the
count is then the chain's length), so a record claiming more frames than its PCs can
still be judged.
``user_walk`` and ``user_stop``: a kernel sample's user stack where the record holds
one beside its kernel chain (dt's ustack: the task's user PC at its kernel entry,
then its callers) and why that walk stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: arm64: user addresses have the top 16 bits clear, kernel addresses all set.
_USER_TOP, _KERNEL_TOP = 0x0000, 0xFFFF


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample: where (CPU, PC, mode), whose (pid, tid), and how it got there."""

    cpu: int
    pc: int
    pid: int
    tid: int | None  # None: the flavour's record carries no thread id (kprof)
    user: bool
    chain: tuple[int, ...] = ()
    truncated: bool = False
    #: When it was taken, guest CLOCK_MONOTONIC ns; None: the record carries no time (tprof).
    time_ns: int | None = None
    length: int | None = None
    stop: int | None = None
    user_walk: tuple[int, ...] = ()
    user_stop: int | None = None


def callers(walk: Sequence[int]) -> tuple[int, ...]:
    """The chain of a walk written PC first (``pa_chain``'s frames): every frame but the PC."""
    return tuple(walk[1:])


def kernel_address(address: int) -> bool:
    """Whether ``address`` lies in the arm64 kernel's half of the address space."""
    return address >> 48 == _KERNEL_TOP


def user_address(address: int) -> bool:
    """Whether ``address`` lies in the arm64 user half of the address space."""
    return address >> 48 == _USER_TOP
