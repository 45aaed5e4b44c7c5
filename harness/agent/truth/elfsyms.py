"""Function symbols and call sites of an arm64 ELF file, read with pyelftools and capstone.

Pure (bytes in, values out): the content oracles learn where every function of
the ground-truth workload (a static, non-PIE executable) and of the agent (a
relocatable ``.ko``) lies, where each function's frame record is in place, and
where it calls whom (`harness.agent.oracles.frames` judges call chains with them)::

    table = read_functions(Path("truth").read_bytes())
    table.named("leaf")                 # Function(name='leaf', start=..., end=..., ...)
    table.at(0x51000868).name           # 'leaf'
    table.named("leaf").framed          # (start, end): the frame record is set up
    table.named("middle").call_at(ret)  # Call(offset=..., direct=True, target='leaf')

Addresses are link addresses: a static executable's are its run-time addresses; a
module's are offsets into their section (`Function.section`), to which the run
adds where the kernel put the function (``/proc/kallsyms``).

The ELF structure (sections, symbols, segments, relocations) is pyelftools', the
instructions capstone's (arm64, little-endian): the bench proves ports right and
should not first have to prove its own ELF reader and opcode masks right.
"""

from __future__ import annotations

import bisect
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.elf.constants import P_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_RELOC_TYPE_AARCH64
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

from harness.agent.truth.insns import Insn, decode, framed
from harness.errors import InfraError

#: R_AARCH64_CALL26 and R_AARCH64_JUMP26: a BL / B to a symbol the linker resolves.
_CALL26 = ENUM_RELOC_TYPE_AARCH64["R_AARCH64_CALL26"]
_JUMP26 = ENUM_RELOC_TYPE_AARCH64["R_AARCH64_JUMP26"]


@dataclass(frozen=True, slots=True)
class Call:
    """One call instruction of a function: where it returns to and what it calls.

    ``offset``: the return address (the instruction after the call) from the
    function's start; for a tail call (`Function.tails`), the B's own offset.
    ``direct``: a BL or B (immediate target); False for a BLR. ``target``: the name of
    the function a direct call enters (its start), or None where it enters no
    function start this file names (a PLT, IPLT or veneer stub, or an indirect
    call). ``delta``: where the branch goes, from the function's start, when the
    file itself says (no relocation, or one against its own section): the target
    is then found by address, not by a name that static functions of several
    objects share (``__raw_spin_lock_irqsave.constprop.0``).
    """

    offset: int
    direct: bool
    target: str | None = None
    delta: int | None = None


@dataclass(frozen=True, slots=True)
class Function:
    """One function symbol: ``[start, end)``, where its frame record holds, what it calls.

    ``framed`` is ``[after mov x29, sp, first ldp x29, x30)``: a PC there has this
    function's frame record in x29, so a frame-pointer walk from the interrupted
    registers finds its caller next. Outside it (prologue, epilogue) the walk skips
    the caller, as Linux perf's does. (start, start) when no frame record was found.
    ``calls``: its BL and BLR instructions, by return address. ``tails``: its B
    instructions out of itself (tail calls): to another function's start, or into one
    past its start (glibc's ``_setjmp`` branches to ``__sigsetjmp + 4``, past a nop).
    """

    name: str
    start: int
    end: int
    framed: tuple[int, int]
    section: int = 0
    calls: tuple[Call, ...] = ()
    tails: tuple[Call, ...] = ()

    def holds(self, address: int) -> bool:
        """Whether ``address`` lies in the function."""
        return self.start <= address < self.end

    def holds_framed(self, address: int) -> bool:
        """Whether ``address`` lies where the function's frame record is set up."""
        return self.framed[0] <= address < self.framed[1]

    def call_at(self, return_address: int) -> Call | None:
        """The call instruction returning to ``return_address``, if there is one."""
        offset = return_address - self.start
        return next((c for c in self.calls if c.offset == offset), None)

    def moved(self, base: int) -> Function:
        """The same function loaded at ``base`` (a module's kallsyms address)."""
        delta = base - self.start
        low, high = self.framed
        return Function(self.name, base, self.end + delta, (low + delta, high + delta),
                        self.section, self.calls, self.tails)  # fmt: skip


@dataclass(frozen=True, slots=True)
class FunctionTable:
    """Functions sorted by start address.

    ``entry_text``: a kernel's exception entry code (``.entry.text``; (0, 0): none).
    A return address there is the entry's call of its handler, and the frame record
    above it is the exception's (arm64 ``kernel_entry``: pt_regs' stackframe holds the
    interrupted x29 and PC), so the next address of a walk is an interrupted PC.
    """

    functions: tuple[Function, ...]
    entry_text: tuple[int, int] = (0, 0)
    _starts: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _names: Mapping[str, Function] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_starts", tuple(f.start for f in self.functions))
        names: dict[str, Function] = {}
        for function in self.functions:
            names.setdefault(function.name, function)
        object.__setattr__(self, "_names", names)

    def named(self, name: str) -> Function:
        """The function called ``name``.

        :raise InfraError: there is none (a stale or stripped binary).
        """
        found = self.find(name)
        if found is None:
            raise InfraError(f"no function {name!r} in the symbol table")
        return found

    def in_entry(self, address: int) -> bool:
        """Whether ``address`` lies in the kernel's exception entry code."""
        return self.entry_text[0] <= address < self.entry_text[1]

    def find(self, name: str) -> Function | None:
        """The function called ``name``, if any."""
        return self._names.get(name)

    def at(self, address: int) -> Function | None:
        """The function holding ``address``, if any."""
        index = bisect.bisect_right(self._starts, address) - 1
        if index >= 0 and self.functions[index].holds(address):
            return self.functions[index]
        return None

    @property
    def span(self) -> tuple[int, int]:
        """``[lowest start, highest end)`` over every function (the text they share)."""
        return (min(f.start for f in self.functions), max(f.end for f in self.functions))


def elf_file(data: bytes) -> ELFFile:
    """``data`` as pyelftools' ELF file.

    :raise InfraError: not ELF64 little-endian.
    """
    try:
        elf = ELFFile(io.BytesIO(data))
    except ELFError as exc:
        raise InfraError(f"not an ELF64 little-endian file: {exc}") from exc
    if elf.elfclass != 64 or not elf.little_endian:
        raise InfraError("not an ELF64 little-endian file")
    return elf


def executable_span(data: bytes) -> tuple[int, int]:
    """``[start, end)`` of the executable's executable PT_LOAD segments, link addresses.

    All its code: .init, the .plt and .iplt stubs, .text, .fini.

    :raise InfraError: not ELF64 little-endian, or no executable segment.
    """
    spans = [(s["p_vaddr"], s["p_vaddr"] + s["p_memsz"]) for s in elf_file(data).iter_segments()
             if s["p_type"] == "PT_LOAD" and s["p_flags"] & P_FLAGS.PF_X]  # fmt: skip
    if not spans:
        raise InfraError("the ELF file has no executable segment")
    return (min(s[0] for s in spans), max(s[1] for s in spans))


def symbol_span(data: bytes, name: str) -> tuple[int, int]:
    """``[start, end)`` of the function symbol ``name`` (its ``st_size``), link addresses.

    :raise InfraError: not ELF64 little-endian, no symbol table, or no such function.
    """
    symtab = elf_file(data).get_section_by_name(".symtab")
    found = symtab.get_symbol_by_name(name) if isinstance(symtab, SymbolTableSection) else None
    function = next((s for s in found or () if s["st_info"]["type"] == "STT_FUNC"), None)
    if function is None or not function["st_size"]:
        raise InfraError(f"the ELF file has no function {name}")
    return (function["st_value"], function["st_value"] + function["st_size"])


@dataclass(frozen=True, slots=True)
class _Resolver:
    """Names the function a branch enters: by relocation (a ``.ko``) or by address."""

    starts: Mapping[tuple[int, int], str]  # (section index, start) → name
    relocations: Mapping[tuple[int, int], str | tuple[int, int]]  # (section, at) → target

    def target(self, section: int, insn: Insn) -> tuple[str | None, int | None]:
        """The branch's target: its name (None: no function start) and address, if known."""
        where = self.relocations.get((section, insn.address))
        if isinstance(where, str):
            return where, None
        if where is not None:
            return self.starts.get(where), where[1] if where[0] == section else None
        address = insn.branch_target()
        if address is None:
            return None, None
        return self.starts.get((section, address)), address


def _relocations(elf: ELFFile) -> dict[tuple[int, int], str | tuple[int, int]]:
    """Each CALL26/JUMP26 relocation: (section, offset) → symbol name, or (section, addend)."""
    found: dict[tuple[int, int], str | tuple[int, int]] = {}
    for rela in elf.iter_sections():
        if not isinstance(rela, RelocationSection) or not rela["sh_info"]:
            continue
        symbols = elf.get_section(rela["sh_link"])
        assert isinstance(symbols, SymbolTableSection)
        for reloc in rela.iter_relocations():
            if reloc["r_info_type"] not in (_CALL26, _JUMP26):
                continue
            symbol = symbols.get_symbol(reloc["r_info_sym"])
            at = (rela["sh_info"], reloc["r_offset"])
            if symbol["st_info"]["type"] == "STT_SECTION":
                found[at] = (symbol["st_shndx"], reloc["r_addend"])
            else:
                found[at] = symbol.name
    return found


def _function(symbol: Any, sections: Mapping[int, tuple[int, bytes]],
              resolver: _Resolver) -> Function:  # fmt: skip
    shndx, value, size = symbol["st_shndx"], symbol["st_value"], symbol["st_size"]
    base, data = sections[shndx]
    insns = decode(data[value - base : value - base + size], value)
    calls, tails = [], []
    for insn in insns:
        if insn.mnemonic == "blr":
            calls.append(Call(insn.address + 4 - value, False))
        elif insn.mnemonic in ("bl", "b"):
            name, address = resolver.target(shndx, insn)
            delta = None if address is None else address - value
            if insn.mnemonic == "bl":
                calls.append(Call(insn.address + 4 - value, True, name, delta))
            elif name is not None if delta is None else not 0 <= delta < size:  # leaves it
                tails.append(Call(insn.address - value, True, name, delta))
    span = framed(insns, value) if insns else (value, value)
    return Function(symbol.name, value, value + size, span, shndx, tuple(calls),
                    tuple(tails))  # fmt: skip


#: A kernel's linker symbols around its exception entry code (`FunctionTable.entry_text`).
_ENTRY_TEXT = ("__entry_text_start", "__entry_text_end")


def _symbols(elf: ELFFile) -> tuple[list[Any], tuple[int, int]]:
    """Its defined, sized function symbols, and its entry text ((0, 0): none), in one pass.

    One pass over the symbol table: pyelftools parses each symbol (about 10 s for a
    vmlinux's 110 000 under this host), and a lookup by name would parse them again.
    """
    symtab = elf.get_section_by_name(".symtab")
    if not isinstance(symtab, SymbolTableSection):
        raise InfraError("the ELF file has no symbol table (stripped?)")
    count = elf.num_sections()
    functions: list[Any] = []
    entry: dict[str, int] = {}
    for symbol in symtab.iter_symbols():
        shndx = symbol["st_shndx"]
        if (symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_size"]
                and isinstance(shndx, int) and 0 < shndx < count):  # fmt: skip
            functions.append(symbol)
        elif symbol.name in _ENTRY_TEXT:
            entry.setdefault(symbol.name, symbol["st_value"])
    start, end = (entry.get(name) for name in _ENTRY_TEXT)
    return functions, (start, end) if start is not None and end is not None else (0, 0)


def read_functions(data: bytes) -> FunctionTable:
    """Every defined, sized function symbol of the ELF file ``data``, with its call sites.

    A direct call's target is named by its relocation where the file has one (a
    ``.ko``: a BL to another object's function is an R_AARCH64_CALL26 against that
    symbol, resolved when the module is loaded, through a PLT or veneer if out of
    range), else by the function starting at its immediate target.

    :raise InfraError: not ELF64 little-endian, or no symbol table (stripped).
    """
    elf = elf_file(data)
    symbols, entry_text = _symbols(elf)
    starts = {(s["st_shndx"], s["st_value"]): s.name for s in symbols}
    resolver = _Resolver(starts, _relocations(elf))
    sections = {}
    for shndx in {s["st_shndx"] for s in symbols}:
        section = elf.get_section(shndx)
        code = b"" if section["sh_type"] == "SHT_NOBITS" else section.data()
        sections[shndx] = (section["sh_addr"], code)
    functions = [_function(s, sections, resolver) for s in symbols]
    return FunctionTable(tuple(sorted(functions, key=lambda f: (f.start, f.name))),
                         entry_text)  # fmt: skip
