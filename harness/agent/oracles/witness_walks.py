"""WITNESS's walks: a record's chains against the walks the witness made, cut as the agent's.

Pure. `harness.agent.oracles.witness` holds each sample's frames to these::

    chain, stop = expected_walk(overflow, depth=19)    # callers, and why the walk ended
    user_walk_differs(sample, overflow, depth=19)      # a kernel sample's user stack (dt)
    user_walk_foreign(sample, overflow)                # ... the witness could not judge

The witness walks deeper than any flavour records (`harness.agent.witnessed`'s depth),
so its walk is cut here at the run's depth, where it then counts as ``truncated``.
"""

from __future__ import annotations

from harness.agent.values.samples import Sample
from harness.vm.witness.records import FOREIGN_TTBR0, STOPS, Overflow


def expected_walk(overflow: Overflow, depth: int) -> tuple[tuple[int, ...], str]:
    """The witnessed walk cut to ``depth`` frames (the PC counts): callers and stop cause."""
    if overflow.frames >= depth:
        return overflow.chain[: depth - 1], "truncated"
    return overflow.chain, overflow.stop


def faulted_early(sample: Sample, chain: tuple[int, ...], *, counted: bool) -> bool:
    """The agent's walk ended at a frame record it could not read and the witness read on.

    The agent reads user frames with ``copy_from_user_nofault`` in NMI context, which
    fails on a page the MMU would fault on (an access-flag fault on an old page, say);
    the witness reads guest memory through QEMU's debug access, which does not. Allowed
    where the record says its walk faulted, or, for a record with no stop cause, while
    ``counted``: the core counted a faulted walk on that CPU not yet used up. The frames
    before the fault must still be the witness's.
    """
    said = sample.stop is not None and STOPS[sample.stop : sample.stop + 1] == ("fault",)
    cut = counted if sample.stop is None else said
    return cut and len(chain) > len(sample.chain) and chain[: len(sample.chain)] == sample.chain


def expected_user_walk(overflow: Overflow, depth: int) -> tuple[tuple[int, ...], str | None]:
    """The witnessed user walk (its PC first) cut to ``depth`` frames, and its stop cause."""
    if len(overflow.user_walk) >= depth:
        return overflow.user_walk[:depth], "truncated"
    return overflow.user_walk, overflow.user_stop


def user_walk_foreign(sample: Sample, overflow: Overflow) -> bool:
    """A kernel sample's user walk that is not judged: TTBR0 did not hold its task's table.

    The witness saw the CPU's TTBR0_EL1 hold another table than the task's ``mm->pgd``
    (``foreign_ttbr0``: mid ``switch_mm``, where ``current`` is still the previous task),
    so neither walk read the task's own user memory: counted, never held equal.
    """
    return sample.user_stop is not None and overflow.user_stop == FOREIGN_TTBR0


def user_walk_differs(sample: Sample, overflow: Overflow, depth: int) -> bool:
    """Whether a kernel sample's user walk is not the witness's (its frames or stop cause).

    Judged where both hold one (the record's ``user_stop``, the witness's kernel hit),
    and the witness saw the task's own table in TTBR0 (`user_walk_foreign`). A walk the
    record says faulted may stop short of the witness's (`faulted_early`).
    """
    if sample.user_stop is None or overflow.user_stop is None:
        return False
    if user_walk_foreign(sample, overflow):
        return False
    walk, stop = expected_user_walk(overflow, depth)
    said = STOPS[sample.user_stop : sample.user_stop + 1]
    if said == ("fault",) and walk[: len(sample.user_walk)] == sample.user_walk:
        return False
    return sample.user_walk != walk or said != (stop,)
