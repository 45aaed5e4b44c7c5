"""How the ground-truth workload is compiled (beside profctl, in its cache entry).

Kept apart from `harness.agent.truth.program` so `harness.agent.profctl` can build it
without importing the runner side::

    binary = compile_truth(entry_dir, "aarch64-linux-gnu-gcc", timeout_s=120)
"""

from __future__ import annotations

from pathlib import Path

from harness.paths import GUEST_DIR
from harness.process import run_logged

TRUTH_SOURCE = GUEST_DIR / "workloads" / "truth.c"
TRUTH_BINARY = "truth"
#: Where its text starts: no other process of the guest maps anything there, and below
#: 2 GiB, where x86_64's small code model still links a static binary
#: (profctl is static at 0x400000, PIEs sit near 0xaaaa..., libraries near 0xffff...).
TEXT_BASE = 0x5100_0000
CFLAGS = ("-std=gnu11", "-static", "-no-pie", "-O2", "-fno-omit-frame-pointer",
          "-mno-omit-leaf-frame-pointer", "-fno-ipa-icf", "-fno-optimize-sibling-calls",
          f"-Wl,-Ttext-segment={TEXT_BASE:#x}", "-Wall", "-Wextra", "-Werror")  # fmt: skip


def compile_truth(out: Path, compiler: str, timeout_s: float) -> Path:
    """Build the workload into ``out`` (unstripped); the binary. Blocks ≤ ``timeout_s``.

    :raise BuildError: the compiler failed (its log attached).
    :raise HarnessTimeout: it took longer than ``timeout_s``.
    """
    binary = out / TRUTH_BINARY
    argv = [compiler, *CFLAGS, "-o", str(binary), str(TRUTH_SOURCE)]
    run_logged(argv, log=out / "truth-build.log", what=f"compiling {TRUTH_SOURCE.name}",
               timeout_s=timeout_s)  # fmt: skip
    return binary
