"""Function symbols of an ELF64 little-endian file, read from its symbol table.

Pure (bytes in, values out): the content oracles learn where every function of
the ground-truth workload (a static, non-PIE executable) and of the agent (a
relocatable ``.ko``) lies, and where each function's frame record is in place,
without pyelftools::

    table = read_functions(Path("truth").read_bytes())
    table.named("leaf")                 # Function(name='leaf', start=..., end=..., ...)
    table.at(0x51000868).name           # 'leaf'
    table.named("leaf").framed          # (start, end): the frame record is set up

Addresses are link addresses: a static executable's are its run-time addresses; a
module's are offsets into their section (`Function.section`), to which the run
adds where the kernel put the function (``/proc/kallsyms``).
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass

from harness.errors import InfraError

_SHT_SYMTAB = 2
_PT_LOAD, _PF_X = 1, 1
_STT_FUNC = 2
#: ``mov x29, sp``: the frame record of the function now is x29 (arm64).
_MOV_FP_SP = 0x910003FD
#: ``ldp x29, x30, [sp], #imm`` (any imm): the caller's frame record is back in x29.
_LDP_FP_LR_POST, _LDP_FP_LR_MASK = 0xA8C07BFD, 0xFFC07FFF


@dataclass(frozen=True, slots=True)
class Function:
    """One function symbol: ``[start, end)`` and where its frame record holds.

    ``framed`` is ``[after mov x29, sp, first ldp x29, x30)``: a PC there has this
    function's frame record in x29, so a frame-pointer walk from the interrupted
    registers finds its caller next. Outside it (prologue, epilogue) the walk skips
    the caller, as Linux perf's does. (start, start) when no frame record was found.
    """

    name: str
    start: int
    end: int
    framed: tuple[int, int]
    section: int = 0

    def holds(self, address: int) -> bool:
        """Whether ``address`` lies in the function."""
        return self.start <= address < self.end

    def holds_framed(self, address: int) -> bool:
        """Whether ``address`` lies where the function's frame record is set up."""
        return self.framed[0] <= address < self.framed[1]

    def moved(self, base: int) -> Function:
        """The same function loaded at ``base`` (a module's kallsyms address)."""
        delta = base - self.start
        low, high = self.framed
        return Function(self.name, base, self.end + delta, (low + delta, high + delta),
                        self.section)  # fmt: skip


@dataclass(frozen=True, slots=True)
class FunctionTable:
    """Functions sorted by start address."""

    functions: tuple[Function, ...]

    def named(self, name: str) -> Function:
        """The function called ``name``.

        :raise InfraError: there is none (a stale or stripped binary).
        """
        for function in self.functions:
            if function.name == name:
                return function
        raise InfraError(f"no function {name!r} in the symbol table")

    def at(self, address: int) -> Function | None:
        """The function holding ``address``, if any."""
        starts = [f.start for f in self.functions]
        index = bisect.bisect_right(starts, address) - 1
        if index >= 0 and self.functions[index].holds(address):
            return self.functions[index]
        return None

    @property
    def span(self) -> tuple[int, int]:
        """``[lowest start, highest end)`` over every function (the text they share)."""
        return (min(f.start for f in self.functions), max(f.end for f in self.functions))


def _sections(data: bytes) -> list[tuple[int, int, int, int, int, int]]:
    """(type, flags, addr, offset, size, link) per section header."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise InfraError("not an ELF64 little-endian file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    headers = []
    for index in range(shnum):
        fields = struct.unpack_from("<IIQQQQII", data, shoff + index * shentsize)
        headers.append((fields[1], fields[2], fields[3], fields[4], fields[5], fields[6]))
    return headers


def executable_span(data: bytes) -> tuple[int, int]:
    """``[start, end)`` of the executable's executable PT_LOAD segments, link addresses.

    All its code: .init, the .plt and .iplt stubs, .text, .fini.

    :raise InfraError: not ELF64 little-endian, or no executable segment.
    """
    _sections(data)  # validates the header
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    spans = []
    for index in range(phnum):
        kind, flags, _, vaddr, _, _, memsz = struct.unpack_from(
            "<IIQQQQQ", data, phoff + index * phentsize
        )
        if kind == _PT_LOAD and flags & _PF_X:
            spans.append((vaddr, vaddr + memsz))
    if not spans:
        raise InfraError("the ELF file has no executable segment")
    return (min(s[0] for s in spans), max(s[1] for s in spans))


def _framed(code: bytes, start: int) -> tuple[int, int]:
    """Where the frame record holds in ``code`` (a function's bytes at ``start``)."""
    words = [struct.unpack_from("<I", code, i)[0] for i in range(0, len(code) - 3, 4)]
    if _MOV_FP_SP not in words:
        return (start, start)
    first = words.index(_MOV_FP_SP) + 1
    last = next((i for i in range(first, len(words))
                 if words[i] & _LDP_FP_LR_MASK == _LDP_FP_LR_POST), len(words))  # fmt: skip
    return (start + 4 * first, start + 4 * last)


def read_functions(data: bytes) -> FunctionTable:
    """Every defined, sized function symbol of the ELF file ``data``.

    :raise InfraError: not ELF64 little-endian, or no symbol table (stripped).
    """
    sections = _sections(data)
    symtabs = [s for s in sections if s[0] == _SHT_SYMTAB]
    if not symtabs:
        raise InfraError("the ELF file has no symbol table (stripped?)")
    _, _, _, sym_off, sym_size, link = symtabs[0]
    str_off = sections[link][3]
    functions = []
    for offset in range(sym_off, sym_off + sym_size, 24):
        name_at, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", data, offset)
        if info & 0xF != _STT_FUNC or not size or not 0 < shndx < len(sections):
            continue
        name = data[str_off + name_at : data.index(b"\0", str_off + name_at)].decode()
        _, _, addr, sec_off, _, _ = sections[shndx]
        file_at = sec_off + (value - addr)
        framed = _framed(data[file_at : file_at + size], value)
        functions.append(Function(name, value, value + size, framed, shndx))
    return FunctionTable(tuple(sorted(functions, key=lambda f: (f.start, f.name))))
