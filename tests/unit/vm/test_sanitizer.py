"""Sanitizer reports read off transcribed consoles (expected values read by hand)."""

from __future__ import annotations

import pytest

from harness.errors import SanitizerFailure
from harness.vm.console import crash_error, scan_console
from harness.vm.sanitizer import KNOWN_RACE_FAMILIES, known_race_functions, parse_reports
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


def test_recorded_latch_race_is_correct_kernel_code_and_no_finding() -> None:
    text = log("arm64-kcsan-latch-recorded.console")
    (report,) = parse_reports(text)
    assert report.known is not None
    assert "seqcount latch" in report.known
    assert report.describe() == (
        "KCSAN data-race in ktime_get_mono_fast_ns+0x88/0xe8; in kernel code "
        "ktime_get_mono_fast_ns+0x88/0xe8, first agent frame pa_probe_spin+0x90/0x10c [profagent]"
    )
    assert scan_console(text) == []


def test_a_race_only_one_side_of_which_is_known_stays_a_finding() -> None:
    # The transcribed race's reader swapped for the latch's: its writer is still the agent's.
    text = log("arm64-kcsan-race.console").replace(
        "tp_read_index+0x2c/0x80 [profagent]", "ktime_get_mono_fast_ns+0x88/0xe8"
    )
    assert_unknown_kcsan_finding(text)


@pytest.mark.parametrize(
    ("console", "title", "reason"),
    [
        pytest.param("arm64-kcsan-kstat-recorded.console",
                     "data-race in __kstat_incr_irqs_this_cpu.isra.0 / "
                     "__kstat_incr_irqs_this_cpu.isra.0", "irqs_sum", id="kstat, IRQ and NMI"),
        pytest.param("arm64-kcsan-virtio-recorded.console",
                     "data-race in virtqueue_get_buf_ctx+0x2b8/0x43c", "used ring",
                     id="virtio used ring, at boot"),
        pytest.param("arm64-kcsan-vring-recorded.console",
                     "data-race in vring_interrupt+0x88/0xe4", "used ring",
                     id="virtio used ring, in the interrupt"),
        pytest.param("arm64-kcsan-tick-recorded.console",
                     "data-race in tick_nohz_idle_got_tick / tick_nohz_stop_idle", "bit-fields",
                     id="tick flags, IRQ and idle loop"),
        pytest.param("arm64-kcsan-napi-recorded.console",
                     "data-race in napi_complete_done / napi_schedule_prep", "NPSVC",
                     id="napi state, virtio_net's receive interrupt"),
        pytest.param("arm64-kcsan-virtqueue-recorded.console",
                     "data-race in virtqueue_disable_cb / virtqueue_disable_cb", "flags shadow",
                     id="virtio avail flags, transmit and its interrupt"),
        pytest.param("arm64-kcsan-vqevent-recorded.console",
                     "data-race in virtqueue_disable_cb / vring_interrupt", "event_triggered",
                     id="virtio event_triggered"),
        pytest.param("arm64-kcsan-showirq-recorded.console",
                     "data-race in __kstat_incr_irqs_this_cpu.isra.0 / show_interrupts",
                     "/proc/interrupts", id="per-IRQ counts read by /proc/interrupts"),
        pytest.param("arm64-kcsan-dirseq-recorded.console",
                     "data-race in start_dir_add+0x24/0x84", "i_dir_seq",
                     id="dcache in-lookup sequence"),
        pytest.param("arm64-kcsan-vqdelayed-recorded.console",
                     "data-race in virtqueue_disable_cb / virtqueue_enable_cb_delayed",
                     "virtqueue_enable_cb_delayed", id="virtio hints, a family pair"),
        pytest.param("arm64-kcsan-tickdo-recorded.console",
                     "data-race in tick_nohz_idle_stop_tick / tick_sched_do_timer",
                     "tick_do_timer_cpu", id="tick state, a family pair"),
        pytest.param("arm64-kcsan-ticknext-recorded.console",
                     "data-race in tick_nohz_idle_stop_tick / tick_nohz_next_event",
                     "tick_do_timer_cpu", id="tick state, another family pair"),
        pytest.param("arm64-kcsan-pollwake-recorded.console",
                     "data-race in do_select / pollwake", "pwq->triggered", id="select wake-up"),
        pytest.param("arm64-kcsan-printcpu-recorded.console",
                     "data-race in print_cpu / tick_nohz_idle_stop_tick", "/proc/timer_list",
                     id="timer_list snapshot"),
    ],
)  # fmt: skip
def test_recorded_race_in_kernel_code_is_accepted_with_its_reason(
    console: str, title: str, reason: str
) -> None:
    text = log(console)
    (report,) = parse_reports(text)
    assert report.title == title
    assert report.agent_frame is None
    assert reason in (report.known or "")
    assert scan_console(text) == []


def test_a_known_race_with_one_side_the_agents_stays_a_finding() -> None:
    # One side alone is not enough: the other stack's top must be known too.
    text = log("arm64-kcsan-tick-recorded.console").replace(
        "tick_nohz_stop_idle+0x4c/0x68", "pa_produce+0x4c/0x68 [profagent]"
    )
    assert [f.kind for f in scan_console(text)] == ["kcsan"]


def test_a_device_ring_race_between_two_guest_stacks_stays_a_finding() -> None:
    # Only a "race at unknown origin" (no writer in the guest) is the device's: the same
    # top frame on both sides of a race between two guest CPUs is not accepted.
    text = (
        log("arm64-kcsan-tick-recorded.console")
        .replace("tick_nohz_stop_idle+0x4c/0x68", "vring_interrupt+0x88/0xe4")
        .replace("tick_nohz_idle_got_tick+0x28/0x5c", "vring_interrupt+0x88/0xe4")
    )
    assert_unknown_kcsan_finding(text)


def test_a_family_race_with_a_function_outside_the_family_stays_a_finding() -> None:
    text = log("arm64-kcsan-tickdo-recorded.console").replace(
        "tick_sched_do_timer+", "rcu_sched_clock_irq+"
    )
    assert_unknown_kcsan_finding(text)


def test_the_known_race_functions_cover_every_key_and_the_families_seen_members() -> None:
    names = known_race_functions()
    assert names == tuple(sorted(set(names)))
    assert {"ktime_get_mono_fast_ns", "vring_interrupt", "tick_nohz_next_event",
            "virtqueue_enable_cb_delayed", "show_interrupts"} <= set(names)  # fmt: skip
    # every family member named as seen belongs to its family
    for family in KNOWN_RACE_FAMILIES:
        assert all(family.pattern.match(name) for name in family.seen)


def assert_unknown_kcsan_finding(text: str) -> None:
    """``text`` holds one KCSAN report, no known race, and the console scan fails on it."""
    (report,) = parse_reports(text)
    assert report.known is None
    assert [f.kind for f in scan_console(text)] == ["kcsan"]
