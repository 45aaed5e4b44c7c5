"""Where the functions the oracles name lie in a running guest, and the tables they come from.

The module's functions (its ``.ko``'s symbols) and the core kernel's move to where
``/proc/kallsyms`` lists them; the ground-truth workload's, profctl's and vmlinux's
tables are read on the host once per process (a cache entry never changes)::

    placed = place_module(module_table(build.ko), kallsyms_lines)
    zeroing = place_kernel(shell.run(kernel_lines_command(KERNEL_NAMES)).stdout.splitlines(),
                           KERNEL_NAMES)
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Sequence
from pathlib import Path

from harness.agent.truth import elfsyms, insns, program
from harness.agent.truth.elfsyms import Function, FunctionTable, read_functions, symbol_span
from harness.builder.cache import Cache, content_key, file_sha256
from harness.errors import InfraError

#: The reader of a kept table (`kernel_table`): its sources are part of the cache key.
_READERS = (Path(elfsyms.__file__), Path(insns.__file__))
_TABLE = "table.pickle"


def place_module(module: FunctionTable, kallsyms: Sequence[str]) -> FunctionTable:
    """The module's functions moved to the addresses ``kallsyms`` lines give them.

    ``kallsyms`` are ``/proc/kallsyms`` lines of the module (``ADDR t NAME [profagent]``);
    a function the kernel does not list (discarded init code) is left out.

    :raise InfraError: no line names a function of the module, or every address is 0
        (``kptr_restrict`` hides them).
    """
    where: dict[str, int] = {}
    for line in kallsyms:
        fields = line.split()
        if len(fields) >= 3 and fields[1] in "tT":
            where[fields[2]] = int(fields[0], 16)
    placed = [f.moved(where[f.name]) for f in module.functions if where.get(f.name)]
    if not placed:
        raise InfraError(f"/proc/kallsyms places no function of the module ({len(kallsyms)} lines)")
    return FunctionTable(tuple(sorted(placed, key=lambda f: f.start)))


def kernel_lines_command(names: Sequence[str]) -> str:
    """A guest command printing ``NAME START NEXT`` per core kernel symbol in ``names``.

    ``NEXT`` is the address of the symbol ``/proc/kallsyms`` lists after it (the core
    kernel's are in address order): the function's end.
    """
    wanted = " ".join(names)
    return (
        "awk -v want='" + wanted + "' 'BEGIN { n = split(want, w, \" \"); "
        "for (i = 1; i <= n; i++) W[w[i]] = 1 } "
        'held != "" { print held, $1; held = "" } '
        'NF == 3 && ($3 in W) { held = $3 " " $1 }\' /proc/kallsyms'
    )


def place_kernel(lines: Sequence[str], names: Sequence[str]) -> FunctionTable:
    """Core kernel functions from `kernel_lines_command`'s output: ``[START, NEXT)`` each.

    :raise InfraError: a name is missing, or its address is 0 (``kptr_restrict``).
    """
    found: dict[str, Function] = {}
    for line in lines:
        fields = line.split()
        if len(fields) == 3:
            start, end = int(fields[1], 16), int(fields[2], 16)
            if start and end > start:
                found[fields[0]] = Function(fields[0], start, end, (start, start))
    missing = [name for name in names if name not in found]
    if missing:
        raise InfraError(f"/proc/kallsyms places no {', '.join(missing)} ({len(lines)} lines)")
    return FunctionTable(tuple(sorted(found.values(), key=lambda f: f.start)))


@functools.cache
def truth_image_of(profctl_binary: Path) -> program.TruthImage:
    """`read_image`, once per process: a cache entry never changes (about 1 s each)."""
    return program.read_image(profctl_binary)


@functools.cache
def module_table(ko: Path) -> FunctionTable:
    """The module's functions at link addresses, once per process per build."""
    return read_functions(ko.read_bytes())


@functools.cache
def spin_loop_of(profctl_binary: Path) -> tuple[int, int]:
    """The ``spin_loop`` of profctl, read once per process (a cache entry never changes)."""
    return symbol_span(profctl_binary.read_bytes(), "spin_loop")


@functools.cache
def kernel_table(vmlinux: Path) -> FunctionTable:
    """The functions of ``vmlinux``: read once per process, kept in the build cache.

    Reading a vmlinux took 9 s here (pyelftools' symbols 5 s, capstone's decoding 4 s),
    every process again. Its table is kept pickled under the digests of the file and
    of `harness.agent.truth.elfsyms` (the reader: a change to it reads the file anew),
    and loads in a fraction of that.
    """
    cache = Cache.default()
    readers = [file_sha256(path) for path in _READERS]
    key = content_key({"vmlinux": file_sha256(vmlinux), "readers": readers})

    def build(path: Path) -> dict[str, object]:
        table = read_functions(vmlinux.read_bytes())
        (path / _TABLE).write_bytes(pickle.dumps(table, protocol=pickle.HIGHEST_PROTOCOL))
        return {"vmlinux": str(vmlinux), "functions": len(table.functions)}

    entry = cache.obtain(cache.entry("functions", key), build)
    table = pickle.loads((entry.path / _TABLE).read_bytes())
    if not isinstance(table, FunctionTable):
        raise InfraError(f"{entry.path / _TABLE} holds no function table")
    return table
