from __future__ import annotations

import json
import re
from typing import Any

import pytest

from harness.errors import ConfigError
from harness.vm.topology import (
    CpuTopology,
    check_guest_topology,
    check_qmp_topology,
    default_topology,
    parse_cpu_list,
    parse_sysfs_topology,
    resolve_topology,
)
from tests.unit.golden import LOGS_DIR


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sockets=2,clusters=2,cores=1,threads=2", CpuTopology(2, 2, 1, 2)),
        ("2s2cl1c2t", CpuTopology(2, 2, 1, 2)),
        ("2s1c2t", CpuTopology(sockets=2, clusters=1, cores=1, threads=2)),
        ("cpus=8,sockets=2,clusters=2,cores=1,threads=2", CpuTopology(2, 2, 1, 2)),
        ("cores=4", CpuTopology(cores=4)),
        ("  1s3c1t ", CpuTopology(cores=3)),
    ],
)
def test_parse_accepts_both_forms(text: str, expected: CpuTopology) -> None:
    assert CpuTopology.parse(text) == expected


def test_properties_of_2s2cl1c2t() -> None:
    topo = CpuTopology(sockets=2, clusters=2, cores=1, threads=2)
    assert (topo.cpus, topo.name, topo.smp_value) == (
        8,
        "2s2cl1c2t",
        "8,sockets=2,clusters=2,cores=1,threads=2",
    )


def test_name_round_trips_through_parse() -> None:
    topo = CpuTopology(sockets=3, clusters=1, cores=4, threads=2)
    assert CpuTopology.parse(topo.name) == topo


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sockets=0,cores=2", "sockets must be at least 1"),
        ("clusters=0", "clusters must be at least 1"),
        ("cores=0", "cores must be at least 1"),
        ("threads=0", "threads must be at least 1"),
        ("0s1c1t", "sockets must be at least 1"),
        ("1s0cl1c1t", "clusters must be at least 1"),
        ("1s1c0t", "threads must be at least 1"),
        ("cpus=6,sockets=2,clusters=2,cores=1,threads=2", "cpus=6"),
        ("sockets=2,dies=2", "'dies=2'"),
        ("sockets=2,sockets=2", "names sockets twice"),
        ("", "empty topology"),
        ("   ", "empty topology"),
        ("banana", "'banana'"),
        ("sockets=two", "'sockets=two'"),
        ("sockets=-1", "'sockets=-1'"),
        ("cores=\u00b2", "'cores=\u00b2'"),  # a superscript two: str.isdigit() says yes
    ],
)
def test_parse_rejects(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        CpuTopology.parse(text)


@pytest.mark.parametrize(
    ("cpus", "expected"),
    [
        # Below 4: flat cores.
        (1, CpuTopology(1, 1, 1, 1)),
        (2, CpuTopology(1, 1, 2, 1)),
        (3, CpuTopology(1, 1, 3, 1)),
        # From 4: SMT pairs if even, then 2 sockets, then 2 clusters, rest cores.
        (4, CpuTopology(2, 1, 1, 2)),
        (5, CpuTopology(1, 1, 5, 1)),
        (6, CpuTopology(1, 1, 3, 2)),
        (7, CpuTopology(1, 1, 7, 1)),
        (8, CpuTopology(2, 2, 1, 2)),
        (9, CpuTopology(1, 1, 9, 1)),
        (16, CpuTopology(2, 2, 2, 2)),
    ],
)
def test_default_topology(cpus: int, expected: CpuTopology) -> None:
    topo = default_topology(cpus)
    assert (topo, topo.cpus) == (expected, cpus)


def test_default_topology_rejects_zero() -> None:
    with pytest.raises(ConfigError, match="at least 1"):
        default_topology(0)


def test_resolve_topology() -> None:
    assert resolve_topology(None, None) == CpuTopology()
    assert resolve_topology(8, None) == CpuTopology(2, 2, 1, 2)
    assert resolve_topology(4, "1s2cl2c1t") == CpuTopology(1, 2, 2, 1)


def test_resolve_topology_disagreement_names_both() -> None:
    with pytest.raises(ConfigError, match=r"--topology 2s2cl1c2t has 8 CPUs but --cpus 4"):
        resolve_topology(4, "2s2cl1c2t")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}),
        ("5", {5}),
        ("0-1\n", {0, 1}),
        ("", set()),
    ],
)
def test_parse_cpu_list(text: str, expected: set[int]) -> None:
    assert parse_cpu_list(text) == frozenset(expected)


# --- guest sysfs ----------------------------------------------------------------------------

TOPO_2S2CL1C2T = CpuTopology(sockets=2, clusters=2, cores=1, threads=2)


def sysfs_dump(cpus: int, socket: Any, cluster: Any, core: Any, siblings: Any) -> str:
    """``grep -H . /sys/devices/system/cpu/cpu*/topology/*`` for ``cpus`` CPUs."""
    lines = []
    for cpu in range(cpus):
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        lines += [
            f"{base}/cluster_cpus_list:{cpu - cpu % 2}-{cpu - cpu % 2 + 1}",
            f"{base}/cluster_id:{cluster(cpu)}",
            f"{base}/core_id:{core(cpu)}",
            f"{base}/physical_package_id:{socket(cpu)}",
            f"{base}/thread_siblings:{1 << cpu:x}",
            f"{base}/thread_siblings_list:{siblings(cpu)}",
        ]
    return "\n".join(lines) + "\n"


def good_dump(cpus: int = 8) -> str:
    # 2s2cl1c2t: cpu = socket*4 + cluster*2 + thread; firmware gives unique core ids.
    return sysfs_dump(
        cpus,
        socket=lambda c: c // 4,
        cluster=lambda c: (c // 2) % 2,
        core=lambda c: c // 2,
        siblings=lambda c: f"{c - c % 2}-{c - c % 2 + 1}",
    )


def test_parse_sysfs_topology_reads_each_cpu() -> None:
    places = parse_sysfs_topology(good_dump())
    cpu5 = places[5]
    assert (len(places), cpu5.cpu, cpu5.socket, cpu5.cluster, cpu5.core, cpu5.thread_siblings) == (
        8,
        5,
        1,
        0,
        2,
        frozenset({4, 5}),
    )


def test_check_guest_topology_accepts_matching_guest() -> None:
    assert check_guest_topology(TOPO_2S2CL1C2T, parse_sysfs_topology(good_dump())) == []


def test_check_guest_topology_wrong_cpu_count() -> None:
    problems = check_guest_topology(TOPO_2S2CL1C2T, parse_sysfs_topology(good_dump(cpus=4)))
    assert problems == ["guest has 4 CPUs in sysfs, asked for 8"]


def test_check_guest_topology_threads_not_paired() -> None:
    dump = sysfs_dump(
        8,
        socket=lambda c: c // 4,
        cluster=lambda c: (c // 2) % 2,
        core=lambda c: c,
        siblings=str,
    )
    problems = check_guest_topology(TOPO_2S2CL1C2T, parse_sysfs_topology(dump))
    assert [p.split(":")[0] for p in problems] == ["cores"] + [f"cpu{c}" for c in range(8)]


def test_check_guest_topology_only_one_package() -> None:
    dump = sysfs_dump(
        8,
        socket=lambda c: 0,
        cluster=lambda c: (c // 2) % 2,
        core=lambda c: c // 2,
        siblings=lambda c: f"{c - c % 2}-{c - c % 2 + 1}",
    )
    problems = check_guest_topology(TOPO_2S2CL1C2T, parse_sysfs_topology(dump))
    assert problems[0] == "sockets: guest shows 1 of sizes [8], asked for 2 of 4 CPU(s) each"


# --- QMP query-cpus-fast --------------------------------------------------------------------


def qmp_cpus(topo: CpuTopology) -> list[dict[str, Any]]:
    cpus: list[dict[str, Any]] = []
    for s in range(topo.sockets):
        for cl in range(topo.clusters):
            for c in range(topo.cores):
                for t in range(topo.threads):
                    props = {"socket-id": s, "cluster-id": cl, "core-id": c, "thread-id": t}
                    cpus.append({"cpu-index": len(cpus), "props": props, "target": "aarch64"})
    return cpus


def test_check_qmp_topology_equal() -> None:
    assert check_qmp_topology(TOPO_2S2CL1C2T, qmp_cpus(TOPO_2S2CL1C2T)) == []


def test_check_qmp_topology_missing_cpu() -> None:
    cpus = [c for c in qmp_cpus(TOPO_2S2CL1C2T) if c["cpu-index"] != 7]
    problems = check_qmp_topology(TOPO_2S2CL1C2T, cpus)
    assert problems == [
        "QEMU reports 7 vCPUs, asked for 8; "
        "missing (socket, cluster, core, thread) [(1, 1, 0, 1)], unexpected []"
    ]


def test_check_qmp_topology_flat_guest_for_smt_request() -> None:
    flat = qmp_cpus(CpuTopology(cores=8))
    (problem,) = check_qmp_topology(TOPO_2S2CL1C2T, flat)
    assert problem.startswith("QEMU reports 8 vCPUs, asked for 8; missing")


# --- recorded from a real QEMU 7.2 arm64 guest ----------------------------------------------


def recorded_query_cpus_fast() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(
        (LOGS_DIR / "arm64-query-cpus-fast-2s2cl1c2t.json").read_text()
    )
    return data


def test_check_qmp_topology_on_recorded_answer() -> None:
    assert check_qmp_topology(TOPO_2S2CL1C2T, recorded_query_cpus_fast()) == []


def test_check_qmp_topology_recorded_answer_differs_from_other_layout() -> None:
    (problem,) = check_qmp_topology(CpuTopology(1, 2, 2, 2), recorded_query_cpus_fast())
    assert problem.startswith("QEMU reports 8 vCPUs, asked for 8; missing")
