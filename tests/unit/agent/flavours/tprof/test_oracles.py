from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from harness.agent.flavours.tprof.data import TPROF
from harness.agent.flavours.tprof.oracles import (
    OUTCOMES,
    TPROF_ORACLES,
    applicable_oracles,
    check_placement,
    check_swaps,
    check_tprof,
    global_name,
)
from harness.agent.flavours.tprof.report import throttle_lost
from harness.agent.flavours.tprof.results import TprofRecord, TprofRun
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.evidence import Injections, KernelEvidence
from harness.agent.oracles.report import failed_oracles
from harness.agent.values.info import CORE_PERCPU
from harness.agent.values.results import AgentCounters, Violation
from harness.errors import ConfigError

PERIOD = 1_000_000
#: The time budgets: judged only where the guest's clock counts instructions.
BUDGETS = ("C-3", "TP-O10")
Brief = tuple[str, int | None, str, str]


def brief(violations: list[Violation]) -> list[Brief]:
    """What a test pins down: oracle, CPU, expected and observed (the detail is prose)."""
    return [(v.oracle, v.cpu, v.expected, v.observed) for v in violations]


def core(**values: int) -> dict[str, int]:
    return {**dict.fromkeys((name for name, _ in CORE_PERCPU), 0), **values}


def percpu(**values: int) -> dict[str, int]:
    return {**dict.fromkeys(TPROF.percpu_names, 0), **values}


def stats(**values: int) -> dict[str, int]:
    return {**dict.fromkeys(TPROF.stat_names, 0), **values}


def samples(cpu: int, pid: int, count: int) -> tuple[TprofRecord, ...]:
    return tuple(
        TprofRecord(pid=pid, tid=pid, cpu=cpu, flags=1, pc=0xFFFF0000 + i) for i in range(count)
    )


def busy_core(seen: int, *, nmi: bool, irqoff: int, **values: int) -> dict[str, int]:
    """A CPU whose ``seen`` overflows each called the producer once, 3 µs each on average."""
    if nmi:
        context = {"x_nmi_ctx_ok": seen, "x_producer_calls_nmi": seen, "x_irqoff_samples": irqoff}
    else:
        context = {"x_nmi_ctx_bad": seen, "x_producer_calls_irq": seen}
    counts = {"x_nmi_total": seen, "x_producer_calls": seen, "x_nmi_sum_ns": 3_000 * seen}
    return core(x_events_created=1, **counts, **context, **values)


def consistent_run(*, nmi: bool = True) -> TprofRun:
    """Two CPUs, manual drain with 3 kicks, pinned loops 101 on CPU 0 and 202 on CPU 1.

    CPU 0: 240 overflows → 200 recorded + 40 overflow. CPU 1: 160 → 150 + 6 + 4 x_not_running,
    2 more periods the emulator never delivered, and 3 IRQ-off probe windows (5 hits with
    pseudo-NMI on). Buffers: 2 CPUs × 5 swaps, 6 queued and 4 empty. The kernel counted
    exactly 240 and 160 PMU interrupts over the run and none after STOP; nothing was
    injected; throttling was off and nothing was throttled. Every law holds.
    """
    core0 = busy_core(240, nmi=nmi, irqoff=12, x_nmi_max_ns=8_000)
    core1 = busy_core(160, nmi=nmi, irqoff=9, x_nmi_max_ns=12_000, x_probe_runs=3)
    core1.update(x_probe_hits=5 if nmi else 0, x_periods_undelivered=2)
    counted = {0: (240_400_000, 241_500_000), 1: (162_900_000, 164_000_000)}
    for cpu_core, (value, ref) in zip((core0, core1), counted.values(), strict=True):
        cpu_core.update(x_counter_value=value, x_enabled_ns=ref)
    totals = {"sample": 350, "overflow": 46, "buf": 6, "emptybuf": 4, "x_not_running": 4}
    counters = AgentCounters(
        info={"flavour": "tprof", "S": "100"},
        stats=stats(**totals, x_swaps=10, x_nbuf_on_list_max=6, x_bytes_read=24 * 350),
        stats_percpu={
            0: percpu(x_sample=200, x_overflow=40, x_swaps=5),
            1: percpu(x_sample=150, x_overflow=6, x_not_running=4, x_swaps=5),
        },
        core={0: core0, 1: core1},
        state={"running": "0", "active": "0", "cur_buffers": "0"},
    )
    return TprofRun(
        ref_events_per_ns=1.0,
        spec=AgentSpec(period=PERIOD, drain="manual").with_params(buffer_samples=100),
        counters=counters,
        samples=samples(0, 101, 150) + samples(0, 0, 50) + samples(1, 202, 100) + samples(1, 0, 50),
        bytes_read=24 * 350,
        online_cpus=(0, 1),
        busy={0: (101,), 1: (202,)},
        probe_cpus=(1,),
        nmi_expected=nmi,
        throttling_disabled=True,
        kicks=3,
        kernel=KernelEvidence("arm-pmu", {0: 1000, 1: 500}, AFTER, AFTER),
    )


AFTER = {0: 1240, 1: 660}


def tp_d1_run(*, quirk: bool) -> TprofRun:
    """seeds-spec §1.7 TP-D1: 1 CPU, S = 8, L = 2, four rounds of {inject 12, kick}.

    Swaps: START (empty), kicks 1-2 queued (8 + 4 overflow each), kicks 3-4 dropped
    (8 + 4 each), STOP (empty). The seed reports 16 + 8 + 16 = 40 of 48; the 8 lost
    overflow goes to x_quirk_lost (quirk) or x_overflow_dropbuf (fixed). 30 overflows
    carried the bursts (pmu_produce off: only injected samples are produced).
    """
    lost = {"x_quirk_lost": 8} if quirk else {"x_overflow_dropbuf": 8}
    seed = {"sample": 16, "overflow": 8, "buf": 2, "emptybuf": 2, "dropbuf": 2}
    cpu0 = busy_core(30, nmi=True, irqoff=0, x_nmi_max_ns=20_000)
    cpu0.update(x_producer_calls=48, x_producer_calls_nmi=48, x_injected=48)
    cpu0.update(x_counter_value=30_000_500, x_enabled_ns=30_200_000)
    counters = AgentCounters(
        info={"flavour": "tprof", "S": "8"},
        stats=stats(**seed, dropbuf_sample=16, x_swaps=6, x_bytes_read=24 * 16, **lost),
        stats_percpu={0: percpu(x_sample=16, x_overflow=8, x_dropbuf_sample=16, x_swaps=6, **lost)},
        core={0: cpu0},
        state={"cur_buffers": "0"},
    )
    d1 = TPROF.quirk_bit("TP-D1") if quirk else 0
    return TprofRun(
        ref_events_per_ns=1.0,
        spec=AgentSpec(period=PERIOD, drain="manual", quirks=d1, pmu_produce=False).with_params(
            buffer_samples=8, list_limit=2
        ),
        counters=counters,
        samples=samples(0, 0, 16),
        bytes_read=24 * 16,
        online_cpus=(0,),
        busy={},
        probe_cpus=(),
        nmi_expected=True,
        throttling_disabled=True,
        injected={0: 48},
        kicks=4,
        kernel=KernelEvidence("arm-pmu", {0: 7}, {0: 37}, {0: 37}),
        injections=Injections(nmi={0: 48}, bursts={0: 4}),
    )


def broken(
    run: TprofRun,
    *,
    core: Mapping[int, Mapping[str, int]] | None = None,
    percpu: Mapping[int, Mapping[str, int]] | None = None,
    stats: Mapping[str, int] | None = None,
    **fields: Any,
) -> TprofRun:
    """``run`` with some numbers changed: core/percpu per CPU, global stats, run fields."""
    counters = replace(
        run.counters,
        core=_merged(run.counters.core, core or {}),
        stats_percpu=_merged(run.counters.stats_percpu, percpu or {}),
        stats={**run.counters.stats, **(stats or {})},
    )
    return replace(run, counters=counters, **fields)


def _merged(
    table: Mapping[int, Mapping[str, int]], changes: Mapping[int, Mapping[str, int]]
) -> dict[int, Mapping[str, int]]:
    return {cpu: {**table.get(cpu, {}), **changes.get(cpu, {})} for cpu in {*table, *changes}}


BASE = consistent_run()
NOT_IN_NMI = "x_producer_calls_nmi = x_producer_calls = 160"
CALLS_1 = "x_producer_calls_nmi + _irq = 160 + injected 0"

#: One number (or two that belong together) broken in `BASE` → exactly these violations.
BROKEN_CASES = [
    # TP-O1
    pytest.param(
        {"percpu": {0: {"x_overflow": 39}}},
        [
            ("TP-O1", 0, "x_producer_calls = 240", "x_sample 200 + x_overflow 39 = 239"),
        ],
        id="TP-O1 per-CPU outcome short",
    ),
    # No "global statistic short": the module prints each one as the sum of its per-CPU
    # counters, so it cannot differ from them (see the oracles' module docstring).
    pytest.param(
        {"percpu": {1: {"x_cur_used": 3}}},
        [
            (
                "TP-O1",
                1,
                "x_producer_calls = 160",
                "x_sample 150 + x_overflow 6 + x_not_running 4 + x_cur_used 3 = 163",
            ),
        ],
        id="TP-O1 the current buffer is an outcome",
    ),
    pytest.param(
        {"injected": {1: 5}},
        [("TP-O1", 1, "x_injected = 5 (injected)", "x_injected = 0")],
        id="TP-O1 injected count",
    ),
    # TP-O2
    pytest.param(
        {"stats": {"buf": 5}},
        [("TP-O2", None, "x_swaps = 10", "buf 5 + emptybuf 4 = 9")],
        id="TP-O2 a swap unclassified",
    ),
    pytest.param(
        {"kicks": 4},
        [("TP-O2", None, "x_swaps = 2 × (4 + 2) = 12", "x_swaps = 10")],
        id="TP-O2 a kick without a swap",
    ),
    pytest.param(
        {"stats": {"x_swaps": 11}},
        [
            ("TP-O2", None, "x_swaps = 11", "buf 6 + emptybuf 4 = 10"),
            ("TP-O2", None, "x_swaps = 2 × (3 + 2) = 10", "x_swaps = 11"),
        ],
        id="TP-O2 one swap too many",
    ),
    # TP-O5
    pytest.param(
        {"bytes_read": 8376},
        [("TP-O5", None, "bytes_read = 24 × sample 350 = 8400", "bytes_read = 8376")],
        id="TP-O5 bytes read",
    ),
    pytest.param(
        {"stats": {"x_bytes_read": 8424}},
        [("TP-O5", None, "x_bytes_read = 24 × sample 350 = 8400", "x_bytes_read = 8424")],
        id="TP-O5 the module's byte count",
    ),
    pytest.param(
        {"samples": BASE.samples[:-1]},
        [
            ("TP-O5", None, "records = sample = 350", "records = 349"),
            ("TP-O5", 1, "records = x_sample = 150", "records = 149"),
        ],
        id="TP-O5 a record missing",
    ),
    pytest.param(
        {"samples": (*BASE.samples[:-1], replace(BASE.samples[-1], cpu=5))},
        [
            ("TP-O5", 1, "records = x_sample = 150", "records = 149"),
            ("TP-O5", 5, "records = x_sample = 0", "records = 1"),
            ("TP-O5", 5, "records = 0", "records = 1"),
        ],
        id="TP-O5 a record from an offline CPU",
    ),
    # IRQ: the kernel's own count of PMU interrupts (CPU 0: 240)
    pytest.param(
        {"kernel": KernelEvidence("arm-pmu", {0: 1000, 1: 500}, {0: 1241, 1: 660}, AFTER)},
        [
            ("IRQ", 0, "x_nmi_total = 241", "240"),
            ("RELEASED", 0, "0 PMU interrupts", "-1"),
        ],
        id="IRQ an interrupt the agent never saw",
    ),
    pytest.param(
        {
            "kernel": KernelEvidence(
                "arm-pmu", {0: 1000, 1: 500}, {0: 1239, 1: 660}, {0: 1239, 1: 660}
            )
        },
        [("IRQ", 0, "x_nmi_total = 239", "240")],
        id="IRQ more overflows than interrupts",
    ),
    pytest.param(
        {
            "kernel": KernelEvidence(
                "arm-pmu", {0: 1000, 1: 500}, {0: 1250, 1: 660}, {0: 1250, 1: 660}, pmu_shared=True
            )
        },
        [],
        id="IRQ the perf peer shares the PMU: seen ≤ interrupts",
    ),
    pytest.param(
        {"kernel": KernelEvidence("arm-pmu", {0: 1000}, {0: 1240}, {0: 1240})},
        [],
        id="IRQ a CPU offline at a read is not judged",
    ),
    pytest.param(
        {"spec": replace(BASE.spec, event="cpu-clock"), "kernel": None},
        [],
        id="IRQ a software clock raises no PMU interrupt",
    ),
    # CALLS: producer calls follow from overflows and injections
    pytest.param(
        {"core": {1: {"x_producer_calls_nmi": 159, "x_producer_calls": 159}}},
        [
            ("CALLS", 1, CALLS_1, "159"),
            (
                "TP-O1",
                1,
                "x_producer_calls = 159",
                "x_sample 150 + x_overflow 6 + x_not_running 4 = 160",
            ),
        ],
        id="CALLS an overflow without its producer call",
    ),
    pytest.param(
        {"injections": Injections(nmi={1: 5}, bursts={1: 1})},
        [("CALLS", 1, "x_producer_calls_nmi + _irq = 159 + injected 5", "160")],
        id="CALLS an injected burst never produced",
    ),
    pytest.param(
        {"injections": Injections(task={0: 3})},
        [("CALLS", 0, "x_producer_calls_task = 3", "0")],
        id="CALLS task injections missing",
    ),
    # RELEASED (C-4)
    pytest.param(
        {"kernel": KernelEvidence("arm-pmu", {0: 1000, 1: 500}, AFTER, {0: 1240, 1: 700})},
        [("RELEASED", 1, "0 PMU interrupts", "40")],
        id="RELEASED an event still armed after STOP",
    ),
    # PLACE
    pytest.param(
        {"busy": {0: (101,), 1: (303,)}},
        [("PLACE", 1, "samples of pids 303 ≥ 1", "samples of pids 303 = 0")],
        id="PLACE busy loop never sampled",
    ),
    pytest.param(
        {
            "busy": {0: (101,), 1: (303,)},
            "spec": replace(BASE.spec, pmu_produce=False),
            "injections": Injections(nmi={0: 240, 1: 160}),
        },
        [],
        id="PLACE only injected samples recorded",
    ),
    pytest.param(
        {"samples": (*BASE.samples[:-1], replace(BASE.samples[-1], pid=101))},
        [
            (
                "PLACE",
                0,
                "samples of pids 101 elsewhere = 0",
                "samples of pids 101 elsewhere = 1",
            )
        ],
        id="PLACE pinned loop sampled elsewhere",
    ),
    pytest.param({"busy": {}}, [], id="PLACE not applicable"),
    # NMI
    pytest.param(
        {"core": {1: {"x_nmi_ctx_bad": 3}}},
        [("NMI", 1, "x_nmi_ctx_bad = 0", "x_nmi_ctx_bad = 3")],
        id="NMI handled outside NMI",
    ),
    pytest.param(
        {"core": {1: {"x_producer_calls_nmi": 150, "x_producer_calls_irq": 10}}},
        [("NMI", 1, "x_producer_calls_irq = 0", "x_producer_calls_irq = 10")],
        id="NMI producer called outside NMI",
    ),
    pytest.param(
        {"core": {0: {"x_nmi_ctx_ok": 0}, 1: {"x_nmi_ctx_ok": 0}}},
        [("NMI", None, "x_nmi_ctx_ok > 0 on some CPU", "x_nmi_ctx_ok = 0 on every CPU")],
        id="NMI nothing in NMI",
    ),
    # PROBE
    pytest.param(
        {"core": {1: {"x_probe_runs": 0}}},
        [("PROBE", 1, "x_probe_runs ≥ 1", "x_probe_runs = 0")],
        id="PROBE never ran",
    ),
    pytest.param(
        {"core": {1: {"x_probe_hits": 0}}},
        [("PROBE", 1, "x_probe_hits ≥ 1", "x_probe_hits = 0")],
        id="PROBE no overflow in IRQ-off windows",
    ),
    # THROTTLE: the perf core's own mark, with throttling off
    pytest.param(
        {"core": {1: {"x_throttled": 1}}},
        [("THROTTLE", 1, "x_throttled = 0", "x_throttled = 1")],
        id="THROTTLE disabled, yet throttled",
    ),
    pytest.param(
        {"throttling_disabled": False, "core": {1: {"x_throttled": 4}}},
        [],
        id="THROTTLE left on: the throttling case judges it",
    ),
    # C-2
    pytest.param(
        {"core": {0: {"x_nmi_lock_violation": 1}}},
        [("C-2", 0, "x_nmi_lock_violation = 0", "x_nmi_lock_violation = 1")],
        id="C-2 lock in NMI",
    ),
    pytest.param(
        {"core": {1: {"x_nmi_alloc_violation": 2}}},
        [("C-2", 1, "x_nmi_alloc_violation = 0", "x_nmi_alloc_violation = 2")],
        id="C-2 allocation in NMI",
    ),
    # several at once: a failed law never hides the others
    pytest.param(
        {"bytes_read": 0, "core": {0: {"x_nmi_lock_violation": 1}}},
        [
            ("C-2", 0, "x_nmi_lock_violation = 0", "x_nmi_lock_violation = 1"),
            ("TP-O5", None, "bytes_read = 24 × sample 350 = 8400", "bytes_read = 0"),
        ],
        id="two laws broken",
    ),
]


@pytest.mark.parametrize(("changes", "expected"), BROKEN_CASES)
def test_breaking_the_consistent_run(changes: dict[str, Any], expected: list[Brief]) -> None:
    assert brief(check_tprof(broken(BASE, **changes))) == expected


#: The same with pseudo-NMI off (the producer ran as a normal IRQ).
IRQ_CASES = [
    pytest.param({}, [], id="consistent"),
    *(
        pytest.param({"core": {0: {name: 2}}}, [("NMI", 0, f"{name} = 0", f"{name} = 2")], id=name)
        for name in ("x_nmi_ctx_ok", "x_irqoff_samples")
    ),
    pytest.param(
        {"core": {0: {"x_producer_calls_nmi": 2, "x_producer_calls_irq": 238}}},
        [("NMI", 0, "x_producer_calls_nmi = 0", "x_producer_calls_nmi = 2")],
        id="x_producer_calls_nmi",
    ),
    pytest.param(
        {"core": {1: {"x_probe_hits": 2}}},
        [("PROBE", 1, "x_probe_hits = 0", "x_probe_hits = 2")],
        id="x_probe_hits",
    ),
    pytest.param(
        {"core": {1: {"x_probe_runs": 0}}},
        [("PROBE", 1, "x_probe_runs ≥ 1", "x_probe_runs = 0")],
        id="x_probe_runs",
    ),
]


@pytest.mark.parametrize(("changes", "expected"), IRQ_CASES)
def test_breaking_the_consistent_irq_run(changes: dict[str, Any], expected: list[Brief]) -> None:
    assert brief(check_tprof(broken(consistent_run(nmi=False), **changes))) == expected


def test_the_consistent_runs_evaluate_every_oracle() -> None:
    assert applicable_oracles(BASE) == {name for name, _ in TPROF_ORACLES} - {
        "PEER",
        "PROFILE",
        *BUDGETS,
    }
    assert failed_oracles(check_tprof(BASE)) == set()


def test_oracles_are_listed_in_report_order() -> None:
    names = [name for name, _ in TPROF_ORACLES]
    assert names == [
        "IRQ", "CALLS", "RELEASED", "PEER", "PROFILE", "THROTTLE", "C-2", "C-3",
        "TP-O1", "TP-O2", "TP-O5", "PLACE", "NMI", "PROBE", "TP-O10", "STOPPED", "ONLINE",
    ]  # fmt: skip


def test_every_outcome_has_a_global_statistic() -> None:
    assert [global_name(n) for n in OUTCOMES if global_name(n) not in TPROF.stat_names] == []


def test_check_tprof_refuses_another_flavours_run() -> None:
    with pytest.raises(ConfigError, match="tprof"):
        check_tprof(replace(BASE, spec=AgentSpec(flavour="kprof")))


def test_failed_oracles_names_each_once() -> None:
    violations = check_tprof(broken(BASE, bytes_read=0, stats={"buf": 5}, kicks=4))
    assert failed_oracles(violations) == {"TP-O2", "TP-O5"}


# --- TP-D1 (seeds-spec §1.7) -----------------------------------------------------------------


@pytest.mark.parametrize("quirk", [True, False], ids=["quirk", "fixed"])
def test_tp_d1_seed_numbers_pass_tp_o1_and_tp_o2(quirk: bool) -> None:
    run = tp_d1_run(quirk=quirk)
    seed = [
        run.counters.stats[name] for name in ("sample", "overflow", "dropbuf", "dropbuf_sample")
    ]
    assert seed == [16, 8, 2, 16]
    skipped = {"PLACE", "PROBE", "PEER", "PROFILE", *BUDGETS}  # no busy loop, no probe CPU
    assert applicable_oracles(run) == {name for name, _ in TPROF_ORACLES} - skipped
    assert check_tprof(run) == []


def test_tp_d1_quirk_mode_must_not_report_the_fixed_counter() -> None:
    run = replace(tp_d1_run(quirk=False), spec=tp_d1_run(quirk=True).spec)
    assert brief(check_tprof(run)) == [
        ("TP-O1", None, "x_overflow_dropbuf = 0", "x_overflow_dropbuf = 8"),
    ]


def test_tp_d1_fixed_mode_must_not_lose_overflow() -> None:
    run = replace(tp_d1_run(quirk=True), spec=tp_d1_run(quirk=False).spec)
    assert brief(check_tprof(run)) == [("TP-O1", None, "x_quirk_lost = 0", "x_quirk_lost = 8")]


def test_tp_d1_the_seeds_invisible_loss_breaks_conservation() -> None:
    run = broken(tp_d1_run(quirk=True), percpu={0: {"x_quirk_lost": 0}}, stats={"x_quirk_lost": 0})
    assert brief(check_tprof(run)) == [
        (
            "TP-O1",
            0,
            "x_producer_calls = 48",
            "x_sample 16 + x_overflow 8 + x_dropbuf_sample 16 = 40",
        ),
    ]


def test_tp_d1_without_pmu_production_only_injected_calls_reach_the_producer() -> None:
    run = broken(tp_d1_run(quirk=False), core={0: {"x_injected": 47}}, injected={0: 47})
    assert brief(check_tprof(run)) == [
        ("TP-O1", 0, "x_producer_calls = 47 (injected)", "x_producer_calls = 48"),
    ]


# --- TP-O2 in auto drain, and what does not apply -----------------------------------------------


@pytest.mark.parametrize(
    ("runtime_s", "buf", "emptybuf", "expected"),
    [
        (2.5, 6, 4, []),  # 4 ≤ 10 ≤ 2 × (2 + 3)
        (4.0, 6, 4, []),
        (1.0, 6, 4, [("TP-O2", None, "x_swaps ≤ 6", "x_swaps = 10")]),
        (0.5, 2, 0, []),  # no floor: START and STOP's swaps are counted in manual drain
    ],
)
def test_tp_o2_auto_drain_bounds(
    runtime_s: float, buf: int, emptybuf: int, expected: list[Brief]
) -> None:
    swaps = buf + emptybuf
    run = broken(
        BASE,
        spec=replace(BASE.spec, drain="auto"),
        kicks=None,
        runtime_s=runtime_s,
        percpu={0: {"x_swaps": swaps // 2}, 1: {"x_swaps": swaps // 2}},
        stats={"x_swaps": swaps, "buf": buf, "emptybuf": emptybuf},
    )
    assert brief(check_tprof(run)) == expected


@pytest.mark.parametrize(
    ("drain", "kicks", "runtime_s", "applies"),
    [
        ("manual", 3, 0.0, True),
        ("manual", None, 0.0, False),
        ("manual", None, 2.5, False),  # hotplug adds swaps: no count to hold them to
        ("auto", None, 2.5, True),
        ("auto", None, 0.0, False),
    ],
)
def test_tp_o2_applies_with_kicks_or_auto_drain_run_time(
    drain: str, kicks: int | None, runtime_s: float, applies: bool
) -> None:
    run = broken(BASE, spec=replace(BASE.spec, drain=drain), kicks=kicks, runtime_s=runtime_s)
    assert ("TP-O2" in applicable_oracles(run)) == applies


def test_tp_o2_skipped_in_a_manual_drain_run_without_kicks() -> None:
    # x_swaps = 10 is above the auto ceiling for 1 s (x_swaps ≤ 6): not judged.
    run = broken(BASE, kicks=None, runtime_s=1.0)
    skipped = {"TP-O2", "PEER", "PROFILE", *BUDGETS}
    assert applicable_oracles(run) == {name for name, _ in TPROF_ORACLES} - skipped
    assert check_tprof(run) == []


def test_tp_o2_does_not_apply_without_kicks_or_run_time() -> None:
    run = broken(BASE, kicks=None, stats={"x_swaps": 11})
    assert "TP-O2" not in applicable_oracles(run)
    assert check_swaps(run) == []
    assert check_tprof(run) == []


def test_place_a_busy_cpu_must_overflow() -> None:
    # Alone, as IRQ and CALLS fail too when x_nmi_total drops.
    run = broken(BASE, core={0: {"x_nmi_total": 0}})
    assert brief(check_placement(run)) == [("PLACE", 0, "x_nmi_total ≥ 1", "x_nmi_total = 0")]


def test_throttle_lost_is_the_clamped_estimate() -> None:
    assert throttle_lost(BASE) == {0: 1, 1: 1}
    assert throttle_lost(broken(BASE, core={1: {"x_enabled_ns": 400_000_000}})) == {0: 1, 1: 237}
    assert throttle_lost(broken(BASE, core={0: {"x_enabled_ns": 200_000_000}})) == {0: 0, 1: 1}
    assert throttle_lost(broken(BASE, core={1: {"x_events_created": 0}})) == {0: 1, 1: 0}


def test_stopped_a_buffer_current_after_stop_fails() -> None:
    # kick_after_stop: a kick that passed its check before STOP installed one after it.
    state = {**BASE.counters.state, "cur_buffers": "1"}
    run = replace(BASE, counters=replace(BASE.counters, state=state))
    assert brief(check_tprof(run)) == [("STOPPED", None, "cur_buffers = 0", "cur_buffers = 1")]


def test_stopped_not_judged_when_the_module_does_not_print_the_count() -> None:
    run = replace(BASE, counters=replace(BASE.counters, state={}))
    assert "STOPPED" not in applicable_oracles(run)
    assert check_tprof(run) == []


def test_online_a_call_on_a_cpu_without_its_buffer_fails_even_when_counted() -> None:
    # online_arm_first: CPU 1 armed before its buffer; 4 of its calls (still accounted,
    # TP-O1 holds: 4 not_running became 4 nobuf) found none.
    run = broken(BASE, percpu={1: {"x_not_running": 0, "x_nobuf": 4}},
                 stats={"x_not_running": 0, "x_nobuf": 4})  # fmt: skip
    assert brief(check_tprof(run)) == [("ONLINE", 1, "x_nobuf = 0", "x_nobuf = 4")]


def test_place_judges_the_loop_itself_not_the_childs_start() -> None:
    """The isolated CPU's loop is forked where profctl runs and pins itself: samples of
    its pid there before the pin (kernel, or outside spin_loop) are its start."""
    loop = (0x400100, 0x400180)
    home = tuple(replace(s, flags=0, pc=loop[0] + 8) for s in BASE.samples if s.pid == 101)
    others = tuple(s for s in BASE.samples if s.pid != 101)
    start = (
        replace(home[0], cpu=1, flags=1, pc=0xFFFF0000),  # sched_setaffinity
        replace(home[0], cpu=1, pc=loop[0] - 4),
    )  # fork's return, pin_to
    run = replace(BASE, samples=(*home, *others, *start), spin_loop=loop)
    assert check_placement(run) == []
    stray = replace(run, samples=(*run.samples, replace(home[0], cpu=1)))
    assert [v.oracle for v in check_placement(stray)] == ["PLACE"]
    # where the loop's code is not known, every sample of the pid is judged
    assert [v.oracle for v in check_placement(replace(run, spin_loop=(0, 0)))] == ["PLACE"]
