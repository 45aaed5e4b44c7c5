"""Saving and loading over QMP, against a scripted QMP at the seam (no QEMU)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.errors import SnapshotError, TransportError, VmLaunchError
from harness.vm.migration import load_state, save_state
from harness.vm.snapshot import MAX_BANDWIDTH_BYTES_S, load_uri, save_uri

STATE = Path("/cache/snapshot/k/state.mig")


class FakeQmp:
    """Answers ``query-migrate`` from a script of statuses; records every command."""

    def __init__(self, statuses: list[dict[str, Any]], refuse: str | None = None) -> None:
        self.statuses = statuses
        self.refuse = refuse
        self.sent: list[tuple[str, dict[str, object]]] = []

    def execute(self, command: str, arguments: Mapping[str, object] | None = None) -> Any:
        self.sent.append((command, dict(arguments or {})))
        if command == self.refuse:
            raise TransportError(f"QMP {command} failed: GenericError: refused")
        if command == "query-migrate":
            return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return {}

    def commands(self) -> list[str]:
        return [command for command, _ in self.sent if command != "query-migrate"]


def test_save_raises_the_bandwidth_stops_then_migrates_to_the_file() -> None:
    qmp = FakeQmp([{"status": "setup"}, {"status": "active"}, {"status": "completed",
                                                                "total-time": 202}])  # fmt: skip
    reply = save_state(qmp, STATE, timeout_s=5.0)
    assert reply["total-time"] == 202
    assert qmp.commands() == ["migrate-set-parameters", "stop", "migrate"]
    assert qmp.sent[0][1] == {"max-bandwidth": MAX_BANDWIDTH_BYTES_S}
    assert qmp.sent[2][1] == {"uri": save_uri(STATE)}
    assert [c for c, _ in qmp.sent].count("query-migrate") == 3


def test_load_waits_for_completion_before_it_continues_the_guest() -> None:
    qmp = FakeQmp([{}, {"status": "active"}, {"status": "completed"}])
    load_state(qmp, STATE, timeout_s=5.0)
    order = [command for command, _ in qmp.sent]
    assert order == ["migrate-incoming", "query-migrate", "query-migrate", "query-migrate", "cont"]
    assert qmp.sent[0][1] == {"uri": load_uri(STATE)}


def test_a_failed_load_is_a_snapshot_error_with_the_status_and_the_guest_stays_stopped() -> None:
    failed_reply = {"status": "failed", "error-desc": "load of migration failed: -22"}
    qmp = FakeQmp([{"status": "active"}, failed_reply])
    with pytest.raises(SnapshotError) as failed:
        load_state(qmp, STATE, timeout_s=5.0)
    assert "status failed: load of migration failed: -22" in failed.value.evidence
    assert "cont" not in qmp.commands()


def test_a_refused_command_is_a_snapshot_error() -> None:
    qmp = FakeQmp([{"status": "completed"}], refuse="migrate")
    with pytest.raises(SnapshotError, match="refused to save") as failed:
        save_state(qmp, STATE, timeout_s=5.0)
    assert "GenericError" in failed.value.evidence


def test_a_migration_that_never_ends_times_out_with_its_last_status() -> None:
    qmp = FakeQmp([{"status": "active", "ram": {}}])
    with pytest.raises(SnapshotError, match="timed out") as failed:
        load_state(qmp, STATE, timeout_s=0.05)
    assert failed.value.evidence == "status active"
    assert "cont" not in qmp.commands()


def test_a_dead_qemu_ends_the_wait_with_its_own_error() -> None:
    qmp = FakeQmp([{"status": "active"}])
    died = VmLaunchError("QEMU exited (status 1)", ["qemu"], 1, "load of migration failed")
    with pytest.raises(VmLaunchError):
        load_state(qmp, STATE, timeout_s=5.0, abort=lambda: died)
