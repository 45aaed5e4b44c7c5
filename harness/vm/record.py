"""Run artifacts: the per-run directory and its ``run.json``.

Every guest run leaves a directory with ``argv.txt``, ``console.log``,
``qemu.log``, ``qmp.jsonl`` and ``run.json``: QEMU version, host facts, image
hashes, the machine spec, the guest's preflight facts, timings and the
verdict. ``run.json`` is rewritten as the run advances, so even a run that was
killed leaves what it knew::

    record = RunRecord(workdir / "run.json")
    record.update(spec=spec_record(spec), images=images.record())
    record.finish(error)          # verdict from the exception (or pass)
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

from harness.builder.cache import write_json_atomic
from harness.errors import ConfigError, GuestError, HarnessError, InfraError
from harness.paths import REPO_ROOT
from harness.process import capture, tool_version
from harness.vm.argv import MachineSpec, kernel_cmdline

ARTIFACTS_ENV = "PROFBENCH_ARTIFACTS"


def artifacts_root() -> Path:
    """Where run directories go: ``$PROFBENCH_ARTIFACTS`` or ``<repo>/artifacts``."""
    return Path(os.environ.get(ARTIFACTS_ENV) or REPO_ROOT / "artifacts")


def new_run_dir(kind: str, name: str) -> Path:
    """A fresh, uniquely named directory ``<artifacts>/<kind>/<UTC time>-<name>``."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    path = artifacts_root() / kind / f"{stamp}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}"
    path.mkdir(parents=True)
    return path


def host_facts() -> dict[str, object]:
    """The host, as far as it can change a run's outcome."""
    return {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "kvm_device": os.path.exists("/dev/kvm"),
        "harness_commit": harness_commit(),
    }


@cache
def harness_commit() -> str:
    """The checkout's commit, with ``-dirty`` when it has uncommitted changes."""
    head = capture(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"]).strip()
    if not head:
        return "unknown"
    dirty = capture(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"])
    return f"{head}-dirty" if dirty.strip() else head


def spec_record(spec: MachineSpec) -> dict[str, object]:
    """JSON-ready description of a machine spec."""
    return {
        "name": spec.name,
        "arch": spec.arch.name,
        "accel": spec.accel,
        "machine": spec.arch.machine,
        "cpu_model": spec.arch.cpu_model(spec.accel),
        "topology": spec.topology.name,
        "smp": spec.topology.smp_value,
        "cpus": spec.topology.cpus,
        "memory_mib": spec.memory_mib,
        "nmi": spec.nmi,
        "cmdline": kernel_cmdline(spec),
        "tcg_threads": spec.tcg_threads,
        "icount_shift": spec.icount_shift,
        "qemu_version": tool_version(spec.arch.qemu_binary),
    }


def verdict_of(error: BaseException | None) -> dict[str, object]:
    """Verdict record: pass, or who failed (config, infra, guest) and why."""
    if error is None:
        return {"result": "pass"}
    if isinstance(error, GuestError):
        blame = "guest"
    elif isinstance(error, InfraError):
        blame = "infra"
    elif isinstance(error, ConfigError):
        blame = "config"
    elif isinstance(error, HarnessError):
        blame = "harness"
    else:
        blame = "interrupted" if isinstance(error, KeyboardInterrupt) else "harness-bug"
    return {"result": "fail", "blame": blame, "error": type(error).__name__,
            "message": str(error)[:4000]}  # fmt: skip


class RunRecord:
    """A ``run.json`` that grows as the run advances."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._data: dict[str, Any] = {
            "started_at": datetime.datetime.now(datetime.UTC).isoformat(),
            "host": host_facts(),
            "verdict": {"result": "running"},
        }
        self._save()

    def update(self, **fields: object) -> None:
        """Merge top-level fields and save."""
        self._data.update(fields)
        self._save()

    def add_timing(self, name: str, seconds: float) -> None:
        """Record one duration in seconds under ``timings``."""
        self._data.setdefault("timings_s", {})[name] = round(seconds, 3)
        self._save()

    def finish(self, error: BaseException | None) -> None:
        """Write the verdict."""
        self._data["finished_at"] = datetime.datetime.now(datetime.UTC).isoformat()
        self._data["verdict"] = verdict_of(error)
        self._save()

    @property
    def data(self) -> dict[str, Any]:
        """A copy of what has been recorded."""
        return dict(self._data)

    def _save(self) -> None:
        write_json_atomic(self.path, self._data)
