"""Compile ``profctl`` and, beside it in one cache entry, the ground-truth workload.

Both are static guest binaries the harness builds itself with the arch's cross
compiler; the entry is keyed by both sources, the compiler's version and the recipe::

    binary = build_profctl(arches.get("arm64"), Cache.default())    # <entry>/profctl
    binary.parent / TRUTH_BINARY          # the ground-truth workload, unstripped
"""

from __future__ import annotations

import functools
from pathlib import Path

from harness.agent.truth.build import TRUTH_SOURCE, compile_truth
from harness.arches import ArchProfile
from harness.builder.cache import Cache, content_key, file_sha256
from harness.errors import BuildError, HostSetupError
from harness.paths import GUEST_DIR
from harness.process import run_logged, tool_version

PROFCTL_SOURCE = GUEST_DIR / "agent" / "profctl.c"


PROFCTL_BINARY = "profctl"


RECIPE = 2  # bump when the compile command changes (2: the truth workload beside it)


CFLAGS = ("-std=gnu11", "-static", "-O2", "-Wall", "-Wextra", "-Werror")


COMPILE_TIMEOUT_S = 120.0


def build_profctl(arch: ArchProfile, cache: Cache, *, source: Path = PROFCTL_SOURCE) -> Path:
    """Compile ``source`` statically for ``arch`` into the cache; return the binary.

    Built once per (source text, compiler version, arch). Blocks ≤ 120 s while
    compiling, longer while another process builds the same entry.

    :raise HostSetupError: ``arch``'s C compiler is not installed.
    :raise BuildError: the compiler failed (its ``file:line: error:`` lines attached).
    :raise HarnessTimeout: the compiler or another builder took too long.
    """
    compiler = f"{arch.cross_compile}gcc"
    version = tool_version(compiler)
    if not version:
        raise HostSetupError([compiler], f"run `invoke setup` (installs {arch.cross_package})")
    text = source.read_text()
    key = _key(text, version, arch)
    build = functools.partial(
        _compile, source=source, text=text, compiler=compiler, version=version
    )
    entry = cache.obtain(cache.entry("profctl", key), build)
    return entry.path / PROFCTL_BINARY


def profctl_key(arch: ArchProfile) -> str | None:
    """The cache key `build_profctl` uses for ``arch`` now; None without its compiler."""
    version = tool_version(f"{arch.cross_compile}gcc")
    return _key(PROFCTL_SOURCE.read_text(), version, arch) if version else None


def _key(text: str, version: str, arch: ArchProfile) -> str:
    truth_text = TRUTH_SOURCE.read_text()
    return content_key({"source": text, "truth": truth_text, "compiler": version,
                        "arch": arch.name, "recipe": RECIPE})  # fmt: skip


def _compile(out: Path, *, source: Path, text: str, compiler: str, version: str) -> dict[str, str]:
    """Build into ``out``; the manifest facts."""
    binary = out / PROFCTL_BINARY
    argv = [compiler, *CFLAGS, "-o", str(binary), str(source)]
    what = f"compiling {source.name} with {compiler}"
    run_logged(argv, log=out / "build.log", what=what, timeout_s=COMPILE_TIMEOUT_S)
    # The key hashes the text read before compiling: refuse a binary of other text.
    if source.read_text() != text:
        raise BuildError(f"{source} changed while {what}; build again")
    if not binary.is_file():
        raise BuildError(f"{what} produced no {binary}", log=out / "build.log")
    # The ground-truth workload lives in the same entry, unstripped (harness.agent.truth.program).
    workload = compile_truth(out, compiler, COMPILE_TIMEOUT_S)
    return {"compiler": version, "sha256": file_sha256(binary),
            "truth_sha256": file_sha256(workload)}  # fmt: skip
