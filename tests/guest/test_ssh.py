"""The SSH shell: exit codes and streams, SFTP put and get, deadlines."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from harness.errors import GuestCommandError
from harness.vm.guest import Guest
from harness.vm.ssh import GuestCommandTimeout
from harness.vm.topology import CpuTopology

pytestmark = [pytest.mark.guest, pytest.mark.selftest]


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
    """The timed-out command keeps running (it is evidence); killing it later, by PID,
    as `Agent` kills a hung profctl, costs the commands after it nothing."""
    with pytest.raises(GuestCommandTimeout):
        guest.shell.run("echo $$ > /tmp/outlived; exec sleep 300", timeout_s=1.0)
    pid = guest.shell.run("cat /tmp/outlived").stdout.strip()
    assert guest.shell.run(f"kill -0 {pid}", check=False).exit_status == 0
    guest.shell.run(f"kill -9 {pid}")
    for i in range(20):
        assert guest.shell.run(f"echo still-here {i}").stdout == f"still-here {i}\n"
    assert guest.shell.run(f"kill -0 {pid}", check=False).exit_status != 0


CONCURRENT_COMMANDS = 150  # per thread; before the fix 9 of 2 x 200 failed on 2 vCPUs
LOG = "/tmp/concurrent-commands.log"


def test_commands_from_two_threads_on_one_connection_all_run(
    guest: Guest, topology: CpuTopology
) -> None:
    """Two threads share the shell, as `Agent.steps_with_host_actions` does. Each command's
    end is a SIGCHLD in dropbear, which closes any channel still waiting for its exec: the
    shell must ask for such a command again, so every command runs exactly once."""
    guest.shell.run(f"rm -f {LOG}")
    outputs: dict[str, list[str]] = {"a": [], "b": []}
    errors: list[BaseException] = []

    def run_all(name: str) -> None:
        try:
            for i in range(CONCURRENT_COMMANDS):
                command = f"echo {name}{i} >> {LOG}; echo {name}{i}"
                outputs[name].append(guest.shell.run(command).stdout)
        except BaseException as exc:  # handed to the asserting thread
            errors.append(exc)

    other = threading.Thread(target=run_all, args=("b",))
    other.start()
    run_all("a")
    other.join(timeout=600)
    assert not other.is_alive()
    assert not errors, errors
    for name, got in outputs.items():
        assert got == [f"{name}{i}\n" for i in range(CONCURRENT_COMMANDS)]
    ran = guest.shell.run(f"cat {LOG}").stdout.split()
    assert sorted(ran) == sorted(line.strip() for got in outputs.values() for line in got)
