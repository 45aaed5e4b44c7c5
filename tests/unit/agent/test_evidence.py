from __future__ import annotations

import pytest

from harness.agent import profctl
from harness.agent.flavours.dt.run import nest_step, skip_step
from harness.agent.oracles.evidence import (
    Injections,
    KernelEvidence,
    injections_of,
    interrupt_reads,
    is_injection,
    module_leaks,
    parse_interrupts,
)
from harness.agent.steps import inject_step
from harness.errors import InfraError
from tests.unit.golden import LOGS_DIR

#: Recorded on a 2-vCPU arm64 guest right after an agent run (pseudo-NMI on).
INTERRUPTS = (LOGS_DIR / "arm64-proc-interrupts-2cpu.txt").read_text().splitlines()


def test_the_pmu_line_of_a_recorded_file() -> None:
    assert parse_interrupts(INTERRUPTS, "arm-pmu") == {0: 1167, 1: 1165}
    assert parse_interrupts(INTERRUPTS, "arch_timer") == {0: 2231, 1: 2102}


def test_an_x86_style_line_matches_its_description() -> None:
    lines = ["   CPU0   CPU1", " PMI:   3   4   Performance monitoring interrupts"]
    assert parse_interrupts(lines, "Performance monitoring interrupts") == {0: 3, 1: 4}


def test_only_online_cpus_have_columns() -> None:
    lines = ["           CPU0       CPU2", " 13:  5  7  GICv3  23 Level  arm-pmu"]
    assert parse_interrupts(lines, "arm-pmu") == {0: 5, 2: 7}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "no header"),
        (INTERRUPTS[:2], "no 'arm-pmu' line"),
        (["  CPU0", " 13:  x  GICv3 23 Level arm-pmu"], "malformed"),
    ],
)
def test_a_file_without_the_line_is_an_error(lines: list[str], message: str) -> None:
    with pytest.raises(InfraError, match=message):
        parse_interrupts(lines, "arm-pmu")


def test_three_reads_make_the_evidence() -> None:
    after = [line.replace("1167", "1170") for line in INTERRUPTS]
    kernel = interrupt_reads([INTERRUPTS, after, after], "arm-pmu")
    assert (kernel.delta(0), kernel.delta(1), kernel.after_stop(0)) == (3, 0, 0)
    with pytest.raises(InfraError, match="3 times, this one 2"):
        interrupt_reads([INTERRUPTS, after], "arm-pmu")


def test_a_cpu_offline_at_a_read_has_no_delta() -> None:
    kernel = KernelEvidence("arm-pmu", {0: 1, 1: 1}, {0: 5}, {0: 5})
    assert kernel.delta(1) is None
    assert kernel.after_stop(1) is None


def test_injections_are_counted_from_the_steps_sent() -> None:
    steps = (
        inject_step("all", 12),
        inject_step(1, 5),
        inject_step(0, 3, ctx="task"),
        nest_step(0, 7),
        skip_step(1, 3),  # no producer call
        profctl.wait_step(),
    )
    assert injections_of(steps, online=(0, 1)) == Injections(
        nmi={0: 19, 1: 17}, bursts={0: 2, 1: 2}, task={0: 3}
    )
    assert [is_injection(s) for s in steps] == [True, True, True, True, False, False]


def test_cpu_all_follows_hotplug_steps() -> None:
    offline = profctl.write_step("/sys/devices/system/cpu/cpu1/online", "0")
    online = profctl.write_step("/sys/devices/system/cpu/cpu1/online", "1")
    steps = (inject_step("all", 2), offline, inject_step("all", 3), online, inject_step("all", 4))
    assert injections_of(steps, online=(0, 1)).nmi == {0: 9, 1: 6}


KMEMLEAK_REPORT = """\
unreferenced object 0xffff000003c3d780 (size 128):
  comm "insmod", pid 123, jiffies 4294893456 (age 8.560s)
  backtrace:
    [<000000001d0f7c5e>] kmalloc_trace+0x2c/0x40
    [<00000000f3e1b6bd>] pa_sources_start+0x1a4/0x1f0 [profagent]
unreferenced object 0xffff000003c3e000 (size 64):
  comm "swapper/0", pid 1, jiffies 4294892000 (age 20.1s)
  backtrace:
    [<000000001d0f7c5e>] kmalloc_trace+0x2c/0x40
"""


def test_only_the_modules_leaks_are_its_own() -> None:
    (leak,) = module_leaks(KMEMLEAK_REPORT, "profagent")
    assert "pa_sources_start" in leak
    assert module_leaks(KMEMLEAK_REPORT, "other") == []
    assert module_leaks("", "profagent") == []
