from __future__ import annotations

import pytest

from harness.console import classify_boot, scan_console
from harness.errors import BootHang, GuestCrash, HarnessTimeout, VmLaunchError
from tests.unit.golden import LOGS_DIR


def log(name: str) -> str:
    return (LOGS_DIR / name).read_text()


def kinds_and_lines(text: str, start_line: int = 0) -> list[tuple[str, int]]:
    return [(f.kind, f.line_number) for f in scan_console(text, start_line=start_line)]


# Expected findings were read off each file by hand (line numbers are 1-based).
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # "Unable to handle kernel ..." opens the report; its "Internal error: Oops"
        # line 12 lines later is inside the same report's context.
        ("arm64-oops.console", [("oops", 7)]),
        # Two WARNING reports; the "WARNING: CPU:" line after each cut-here is not repeated.
        ("arm64-warning.console", [("warning", 8), ("warning", 51)]),
        ("arm64-lockdep.console", [("lockdep", 9)]),
        ("arm64-rcu-stall.console", [("rcu-stall", 7)]),
        ("arm64-hung-task.console", [("hung-task", 7)]),
        # The watchdog repeats itself 26 s later: a second report.
        ("arm64-soft-lockup.console", [("soft-lockup", 7), ("soft-lockup", 43)]),
    ],
)
def test_scan_transcribed_failures(name: str, expected: list[tuple[str, int]]) -> None:
    assert kinds_and_lines(log(name)) == expected


def test_finding_carries_its_line_and_context() -> None:
    (finding,) = scan_console(log("arm64-hung-task.console"))
    assert finding.line.endswith("INFO: task kworker/0:1:42 blocked for more than 122 seconds.")
    assert "profbench-guest: ready" in finding.context  # lines before the report
    assert "Workqueue: events profagent_drain_work [profagent]" in finding.context
    assert str(finding).startswith("[hung-task] console line 7: [  245.678901] INFO: task")


def test_start_line_skips_earlier_reports() -> None:
    text = log("arm64-warning.console")
    assert kinds_and_lines(text, start_line=20) == [("warning", 51)]


def test_start_line_past_the_end_finds_nothing() -> None:
    text = log("arm64-warning.console")
    assert kinds_and_lines(text, start_line=len(text.splitlines())) == []


def test_different_kind_inside_a_report_is_reported() -> None:
    text = (
        "[   30.000001] BUG: sleeping function called from invalid context at "
        "kernel/locking/mutex.c:580\n"
        "[   30.000112] in_atomic(): 0, irqs_disabled(): 128, non_block: 0, pid: 0, name: swapper/2\n"
        "[   30.000223] ======================================================\n"
        "[   30.000334] WARNING: possible circular locking dependency detected\n"
    )
    assert kinds_and_lines(text) == [("atomic-sleep", 1), ("lockdep", 4)]


def test_panic_line() -> None:
    text = "[    9.100000] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100\n"
    assert kinds_and_lines(text) == [("panic", 1)]


# --- classify_boot --------------------------------------------------------------------------

BOOT_THEN_SILENCE = (
    "[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x000f0510]\n"
    "[    0.000000] Linux version 6.1.0 (root@build) (aarch64-linux-gnu-gcc) #1 SMP\n"
    "[    1.234567] Run /init as init process\n"
)


def test_crash_text_is_a_guest_crash() -> None:
    error = classify_boot(log("arm64-oops.console"), qemu_exitcode=None, waited_s=120)
    assert isinstance(error, GuestCrash)
    assert "oops" in error.reason
    assert "Unable to handle kernel NULL pointer dereference" in error.evidence


def test_crash_wins_over_exit_code() -> None:
    error = classify_boot(log("arm64-lockdep.console"), qemu_exitcode=0, waited_s=3)
    assert isinstance(error, GuestCrash)


def test_output_then_silence_is_a_boot_hang() -> None:
    error = classify_boot(BOOT_THEN_SILENCE, qemu_exitcode=None, waited_s=120)
    assert isinstance(error, BootHang)
    assert "Run /init as init process" in error.evidence


def test_no_output_is_a_host_timeout() -> None:
    error = classify_boot("", qemu_exitcode=None, waited_s=120)
    assert isinstance(error, HarnessTimeout)
    assert error.waited_s == 120


def test_whitespace_only_output_counts_as_none() -> None:
    assert isinstance(classify_boot("\r\n \n", qemu_exitcode=None, waited_s=5), HarnessTimeout)


def test_no_output_and_qemu_exited_is_a_launch_error() -> None:
    argv = ("qemu-system-aarch64", "-kernel", "/images/Image")
    error = classify_boot(
        "", qemu_exitcode=1, waited_s=1, qemu_output="could not load kernel", argv=argv
    )
    assert isinstance(error, VmLaunchError)
    assert (error.exitcode, error.argv, error.output) == (1, argv, "could not load kernel")


def test_output_and_qemu_exited_without_crash_is_a_boot_hang() -> None:
    error = classify_boot(BOOT_THEN_SILENCE, qemu_exitcode=0, waited_s=4)
    assert isinstance(error, BootHang)
    assert "status 0" in error.reason
