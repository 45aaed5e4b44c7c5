"""Every frame of every call chain: each return address follows a call to the frame below.

Pure. CHAIN's general law (`harness.agent.oracles.content.check_chain` calls it), for
kernel and user chains alike, against the instructions of the code they name: the
ground-truth workload's (user), the agent module's at its kallsyms addresses (kernel),
read by `harness.agent.truth.elfsyms`::

    verdict = judge_frames(samples, lambda s: (image.functions,) if s.user else (module,))
    verdict.faults          # (FrameFault(sample, index=2, why='...'), ...)
    verdict.frames          # return addresses judged

The law, per return address ``ra`` of a chain (innermost first, after the sampled PC):

* **a call**: ``ra`` lies just after a BL or BLR inside the function holding
  ``ra - 1`` (the call's own function: after a call that never returns, ``ra`` itself
  is the next function's first instruction);
* **its target**: where that call is a BL whose target this code names, the target is
  the start of the function of the frame below (the sampled PC's function, looked up
  at the PC, for the first caller; the previous caller's function otherwise).

What is not judged, and why:

* *Unknown frames.* An address no table holds (the kernel outside the module, a shared
  library, another program) is not judged and is counted (`FrameVerdict.unknown`);
  the frame above it has no known frame below, so its target half is not judged.
* *Prologue and epilogue.* A sampled PC outside its function's ``framed`` span (before
  ``mov x29, sp``, from the ``ldp x29, x30`` on, or a function with no frame record)
  has the caller's record in x29: a frame-pointer walk skips the caller, and the first
  return address belongs to the caller's caller. Its call half is judged, its target
  half is not (the skipped caller is not known).
* *Stubs.* A BL whose target is no function start the file names (a static binary's
  .iplt or .plt stub, a module's PLT or veneer; elfsyms gives it no target) and a BLR
  are judged only as "a call".
* *Tail calls.* A function that ends in a B to another (a tail call) leaves its caller's
  return address above the tail-callee's frame. So the target half also holds when the
  frame below's function is reached from the BL's target by B's out of a function
  (`Function.tails`: to its start or past it, as glibc's ``_setjmp`` enters
  ``__sigsetjmp + 4``), through any number of them.
* *Exceptions.* A return address in a kernel's exception entry code
  (`FunctionTable.entry_text`) is the entry's call of its C handler; the frame record
  above it is the exception's, so the next address is the PC the exception
  interrupted: it is looked up at itself and treated as a sampled PC (its own
  framed span decides whether the target half of the next caller is judged). Both
  are counted as not judged. A PC sampled in the entry code itself is followed by
  the interrupted PC once ``kernel_entry`` has pointed x29 at the exception's record,
  by a return address before that (or once ``kernel_exit`` restored x29): that first
  address is not judged, nor the target half of the caller after it. Where the kernel's
  entry code is not known (no vmlinux: ``entry_known`` false), an unknown frame may be
  it, so the address after an unknown one (or after an unknown sampled PC) is not
  judged either: it may be an interrupted PC (an interrupt taken in ``dt_read``).
* *A new thread's first instructions.* A user PC in libc's ``__clone`` (alias ``clone``;
  or ``__clone3``, or ``thread_start``, where the child clears x29) may be the child's,
  between the syscall's return and that clearing: its x29 is still its parent's, which
  points into the parent's stack while the parent runs on and rewrites it, so its walk
  is no snapshot of any one stack (seen: CI, kprof on 8 vCPUs, a chain through
  ``__nptl_free_stacks`` into ``__futex_abstimed_wait_cancelable64``). Its return
  addresses are counted as not judged.
* *Relocatable code.* A module's BL to another object's function is an R_AARCH64_CALL26
  relocation against that symbol (elfsyms names it); the target is looked up by name in
  the caller's own table first, then in the others given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.agent.truth.elfsyms import Call, Function, FunctionTable
from harness.agent.values.samples import Sample

Tables = tuple[FunctionTable, ...]
#: Where a child thread runs on its parent's frame pointer (glibc's aarch64 clone.S), by
#: each name its symbol table may give the function (the static workload's names ``clone``).
CLONE_WINDOW = frozenset({"__clone", "clone", "__clone3", "clone3", "thread_start"})


@dataclass(frozen=True, slots=True)
class FrameFault:
    """One return address that breaks the law: the sample, which caller (0: first), why."""

    sample: Sample
    index: int
    why: str


@dataclass(frozen=True, slots=True)
class FrameVerdict:
    """What the law judged and what broke it.

    ``samples``: samples with at least one return address judged; ``frames``: return
    addresses judged as calls; ``targets``: of those, direct calls whose target was
    judged; ``unknown``: return addresses no table holds (not judged).
    """

    faults: tuple[FrameFault, ...]
    samples: int
    frames: int
    targets: int
    unknown: int


@dataclass(frozen=True, slots=True)
class _Count:
    frames: int = 0
    targets: int = 0
    unknown: int = 0


_Found = tuple[FunctionTable, Function]


def _lookup(tables: Tables, address: int) -> _Found | None:
    return next(((t, f) for t in tables if (f := t.at(address)) is not None), None)


def _framed_at(tables: Tables, pc: int) -> Function | None:
    """The function of ``pc`` if its frame record is in place there (else the walk skipped)."""
    found = _lookup(tables, pc)
    return found[1] if found is not None and found[1].holds_framed(pc) else None


def _named(tables: Tables, name: str, home: FunctionTable) -> _Found | None:
    return next(((t, f) for t in (home, *tables) if (f := t.find(name)) is not None), None)


def callee(
    tables: Tables, home: FunctionTable, caller: Function, call: Call, *, tail: bool = False
) -> _Found | None:
    """The function a direct branch of ``caller`` enters, if this code names it.

    By address where the file gave one (``Call.delta``): the function starting
    there, else none (a stub); a ``tail`` call (a B) may also enter a function past
    its start. Else by the relocation's name.
    """
    if call.delta is not None:
        address = caller.start + call.delta
        found = home.at(address)
        entered = found is not None and (found.start == address or tail)
        return (home, found) if found is not None and entered else None
    return _named(tables, call.target, home) if call.target is not None else None


def enters(tables: Tables, called: _Found, below: Function) -> bool:
    """Whether a call of ``called`` can leave ``below`` as the frame under it.

    ``below`` is the called function itself, or one it reaches by tail calls (any
    number of B's: glibc's ``_dl_add_to_namespace_list`` branches to
    ``__pthread_mutex_unlock``, which branches to ``__pthread_mutex_unlock_usercnt``).
    """
    todo, seen = [called], {called[1].start}
    while todo:
        home, function = todo.pop()
        if function.start == below.start:
            return True
        for tail in function.tails:
            found = callee(tables, home, function, tail, tail=True)
            if found is not None and found[1].start not in seen:
                seen.add(found[1].start)
                todo.append(found)
    return False


def judge_chain(
    sample: Sample, tables: Tables, *, entry_known: bool = True
) -> tuple[list[FrameFault], _Count]:
    """The law on one sample's chain against ``tables``; its faults and what it judged.

    ``entry_known``: whether ``tables`` know every exception entry the chain can cross
    (a kernel chain's, when vmlinux is among them; a user chain's always).
    """
    faults: list[FrameFault] = []
    frames = targets = unknown = 0
    at_pc = _lookup(tables, sample.pc)
    if sample.user and at_pc is not None and at_pc[1].name in CLONE_WINDOW:
        return faults, _Count(unknown=len(sample.chain))
    below = at_pc[1] if at_pc is not None and at_pc[1].holds_framed(sample.pc) else None
    interrupted, unsure = False, any(t.in_entry(sample.pc) for t in tables)
    unsure = unsure or (not entry_known and _lookup(tables, sample.pc) is None)
    for index, address in enumerate(sample.chain):
        if interrupted:  # the PC an exception interrupted, not a return address
            unknown += 1
            below, interrupted = _framed_at(tables, address), False
            continue
        if unsure:  # after entry code (or an unknown frame): interrupted PC or return address
            unknown += 1
            below, unsure = None, not entry_known and _lookup(tables, address - 1) is None
            continue
        if any(t.in_entry(address - 1) for t in tables):
            unknown += 1
            below, interrupted = None, True
            continue
        here = _lookup(tables, address - 1)
        if here is None:
            unknown += 1
            below, unsure = None, not entry_known
            continue
        frames += 1
        home, caller = here
        call = caller.call_at(address)
        if call is None:
            faults.append(FrameFault(sample, index, f"{address:#x} in {caller.name} does not "
                                     "follow a call instruction"))  # fmt: skip
        elif call.direct and call.target is not None and below is not None:
            called = callee(tables, home, caller, call)
            targets += called is not None
            if called is not None and not enters(tables, called, below):
                why = f"{caller.name} calls {call.target} at {address:#x}, the frame below is "
                faults.append(FrameFault(sample, index, why + below.name))
        below = caller
    return faults, _Count(frames, targets, unknown)


def judge_frames(
    samples: Sequence[Sample],
    tables_of: Callable[[Sample], Tables],
    *,
    entry_known: Callable[[Sample], bool] = lambda _sample: True,
) -> FrameVerdict:
    """The law over ``samples``, each against the tables ``tables_of`` gives it.

    A chain is judged once per run: samples with the same PC, mode and return addresses
    against the same tables (by identity) share its verdict, their faults naming each
    sample (a busy loop repeats its chains: kprof's standard run, 8 vCPUs, 118 400 chains
    in 1.75 s before).
    """
    faults: list[FrameFault] = []
    judged = frames = targets = unknown = 0
    # keyed by the tables' id, which holding them in the value keeps from being reused
    seen: dict[tuple[int, bool, int, bool, tuple[int, ...]],
               tuple[Tables, list[FrameFault], _Count]] = {}  # fmt: skip
    for sample in samples:
        tables, known = tables_of(sample), entry_known(sample)
        key = (id(tables), known, sample.pc, sample.user, sample.chain)
        if key not in seen:
            seen[key] = (tables, *judge_chain(sample, tables, entry_known=known))
        _, first, count = seen[key]
        found = [FrameFault(sample, f.index, f.why) for f in first]
        faults += found
        judged += count.frames > 0
        frames, targets = frames + count.frames, targets + count.targets
        unknown += count.unknown
    return FrameVerdict(tuple(faults), judged, frames, targets, unknown)
