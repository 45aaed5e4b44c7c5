"""The SSH shell: exit codes and streams, SFTP put and get, deadlines."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from harness.errors import GuestCommandError
from harness.vm.guest import Guest
from harness.vm.ssh import GuestCommandTimeout
from harness.vm.topology import CpuTopology

pytestmark = pytest.mark.guest


def test_run_returns_status_and_both_streams(guest: Guest, topology: CpuTopology) -> None:
    result = guest.shell.run("echo out; echo err >&2; exit 3", check=False)
    assert (result.exit_status, result.stdout, result.stderr) == (3, "out\n", "err\n")
    with pytest.raises(GuestCommandError) as failed:
        guest.shell.run("exit 7")
    assert failed.value.status == 7


def test_put_and_get_round_trip(guest: Guest, topology: CpuTopology, tmp_path: Path) -> None:
    payload = os.urandom(300_000)
    local = tmp_path / "payload.bin"
    local.write_bytes(payload)
    guest.shell.put(local, "/tmp/payload.bin", mode=0o640)
    remote_sum = guest.shell.run("sha256sum /tmp/payload.bin").stdout.split()[0]
    assert remote_sum == hashlib.sha256(payload).hexdigest()
    assert guest.shell.run("stat -c %a /tmp/payload.bin").stdout.strip() == "640"
    back = tmp_path / "back.bin"
    guest.shell.get("/tmp/payload.bin", back)
    assert back.read_bytes() == payload


def test_a_command_past_its_deadline_times_out(guest: Guest, topology: CpuTopology) -> None:
    with pytest.raises(GuestCommandTimeout):
        guest.shell.run("sleep 30", timeout_s=1.0)
    assert guest.shell.run("echo still-here").stdout == "still-here\n"
