"""From what a person asks for to a running guest: the one path every entry point takes.

`GuestRequest` holds command-line words (``--cpus 8``, ``--accel auto``);
`resolve_request` validates them, the only place that does, into a
`ResolvedRequest` (the kernel choice, the run's topologies, the flavours whose
tests run). That object is what reaches pytest and its xdist workers, as JSON
(`request_json`) in a file that `REQUEST_ENV` names, never as options to parse
again; the tests read it (tests/runrequest.py), never pytest's options. `prepare` checks the host,
picks the accelerator, builds or finds the images and returns a ready
`MachineSpec`; `resolve` is both steps. `interactive_shell` is ``invoke shell``::

    request = resolve_request(GuestRequest(cpus=4))
    spec, images = prepare(request, Cache.default())
    with Guest(spec, images, new_run_dir("shell", spec.name), timeouts=...) as guest:
        ...
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import arches
from harness.agent import flavours as registry
from harness.builder.cache import Cache
from harness.builder.hostdeps import ensure_host
from harness.builder.images import GuestImages, prepare_images
from harness.builder.kernel import KernelChoice, Variant, check_variant
from harness.builder.kernels import DEFAULT_VERSION, get_version
from harness.errors import ConfigError
from harness.timeouts import Timeouts
from harness.vm.accel import choose_accel
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.record import new_run_dir
from harness.vm.topology import CpuTopology, default_topology, resolve_topology

LOG = logging.getLogger(__name__)

#: The guests of a run that names none (no ``--cpus``, no ``--topology``): these vCPU
#: counts' default layouts, then an SMT/cluster one.
FULL_SET_CPUS = (1, 2, 4, 8)
SMT_CLUSTER_LAYOUT = "1s2cl2c2t"
#: The environment variable naming a `ResolvedRequest`'s JSON file: ``invoke test``
#: sets it for pytest, whose controller reads it (tests/conftest.py) and hands the
#: object to its xdist workers (their workerinput); a run told by options has none.
REQUEST_ENV = "PROFBENCH_REQUEST"


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


@dataclass(frozen=True, slots=True)
class ResolvedRequest:
    """A `GuestRequest` validated, each option resolved: what a test run is built from.

    ``asked`` keeps the words (a rerun's command line, `harness.cli.skips`); the rest is
    what they mean. The first of ``topologies`` is the guest a single-guest entry point
    boots (``invoke shell``); the guest tier boots each. ``flavours``: the only flavours
    whose tests run (``--flavour``, each checked against the registry); () all.
    """

    asked: GuestRequest
    variant: Variant
    kernel: KernelChoice
    topologies: tuple[CpuTopology, ...]
    flavours: tuple[str, ...] = ()


def tier_topologies(cpus: Sequence[int], layouts: Sequence[str]) -> tuple[CpuTopology, ...]:
    """The guests of pytest's repeatable ``--cpus`` and ``--topology``: each, or the full set.

    :raise ConfigError: a count below 1 or a layout that does not parse.
    """
    if not cpus and not layouts:
        return (*map(default_topology, FULL_SET_CPUS), CpuTopology.parse(SMT_CLUSTER_LAYOUT))
    return (*map(default_topology, cpus), *map(CpuTopology.parse, layouts))


def resolve_request(
    asked: GuestRequest,
    *,
    tier: tuple[CpuTopology, ...] | None = None,
    flavours: tuple[str, ...] = (),
) -> ResolvedRequest:
    """Validate every word of ``asked``: the one place each option is resolved.

    ``tier``: the guests where pytest's repeatable options named them (`tier_topologies`);
    None: ``asked``'s one guest (``--cpus`` and ``--topology`` must agree), or the full
    set where it names none. ``flavours``: ``--flavour``'s names (the registry's,
    out-of-tree ones included once ``--flavour-path`` added them). Pure but for
    ``--kernel-src``'s look at the tree.

    :raise ConfigError: an unknown arch, variant, kernel or flavour, or a layout that does
        not hold.
    """
    arches.get(asked.arch)
    if tier is None:
        named = asked.cpus is not None or asked.topology is not None
        tier = (resolve_topology(asked.cpus, asked.topology),) if named else tier_topologies((), ())
    try:
        chosen = registry.known(flavours)
    except ConfigError as exc:
        raise ConfigError(f"--flavour: {exc}") from exc
    return ResolvedRequest(asked=asked, variant=check_variant(asked.variant),
                           kernel=parse_kernel(asked.kernel, asked.kernel_src),
                           topologies=tier, flavours=chosen)  # fmt: skip


def request_json(request: ResolvedRequest) -> str:
    """``request`` as JSON, for pytest and its workers (`request_from_json` reads it)."""
    asked = dataclasses.asdict(request.asked)
    tree = request.kernel.tree
    return json.dumps({
        "asked": {**asked, "kernel_args": list(request.asked.kernel_args)},
        "variant": request.variant,
        "kernel": {"version": request.kernel.version, "tree": None if tree is None else str(tree)},
        "topologies": [dataclasses.asdict(topology) for topology in request.topologies],
        "flavours": list(request.flavours),
    }, indent=2)  # fmt: skip


def request_from_json(text: str) -> ResolvedRequest:
    """The `ResolvedRequest` that `request_json` wrote (nothing resolved again).

    :raise ConfigError: not such JSON.
    """
    try:
        data = json.loads(text)
        words = data["asked"]
        asked = GuestRequest(**{**words, "kernel_args": tuple(words["kernel_args"])})
        kernel = KernelChoice(data["kernel"]["version"], _path(data["kernel"]["tree"]))
        topologies = tuple(CpuTopology(**topology) for topology in data["topologies"])
        variant = check_variant(data["variant"])  # the file's edge: a Literal again
        chosen = tuple(str(name) for name in data["flavours"])  # checked when written
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"not a request written by request_json: {exc}") from exc
    return ResolvedRequest(asked=asked, variant=variant, kernel=kernel, topologies=topologies,
                           flavours=chosen)  # fmt: skip


def _path(text: str | None) -> Path | None:
    return None if text is None else Path(text)


def resolve(request: GuestRequest, cache: Cache) -> tuple[MachineSpec, GuestImages]:
    """Validate ``request`` (`resolve_request`), then `prepare` its first guest."""
    return prepare(resolve_request(request), cache)


def prepare(request: ResolvedRequest, cache: Cache) -> tuple[MachineSpec, GuestImages]:
    """Make sure the host and images are ready for ``request``; its first guest's spec.

    The spec is checked before anything is installed or built. Blocks while images build.
    """
    arch = arches.get(request.asked.arch)
    spec = MachineSpec(  # validates the request before anything is installed or built
        arch=arch,
        topology=request.topologies[0],
        nmi=request.asked.nmi,
        memory_mib=request.asked.memory_mib,
        kernel_args=request.asked.kernel_args,
    )
    ensure_host()
    accel, reason = choose_accel(arch, request.asked.accel, cache)
    LOG.info("accelerator: %s (%s)", accel, reason)
    if not arch.has_pmu(accel):
        LOG.warning("%s under %s has no PMU: PMU and NMI checks will be skipped", arch.name, accel)
    images = prepare_images(arch, request.variant, cache, kernel=request.kernel)
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
