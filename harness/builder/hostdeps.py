"""Host requirements: check them fast, install what is missing through apt.

Every task calls `ensure_host` first; with everything present it only looks at
``PATH`` and a few files (milliseconds). As root it installs the missing Debian
packages itself; otherwise it fails with the exact command to run::

    report = ensure_host(install=True)     # raises HostSetupError when it cannot fix
    report.installed                       # packages it installed, if any
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.arches import ARCHES
from harness.builder.kernels import VERSIONS
from harness.errors import HostSetupError

LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Requirement:
    """Something on the host, and the Debian package that provides it."""

    what: str  # a program on PATH, or an absolute file path
    package: str

    def present(self) -> bool:
        """Whether the host has it."""
        if self.what.startswith("/"):
            return Path(self.what).exists()
        return shutil.which(self.what) is not None


def requirements() -> tuple[Requirement, ...]:
    """Everything the bench needs: QEMU and compilers for every arch, kernel build tools.

    The kernel sources are every version of `harness.builder.kernels.VERSIONS`.
    """
    per_arch = [
        req
        for arch in ARCHES.values()
        for req in (
            Requirement(arch.qemu_binary, arch.qemu_package),
            Requirement(f"{arch.cross_compile}gcc", arch.cross_package),
            Requirement(arch.static_libc, arch.static_libc_package),
        )
    ]
    common = (
        Requirement("make", "make"),
        Requirement("gcc", "gcc"),
        Requirement("bc", "bc"),
        Requirement("flex", "flex"),
        Requirement("bison", "bison"),
        Requirement("perl", "perl"),
        Requirement("xz", "xz-utils"),
        Requirement("readelf", "binutils"),
        Requirement("dpkg-deb", "dpkg"),
        Requirement("apt-get", "apt"),
        Requirement("/usr/include/openssl/ssl.h", "libssl-dev"),
        Requirement("/usr/include/libelf.h", "libelf-dev"),
        Requirement("/usr/include/stdio.h", "libc6-dev"),
        *(Requirement(str(v.tarball), v.package) for v in VERSIONS.values()),
        # `invoke repro --bundle DIR --replay --gdb`: reverse debugging of a replayed guest
        # (gdb for arm64 guests; qemu-img for the qcow2 file that holds the replay's snapshot)
        Requirement("gdb-multiarch", "gdb-multiarch"),
        Requirement("qemu-img", "qemu-utils"),
        # the unit tier counts the ground-truth workload's instructions and system calls
        # outside its phase under QEMU's user mode (tests/unit/agent/test_truth_model.py)
        Requirement("qemu-aarch64", "qemu-user"),
        # the peer runs' perf.data is read on the host, off the emulated guest
        # (harness.vm.perfread.read_perf_data): Debian's perf reads any architecture's file
        Requirement("perf", "linux-perf"),
    )
    return (*per_arch, *common)


@dataclass(frozen=True, slots=True)
class HostReport:
    """The outcome of `ensure_host`."""

    missing_before: tuple[str, ...]
    installed: tuple[str, ...]


def install_command(packages: tuple[str, ...]) -> str:
    """The shell command that installs ``packages``."""
    names = " ".join(packages)
    return (
        "apt-get update && DEBIAN_FRONTEND=noninteractive "
        f"apt-get install -y --no-install-recommends {names}"
    )


def ensure_host(*, install: bool = True, timeout_s: float = 1800.0) -> HostReport:
    """Check the host; as root (and ``install``) install what is missing.

    Blocks for the apt run when something is missing (≤ ``timeout_s``).

    :raise HostSetupError: something is missing and cannot be installed here.
    """
    missing = [req for req in requirements() if not req.present()]
    if not missing:
        return HostReport((), ())
    packages = tuple(sorted({req.package for req in missing}))
    what = tuple(req.what for req in missing)
    command = install_command(packages)
    if not install or os.geteuid() != 0:
        raise HostSetupError(what, f"as root run: {command}")
    LOG.info("installing %d Debian package(s): %s", len(packages), " ".join(packages))
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    steps = (
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", *packages],
    )
    for argv in steps:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)  # fmt: skip
        if proc.returncode != 0:
            raise HostSetupError(
                what,
                f"{' '.join(argv[:2])} failed (status {proc.returncode}): "
                f"{(proc.stdout + proc.stderr)[-1500:]}\n  try by hand: {command}",
            )
    if still := [req.what for req in missing if not req.present()]:
        raise HostSetupError(still, f"apt installed {' '.join(packages)}, yet these are missing")
    return HostReport(what, packages)
