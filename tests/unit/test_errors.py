from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import (
    BootHang,
    BuildError,
    ConfigError,
    EnvironmentMismatch,
    GuestCommandError,
    GuestCrash,
    GuestError,
    HarnessError,
    HarnessTimeout,
    HostSetupError,
    InfraError,
    KconfigError,
    TransportError,
    VmLaunchError,
)


def test_vm_launch_error_shows_quoted_argv_exit_code_and_output() -> None:
    error = VmLaunchError(
        "QEMU exited before QMP answered",
        ["qemu-system-aarch64", "-append", "console=ttyAMA0 panic=-1", "-m", "1024M"],
        1,
        "qemu-system-aarch64: -kernel /x: No such file or directory",
    )
    text = str(error)
    assert "command: qemu-system-aarch64 -append 'console=ttyAMA0 panic=-1' -m 1024M" in text
    assert "exit code: 1" in text
    assert "-kernel /x: No such file or directory" in text


def test_vm_launch_error_without_output() -> None:
    assert "<none>" in str(VmLaunchError("no QMP", ["qemu"], None, ""))


def test_kconfig_error_lists_every_problem() -> None:
    problems = [
        "CONFIG_ARM64_PSEUDO_NMI: requested y, olddefconfig left it unset",
        "CONFIG_PROVE_LOCKING: requested y, olddefconfig left it unset",
    ]
    error = KconfigError(problems, Path("/cache/kernel/abc/.config"))
    text = str(error)
    assert [p for p in problems if p not in text] == []
    assert "2 requested kernel option(s)" in text
    assert "/cache/kernel/abc/.config" in text
    assert isinstance(error, BuildError)


def test_guest_command_error_carries_its_streams() -> None:
    error = GuestCommandError("insmod agent.ko", 1, "", "insmod: ERROR: File exists\n")
    assert (error.command, error.status, error.stdout, error.stderr) == (
        "insmod agent.ko",
        1,
        "",
        "insmod: ERROR: File exists\n",
    )
    assert "insmod: ERROR: File exists" in str(error)
    assert error.exit_status == 4  # the CLI status of a guest failure, not the command's


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ConfigError("x"), 2),
        (InfraError("x"), 3),
        (HostSetupError(["make"], "apt-get install make"), 3),
        (HarnessTimeout("SSH", 1.0), 3),
        (TransportError("x"), 3),
        (GuestError("x"), 4),
        (GuestCrash("x"), 4),
        (BootHang("x"), 4),
    ],
)
def test_exit_status_by_blame(error: HarnessError, status: int) -> None:
    assert error.exit_status == status


def test_guest_error_shows_reason_log_and_evidence() -> None:
    error = GuestCrash("the guest crashed", "Kernel panic - not syncing", Path("/run/console.log"))
    assert str(error) == (
        "the guest crashed\n  console log: /run/console.log\n"
        "--- evidence ---\nKernel panic - not syncing"
    )


def test_harness_timeout_message() -> None:
    error = HarnessTimeout("SSH on port 10022", 120.04, ConnectionRefusedError("refused"))
    assert str(error) == (
        "timed out after 120.0s waiting for SSH on port 10022 "
        "(last error: ConnectionRefusedError('refused'))"
    )


def test_environment_mismatch_lists_differences() -> None:
    error = EnvironmentMismatch("guest differs", ["4 CPUs online, asked for 8", "no PMU"])
    assert str(error) == "guest differs:\n  4 CPUs online, asked for 8\n  no PMU"
