"""The guest kernel's layouts the witness reads memory with, taken from the kernel itself.

``guest/witness/offsets.c`` is compiled to assembly against the images' kernel build
tree, as the kernel makes its ``asm-offsets.h`` (``<linux/kbuild.h>``'s ``OFFSET`` and
``DEFINE``): each leaves a ``->NAME value`` line. The entry is cached per kernel and
source::

    offsets = kernel_offsets(images, cache)      # KernelOffsets(task_pid=912, ...)
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from harness.builder.cache import Cache, content_key
from harness.builder.images import GuestImages
from harness.errors import BuildError
from harness.paths import GUEST_DIR
from harness.process import run_logged

SOURCE_DIR = GUEST_DIR / "witness"
RECIPE = 1  # bump when the make command changes
_LINE = re.compile(r'\.ascii\s+"->(\w+) (-?\d+) ')


@dataclass(frozen=True, slots=True)
class KernelOffsets:
    """Where the witness finds each field, and the constants that say what it means."""

    task_pid: int
    task_tgid: int
    task_stack: int
    task_preempt_count: int
    task_mm: int
    task_flags: int
    pf_kthread_bits: int
    mm_pgd: int
    event_count: int
    regs_fp: int
    regs_sp: int
    regs_pc: int
    regs_pstate: int
    regs_pmr_save: int
    regs_size: int
    thread_size_bytes: int
    task_size_user: int
    nmi_mask_bits: int
    psr_i: int
    psr_mode_mask_bits: int
    psr_mode_el0t: int
    prio_irqon: int

    def as_dict(self) -> dict[str, int]:
        """Field name → value, as gdbside reads them."""
        return dataclasses.asdict(self)


def parse_offsets(assembly: str) -> KernelOffsets:
    """The ``->NAME value`` lines of ``offsets.s``, one per field.

    :raise BuildError: a field is missing (the source and this record disagree).
    """
    values = {m.group(1).lower(): int(m.group(2)) for m in _LINE.finditer(assembly)}
    names = [f.name for f in dataclasses.fields(KernelOffsets)]
    missing = [n for n in names if n not in values]
    if missing:
        raise BuildError(f"the witness's offsets.s has no {', '.join(missing)}")
    return KernelOffsets(**{n: values[n] for n in names})


def kernel_offsets(images: GuestImages, cache: Cache, *, timeout_s: float = 300) -> KernelOffsets:
    """``images``' kernel layouts (compiled once per kernel and source text).

    :raise BuildError: the compiler failed (its log attached) or a field is missing.
    """
    sources = {p.name: p.read_text() for p in sorted(SOURCE_DIR.iterdir()) if p.is_file()}
    key = content_key({"kernel": images.kernel_key, "sources": sources, "recipe": RECIPE})

    def build(out: Path) -> dict[str, str]:
        for name, text in sources.items():
            (out / name).write_text(text)
        arch = images.arch
        make = ["make", "-C", str(images.kernel_build), f"M={out}", f"ARCH={arch.linux_arch}",
                f"CROSS_COMPILE={arch.cross_compile}", "offsets.s"]  # fmt: skip
        run_logged(make, log=out / "build.log", what="compiling the witness's offsets",
                   timeout_s=timeout_s)  # fmt: skip
        parse_offsets((out / "offsets.s").read_text())
        return {"kernel_key": images.kernel_key}

    entry = cache.obtain(cache.entry("witness-offsets", key), build)
    return parse_offsets((entry.path / "offsets.s").read_text())
