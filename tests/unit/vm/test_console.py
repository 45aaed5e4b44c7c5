from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import BootHang, GuestCrash, HarnessTimeout, VmLaunchError
from harness.vm.console import classify_boot, scan_console
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
        ("arm64-lockdep-irq-unsafe.console", [("lockdep", 9)]),
        ("arm64-rcu-stall.console", [("rcu-stall", 7)]),
        ("arm64-hung-task.console", [("hung-task", 7)]),
        # The watchdog repeats itself 26 s later: a second report.
        ("arm64-soft-lockup.console", [("soft-lockup", 7), ("soft-lockup", 43)]),
    ],
)
def test_scan_transcribed_failures(name: str, expected: list[tuple[str, int]]) -> None:
    assert kinds_and_lines(log(name)) == expected


@pytest.mark.parametrize(
    "name", ["arm64-boot-ok.console", "arm64-boot-hang.console"], ids=["ok", "hang"]
)
def test_recorded_healthy_consoles_have_no_findings(name: str) -> None:
    assert scan_console(log(name)) == []


def test_recorded_dmesg_of_booted_guests_has_no_findings() -> None:
    for name in ("arm64-facts-2s2cl1c2t.txt", "arm64-facts-1cpu-nmi-off.txt"):
        assert scan_console(log(name)) == [], name


def test_recorded_sysrq_panic() -> None:
    (finding,) = scan_console(log("arm64-sysrq-panic.console"))
    assert (finding.kind, finding.line_number) == ("panic", 150)
    assert finding.line.endswith("Kernel panic - not syncing: sysrq triggered crash")
    assert "sysrq: Trigger a crash" in finding.context


@pytest.mark.parametrize(("start", "expected"), [(149, [("panic", 150)]), (150, [])])
def test_start_line_is_zero_based(start: int, expected: list[tuple[str, int]]) -> None:
    assert kinds_and_lines(log("arm64-sysrq-panic.console"), start_line=start) == expected


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
        "[   30.000112] in_atomic(): 0, irqs_disabled(): 128, non_block: 0, pid: 0, "
        "name: swapper/2\n"
        "[   30.000223] ======================================================\n"
        "[   30.000334] WARNING: possible circular locking dependency detected\n"
    )
    assert kinds_and_lines(text) == [("atomic-sleep", 1), ("lockdep", 4)]


def test_lockdep_unlock_imbalance() -> None:
    text = (
        "[   31.000001]\n"
        "[   31.000002] =====================================\n"
        "[   31.000003] WARNING: bad unlock balance detected!\n"
        "[   31.000004] 6.1.192 #1 Tainted: G           O\n"
        "[   31.000005] -------------------------------------\n"
        "[   31.000006] insmod/121 is trying to release lock (profagent_ring_lock) at:\n"
        "[   31.000007] [<ffff800001250a3c>] profagent_flush+0x5c/0x80 [profagent]\n"
        "[   31.000008] but there are no more locks to release!\n"
    )
    assert kinds_and_lines(text) == [("lockdep", 3)]


def test_panic_line() -> None:
    text = (
        "[    9.100000] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100\n"
    )
    assert kinds_and_lines(text) == [("panic", 1)]


# --- classify_boot --------------------------------------------------------------------------

BOOT_THEN_SILENCE = (
    "[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x000f0510]\n"
    "[    0.000000] Linux version 6.1.0 (root@build) (aarch64-linux-gnu-gcc) #1 SMP\n"
    "[    1.234567] Run /init as init process\n"
)


def test_recorded_panic_with_qemu_exited_is_a_guest_crash() -> None:
    # panic=-1 and -no-reboot: QEMU exits with status 0 right after the panic lines.
    error = classify_boot(log("arm64-sysrq-panic.console"), qemu_exitcode=0, waited_s=3)
    assert isinstance(error, GuestCrash)
    assert error.reason == "the guest crashed during boot: the guest console shows panic"
    assert "sysrq triggered crash" in error.evidence


def test_recorded_boot_hang_is_a_boot_hang() -> None:
    error = classify_boot(log("arm64-boot-hang.console"), qemu_exitcode=None, waited_s=60)
    assert isinstance(error, BootHang)
    assert error.evidence.endswith("Run /bin/busybox as init process")


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


def test_boot_errors_carry_the_console_log_path(tmp_path: Path) -> None:
    where = tmp_path / "console.log"
    crash = classify_boot(log("arm64-sysrq-panic.console"), qemu_exitcode=0, waited_s=3.0,
                          console_log=where)  # fmt: skip
    hang = classify_boot("[    0.1] Booting Linux\n", qemu_exitcode=None, waited_s=60.0,
                         console_log=where)  # fmt: skip
    assert isinstance(crash, GuestCrash)
    assert isinstance(hang, BootHang)
    assert (crash.console_log, hang.console_log) == (where, where)
