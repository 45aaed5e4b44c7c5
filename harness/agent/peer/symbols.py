"""Both profilers' samples named by one symboliser and folded into stacks.

A sample is a PC and, where the profiler walked one, its callers. Both profilers'
samples go through one `Symboliser` (the guest's ``/proc/kallsyms`` for kernel PCs,
a workload's ELF symbols for user PCs; anything else is ``[kernel]`` or ``[user]``),
so the comparison tests the agent's PCs, not two symbolisers. The folded stacks
(``root;…;leaf N``) are the text that flamegraph.pl, inferno and speedscope read::

    symbols = Symboliser(parse_kallsyms(text))
    agent = fold(agent_stack(s, symbols) for s in samples)
    peer = fold(perf_stack(s, symbols) for s in perf_counts.stacks)
    agent.folded()                      # 'main;work;outer;middle;leaf 412' ...
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.agent.values.samples import Sample
from harness.vm.perf import PerfSample

KERNEL_TOP_BIT = 1 << 63  # arm64 and x86-64 kernel addresses have the top bit set
KERNEL, USER, OTHER = "[kernel]", "[user]", "other"
_TEXT_TYPES = frozenset("tTwW")


@dataclass(frozen=True, slots=True)
class KernelSymbols:
    """The kernel's text symbols (``/proc/kallsyms``), sorted by address."""

    starts: tuple[int, ...]
    names: tuple[str, ...]

    def name(self, addr: int) -> str:
        """The symbol ``addr`` falls in (the last one starting at or below it), or ``[kernel]``."""
        i = bisect.bisect_right(self.starts, addr) - 1
        return self.names[i] if i >= 0 else KERNEL


@dataclass(frozen=True, slots=True)
class UserSymbols:
    """A workload's function symbols: (start, end, name); ``binary`` as perf names its dso.

    ``base``: where its text is mapped (perf prints user addresses relative to it).
    """

    binary: str
    ranges: tuple[tuple[int, int, str], ...]
    base: int = 0
    _names: dict[int, str | None] = field(default_factory=dict, init=False, repr=False,
                                          compare=False)  # fmt: skip

    def name(self, addr: int) -> str | None:
        """The function holding ``addr``, if any (the first in ``ranges`` that holds it).

        Remembered per address: a profile names the same few thousand PCs over and
        over (a pass over the ranges each time cost 8 s in the 8-vCPU peer runs).
        """
        if addr not in self._names:
            self._names[addr] = next((n for start, end, n in self.ranges if start <= addr < end),
                                     None)  # fmt: skip
        return self._names[addr]


@dataclass(frozen=True, slots=True)
class Symboliser:
    """Names a PC the same way for the agent and for perf."""

    kernel: KernelSymbols
    user: UserSymbols | None = None

    def frame(self, pc: int, *, user: bool) -> str:
        """The name of ``pc``: a kernel or workload symbol, else ``[kernel]``/``[user]``."""
        if not user:
            return self.kernel.name(pc)
        found = self.user.name(pc) if self.user is not None else None
        return found or USER


def parse_kallsyms(text: str) -> KernelSymbols:
    """Text symbols of ``/proc/kallsyms`` (``addr type name [module]``), by address.

    Where several names share an address, one without a leading underscore wins
    (``gic_handle_irq`` over ``_stext``), else the first; zero addresses (a
    reader without the right to see them) are skipped.
    """
    best: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] not in _TEXT_TYPES:
            continue
        try:
            addr = int(parts[0], 16)
        except ValueError:
            continue
        if addr == 0:
            continue
        held = best.get(addr)
        if held is None or (held.startswith("_") and not parts[2].startswith("_")):
            best[addr] = parts[2]
    starts = tuple(sorted(best))
    return KernelSymbols(starts, tuple(best[a] for a in starts))


def _at(index: int) -> int:
    """How far before a frame's address its function is looked up (`agent_stack`)."""
    return 1 if index else 0


def agent_stack(sample: Sample, symbols: Symboliser) -> tuple[str, ...]:
    """``sample``'s frames named, root first (its chain shares its PC's mode).

    The PC is named at the PC, each caller at its return address - 1: the call's
    own function (after a call that never returns, the return address is the next
    function's first instruction: CPU 0's idle would read ``start_kernel →
    arch_post_acpi_subsys_init``).
    """
    frames = (sample.pc, *sample.chain)
    named = (symbols.frame(pc - _at(i), user=sample.user) for i, pc in enumerate(frames))
    return _one_user(reversed(tuple(named)))


def perf_stack(sample: PerfSample, symbols: Symboliser) -> tuple[str, ...]:
    """A perf sample's frames named by ``symbols``, root first, callers at address - 1.

    Kernel frames by their address (callers' at - 1, as `agent_stack`'s); user
    frames in the workload's binary by the workload's symbols (perf prints their
    address relative to the mapping: plus ``base``), or where those name none by
    perf's own symbol (perf's is at the address itself, so only a leaf's agrees with
    ours at a function's first instruction); any other user frame is ``[user]``.
    """
    names = []
    user = symbols.user
    for index, frame in enumerate(sample.frames):
        ip = frame.ip - _at(index)
        if frame.ip >= KERNEL_TOP_BIT:
            names.append(symbols.kernel.name(ip))
        elif user is None or frame.dso.rsplit("/", 1)[-1] != user.binary:
            names.append(USER)
        else:
            own = user.name(ip + user.base)
            perf = frame.sym.split("+", 1)[0] if frame.sym != "[unknown]" else None
            names.append(own or perf or USER)
    return _one_user(reversed(names))


def _one_user(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` with each run of unnamed user frames (``[user]``) as one frame."""
    found: list[str] = []
    for name in names:
        if not (name == USER and found and found[-1] == USER):
            found.append(name)
    return tuple(found)


@dataclass(frozen=True, slots=True)
class Profile:
    """Folded stacks: (root … leaf, count), most frequent first."""

    stacks: tuple[tuple[tuple[str, ...], int], ...]

    @property
    def total(self) -> int:
        """Samples folded."""
        return sum(n for _, n in self.stacks)

    def leaves(self) -> dict[str, int]:
        """Samples per leaf symbol (where each sample's PC was)."""
        found: Counter[str] = Counter()
        for stack, n in self.stacks:
            found[stack[-1] if stack else KERNEL] += n
        return dict(found)

    def folded(self) -> str:
        """The folded-stack text: one ``root;…;leaf N`` line per stack."""
        return "".join(f"{';'.join(stack)} {n}\n" for stack, n in self.stacks if stack)


def fold(stacks: Iterable[tuple[str, ...]]) -> Profile:
    """Count identical stacks; most frequent first, then by name."""
    counted = Counter(stacks)
    return Profile(tuple(sorted(counted.items(), key=lambda item: (-item[1], item[0]))))
