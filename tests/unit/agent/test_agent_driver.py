from __future__ import annotations

import re
import struct
from collections.abc import Mapping, Sequence

import pytest

from harness.agent.flavours.tprof.data import TPROF, TPROF_IOCTLS
from harness.agent.flavours.tprof.run import (
    collect_steps,
    decode_stat,
    ioctl_step,
    start_steps,
    tprof_steps,
)
from harness.agent.profctl import StepResult
from harness.agent.steps import (
    Named,
    Results,
    SamplingPlan,
    counters_of,
    counters_steps,
    inject_step,
    kick_step,
    parse_pairs,
    parse_percpu,
    probe_step,
    require_ok,
    texts,
)
from harness.agent.values.info import CORE_PERCPU
from harness.agent.values.layouts import Ioctl
from harness.errors import AgentStepError, ConfigError, InfraError

DEBUGFS = "/sys/kernel/debug/profagent"
#: The native ioctls on fd 3, numbers as Linux _IOW/_IO/_IOR('T', nr, size) give them.
START = "ioctl:3:0x40185402:24:" + "00" * 24
IRQS = "cat:/proc/interrupts"
STOP = "ioctl:3:0x5403:0"
GETSTAT = "ioctl:3:0x80305404:48"
COLLECT = (
    STOP,
    "timeout:60",
    "read:3:/tmp/profagent/samples.bin:65536",
    f"cat:{DEBUGFS}/info",
    f"cat:{DEBUGFS}/stats",
    f"cat:{DEBUGFS}/stats_percpu",
    f"cat:{DEBUGFS}/nmi",
    f"cat:{DEBUGFS}/state",
    GETSTAT,
    "close:3",
)

# --- step tokens ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (inject_step(2, 100), f"write:{DEBUGFS}/inject:cpu=2 count=100 ctx=nmi"),
        (inject_step("all", 12, "task"), f"write:{DEBUGFS}/inject:cpu=all count=12 ctx=task"),
        (kick_step(), f"write:{DEBUGFS}/kick:all"),
        (kick_step(3), f"write:{DEBUGFS}/kick:3"),
        (probe_step(1, 200), f"write:{DEBUGFS}/probe:cpu=1 ms=200"),
    ],
)
def test_debugfs_write_steps(step: str, expected: str) -> None:
    assert step == expected


def test_start_opens_the_device_then_starts_with_a_zero_param() -> None:
    assert texts(start_steps()) == ("open:/dev/profagent", START)


def test_start_step_carries_starts_number_and_24_zero_bytes() -> None:
    op, fd, request, size, data = texts(start_steps())[1].split(":")
    start = TPROF.ioctl("TPROF_IOC_START")
    assert (op, fd, int(request, 16), int(size)) == ("ioctl", "3", start.number, 24)
    assert bytes.fromhex(data) == bytes(24)


@pytest.mark.parametrize("ioctl", TPROF_IOCTLS, ids=lambda ioctl: ioctl.name)
def test_ioctl_step_uses_the_layouts_number_and_size(ioctl: Ioctl) -> None:
    _, fd, request, size = ioctl_step(ioctl.name).split(":")
    assert (fd, int(request, 16), int(size)) == ("3", ioctl.number, ioctl.arg_size)


def test_ioctl_step_of_an_unknown_ioctl() -> None:
    with pytest.raises(KeyError):
        ioctl_step("TPROF_IOC_FLUSH")


def test_collect_stops_reads_counters_getstats_and_closes_in_order() -> None:
    assert texts(collect_steps()) == COLLECT


def test_sampling_steps_for_a_plan() -> None:
    plan = SamplingPlan(busy_cpus=(0, 2), busy_ms=500, probe_cpus=(1,), probe_ms=100, idle_ms=300)
    assert (
        texts(tprof_steps(plan))
        == (
            IRQS,
            "open:/dev/profagent",
            START,
            "spin:0:500",
            "spin:2:500",
            f"write:{DEBUGFS}/probe:cpu=1 ms=100",
            "wait",
            "sleep:300",
            COLLECT[0],  # STOP, then the kernel's counts right after and 300 ms later
            IRQS,
            "sleep:300",
            IRQS,
            *COLLECT[1:],
        )
    )


def test_sampling_steps_without_busy_loops_or_probe() -> None:
    steps = texts(tprof_steps(SamplingPlan(busy_cpus=())))
    assert steps == (IRQS, "open:/dev/profagent", START, "wait", "sleep:300", COLLECT[0],
                     IRQS, "sleep:300", IRQS, *COLLECT[1:])  # fmt: skip


def test_sampling_steps_reject_an_impossible_cpu() -> None:
    with pytest.raises(ConfigError, match=re.escape("cpu must be in 0..1023, not 1024")):
        tprof_steps(SamplingPlan(busy_cpus=(1024,)))


# --- parsers --------------------------------------------------------------------------------


def test_parse_pairs() -> None:
    lines = ("flavour tprof", "source software-clock (no PMU)", "quirks 0x3 ", "empty")
    assert parse_pairs(lines) == {
        "flavour": "tprof",
        "source": "software-clock (no PMU)",
        "quirks": "0x3",
        "empty": "",
    }


def test_parse_pairs_keeps_the_last_of_a_repeated_name() -> None:
    assert parse_pairs(("running 1", "running 0")) == {"running": "0"}


def test_parse_percpu() -> None:
    lines = ("0 x_sample 5", "0 x_nobuf 0", "1 x_sample 7", "12 x_sample 18446744073709551615")
    assert parse_percpu(lines) == {
        0: {"x_sample": 5, "x_nobuf": 0},
        1: {"x_sample": 7},
        12: {"x_sample": 2**64 - 1},
    }


@pytest.mark.parametrize(
    "line",
    ["0 x_sample", "0 x_sample 5 extra", "cpu0 x_sample 5", "0 x_sample -1", "0 x_sample 1.5", ""],
)
def test_parse_percpu_rejects_a_malformed_line(line: str) -> None:
    with pytest.raises(
        InfraError, match=re.escape(f"malformed per-CPU line from the agent: {line!r}")
    ):
        parse_percpu(("0 x_sample 5", line))


# --- counters_of ----------------------------------------------------------------------------

#: Values the tests look at; every other counter the module declares reads 0.
SET = {"sample": 40, "overflow": 8, "x_bytes_read": 960}
SET_PERCPU = {0: {"x_sample": 30, "x_overflow": 8}, 1: {"x_sample": 10}}
SET_NMI = {0: {"x_nmi_total": 38}, 1: {"x_nmi_total": 10}}


def lines_of(names: Sequence[str], cpus: Mapping[int, Mapping[str, int]]) -> tuple[str, ...]:
    """A per-CPU debugfs file: every name for every CPU, 0 unless set."""
    return tuple(f"{c} {n} {cpus[c].get(n, 0)}" for c in sorted(cpus) for n in names)


FILES: dict[str, tuple[str, ...]] = {
    "info": ("flavour tprof", "event cycles", "source pmu"),
    "stats": tuple(f"{name} {SET.get(name, 0)}" for name in TPROF.stat_names),
    "stats_percpu": lines_of(TPROF.percpu_names, SET_PERCPU),
    "nmi": lines_of([name for name, _ in CORE_PERCPU], SET_NMI),
    "state": ("sources off", "running 0", "nbuf_on_list 0"),
}


def result_of(index: int, step: str, lines: Sequence[str] = (), *, ok: bool = True) -> StepResult:
    """What profctl reports for ``step``: a cat has its file's lines, a failure an errno."""
    op = step.partition(":")[0]
    values: Mapping[str, str] = {}
    if op == "cat" and ok:
        values = {"bytes": str(sum(len(line) + 1 for line in lines)), "lines": str(len(lines))}
    elif ok:
        values = {"rc": "0"}
    return StepResult(
        index=index,
        op=op,
        ok=ok,
        errno=None if ok else "ENOENT",
        values=values,
        lines=tuple(lines) if ok else (),
    )


def lists_of(steps: Sequence[str], files: Mapping[str, Sequence[str]]) -> list[StepResult]:
    """A successful result per step; a cat of the agent's ``name`` reads ``files[name]``."""
    results = []
    for index, step in enumerate(steps):
        name = step.rsplit("/", 1)[-1] if step.startswith(f"cat:{DEBUGFS}/") else ""
        results.append(result_of(index, step, files.get(name, ())))
    return results


def results_of(plan: Sequence[str | Named], files: Mapping[str, Sequence[str]]) -> Results:
    """`lists_of` the plan's steps, asked for by the plan's names."""
    return Results.of(plan, lists_of(texts(plan), files))


def test_counters_of_a_collect() -> None:
    counters = counters_of(results_of(collect_steps(), FILES))
    assert counters.info == {"flavour": "tprof", "event": "cycles", "source": "pmu"}
    assert counters.stats == {name: SET.get(name, 0) for name in TPROF.stat_names}
    assert counters.stats_percpu[0]["x_overflow"] == 8
    assert counters.stats_percpu[1]["x_sample"] == 10
    assert (counters.core[0]["x_nmi_total"], counters.core[1]["x_nmi_total"]) == (38, 10)
    assert counters.state == {"sources": "off", "running": "0", "nbuf_on_list": "0"}


def test_counters_of_takes_the_last_read_of_each_file() -> None:
    stats = Named(f"cat:{DEBUGFS}/stats", "counters.stats")
    plan = (stats, *collect_steps())
    results = lists_of(texts(plan), FILES)
    results[0] = result_of(0, stats.step, ("sample 1",))
    assert counters_of(Results.of(plan, results)).stats["sample"] == 40
    plan = (*collect_steps(), stats)
    results = lists_of(texts(plan), FILES)
    results[-1] = result_of(len(COLLECT), stats.step, tuple(
        line.replace("sample 40", "sample 41") for line in FILES["stats"]
    ))  # fmt: skip
    assert counters_of(Results.of(plan, results)).stats["sample"] == 41


def test_counters_of_reads_only_the_steps_named_so() -> None:
    plan = (*texts(collect_steps()), *collect_steps()[3:5])  # unnamed, then info and stats
    with pytest.raises(InfraError, match=r"did not read the agent's stats_percpu, nmi, state$"):
        counters_of(results_of(plan, FILES))


@pytest.mark.parametrize("name", list(FILES))
def test_counters_of_without_a_file_names_it(name: str) -> None:
    plan = tuple(s for s in collect_steps() if texts((s,))[0] != f"cat:{DEBUGFS}/{name}")
    with pytest.raises(InfraError, match=rf"did not read the agent's {name}$"):
        counters_of(results_of(plan, FILES))


def test_counters_of_a_failed_cat_is_a_missing_file() -> None:
    plan = collect_steps()
    results = lists_of(COLLECT, FILES)
    index = COLLECT.index(f"cat:{DEBUGFS}/nmi")
    results[index] = result_of(index, COLLECT[index], ok=False)
    with pytest.raises(InfraError, match="did not read the agent's nmi"):
        counters_of(Results.of(plan, results))


def test_counters_steps_read_every_debugfs_file_under_its_name() -> None:
    assert [(s.step, s.name) for s in counters_steps()] == [
        (f"cat:{DEBUGFS}/{name}", f"counters.{name}") for name in FILES
    ]


@pytest.mark.parametrize(
    ("file", "drop", "message"),
    [
        ("stats", "x_nobuf 0", "stats file has no x_nobuf:"),
        ("stats_percpu", "1 x_nobuf 0", "stats_percpu file has no x_nobuf for CPU 1:"),
        ("nmi", "0 x_nmi_ctx_bad 0", "nmi file has no x_nmi_ctx_bad for CPU 0:"),
    ],
)
def test_a_counter_missing_from_a_file_is_an_error_naming_it(
    file: str, drop: str, message: str
) -> None:
    files = {**FILES, file: tuple(line for line in FILES[file] if line != drop)}
    assert len(files[file]) == len(FILES[file]) - 1
    with pytest.raises(InfraError, match=re.escape(message)):
        counters_of(results_of(collect_steps(), files))


def test_a_file_without_any_cpu_is_an_error() -> None:
    with pytest.raises(InfraError, match="nmi file lists no CPU at all"):
        counters_of(results_of(collect_steps(), {**FILES, "nmi": ()}))


def test_counters_of_a_malformed_per_cpu_file() -> None:
    with pytest.raises(InfraError, match="malformed per-CPU line"):
        counters_of(results_of(collect_steps(), {**FILES, "nmi": ("0 x_nmi_total",)}))


# --- decode_stat and require_ok --------------------------------------------------------------


def test_decode_stat_of_48_bytes() -> None:
    data = struct.pack("<6Q", 16, 8, 2, 5, 2, 2**64 - 1)
    assert len(data) == 48
    assert decode_stat(data) == {
        "sample": 16,
        "overflow": 8,
        "buf": 2,
        "emptybuf": 5,
        "dropbuf": 2,
        "dropbuf_sample": 2**64 - 1,
    }


def test_decode_stat_is_little_endian() -> None:
    assert decode_stat(b"\x01" + bytes(47))["sample"] == 1


def test_require_ok_names_the_first_failed_step() -> None:
    results = [*lists_of(COLLECT[:2], {}), result_of(2, COLLECT[2], ok=False)]
    require_ok(results[:2])
    with pytest.raises(AgentStepError, match=r"step 2 \(read, failed with ENOENT"):
        require_ok(results)
