"""From what a person asks for to a running guest: the one path every entry point takes.

`GuestRequest` holds command-line words (``--cpus 8``, ``--accel auto``);
`resolve` validates them, checks the host, picks the accelerator, builds or
finds the images and returns a ready `MachineSpec`. `interactive_shell` is
``invoke shell``::

    request = GuestRequest(cpus=4)
    spec, images = resolve(request, Cache.default())
    with Guest(spec, images, new_run_dir("shell", spec.name), timeouts=...) as guest:
        ...
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
from dataclasses import dataclass
from pathlib import Path

from harness import arches
from harness.builder.cache import Cache
from harness.builder.hostdeps import ensure_host
from harness.builder.images import GuestImages, prepare_images
from harness.builder.kernel import KernelChoice, check_variant
from harness.builder.kernels import DEFAULT_VERSION, get_version
from harness.errors import ConfigError
from harness.timeouts import Timeouts
from harness.vm.accel import choose_accel
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.record import new_run_dir
from harness.vm.topology import resolve_topology

LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GuestRequest:
    """A guest as asked for on the command line (unvalidated words)."""

    arch: str = arches.DEFAULT_ARCH
    cpus: int | None = None
    topology: str | None = None
    variant: str = "default"
    accel: str = "auto"
    nmi: bool = True
    memory_mib: int = 1024
    kernel_args: tuple[str, ...] = ()
    kernel: str = DEFAULT_VERSION  # --kernel: a Debian kernel version (6.1, 6.12)
    kernel_src: str | None = None  # --kernel-src: a developer's kernel tree instead


def parse_cpus(text: str | None) -> int | None:
    """``--cpus`` as given (None when absent).

    :raise ConfigError: not a whole number.
    """
    if text is None:
        return None
    if not text.strip().isascii() or not text.strip().isdigit():
        raise ConfigError(f"--cpus takes a whole number, not {text!r}")
    return int(text)


def parse_nmi(word: str) -> bool:
    """``on``/``off`` → bool.

    :raise ConfigError: any other word.
    """
    if word in ("on", "off"):
        return word == "on"
    raise ConfigError(f"--nmi takes 'on' or 'off', not {word!r}")


def guest_request(*, cpus: str | None, topology: str | None, arch: str, variant: str,
                  accel: str, nmi: str, append: str, memory: int, kernel: str = "6.1",
                  kernel_src: str | None = None) -> GuestRequest:  # fmt: skip
    """A guest task's options as a `GuestRequest` (``--cpus``, ``--nmi`` and ``--append`` read).

    :raise ConfigError: ``--cpus`` is not a whole number, or ``--nmi`` not on or off.
    """
    return GuestRequest(arch=arch, cpus=parse_cpus(cpus), topology=topology, variant=variant,
                        accel=accel, nmi=parse_nmi(nmi), memory_mib=memory,
                        kernel_args=tuple(shlex.split(append)), kernel=kernel,
                        kernel_src=kernel_src)  # fmt: skip


def parse_kernel(version: str, tree: str | None) -> KernelChoice:
    """``--kernel`` and ``--kernel-src`` as a `KernelChoice` (a tree wins over a version).

    :raise ConfigError: unknown version, a tree that is not a directory, or both given.
    """
    if tree is None:
        return KernelChoice(version=get_version(version).name)
    if version != DEFAULT_VERSION:
        raise ConfigError(f"give --kernel {version} or --kernel-src {tree}, not both")
    path = Path(tree).expanduser().resolve()
    if not (path / "Makefile").is_file() or not (path / "Kconfig").is_file():
        raise ConfigError(f"--kernel-src {tree}: not a kernel source tree (no Makefile, Kconfig)")
    return KernelChoice(tree=path)


def resolve(request: GuestRequest, cache: Cache) -> tuple[MachineSpec, GuestImages]:
    """Validate ``request``, make sure the host and images are ready, return the spec.

    Bad input fails first, before anything is installed or built.
    """
    arch = arches.get(request.arch)
    topology = resolve_topology(request.cpus, request.topology)
    variant = check_variant(request.variant)
    kernel = parse_kernel(request.kernel, request.kernel_src)
    spec = MachineSpec(  # validates the request before anything is installed or built
        arch=arch,
        topology=topology,
        nmi=request.nmi,
        memory_mib=request.memory_mib,
        kernel_args=request.kernel_args,
    )
    ensure_host()
    accel, reason = choose_accel(arch, request.accel, cache)
    LOG.info("accelerator: %s (%s)", accel, reason)
    if not arch.has_pmu(accel):
        LOG.warning("%s under %s has no PMU: PMU and NMI checks will be skipped", arch.name, accel)
    images = prepare_images(arch, variant, cache, kernel=kernel)
    return dataclasses.replace(spec, accel=accel), images


def interactive_shell(request: GuestRequest, cache: Cache, timeouts: Timeouts) -> int:
    """Boot a guest, attach this terminal to a root shell, stop the guest on exit.

    Returns the shell's exit status; blocks while the user works.
    """
    spec, images = resolve(request, cache)
    workdir = new_run_dir("shell", spec.name)
    LOG.info("artifacts: %s", workdir)
    with Guest(spec, images, workdir, timeouts=timeouts) as guest:
        LOG.info(
            "root shell in %s (%d CPUs, PMU %s, pseudo-NMI %s); exit to stop the guest",
            guest.name,
            guest.facts.cpus_online,
            guest.facts.pmu_driver,
            guest.facts.pseudo_nmi,
        )
        return guest.shell.interactive()
