"""Guest CPU topologies: parsing, defaults, and checking what a guest really got.

A topology is sockets × clusters × cores × threads. It is written either in
QEMU's ``-smp`` words or compactly; the compact form is also its `name`, safe in
test ids and directory names::

    CpuTopology.parse("sockets=2,clusters=2,cores=1,threads=2")   # 8 CPUs
    CpuTopology.parse("2s2cl1c2t").name                            # '2s2cl1c2t'
    resolve_topology(cpus=8, text=None)                             # the default layout

After boot, `check_guest_topology` compares the request with what the guest
kernel reports in sysfs, and `check_qmp_topology` with what QEMU reports over
QMP ``query-cpus-fast``; both return readable differences, empty when equal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError

_COMPACT = re.compile(r"^(?P<s>\d+)s(?:(?P<cl>\d+)cl)?(?P<c>\d+)c(?P<t>\d+)t$")
_WORDS = ("cpus", "sockets", "clusters", "cores", "threads")
_EXAMPLES = "e.g. 'sockets=2,clusters=2,cores=1,threads=2' or '2s2cl1c2t'"


@dataclass(frozen=True, slots=True)
class CpuTopology:
    """A vCPU layout; every dimension is at least 1."""

    sockets: int = 1
    clusters: int = 1
    cores: int = 1
    threads: int = 1

    def __post_init__(self) -> None:
        for field, value in (
            ("sockets", self.sockets),
            ("clusters", self.clusters),
            ("cores", self.cores),
            ("threads", self.threads),
        ):
            if value < 1:
                raise ConfigError(f"topology {field} must be at least 1, got {value}")

    @property
    def cpus(self) -> int:
        """Total vCPUs."""
        return self.sockets * self.clusters * self.cores * self.threads

    @property
    def name(self) -> str:
        """Compact, stable identifier: ``2s2cl1c2t``."""
        return f"{self.sockets}s{self.clusters}cl{self.cores}c{self.threads}t"

    @property
    def smp_value(self) -> str:
        """The value of QEMU's ``-smp`` option."""
        return (
            f"{self.cpus},sockets={self.sockets},clusters={self.clusters},"
            f"cores={self.cores},threads={self.threads}"
        )

    @property
    def smp_value_without_clusters(self) -> str:
        """``-smp`` for machine types that reject ``clusters=``."""
        return f"{self.cpus},sockets={self.sockets},cores={self.cores},threads={self.threads}"

    @classmethod
    def parse(cls, text: str) -> CpuTopology:
        """Parse either form.

        :raise ConfigError: malformed text, a dimension < 1, or ``cpus=`` that
            disagrees with the product of the others.
        """
        text = text.strip()
        if match := _COMPACT.match(text):
            return cls(int(match["s"]), int(match["cl"] or 1), int(match["c"]), int(match["t"]))
        words = _parse_words(text)
        topo = cls(
            sockets=words.get("sockets", 1),
            clusters=words.get("clusters", 1),
            cores=words.get("cores", 1),
            threads=words.get("threads", 1),
        )
        if "cpus" in words and words["cpus"] != topo.cpus:
            raise ConfigError(
                f"topology {text!r}: sockets×clusters×cores×threads = {topo.cpus}, "
                f"but cpus={words['cpus']}; make the product equal the CPU count"
            )
        return topo


def _parse_words(text: str) -> dict[str, int]:
    words: dict[str, int] = {}
    for part in filter(None, text.split(",")):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _WORDS or not re.fullmatch(r"[0-9]+", value.strip()):
            raise ConfigError(f"cannot read topology {text!r} at {part!r}; {_EXAMPLES}")
        if key in words:
            raise ConfigError(f"topology {text!r} names {key} twice")
        words[key] = int(value)
    if not words:
        raise ConfigError(f"empty topology; {_EXAMPLES}")
    return words


def default_topology(cpus: int) -> CpuTopology:
    """The layout ``--cpus N`` picks: spread over every level that N allows.

    Fewer than 4 CPUs stay flat cores. From 4 on: SMT pairs (N even), then two
    sockets, then two clusters per socket, the rest as cores; so 8 → 2s2cl1c2t
    (every level exercised), 4 → 2s1cl1c2t, 6 → 1s1cl3c2t, 5 → 1s1cl5c1t.
    """
    if cpus < 1:
        raise ConfigError(f"--cpus must be at least 1, got {cpus}")
    if cpus < 4:
        return CpuTopology(cores=cpus)
    threads = 2 if cpus % 2 == 0 else 1
    rest = cpus // threads
    sockets = 2 if rest % 2 == 0 else 1
    rest //= sockets
    clusters = 2 if rest >= 2 and rest % 2 == 0 else 1
    return CpuTopology(sockets, clusters, rest // clusters, threads)


def resolve_topology(cpus: int | None, text: str | None) -> CpuTopology:
    """Combine ``--cpus`` and ``--topology`` into one layout.

    :raise ConfigError: neither is usable, or they disagree.
    """
    if text is None:
        return default_topology(1 if cpus is None else cpus)
    topo = CpuTopology.parse(text)
    if cpus is not None and cpus != topo.cpus:
        raise ConfigError(
            f"--topology {text} has {topo.cpus} CPUs but --cpus {cpus} was given; "
            "drop --cpus or make them agree"
        )
    return topo


# --- checking a booted guest --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CpuPlace:
    """Where one vCPU sits, as one side (guest sysfs or QMP) reports it."""

    cpu: int
    socket: int
    cluster: int
    core: int
    thread_siblings: frozenset[int]


def parse_sysfs_topology(dump: str) -> tuple[CpuPlace, ...]:
    """Parse ``grep -H . /sys/devices/system/cpu/cpu*/topology/*`` output."""
    fields: dict[int, dict[str, str]] = {}
    pattern = re.compile(r"^/sys/devices/system/cpu/cpu(\d+)/topology/(\w+):(.*)$")
    for line in dump.splitlines():
        if match := pattern.match(line.strip()):
            fields.setdefault(int(match[1]), {})[match[2]] = match[3].strip()
    places = []
    for cpu, values in sorted(fields.items()):
        places.append(
            CpuPlace(
                cpu=cpu,
                socket=int(values.get("physical_package_id", "-1")),
                cluster=int(values.get("cluster_id", "-1")),
                core=int(values.get("core_id", "-1")),
                thread_siblings=parse_cpu_list(values.get("thread_siblings_list", str(cpu))),
            )
        )
    return tuple(places)


def parse_cpu_list(text: str) -> frozenset[int]:
    """Parse a kernel CPU list such as ``0-3,8,10-11``."""
    cpus: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return frozenset(cpus)


def check_guest_topology(want: CpuTopology, places: Sequence[CpuPlace]) -> list[str]:
    """Compare the requested layout with the guest kernel's view.

    Firmware numbers ids freely, so this compares *structure*: how many packages,
    clusters and cores there are and how many CPUs each holds.
    """
    problems: list[str] = []
    if len(places) != want.cpus:
        return [f"guest has {len(places)} CPUs in sysfs, asked for {want.cpus}"]
    packages = _group_sizes(places, lambda p: (p.socket,))
    clusters = _group_sizes(places, lambda p: (p.socket, p.cluster))
    cores = _group_sizes(places, lambda p: (p.socket, p.cluster, p.core))
    expect = (
        ("sockets", packages, want.sockets, want.cpus // want.sockets),
        ("clusters", clusters, want.sockets * want.clusters, want.cores * want.threads),
        ("cores", cores, want.sockets * want.clusters * want.cores, want.threads),
    )
    for level, sizes, count, size in expect:
        if sorted(sizes) != [size] * count:
            problems.append(
                f"{level}: guest shows {len(sizes)} of sizes {sorted(sizes)}, "
                f"asked for {count} of {size} CPU(s) each"
            )
    for place in places:
        if len(place.thread_siblings) != want.threads:
            problems.append(
                f"cpu{place.cpu}: {len(place.thread_siblings)} SMT sibling(s) "
                f"{sorted(place.thread_siblings)}, asked for {want.threads}"
            )
    return problems


def _group_sizes(places: Iterable[CpuPlace], key: Any) -> list[int]:
    groups: dict[tuple[int, ...], int] = {}
    for place in places:
        groups[key(place)] = groups.get(key(place), 0) + 1
    return list(groups.values())


def check_qmp_topology(want: CpuTopology, cpus: Sequence[Mapping[str, Any]]) -> list[str]:
    """Compare the request with QMP ``query-cpus-fast`` (QEMU's own view)."""
    seen = sorted(
        (
            int(c["props"].get("socket-id", 0)),
            int(c["props"].get("cluster-id", 0)),
            int(c["props"].get("core-id", 0)),
            int(c["props"].get("thread-id", 0)),
        )
        for c in cpus
    )
    expected = sorted(
        (s, cl, c, t)
        for s in range(want.sockets)
        for cl in range(want.clusters)
        for c in range(want.cores)
        for t in range(want.threads)
    )
    if seen == expected:
        return []
    missing = sorted(set(expected) - set(seen))
    extra = sorted(set(seen) - set(expected))
    return [
        f"QEMU reports {len(seen)} vCPUs, asked for {len(expected)}; "
        f"missing (socket, cluster, core, thread) {missing[:8]}, unexpected {extra[:8]}"
    ]
