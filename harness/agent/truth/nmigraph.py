"""What the agent's NMI entry can reach in its built module: no lock, allocator or sleep.

C-2's counter half (``x_nmi_lock_violation``) counts only what goes through the
agent's own checking wrappers: a port that takes a plain ``spin_lock`` in its
producer passes it. This half reads the built ``.ko`` instead (pyelftools for the
sections, symbols and relocations, capstone for the instructions) and walks the
call graph from the core's overflow handler, the only code the PMU interrupt runs::

    graph = nmi_graph(ko.read_bytes(), flavour="dt")
    graph.calls                 # call sites judged on every path from pa_overflow
    graph.forbidden             # (Reach(path=('pa_overflow', ..., 'queued_spin_lock_slowpath'),
                                #        kind='lock'), ...): each one fails C-2

Edges: every BL and B to a function (the relocation names it where the file does;
a static function of the same section is found by address), and every BLR and BR
whose register was last loaded by ``ldr xN, [xM, #off]`` with ``xM`` the registry's
pointer ``pa_fl`` read from its variable (``pa_fl->produce``): ``pa_fl`` points at
``pa_flavour_<flavour>`` (the module's ``flavour=`` parameter), so the call enters the
function that table holds at ``off`` (relocations resolved). Only that table: a slot
matched by offset in any object was wrong on 6.12, whose ``struct file_operations``
gained ``fop_flags`` and moved ``write`` to offset 32, ``produce``'s (dt_nest_write,
hw_sweep_write, kp_ctl_write were followed, and C-2 failed a clean agent). An indirect
call whose register came any other way (``event->pmu->stop``, a kernel object's slot)
is `NmiGraph.unresolved`, named, never assumed safe. Calls into the kernel
are judged by name (`FORBIDDEN`), not followed: this is the module's code, the
kernel's own NMI-safe entry points (``irq_work_queue``, ``copy_from_user_nofault``,
``ktime_get_mono_fast_ns``) are the kernel's to prove.

What it cannot see: a lock inlined with no call left. On the default kernels
(``CONFIG_INLINE_SPIN_LOCK=y``) ``spin_lock`` compiles to an atomic and a call of
``queued_spin_lock_slowpath``, which it sees; an inlined ``spin_trylock`` leaves no
call. The debug kernel (lockdep) builds every lock out of line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_RELOC_TYPE_AARCH64
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

from harness.agent.truth.elfsyms import Function, elf_file, read_functions
from harness.agent.truth.insns import Insn, decode

#: The core's overflow handler: what the PMU interrupt (a pseudo-NMI) calls.
NMI_ENTRY = "pa_overflow"
#: How the core's flavour registry names each flavour's ops table (core.c.j2).
FLAVOUR_TABLE = "pa_flavour_"
#: The core's pointer to the loaded flavour's table (core.c.j2's ``pa_fl``).
REGISTRY_POINTER = "pa_fl"

#: Kernel functions no NMI path may call, by kind: each takes a lock (or a lock inside,
#: as a wake-up or a timer does), allocates or frees, or may sleep or fault.
FORBIDDEN: tuple[tuple[str, str], ...] = (
    ("lock", r"_raw_(spin|read|write)_(try)?lock.*|do_raw_(spin|read|write)_(try)?lock"),
    ("lock", r"queued_(spin|read|write)_lock_slowpath|(__)?mutex_(try)?lock.*"),
    ("lock", r"(__)?down(_read|_write)?(_interruptible|_killable|_trylock|_timeout)?"),
    ("lock", r"rt_(mutex|spin)_lock.*|(__)?percpu_down_(read|write)|cpus_read_lock"),
    ("lock", r"__wake_up.*|wake_up_(process|state)|try_to_wake_up|complete(_all)?"),
    ("lock", r"queue_(delayed_)?work_on|mod_timer|add_timer(_on)?|hrtimer_start_range_ns"),
    ("allocator", r"(__)?k(v|m)?(z)?alloc.*|kmem_cache_(z)?alloc.*|krealloc.*|kmemdup.*"),
    ("allocator", r"(__)?v(z)?malloc.*|(__)?alloc_pages.*|__get_free_pages|get_zeroed_page"),
    ("allocator", r"(__)?alloc_percpu.*|pcpu_alloc|kstrdup.*|kasprintf"),
    ("allocator", r"k(v)?free(_sensitive)?|kmem_cache_free|vfree|(__)?free_pages"),
    ("sleep", r"schedule(_timeout.*|_hrtimeout.*)?|io_schedule.*|(__|_)cond_resched.*"),
    ("sleep", r"msleep.*|usleep_range.*|__might_(sleep|resched|fault)|wait_for_completion.*"),
    ("sleep", r"synchronize_(rcu|srcu|net).*|(__)?flush_(work|workqueue|delayed_work)"),
    ("sleep", r"cancel_(delayed_)?work_sync|prepare_to_wait.*|kthread_stop|irq_work_sync"),
    ("sleep", r"_?_?(arch_)?copy_(from|to)_user|get_user_pages.*|pin_user_pages.*"),
)
_FORBIDDEN = tuple((kind, re.compile(pattern)) for kind, pattern in FORBIDDEN)

_ABS64 = ENUM_RELOC_TYPE_AARCH64["R_AARCH64_ABS64"]
#: The low half of an ``adrp`` pair that loads a 64-bit variable: ``ldr x, [x, :lo12:v]``.
_LDST64 = ENUM_RELOC_TYPE_AARCH64["R_AARCH64_LDST64_ABS_LO12_NC"]
#: How far back from a BLR the load of its register is looked for (instructions).
_LOOKBACK = 24


def forbidden_kind(name: str) -> str | None:
    """The kind of `FORBIDDEN` kernel function ``name`` is, or None (allowed).

    A compiler clone (``__kmalloc.constprop.0``) is judged by its base name.
    """
    base = name.split(".", 1)[0]
    return next((kind for kind, pattern in _FORBIDDEN if pattern.fullmatch(base)), None)


@dataclass(frozen=True, slots=True)
class Reach:
    """A forbidden kernel function reached from the NMI entry, and the path there."""

    path: tuple[str, ...]
    kind: str

    def __str__(self) -> str:
        return f"{self.kind} {self.path[-1]} via {' -> '.join(self.path[:-1])}"


@dataclass(frozen=True, slots=True)
class NmiGraph:
    """What `nmi_graph` found from ``entry``.

    ``functions``: the module's functions reachable; ``calls``: the call sites judged
    in them (each direct call, each indirect call whose slot was followed, with
    every target); ``external``: the kernel functions they call; ``forbidden``: the
    reaches that fail C-2; ``unresolved``: indirect calls not followed
    (``function+0xoffset``).
    """

    entry: str
    functions: tuple[str, ...]
    calls: int
    external: tuple[str, ...]
    forbidden: tuple[Reach, ...]
    unresolved: tuple[str, ...]


def nmi_graph(data: bytes, *, flavour: str, entry: str = NMI_ENTRY) -> NmiGraph:
    """Walk the built module ``data`` from ``entry`` for a run of ``flavour``.

    :raise InfraError: not ELF64 little-endian, no symbol table, or no ``entry``.
    """
    table = read_functions(data)
    table.named(entry)
    elf = elf_file(data)  # parsed once for the code and the slots (read_functions: its own)
    slots, own = _slots(elf, flavour)
    code = _code(elf)
    by_start = {(f.section, f.start): f for f in table.functions}
    parents: dict[str, str | None] = {entry: None}
    order = [entry]
    calls = 0
    external: set[str] = set()
    unresolved: list[str] = []
    for name in order:  # breadth first: each path found is a shortest one
        function = table.find(name)
        if function is None:
            external.add(name)
            continue
        targets: list[str] = []
        for call in (*function.calls, *function.tails):
            if call.direct:
                found = _direct(function, call.target, call.delta, by_start)
                targets += [found] if found else []
                calls += 1
        for site, offset in _indirect(function, code, own):
            followed = slots.get(offset) if offset is not None else None
            if not followed:
                unresolved.append(f"{name}+{site - function.start:#x}")
                continue
            targets += sorted(followed)
            calls += 1
        for target in targets:
            if target not in parents:
                parents[target] = name
                order.append(target)
    forbidden = [Reach(_path(parents, name), kind) for name in order
                 if name in external and (kind := forbidden_kind(name))]  # fmt: skip
    local = tuple(n for n in order if n not in external)
    return NmiGraph(entry, local, calls, tuple(sorted(external)), tuple(forbidden),
                    tuple(unresolved))  # fmt: skip


def _direct(function: Function, target: str | None, delta: int | None,
            by_start: Mapping[tuple[int, int], Function]) -> str | None:  # fmt: skip
    """The function a BL or B enters: its relocation's name, else the one at its address."""
    if target is not None:
        return target
    if delta is None:
        return None
    found = by_start.get((function.section, function.start + delta))
    return found.name if found is not None else None


def _path(parents: Mapping[str, str | None], name: str) -> tuple[str, ...]:
    path = [name]
    while (parent := parents[path[-1]]) is not None:
        path.append(parent)
    return tuple(reversed(path))


def _indirect(
    function: Function, code: Mapping[int, bytes], own: frozenset[tuple[int, int]]
) -> Iterable[tuple[int, int | None]]:
    """Each BLR and BR of ``function``: its address, and the slot offset its register came from.

    The offset is that of the last ``ldr xN, [xM, #off]`` to write the register before
    the branch, where the last to write ``xM`` before that loads ``pa_fl`` (``own``:
    (section, offset) of such loads); None otherwise, or where no writer lies within
    `_LOOKBACK` instructions.
    """
    text = code.get(function.section, b"")
    insns = decode(text[function.start : function.end], function.start)
    for index, insn in enumerate(insns):
        if insn.mnemonic not in ("blr", "br"):
            continue
        before = insns[max(0, index - _LOOKBACK) : index]
        load, register = _source(before, insn.branch_register())
        slot = load.memory_load() if load is not None else None
        if load is None or slot is None or slot[0] != register:
            yield insn.address, None
            continue
        base, _ = _source(before[: before.index(load)], slot[1])
        known = base is not None and (function.section, base.address) in own
        yield insn.address, slot[2] if known else None


def _source(before: list[Insn], register: int | None) -> tuple[Insn | None, int | None]:
    """The last of ``before`` to write ``register`` other than a copy, and what it wrote.

    A ``mov xD, xS`` is followed to what wrote ``xS`` (GCC's ``mov x16, x1; br x16``).
    """
    while register is not None:
        writer = next((i for i in reversed(before) if register in i.written_registers()), None)
        copied = writer.copied_register() if writer is not None else None
        if writer is None or copied is None:
            return writer, register
        before, register = before[: before.index(writer)], copied
    return None, None


def _code(elf: ELFFile) -> dict[int, bytes]:
    """Section index → contents, for every executable section."""
    return {index: section.data() for index, section in enumerate(elf.iter_sections())
            if section["sh_flags"] & SH_FLAGS.SHF_EXECINSTR
            and section["sh_type"] == "SHT_PROGBITS"}  # fmt: skip


def _slots(elf: ELFFile, flavour: str) -> tuple[dict[int, set[str]], frozenset[tuple[int, int]]]:
    """Offset in ``pa_flavour_<flavour>`` → the function it holds there (its ops slots).

    Second: the (section, offset) of every instruction that loads `REGISTRY_POINTER`
    (an LDST64 low-half relocation against it, or against its section at its address).
    """
    symtab = elf.get_section_by_name(".symtab")
    assert isinstance(symtab, SymbolTableSection)
    symbols = list(symtab.iter_symbols())
    pointers, loads = _relocated(elf, symbols)
    found: dict[int, set[str]] = {}
    for symbol in symbols:
        if symbol.name != FLAVOUR_TABLE + flavour or symbol["st_info"]["type"] != "STT_OBJECT":
            continue
        base = symbol["st_value"]
        for offset in range(0, symbol["st_size"], 8):
            target = pointers.get((symbol["st_shndx"], base + offset))
            if target is not None:
                found.setdefault(offset, set()).add(target)
    return found, frozenset(loads)


def _relocated(
    elf: ELFFile, symbols: list[Any]
) -> tuple[dict[tuple[int, int], str], set[tuple[int, int]]]:
    """The functions data words point at, by (section, offset); the loads of ``pa_fl``."""
    starts = {(s["st_shndx"], s["st_value"]): s.name for s in symbols
              if s["st_info"]["type"] == "STT_FUNC"}  # fmt: skip
    registry = {(s["st_shndx"], s["st_value"]) for s in symbols if s.name == REGISTRY_POINTER}
    pointers: dict[tuple[int, int], str] = {}
    loads: set[tuple[int, int]] = set()
    for rela in elf.iter_sections():
        if not isinstance(rela, RelocationSection) or not rela["sh_info"]:
            continue
        for reloc in rela.iter_relocations():
            symbol = symbols[reloc["r_info_sym"]]
            kind, kind_of = symbol["st_info"]["type"], reloc["r_info_type"]
            at = (rela["sh_info"], reloc["r_offset"])
            if kind_of == _LDST64 and (
                symbol.name == REGISTRY_POINTER
                or (kind == "STT_SECTION" and (symbol["st_shndx"], reloc["r_addend"]) in registry)
            ):
                loads.add(at)
            elif kind_of == _ABS64 and kind == "STT_FUNC":
                pointers[at] = symbol.name
            elif kind_of == _ABS64 and kind == "STT_SECTION":
                target = starts.get((symbol["st_shndx"], reloc["r_addend"]))
                pointers.update({at: target} if target is not None else {})
    return pointers, loads
