"""Sanitizer reports read off transcribed consoles (expected values read by hand)."""

from __future__ import annotations

import pytest

from harness.errors import SanitizerFailure
from harness.vm.console import crash_error, scan_console
from harness.vm.sanitizer import parse_reports
from tests.unit.golden import LOGS_DIR


def log(name: str) -> str:
    return (LOGS_DIR / name).read_text()


@pytest.mark.parametrize(
    ("name", "tool", "title", "line", "agent_frame", "first_frame"),
    [
        # The access's stack: tp_sample, under the runtime's six frames.
        ("arm64-kasan-uaf.console", "KASAN", "use-after-free in tp_sample+0x1c8/0x2f0 [profagent]",
         4, "tp_sample+0x1c8/0x2f0 [profagent]", "tp_sample+0x1c8/0x2f0 [profagent]"),
        ("arm64-kcsan-race.console", "KCSAN", "data-race in pa_overflow / tp_read_index",
         4, "pa_overflow+0x2e0/0x520 [profagent]", "pa_overflow+0x2e0/0x520 [profagent]"),
        ("arm64-kcsan-kernel.console", "KCSAN",
         "data-race in do_idle / tick_nohz_idle_stop_tick", 3, None,
         "tick_nohz_idle_stop_tick+0x9c/0x3f0"),
        ("arm64-ubsan-bounds.console", "UBSAN",
         "array-index-out-of-bounds in /root/.cache/profbench/agent/4b1c0d7e9a2f6b3c8d5e1f20/"
         "build/kprof.c:311:17", 4, "kp_sample+0x3a0/0x420 [profagent]",
         "kp_sample+0x3a0/0x420 [profagent]"),
    ],
)  # fmt: skip
def test_each_report_names_its_culprit(
    name: str, tool: str, title: str, line: int, agent_frame: str | None, first_frame: str
) -> None:
    (report,) = parse_reports(log(name))
    assert (report.tool, report.title, report.line_number) == (tool, title, line)
    assert (report.agent_frame, report.first_frame) == (agent_frame, first_frame)


def test_kasan_report_ends_at_its_rule_and_keeps_the_free_stack() -> None:
    (report,) = parse_reports(log("arm64-kasan-uaf.console"))
    assert "tp_stop+0x18c/0x280 [profagent]" in report.text  # freed by
    assert "Disabling lock debugging" not in report.text


def test_agent_frame_only_in_the_free_stack_still_names_the_agent() -> None:
    # The access in kernel code (kfree's caller cut away), the agent only freeing.
    lines = (
        log("arm64-kasan-uaf.console")
        .replace(
            "use-after-free in tp_sample+0x1c8/0x2f0 [profagent]",
            "use-after-free in __perf_event_overflow+0x8c/0x1c0",
        )
        .splitlines()
    )
    text = "\n".join(line for line in lines if "tp_sample" not in line and " pa_" not in line)
    (report,) = parse_reports(text)
    assert report.first_frame == "__perf_event_overflow+0x8c/0x1c0"
    assert report.agent_frame == "tp_alloc_buffer+0x40/0xa0 [profagent]"


def test_kernel_report_is_a_failure_named_as_the_kernels() -> None:
    findings = scan_console(log("arm64-kcsan-kernel.console"))
    error = crash_error(findings, what="tests/guest/test_x.py::test_y")
    assert isinstance(error, SanitizerFailure)
    assert error.reason == (
        "tests/guest/test_x.py::test_y: KCSAN data-race in do_idle / tick_nohz_idle_stop_tick; "
        "in kernel code, not the agent's (first frame tick_nohz_idle_stop_tick+0x9c/0x3f0)"
    )
    assert error.reports == ((
        "KCSAN", error.reason.split(": ", 1)[1], False),)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "kind"),
    [("arm64-kasan-uaf.console", "kasan"), ("arm64-kcsan-race.console", "kcsan"),
     ("arm64-ubsan-bounds.console", "ubsan")],
)  # fmt: skip
def test_agent_report_is_a_failure_naming_report_frame_and_test(name: str, kind: str) -> None:
    findings = scan_console(log(name))
    assert [f.kind for f in findings] == [kind]
    error = crash_error(findings, what="test_t")
    assert isinstance(error, SanitizerFailure)
    assert error.reason.startswith(f"test_t: {kind.upper()} ")
    assert "; first agent frame " in error.reason
    assert [in_agent for _tool, _text, in_agent in error.reports] == [True]


def test_two_reports_are_two_findings_and_start_line_skips_the_first() -> None:
    text = log("arm64-kcsan-kernel.console") + log("arm64-kcsan-race.console")
    assert [r.line_number for r in parse_reports(text)] == [3, 24]
    assert [r.line_number for r in parse_reports(text, start_line=3)] == [24]
    assert [(f.kind, f.line_number) for f in scan_console(text)] == [("kcsan", 3), ("kcsan", 24)]


def test_other_crashes_stay_plain_guest_crashes() -> None:
    error = crash_error(scan_console(log("arm64-lockdep.console")), what="t")
    assert not isinstance(error, SanitizerFailure)


def test_recorded_kasan_report_from_the_pmu_nmi() -> None:
    (report,) = parse_reports(log("arm64-kasan-oob-recorded.console"))
    assert (report.tool, report.line_number) == ("KASAN", 4)
    assert report.title == "slab-out-of-bounds in kp_commit+0x358/0x698 [profagent]"
    # memcpy (KASAN's checking one) and kasan_check_range are the runtime's.
    assert report.first_frame == "kp_commit+0x358/0x698 [profagent]"
    assert report.agent_frame == "kp_commit+0x358/0x698 [profagent]"
    assert "Disabling lock debugging" not in report.text


def test_a_report_with_an_agent_frame_below_kernel_frames_is_a_finding() -> None:
    # Recorded when the kcsan kernel instrumented its own code: the latch read of
    # ktime_get_mono_fast_ns on top, the agent's probe below it. Once accepted as a
    # known kernel race; an agent frame anywhere in a stack makes it the agent's.
    text = log("arm64-kcsan-latch-recorded.console")
    (report,) = parse_reports(text)
    assert report.describe() == (
        "KCSAN data-race in ktime_get_mono_fast_ns+0x88/0xe8; in kernel code "
        "ktime_get_mono_fast_ns+0x88/0xe8, first agent frame pa_probe_spin+0x90/0x10c [profagent]"
    )
    assert [f.kind for f in scan_console(text)] == ["kcsan"]
    error = crash_error(scan_console(text), what="t")
    assert isinstance(error, SanitizerFailure)
    assert [in_agent for _tool, _text, in_agent in error.reports] == [True]
