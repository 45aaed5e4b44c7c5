"""``invoke bench``: measure what the speed goals are about; write JSON and a table.

Measured (wall-clock seconds, medians where repeated):

* cold kernel build and cold rootfs build, in a scratch cache (``cold=True``);
* cached rebuild: `prepare_images` on a warm cache in-process; ``invoke setup`` on a
  ready host; ``invoke images`` warm; and from starting ``invoke test`` to the start of
  its guest run (what a second run pays before booting);
* launch-to-SSH for 1, 2, 4 and 8 vCPUs (default layouts), cold boot and restore from
  a snapshot side by side (with the restore's state-load share and the snapshot's
  size), and the shutdown time;
* the agent (`harness.cli.agentbench`, one 2-vCPU guest): render + build + load time and
  overflow-handler cost per overflow; then each flavour's own measurements, its
  `Flavour.bench` (tprof: the highest per-CPU rate that runs 10 s without a drop; kprof:
  bytes per sample read and its no-drop rate with one reader; hwpmc: overflow-to-swept
  latency per CPU and its highest rate with no bufferfull);
* the ``quick`` matrix's wall time with 1 worker and with the CPU budget, and the ratio;
* with ``test_wall``, the wall time of ``invoke test --cpus 8`` with snapshots and with
  ``--no-snapshot`` (minutes).

The host's load average is recorded before and after each group: these machines
are shared, and TCG timings move with the neighbours' guests.

Timing is measured here and never asserted in tests::

    result = run_bench(BenchRequest(cold=False, repeats=3))
    print(format_table(result))      # result["json_path"] holds the JSON file
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import arches
from harness.builder.cache import Cache
from harness.builder.hostdeps import ensure_host
from harness.builder.images import GuestImages, prepare_images
from harness.builder.kernel import DEFAULT_KERNEL, KernelChoice, KernelRequest, build_kernel
from harness.builder.keys import ensure_keypair
from harness.builder.rootfs import build_rootfs
from harness.cli.against import TestWall, compare_test_wall, export_revision, format_rows
from harness.cli.agentbench import bench_rows, measure_agents
from harness.cli.testrun import worker_budget
from harness.errors import InfraError
from harness.paths import REPO_ROOT
from harness.process import tool_version
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.record import ARTIFACTS_ENV, artifacts_root, host_facts, new_run_dir
from harness.vm.snapstore import SnapshotStore
from harness.vm.topology import default_topology

LOG = logging.getLogger(__name__)
BOOT_CPUS = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True)
class BenchRequest:
    """What to measure and where to write it."""

    out: Path | None = None
    cold: bool = True
    repeats: int = 3
    matrix: str | None = "quick"  # None: skip the matrix wall times
    arch: str = "arm64"
    test_wall: bool = False  # also time `invoke test --cpus 8` with and without snapshots
    only_boots: bool = False  # only the boot and restore times (and test_wall if asked)
    kernel: KernelChoice = DEFAULT_KERNEL  # --kernel / --kernel-src: builds, boots, agent


def _timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def _summary(samples: list[float]) -> dict[str, Any]:
    return {
        "median_s": round(statistics.median(samples), 3),
        "min_s": round(min(samples), 3),
        "max_s": round(max(samples), 3),
        "samples_s": [round(s, 3) for s in samples],
    }


def measure_cold_builds(
    arch_name: str, cache: Cache, kernel: KernelChoice = DEFAULT_KERNEL
) -> dict[str, Any]:
    """Cold kernel and rootfs builds in a scratch cache next to the real one."""
    arch = arches.get(arch_name)
    request = KernelRequest(arch=arch, kernel=kernel)
    cache.root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench-cold-", dir=cache.root))
    try:
        cold = Cache(scratch)
        LOG.info("bench: cold kernel build in %s (minutes)", scratch)
        kernel_s = _timed(lambda: build_kernel(request, cold))
        keypair = ensure_keypair(scratch / "ssh")
        LOG.info("bench: cold rootfs build")
        rootfs_s = _timed(lambda: build_rootfs(arch, cold, keypair))
        kernel_sha = build_kernel(request, cold).manifest["image_sha256"]
        warm_sha = build_kernel(request, cache).manifest["image_sha256"]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"kernel_cold_build_s": round(kernel_s, 3), "rootfs_cold_build_s": round(rootfs_s, 3),
            "kernel_rebuild_is_bit_identical": kernel_sha == warm_sha}  # fmt: skip


def measure_warm(arch_name: str, cache: Cache, repeats: int) -> dict[str, Any]:
    """Warm-cache costs: rebuild check in-process, and the CLI's own start-up."""
    arch = arches.get(arch_name)
    prepare_images(arch, "default", cache)  # make sure it is warm
    in_process = [_timed(lambda: prepare_images(arch, "default", cache)) for _ in range(repeats)]
    invoke = [sys.executable, "-m", "invoke"]
    setup = [_timed(lambda: _cli([*invoke, "setup"])) for _ in range(repeats)]
    images = [_timed(lambda: _cli([*invoke, "images", "--arch", arch_name]))
              for _ in range(repeats)]  # fmt: skip
    launch = [_start_to_launch([*invoke, "test", "--arch", arch_name, "--cpus", "1", "-k",
                                "test_qemu_reports_the_requested_topology"])
              for _ in range(repeats)]  # fmt: skip
    return {
        "cached_rebuild": _summary(in_process),
        "cli_invoke_setup_ready_host": _summary(setup),
        "cli_invoke_images_warm": _summary(images),
        "cli_invoke_test_start_to_qemu_launch": _summary(launch),
    }


def _cli(argv: list[str], env: dict[str, str] | None = None) -> None:
    subprocess.run(argv, cwd=REPO_ROOT, check=True, capture_output=True, env=env, timeout=900)


def _start_to_launch(argv: list[str]) -> float:
    """Seconds from starting ``argv`` to the moment its first guest run began.

    Each guest run keeps a run.json with its start: a booted guest's in its own
    directory, a restored one's in ``restore-NNN/`` below it (snapshot reset).
    """
    with tempfile.TemporaryDirectory(prefix="bench-launch-") as tmp:
        started = time.time()
        _cli(argv, env={**os.environ, ARTIFACTS_ENV: tmp})
        records = list(Path(tmp).glob("pytest/**/run.json"))
        if not records:
            raise InfraError(f"{shlex.join(argv)} left no guest run record under {tmp}")
        began = min(datetime.datetime.fromisoformat(json.loads(r.read_text())["started_at"])
                    for r in records)  # fmt: skip
        return began.timestamp() - started


def load_average() -> list[float]:
    """The host's 1, 5 and 15 minute load averages."""
    return [round(load, 2) for load in os.getloadavg()]


def measure_boots(
    arch_name: str, cache: Cache, repeats: int, kernel: KernelChoice = DEFAULT_KERNEL
) -> dict[str, Any]:
    """Launch-to-SSH, cold and restored, and shutdown per vCPU count (default layouts, TCG)."""
    arch = arches.get(arch_name)
    images = prepare_images(arch, "default", cache, kernel=kernel)
    timeouts = Timeouts.from_env()
    store = SnapshotStore(cache, timeouts)
    boots: dict[str, Any] = {}
    restores: dict[str, Any] = {}
    shutdowns: list[float] = []
    load_before = load_average()
    for cpus in BOOT_CPUS:
        spec = MachineSpec(arch=arch, topology=default_topology(cpus), accel="tcg")
        samples = []
        for attempt in range(repeats):
            workdir = new_run_dir("bench", f"{spec.name}-{attempt}")
            with Guest(spec, images, workdir, timeouts=timeouts) as guest:
                pass
            samples.append(guest.boot_s)
            shutdowns.append(guest.shutdown_s)
            LOG.info("bench: %d vCPUs: SSH after %.2fs, shutdown %.2fs", cpus, guest.boot_s,
                     guest.shutdown_s)  # fmt: skip
        name = f"{cpus}cpu_{spec.topology.name}"
        boots[name] = _summary(samples)
        restores[name] = _restores(spec, images, store, repeats)
    return {"launch_to_ssh": boots, "restore_to_ssh": restores, "shutdown": _summary(shutdowns),
            "load_average_before": load_before, "load_average_after": load_average()}  # fmt: skip


def _restores(
    spec: MachineSpec, images: GuestImages, store: SnapshotStore, repeats: int
) -> dict[str, Any]:
    """Restore-to-SSH of ``spec``'s snapshot (saved first if missing: not timed)."""
    snapshot, entry = store.obtain(spec, images, new_run_dir("bench", f"{spec.name}-save"))
    samples, loads, logins = [], [], []
    for attempt in range(repeats):
        workdir = new_run_dir("bench", f"{spec.name}-restore-{attempt}")
        guest = store.start(spec, images, workdir, name=spec.name)
        guest.__exit__(None, None, None)
        samples.append(guest.boot_s)
        loads.append(guest.record.data["timings_s"]["restore_load"])
        logins.append(guest.record.data["timings_s"]["restore_login"])
        LOG.info("bench: %d vCPUs: restored, SSH after %.2fs", spec.topology.cpus, guest.boot_s)
    return {**_summary(samples), "launch_and_load": _summary(loads),
            "until_logged_in": _summary(logins),
            "state_mib": round(snapshot.state_bytes / 2**20, 1),
            "save_s": entry.manifest.get("save_s")}  # fmt: skip


def measure_test_wall(cpus: int = 8) -> dict[str, Any]:
    """Wall time of ``invoke test --cpus N``, restoring snapshots and booting cold.

    The snapshot run goes second, after a one-test warm-up run that saves the
    snapshot if it is missing, so both are timed on a warm cache.
    """
    invoke = [sys.executable, "-m", "invoke", "test", "--cpus", str(cpus)]
    load_before = load_average()
    cold, cold_status = _wall([*invoke, "--no-snapshot"])
    _wall([*invoke, "-k", "test_qemu_reports_the_requested_topology"])  # the snapshot, if new
    warm, warm_status = _wall(invoke)
    LOG.info("bench: invoke test --cpus %d: %.1fs cold boot (status %d), %.1fs with snapshots "
             "(status %d)", cpus, cold, cold_status, warm, warm_status)  # fmt: skip
    return {"cpus": cpus, "no_snapshot_s": round(cold, 1), "no_snapshot_status": cold_status,
            "snapshot_s": round(warm, 1), "snapshot_status": warm_status,
            "load_average_before": load_before, "load_average_after": load_average()}  # fmt: skip


def _wall(argv: list[str]) -> tuple[float, int]:
    """Seconds ``argv`` ran, and its exit status (a failed test run is still timed)."""
    started = time.monotonic()
    done = subprocess.run(argv, cwd=REPO_ROOT, check=False, capture_output=True, timeout=3600)
    return time.monotonic() - started, done.returncode


def measure_matrix(name: str) -> dict[str, Any]:
    """Wall time of ``invoke test --matrix NAME`` with 1 worker and with the CPU budget."""
    budget = worker_budget("auto")
    invoke = [sys.executable, "-m", "invoke", "test", "--matrix", name, "-n"]
    one = _timed(lambda: _cli([*invoke, "1"]))
    many = _timed(lambda: _cli([*invoke, str(budget)]))
    LOG.info("bench: matrix %s: %.1fs with 1 worker, %.1fs with %d", name, one, many, budget)
    return {"name": name, "one_worker_s": one, "budget_workers": budget,
            "budget_s": many, "speedup": one / many if many else 0.0}  # fmt: skip


def run_bench(request: BenchRequest, cache: Cache | None = None) -> dict[str, Any]:
    """Run every measurement; write the JSON file; return the result (with its path)."""
    cache = cache or Cache.default()
    ensure_host()
    arch = arches.get(request.arch)
    result: dict[str, Any] = {
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "host": host_facts(),
        "qemu": tool_version(arch.qemu_binary),
        "arch": arch.name,
        "repeats": request.repeats,
        "goals": {"launch_to_ssh_8cpu_s": 5.0, "warm_start_to_boot_s": 2.0,
                  "restore_to_ssh_8cpu_s": 0.5, "invoke_test_8cpu_snapshot_s": 40.0},
    }  # fmt: skip
    if request.cold and not request.only_boots:
        result["cold"] = measure_cold_builds(request.arch, cache, request.kernel)
    if not request.only_boots:
        result["warm"] = measure_warm(request.arch, cache, request.repeats)
    result["boot"] = measure_boots(request.arch, cache, request.repeats, request.kernel)
    images = prepare_images(arch, "default", cache, kernel=request.kernel)
    result["kernel"] = images.kernel_name
    if not request.only_boots:
        result.update(measure_agents(arch, images, cache, request.repeats))
    if request.matrix and not request.only_boots:
        result["matrix"] = measure_matrix(request.matrix)
    if request.test_wall:
        result["test_wall"] = measure_test_wall()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = request.out or artifacts_root() / "bench" / f"bench-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    result["json_path"] = str(out)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


def run_against(rev: str, wall: TestWall, out: Path | None = None) -> dict[str, Any]:
    """``invoke test`` of this tree and of commit ``rev``, side by side; the JSON's result.

    REV's tree is unpacked under the bench's artifacts, and its runs' artifacts stay
    there. Blocks for 2 x ``wall.rounds`` tier runs.

    :raise ConfigError: ``rev`` names no commit of this repository.
    """
    ensure_host()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    root = artifacts_root() / "bench"
    tree = export_revision(rev, root / f"against-{stamp}")
    result = {"measured_at": datetime.datetime.now(datetime.UTC).isoformat(), "host": host_facts(),
              "test_wall_against": compare_test_wall(tree, rev, wall)}  # fmt: skip
    path = out or root / f"bench-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    result["json_path"] = str(path)
    path.write_text(json.dumps(result, indent=2) + "\n")
    return result


def format_against(result: dict[str, Any]) -> str:
    """`run_against`'s table, each run with its load average, and where the JSON went."""
    found = result["test_wall_against"]
    rows = [("measurement", "median s", "min s", "max s"), *format_rows(found)]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) for row in rows]
    lines += [f"  {r['tree']}: {r['wall_s']} s, exit {r['status']}, load average before "
              f"{r['load_average_before']}; output: {r['log']}" for r in found["runs"]]  # fmt: skip
    return "\n".join([*lines, f"JSON: {result['json_path']}"])


def format_table(result: dict[str, Any]) -> str:
    """A readable table of a `run_bench` result."""
    rows = [("measurement", "median s", "min s", "max s")]
    for name, value in result.get("cold", {}).items():
        rows.append((name, f"{value:.1f}" if name.endswith("_s") else str(value), "", ""))
    for name, summary in result.get("warm", {}).items():
        rows.append((name, *_cells(summary)))
    boot = result["boot"]
    for name, summary in boot["launch_to_ssh"].items():
        rows.append((f"launch to SSH, {name}", *_cells(summary)))
        if restored := boot.get("restore_to_ssh", {}).get(name):
            rows.append((f"  restore to SSH ({restored['state_mib']} MiB)", *_cells(restored)))
            rows.append(("    launch + state load", *_cells(restored["launch_and_load"])))
            if "until_logged_in" in restored:
                rows.append(("    launch to SSH login", *_cells(restored["until_logged_in"])))
    rows.append(("shutdown", *_cells(boot["shutdown"])))
    rows.append(("load average before / after boots", str(boot.get("load_average_before")),
                 "", str(boot.get("load_average_after"))))  # fmt: skip
    rows += bench_rows(result)
    if matrix := result.get("matrix"):
        rows.append((f"matrix {matrix['name']}, 1 worker", f"{matrix['one_worker_s']:.1f}", "", ""))
        rows.append((f"matrix {matrix['name']}, {matrix['budget_workers']} workers",
                     f"{matrix['budget_s']:.1f}", "", ""))  # fmt: skip
        rows.append(("matrix speed-up (1 worker ÷ budget)", f"{matrix['speedup']:.2f}", "", ""))
    if wall := result.get("test_wall"):
        rows.append((f"invoke test --cpus {wall['cpus']}, --no-snapshot",
                     f"{wall['no_snapshot_s']:.1f}", "", ""))  # fmt: skip
        rows.append((f"invoke test --cpus {wall['cpus']}, snapshots", f"{wall['snapshot_s']:.1f}",
                     "", ""))  # fmt: skip
    width = max(len(row[0]) for row in rows)
    lines = [f"{row[0]:<{width}}  {row[1]:>9}  {row[2]:>7}  {row[3]:>7}" for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join([*lines, f"\nJSON: {result['json_path']}"])


def _cells(summary: dict[str, Any]) -> tuple[str, str, str]:
    return (f"{summary['median_s']:.2f}", f"{summary['min_s']:.2f}", f"{summary['max_s']:.2f}")
