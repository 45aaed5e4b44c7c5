"""Where each vCPU is: QEMU's registers, symbolized against the guest kernel's System.map.

When a guest stops answering, its own console usually says nothing (every CPU
may be spinning with the same lock, none left to print a stall). QEMU still
knows each vCPU's program counter: ``info registers -a`` over QMP. This module
is the pure part: find the PCs in that text and name them::

    symbols = Symbols.from_system_map(kernel_build / "System.map")
    where(qmp.hmp("info registers -a"), symbols)
    # ('queued_spin_lock_slowpath+0x1d4', '__cmpwait_case_32+0x0', ...)
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

#: arm64 prints ``PC=``, x86-64 ``RIP=``; one per vCPU, in vCPU order.
_PC = re.compile(r"\b(?:PC|RIP)=([0-9a-fA-F]{8,16})\b")
_TEXT_TYPES = frozenset("tTwW")


@dataclass(frozen=True, slots=True)
class Symbols:
    """Text symbols sorted by address."""

    addresses: tuple[int, ...]
    names: tuple[str, ...]

    @classmethod
    def from_system_map(cls, path: Path) -> Symbols:
        """Read ``System.map`` (``address type name`` per line); missing file: no symbols."""
        if not path.is_file():
            return cls((), ())
        pairs: list[tuple[int, str]] = []
        for line in path.read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[1] in _TEXT_TYPES:
                pairs.append((int(parts[0], 16), parts[2]))
        pairs.sort()
        return cls(tuple(a for a, _ in pairs), tuple(n for _, n in pairs))

    def name(self, pc: int) -> str:
        """``symbol+0xoff``, or the bare address outside the kernel's text (modules)."""
        i = bisect.bisect_right(self.addresses, pc) - 1
        if i < 0 or (i == len(self.addresses) - 1 and pc - self.addresses[i] > 1 << 20):
            return f"{pc:#x}"
        return f"{self.names[i]}+{pc - self.addresses[i]:#x}"


def pcs(info_registers: str) -> tuple[int, ...]:
    """The program counters in ``info registers -a`` output, in vCPU order."""
    return tuple(int(m, 16) for m in _PC.findall(info_registers))


def where(info_registers: str, symbols: Symbols) -> tuple[str, ...]:
    """Each vCPU's PC, named."""
    return tuple(symbols.name(pc) for pc in pcs(info_registers))
