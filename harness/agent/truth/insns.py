"""arm64 instructions of a function's bytes, decoded with capstone (pure).

`harness.agent.truth.elfsyms` reads an ELF file's functions with these: every word of a
function decoded (`decode`: one capstone cannot decode is kept, not the end of the
function), where its frame record holds (`framed`)::

    insns = decode(code, start)          # Insn(address, mnemonic, operands, word), ...
    framed(insns, start)                 # (after mov x29, sp, first ldp x29, x30, ...)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import capstone
from capstone import arm64

#: An arm64 instruction's size: every word is one.
WORD = 4


@dataclass(frozen=True, slots=True)
class Insn:
    """One instruction: where, capstone's mnemonic and operand text, and its 32-bit word.

    The frame record's setup and restore are recognised from capstone's operands as
    data (detail mode), decoded for the few ``mov`` and ``ldp`` instructions asked
    about. A branch's target is capstone's printed immediate (``#0x…``, the absolute
    address): detail-decoding every branch of a vmlinux made reading it 2.7 times as
    slow (16.6 s against 6.1 s for 6.12's, on this host under load).
    """

    address: int
    mnemonic: str
    operands: str
    word: int

    def _detail(self) -> tuple[Any, ...]:
        return _operands(self.word, self.address)

    def branch_target(self) -> int | None:
        """A B's, BL's or B.cond's immediate target (capstone prints it as ``#0x…``)."""
        text = self.operands
        try:
            return int(text[1:], 0) if text.startswith("#") else None
        except ValueError:
            return None

    def branch_register(self) -> int | None:
        """A BLR's or BR's target register (capstone's number), else None."""
        if self.mnemonic not in ("blr", "br"):
            return None
        operands = self._detail()
        return int(operands[0].reg) if operands and operands[0].type == arm64.ARM64_OP_REG else None

    def copied_register(self) -> int | None:
        """``mov xD, xS`` (a register copy): xS's number; else None."""
        if self.mnemonic != "mov":
            return None
        registers = _registers(self._detail())
        return registers[1] if registers is not None and len(registers) == _COPY else None

    def written_registers(self) -> frozenset[int]:
        """The registers the instruction writes (capstone's register access, as data)."""
        return _written(self.word, self.address)

    def memory_load(self) -> tuple[int, int, int] | None:
        """``ldr xN, [xM, #off]`` (64-bit, immediate offset): (N, M, off); else None."""
        if self.mnemonic != "ldr":
            return None
        operands = self._detail()
        if len(operands) != _LOAD or operands[0].type != arm64.ARM64_OP_REG:
            return None
        memory = operands[1]
        if memory.type != arm64.ARM64_OP_MEM or memory.mem.index != arm64.ARM64_REG_INVALID:
            return None
        return (int(operands[0].reg), int(memory.mem.base), int(memory.mem.disp))

    def sets_frame_pointer(self) -> bool:
        """``mov x29, sp``: the frame record is in place from the next instruction."""
        if self.mnemonic != "mov":
            return False
        return _registers(self._detail()) == (arm64.ARM64_REG_X29, arm64.ARM64_REG_SP)

    def restores_frame_record(self) -> bool:
        """``ldp x29, x30, [sp…]``: the epilogue's load of the record, in any addressing form.

        Post-indexed (``[sp], #n``) where the record sits at the frame's bottom, or an
        offset (``[sp]``, ``[sp, #n]``) where a large frame pops its locals after
        (6.12's ``mas_topiary_replace``: ``ldp x29, x30, [sp]``, then the callee-saved
        registers, then ``add sp, sp, #0x220``): x29 is the caller's from the next
        instruction on. A load of x29 and x30 from another base (a longjmp's buffer)
        is no epilogue's.
        """
        if self.mnemonic != "ldp":
            return False
        operands = self._detail()
        if len(operands) < _PAIR_LOAD:
            return False
        first, second, memory = operands[:_PAIR_LOAD]
        return (_registers((first, second)) == (arm64.ARM64_REG_X29, arm64.ARM64_REG_X30)
                and memory.type == arm64.ARM64_OP_MEM
                and memory.mem.base == arm64.ARM64_REG_SP)  # fmt: skip


#: An LDP's first operands in capstone 5: two registers, the memory (a post-indexed one
#: has a fourth, its step).
_PAIR_LOAD = 3
#: An immediate-offset LDR's operands: the register, the memory (a pre- or post-indexed
#: one has a third, its step, and writes its base: not a slot's load).
_LOAD = 2
#: A register copy's operands: the destination, the source.
_COPY = 2


def _registers(operands: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The registers ``operands`` name, or None if one is not a register."""
    if not all(o.type == arm64.ARM64_OP_REG for o in operands):
        return None
    return tuple(int(o.reg) for o in operands)


@functools.cache
def _detailed() -> capstone.Cs:
    """One arm64 disassembler in detail mode (operands as data) per process."""
    found = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
    found.detail = True
    return found


@functools.lru_cache(maxsize=65536)
def _operands(word: int, address: int) -> tuple[Any, ...]:
    """Capstone's operands of the instruction ``word`` at ``address`` (none: undecodable)."""
    decoded = next(_detailed().disasm(word.to_bytes(WORD, "little"), address), None)
    return tuple(decoded.operands) if decoded is not None else ()


@functools.lru_cache(maxsize=65536)
def _written(word: int, address: int) -> frozenset[int]:
    decoded = next(_detailed().disasm(word.to_bytes(WORD, "little"), address), None)
    return (
        frozenset(int(r) for r in decoded.regs_access()[1]) if decoded is not None else frozenset()
    )


@functools.cache
def _disassembler() -> capstone.Cs:
    """One arm64 disassembler per process: making one cost 0.2 ms (30 s for a vmlinux)."""
    return capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)


#: The mnemonic of a word capstone does not decode (`decode`).
UNDECODED = ".inst"


def _word(code: bytes, offset: int) -> int:
    return int.from_bytes(code[offset : offset + WORD], "little")


def decode(code: bytes, start: int) -> list[Insn]:
    """Every 4-byte word of ``code`` (linked at ``start``) as an instruction, in order.

    Capstone's ``disasm_lite`` stops at the first word it cannot decode, and capstone
    5.0 cannot decode an LDTR or STTR whose base and target are one register (``ldtr
    x25, [x25]``, ``f8400b39``): Linux 6.12's arm64 user accessors (``__get_user``,
    ``get_user`` in ``pselect6``, ``restore_sigframe``, ...) emit them, 6.1's never
    did. Stopping there lost every later call of 47 of 6.12's 19 772 functions
    (``__arm64_sys_pselect6``'s ``bl core_sys_select`` among them), and CHAIN said
    their return addresses "do not follow a call instruction" (issue 48). arm64 words
    are fixed-size, so decoding resumes at the next word; the one skipped is kept as
    `UNDECODED` (never a branch: capstone decodes every B, BL, BR and BLR).
    """
    found: list[Insn] = []
    offset = 0
    while offset < len(code):
        decoded = _disassembler().disasm_lite(code[offset:], start + offset)
        found += [Insn(address, mnemonic, operands, _word(code, address - start))
                  for address, _, mnemonic, operands in decoded]  # fmt: skip
        offset = found[-1].address + WORD - start if found else 0
        if offset < len(code):  # capstone stopped before the end: a word it cannot decode
            word = _word(code, offset)
            found.append(Insn(start + offset, UNDECODED, f"{word:#010x}", word))
            offset += WORD
    return found


def framed(insns: list[Insn], start: int) -> tuple[int, int]:
    """Where the frame record holds: after ``mov x29, sp``, before ``ldp x29, x30, [sp…]``.

    A shrink-wrapped function sets its record up on one path only: a branch taken
    before the setup that lands past it (skb_push's fast path, ``b.cs`` over the
    ``stp``, to a ``ret``) ends the span there, since that code runs without a record.
    """
    setup = next((i for i, n in enumerate(insns) if n.sets_frame_pointer()), None)
    if setup is None:
        return (start, start)
    restore = next((n.address for n in insns[setup + 1 :] if n.restores_frame_record()), None)
    end = restore if restore is not None else insns[-1].address + 4
    begin = insns[setup].address + 4
    skips = [t for n in insns[:setup] if n.mnemonic.startswith(("b", "cb", "tb"))
             and n.mnemonic not in ("bl", "blr", "br") and (t := n.branch_target()) is not None
             and begin <= t < end]  # fmt: skip
    return (begin, min([end, *skips]))
