from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from harness.agent.flavours.dt.counters import (
    check_dt_drain,
    check_dt_gstats,
    check_dt_skipticks,
    reads_whole_events,
)
from harness.agent.flavours.dt.data import DT
from harness.agent.flavours.dt.oracles import (
    DT_ORACLES,
    applicable_dt_oracles,
    canary_of,
    check_dt,
    check_dt_reader,
    core_view,
)
from harness.agent.flavours.dt.results import DtEvent, DtOpenStats, DtRun
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.core import CORE_ORACLES, applicable_core
from harness.agent.oracles.evidence import Injections, KernelEvidence
from harness.agent.values.info import CORE_PERCPU
from harness.agent.values.results import Violation
from harness.errors import ConfigError

Brief = tuple[str, int | None, str, str]
D1 = DT.quirk_bit("DT-D1")
D2 = DT.quirk_bit("DT-D2")
D9 = DT.quirk_bit("DT-D9")
EV = DT.record.size  # bytes per event
HALF3 = EV * 3 // 2  # a read of 1.5 events (DT-D2)


def brief(violations: list[Violation]) -> list[Brief]:
    """What a test pins down: oracle, CPU, expected and observed (the detail is prose)."""
    return [(v.oracle, v.cpu, v.expected, v.observed) for v in violations]


def core(**values: int) -> dict[str, int]:
    return {**dict.fromkeys((name for name, _ in CORE_PERCPU), 0), **values}


def percpu(**values: int) -> dict[str, int]:
    return {**dict.fromkeys(DT.percpu_names, 0), **values}


def gstats(readevt: int, dropevt: int, skiptick: int, recurevt: int) -> dict[str, int]:
    return {"readevt": readevt, "dropevt": dropevt, "skiptick": skiptick, "recurevt": recurevt}


def opens(evtcnt: int, wakeups: int, partial: int = 0) -> dict[str, int]:
    return {"x_evtcnt": evtcnt, "x_wakeups": wakeups, "x_partial_events": partial}


def event(cpu: int, seq: int, **changes: int) -> DtEvent:
    """A well-formed event; the canary is computed here, not with canary_of."""
    fields = {
        "seq": seq,
        "ts_ns": 1_000_000 * cpu + 1_000 * seq,
        "pc": 0xFFFF800080000000 + seq,
        "probe": 1,
        "cpu": cpu,
        "pid": 0,
        "tid": 0,
        "flags": 1,
        "canary": 0xD7E7C0DE ^ (seq & 0xFFFFFFFF),
    }
    return DtEvent(**{**fields, **changes}, kstack=(), ustack=())


def events(cpu: int, count: int) -> tuple[DtEvent, ...]:
    return tuple(event(cpu, seq) for seq in range(1, count + 1))


def consistent_run(*, nmi: bool = True) -> DtRun:
    """Two CPUs, bursts only (pmu_produce off), read in buffers of 4 events.

    CPU 0: 20 injected + a nested window holding 7 calls: E = 20 + 7 + 1 (the window's
    outer get) = 28, recurevt 7, committed min(21, 15) = 15, dropevt 6. CPU 1: 5
    injected, 3 forced skips: E = 5, committed 5, skiptick 3; its core also counted 2 undelivered
    periods, which are no ticks without pmu_produce. 20 events are read, CPU 0's
    first (reads rotate from CPU 0), 20 events' bytes. Every law holds.
    """
    before = DtOpenStats(
        gstats=gstats(0, 6, 3, 7),
        percpu={
            0: percpu(
                x_calls=28, dc_recurevt=7, dc_dropevt=6, x_committed=15, x_inring=15, x_seq=15
            ),
            1: percpu(x_calls=5, x_committed=5, dc_skiptick=3, x_inring=5, x_seq=5),
        },
        open=opens(20, 4),
    )
    after = DtOpenStats(
        gstats=gstats(20, 6, 3, 7),
        percpu={
            0: percpu(
                x_calls=28, dc_recurevt=7, dc_dropevt=6, x_committed=15, dc_readevt=15, x_seq=15
            ),
            1: percpu(x_calls=5, x_committed=5, dc_skiptick=3, dc_readevt=5, x_seq=5),
        },
        open=opens(0, 9),
    )
    ok = "x_nmi_ctx_ok" if nmi else "x_nmi_ctx_bad"
    context = "x_producer_calls_nmi" if nmi else "x_producer_calls_irq"
    calls = {
        0: {"x_producer_calls": 27, "x_injected": 27, context: 27},
        1: {"x_producer_calls": 5, "x_injected": 5, context: 5},
    }
    return DtRun(
        spec=AgentSpec(flavour="dt", pmu_produce=False, drain="manual"),
        before_read=before,
        after_read=after,
        events=events(0, 15) + events(1, 5),
        bytes_read=EV * 20,
        read_size=EV * 4,
        online_cpus=(0, 1),
        core={
            0: core(x_nmi_total=3, x_events_created=1, **calls[0], **{ok: 3}),
            1: core(
                x_nmi_total=1, x_events_created=1, x_periods_undelivered=2, **calls[1], **{ok: 1}
            ),
        },
        nmi_expected=nmi,
        injected={0: 20, 1: 5},
        nested={0: 7},
        windows={0: 1},
        skips={1: 3},
        kernel=KernelEvidence("arm-pmu", {0: 40, 1: 9}, {0: 43, 1: 10}, {0: 43, 1: 10}),
        injections=Injections(nmi={0: 27, 1: 5}, bursts={0: 2, 1: 1}),
    )


BASE = consistent_run()


def with_percpu(stats: DtOpenStats, cpu: int, **values: int) -> DtOpenStats:
    return replace(stats, percpu={**stats.percpu, cpu: {**stats.percpu[cpu], **values}})


def before(cpu: int, **values: int) -> Callable[[DtRun], DtRun]:
    return lambda run: replace(run, before_read=with_percpu(run.before_read, cpu, **values))


def after(cpu: int, **values: int) -> Callable[[DtRun], DtRun]:
    return lambda run: replace(run, after_read=with_percpu(run.after_read, cpu, **values))


def after_open(**values: int) -> Callable[[DtRun], DtRun]:
    return lambda run: replace(
        run, after_read=replace(run.after_read, open={**run.after_read.open, **values})
    )


def with_events(run: DtRun, index: int, new: DtEvent) -> DtRun:
    return replace(run, events=(*run.events[:index], new, *run.events[index + 1 :]))


INJ_0 = "x_calls = 20 + 7 + 1 = 28 (injected + nested + outer get)"

BROKEN: dict[str, tuple[Callable[[DtRun], DtRun], list[Brief]]] = {
    "calls before the read": (
        before(0, x_calls=29),
        [
            ("DT-O1", 0, "x_calls = 29", "x_producer_calls 27 + nested windows 1 = 28"),
            ("DT-O1", 0, "x_calls = 29", "dc_recurevt 7 + dc_dropevt 6 + x_committed 15 = 28"),
            ("DT-O2", 0, "dc_dropevt = 29 - 7 - 15 = 7", "dc_dropevt = 6"),
            ("DT-INJ", 0, INJ_0, "x_calls = 29"),
        ],
    ),
    "committed before the read": (
        before(1, x_committed=4),
        [
            ("DT-O1", 1, "x_calls = 5", "x_committed 4 = 4"),
            ("DT-O1", 1, "x_committed = 4", "x_inring 5 = 5"),
            ("DT-O2", 1, "x_committed = min(5 - 0, 15) = 5", "x_committed = 4"),
            ("DT-O2", None, "x_evtcnt = Σ x_committed = 19", "x_evtcnt = 20"),
        ],
    ),
    "a read before the read": (
        before(1, dc_readevt=1),
        [
            ("DT-O1", 1, "x_committed = 5", "dc_readevt 1 + x_inring 5 = 6"),
            ("DT-O2", 1, "dc_readevt = 0", "dc_readevt = 1"),
            ("DT-O4", None, "readevt = Σ dc_readevt = 1", "readevt = 0"),
        ],
    ),
    "evtcnt before the read": (
        lambda run: replace(
            run, before_read=replace(run.before_read, open=opens(evtcnt=19, wakeups=4))
        ),
        [("DT-O2", None, "x_evtcnt = Σ x_committed = 20", "x_evtcnt = 19")],
    ),
    "recursion before the read": (
        before(0, dc_recurevt=6),
        [
            ("DT-O1", 0, "x_calls = 28", "dc_recurevt 6 + dc_dropevt 6 + x_committed 15 = 27"),
            ("DT-O2", 0, "dc_dropevt = 28 - 6 - 15 = 7", "dc_dropevt = 6"),
            ("DT-O4", None, "recurevt = Σ dc_recurevt = 6", "recurevt = 7"),
            ("DT-O6", 0, "dc_recurevt = 7 (calls in nested windows)", "dc_recurevt = 6"),
        ],
    ),
    "skipped ticks before the read": (
        before(1, dc_skiptick=2),
        [
            ("DT-O4", None, "skiptick = Σ dc_skiptick = 2", "skiptick = 3"),
            ("DT-O7", 1, "dc_skiptick = 3 (forced skips)", "dc_skiptick = 2"),
        ],
    ),
    "events read after the read": (
        after(1, dc_readevt=4),
        [
            ("DT-O1", 1, "x_committed = 5", "dc_readevt 4 = 4"),
            ("DT-O3", 1, "dc_readevt = x_committed = 5", "dc_readevt = 4"),
            ("DT-O3", None, f"bytes_read = {EV} × 19 (Σ dc_readevt)", f"bytes_read = {EV * 20}"),
            ("DT-O3", None, "events = Σ dc_readevt = 19", "events = 20"),
            ("DT-O4", None, "readevt = Σ dc_readevt = 19", "readevt = 20"),
        ],
    ),
    "an event left in the ring": (
        after(0, x_inring=1),
        [("DT-O1", 0, "x_committed = 15", "dc_readevt 15 + x_inring 1 = 16")],
    ),
    "seq after the read (no longer judged: it moves with x_committed by construction)": (
        after(0, x_seq=14),
        [],
    ),
    "a producer call that never reached the open": (
        lambda run: replace(run, core={**run.core, 1: {**run.core[1], "x_producer_calls": 6}}),
        [("DT-O1", 1, "x_calls = 5", "x_producer_calls 6 = 6")],
    ),
    "a nested window the harness did not open": (
        lambda run: replace(run, windows={0: 2}),
        [
            ("DT-O1", 0, "x_calls = 28", "x_producer_calls 27 + nested windows 2 = 29"),
            (
                "DT-INJ",
                0,
                "x_calls = 20 + 7 + 2 = 29 (injected + nested + outer get)",
                "x_calls = 28",
            ),
        ],
    ),
    "evtcnt after the read": (
        after_open(x_evtcnt=1),
        [("DT-O3", None, "x_evtcnt = 0", "x_evtcnt = 1")],
    ),
    "a partial event in whole-event reads": (
        after_open(x_partial_events=1),
        [("DT-O3", None, "x_partial_events = 0 (whole-event reads)", "x_partial_events = 1")],
    ),
    "bytes read": (
        lambda run: replace(run, bytes_read=EV * 20 - 24),
        [("DT-O3", None, f"bytes_read = {EV} × 20 (Σ dc_readevt)", f"bytes_read = {EV * 20 - 24}")],
    ),
    "gstats after the read": (
        lambda run: replace(run, after_read=replace(run.after_read, gstats=gstats(20, 6, 0, 7))),
        [("DT-O4", None, "skiptick = Σ dc_skiptick = 3", "skiptick = 0")],
    ),
    "a nested window the counters do not show": (
        lambda run: replace(run, nested={0: 7, 1: 2}, windows={0: 1, 1: 1}),
        [
            ("DT-O1", 1, "x_calls = 5", "x_producer_calls 5 + nested windows 1 = 6"),
            ("DT-O6", 1, "dc_recurevt = 2 (calls in nested windows)", "dc_recurevt = 0"),
            ("DT-INJ", 1, "x_calls = 5 + 2 + 1 = 8 (injected + nested + outer get)", "x_calls = 5"),
        ],
    ),
    "a forced skip the counters do not show": (
        lambda run: replace(run, skips={0: 1, 1: 3}),
        [("DT-O7", 0, "dc_skiptick = 1 (forced skips)", "dc_skiptick = 0")],
    ),
    "injected count": (
        lambda run: replace(run, injected={0: 21, 1: 5}),
        [("DT-INJ", 0, INJ_0.replace("20", "21").replace("28", "29"), "x_calls = 28")],
    ),
    "an overflow outside NMI": (
        lambda run: replace(run, core={**run.core, 1: {**run.core[1], "x_nmi_ctx_bad": 1}}),
        [("NMI", 1, "x_nmi_ctx_bad = 0", "x_nmi_ctx_bad = 1")],
    ),
    "NMI expected off": (
        lambda run: replace(run, nmi_expected=False),
        [
            ("NMI", 0, "x_nmi_ctx_ok = 0", "x_nmi_ctx_ok = 3"),
            ("NMI", 0, "x_producer_calls_nmi = 0", "x_producer_calls_nmi = 27"),
            ("NMI", 1, "x_nmi_ctx_ok = 0", "x_nmi_ctx_ok = 1"),
            ("NMI", 1, "x_producer_calls_nmi = 0", "x_producer_calls_nmi = 5"),
        ],
    ),
    "NMI a sample produced later, in hard IRQ": (  # the defer_producer mutant's trace
        lambda run: replace(
            run,
            core={
                **run.core,
                1: {**run.core[1], "x_producer_calls_nmi": 3, "x_producer_calls_irq": 2},
            },
        ),
        [("NMI", 1, "x_producer_calls_irq = 0", "x_producer_calls_irq = 2")],
    ),
}


def test_consistent_run_passes_every_oracle() -> None:
    assert check_dt(BASE) == []
    core = {name for name, _ in CORE_ORACLES}
    unjudged = {"DT-O8", "DT-O10", *(core - applicable_core(core_view(BASE)))}
    assert "PEER" in unjudged
    assert applicable_dt_oracles(BASE) == {name for name, _ in DT_ORACLES} - unjudged


def test_consistent_run_with_pseudo_nmi_off_passes() -> None:
    assert check_dt(consistent_run(nmi=False)) == []


@pytest.mark.parametrize("case", BROKEN, ids=list(BROKEN))
def test_one_broken_number_gives_exactly_its_violations(case: str) -> None:
    breaks, expected = BROKEN[case]
    assert brief(check_dt(breaks(BASE))) == expected


def test_oracle_order_and_names() -> None:
    names = [name for name, _ in DT_ORACLES]
    assert names == [
        *(name for name, _ in CORE_ORACLES),
        "DT-O1", "DT-O2", "DT-O3", "DT-O4", "DT-O6", "DT-O7", "DT-O8", "DT-O10", "DT-INJ", "NMI",
    ]  # fmt: skip


def test_check_dt_refuses_another_flavour() -> None:
    with pytest.raises(ConfigError, match="flavour is 'tprof'"):
        check_dt(replace(BASE, spec=AgentSpec(flavour="tprof")))


def test_injection_oracle_needs_injection_without_pmu_ticks() -> None:
    assert "DT-INJ" not in applicable_dt_oracles(replace(BASE, injected=None))
    assert "DT-INJ" not in applicable_dt_oracles(pmu_run())


def test_canary_uses_the_low_32_bits_of_seq() -> None:
    assert canary_of(5) == 0xD7E7C0DB
    assert canary_of((1 << 32) | 3) == 0xD7E7C0DD


def test_torn_event_names_its_cpu_and_seq() -> None:
    torn = with_events(BASE, 3, event(0, 4, canary=0xD7E7C0DB))
    violations = check_dt(torn)
    assert brief(violations) == [("DT-O3", 0, "canary 0xd7e7c0da", "canary 0xd7e7c0db")]
    assert "torn event: seq 4" in str(violations[0])


def test_duplicated_seq_is_a_repeat_then_a_gap() -> None:
    duplicated = with_events(BASE, 5, event(0, 5))  # CPU 0 reads 1 2 3 4 5 5 7 …
    violations = check_dt(duplicated)
    assert brief(violations) == [
        ("DT-O3", 0, "seq 6", "seq 5"),
        ("DT-O3", 0, "seq 6", "seq 7"),
    ]
    assert "event 5 of the stream is a repeat after seq 5" in violations[0].detail
    assert "a gap: seq 6..6 missing" in violations[1].detail


def test_decreasing_seq() -> None:
    swapped = with_events(with_events(BASE, 16, event(1, 3)), 17, event(1, 2))  # 1 3 2 4 5
    violations = check_dt_drain(swapped)
    assert brief(violations) == [("DT-O3", 1, "seq 2", "seq 3"), ("DT-O3", 1, "seq 4", "seq 2")]
    assert "a decrease after seq 3" in violations[1].detail


def test_event_of_an_offline_cpu_and_a_foreign_probe() -> None:
    stray = with_events(BASE, 19, event(2, 5))
    foreign = with_events(stray, 0, event(0, 1, probe=2))
    assert brief(check_dt(foreign)) == [
        ("DT-O3", 1, "events = x_committed = 5", "events = 4"),
        ("DT-O3", 2, "events = x_committed = 0", "events = 1"),
        ("DT-O3", 2, "seq 1", "seq 5"),
        ("DT-O3", 0, "probe 1", "probe 2"),
        ("DT-O3", 2, "cpu in 0,1", "cpu 2 in 1 events"),
    ]


def dt_d1_run(*, ncpu: int, quirk: bool) -> DtRun:
    """seeds-spec DT-D1: skips and recursion only on CPU 0, GSTATS as the module returns it.

    CPU 0: 4 injected, a nested window of 3, 2 forced skips: E = 8, recurevt 3, 5
    committed and read. With the quirk on 2 CPUs, GSTATS' skiptick and recurevt are
    CPU 1's (0); with 1 CPU the last CPU is CPU 0 and both aggregations agree.
    """
    cpu0 = {"x_calls": 8, "dc_recurevt": 3, "x_committed": 5, "dc_skiptick": 2, "x_seq": 5}
    pcpu_before = {0: percpu(**cpu0, x_inring=5)}
    pcpu_after = {0: percpu(**cpu0, dc_readevt=5)}
    cores = {0: core(x_nmi_total=2, x_nmi_ctx_ok=2, x_producer_calls=7, x_events_created=1)}
    if ncpu == 2:
        pcpu_before[1] = pcpu_after[1] = percpu()
        cores[1] = core(x_events_created=1)
    hidden = quirk and ncpu == 2
    skiptick, recurevt = (0, 0) if hidden else (2, 3)
    return DtRun(
        spec=AgentSpec(flavour="dt", pmu_produce=False, drain="manual", quirks=D1 if quirk else 0),
        before_read=DtOpenStats(gstats(0, 0, skiptick, recurevt), pcpu_before, opens(5, 1)),
        after_read=DtOpenStats(gstats(5, 0, skiptick, recurevt), pcpu_after, opens(0, 2)),
        events=events(0, 5),
        bytes_read=EV * 5,
        read_size=EV,
        online_cpus=tuple(range(ncpu)),
        core=cores,
        nmi_expected=True,
        injected={0: 4},
        nested={0: 3},
        windows={0: 1},
        skips={0: 2},
    )


def test_dt_d1_run_passes_with_the_quirk_bit() -> None:
    assert check_dt(dt_d1_run(ncpu=2, quirk=True)) == []


def test_dt_d1_numbers_fail_without_the_quirk_bit() -> None:
    seed_numbers = replace(dt_d1_run(ncpu=2, quirk=True), spec=dt_d1_run(ncpu=2, quirk=False).spec)
    assert (
        brief(check_dt(seed_numbers))
        == [
            ("DT-O4", None, "skiptick = Σ dc_skiptick = 2", "skiptick = 0"),
            ("DT-O4", None, "recurevt = Σ dc_recurevt = 3", "recurevt = 0"),
        ]
        * 2
    )


def test_fixed_numbers_fail_with_the_quirk_bit() -> None:
    fixed_numbers = replace(dt_d1_run(ncpu=2, quirk=False), spec=dt_d1_run(ncpu=2, quirk=True).spec)
    last = "= 0 (quirk DT-D1: the last CPU's)"
    assert (
        brief(check_dt_gstats(fixed_numbers))
        == [
            ("DT-O4", None, f"skiptick = dc_skiptick[1] {last}", "skiptick = 2"),
            ("DT-O4", None, f"recurevt = dc_recurevt[1] {last}", "recurevt = 3"),
        ]
        * 2
    )


@pytest.mark.parametrize("quirk", [True, False])
def test_dt_d1_is_invisible_on_one_cpu(quirk: bool) -> None:
    one = dt_d1_run(ncpu=1, quirk=True)
    assert check_dt(replace(one, spec=dt_d1_run(ncpu=1, quirk=quirk).spec)) == []


def dt_d2_run(*, quirk: bool = True) -> DtRun:
    """seeds-spec DT-D2: 4 events on 1 CPU read with buffers of 1.5 events (`HALF3` bytes).

    With the quirk each read consumes and counts 2 events and returns 1.5 events' bytes: the
    second is cut in half. 3 events' bytes, readevt 4, 2 partial events; the stream decodes
    as 3 frames, the later ones misaligned (here: garbage canaries).
    """
    cpu0 = {"x_calls": 4, "x_committed": 4, "x_seq": 4}
    misaligned = (event(0, 9, canary=1), event(0, 2, probe=7))
    return DtRun(
        spec=AgentSpec(flavour="dt", pmu_produce=False, drain="manual", quirks=D2 if quirk else 0),
        before_read=DtOpenStats(gstats(0, 0, 0, 0), {0: percpu(**cpu0, x_inring=4)}, opens(4, 1)),
        after_read=DtOpenStats(
            gstats(4, 0, 0, 0), {0: percpu(**cpu0, dc_readevt=4)}, opens(0, 1, partial=2)
        ),
        events=(event(0, 1), *misaligned),
        bytes_read=2 * HALF3,
        read_size=HALF3,
        online_cpus=(0,),
        core={0: core(x_nmi_total=1, x_nmi_ctx_ok=1, x_producer_calls=4, x_events_created=1)},
        nmi_expected=True,
        injected={0: 4},
    )


def test_dt_d2_ragged_reads_skip_the_byte_and_event_rules() -> None:
    run = dt_d2_run()
    assert not reads_whole_events(run)
    assert check_dt(run) == []


def test_dt_d2_ragged_reads_still_bound_the_bytes() -> None:
    run = replace(dt_d2_run(), bytes_read=EV * 4 + 8)
    assert brief(check_dt(run)) == [
        ("DT-O3", None, f"bytes_read ≤ {EV} × 4 (Σ dc_readevt)", f"bytes_read = {EV * 4 + 8}")
    ]


def test_dt_d2_numbers_fail_without_the_quirk_bit() -> None:
    assert brief(check_dt_drain(dt_d2_run(quirk=False)))[:4] == [
        ("DT-O3", None, "x_partial_events = 0 (whole-event reads)", "x_partial_events = 2"),
        ("DT-O3", None, f"bytes_read = {EV} × 4 (Σ dc_readevt)", f"bytes_read = {2 * HALF3}"),
        ("DT-O3", None, "events = Σ dc_readevt = 4", "events = 3"),
        ("DT-O3", 0, "events = x_committed = 4", "events = 3"),
    ]


@pytest.mark.parametrize(
    ("quirks", "read_size", "whole"),
    [(D2, HALF3, False), (D2, 2 * EV, True), (0, HALF3, True), (D1, HALF3, True)],
)
def test_reads_whole_events(quirks: int, read_size: int, whole: bool) -> None:
    spec = AgentSpec(flavour="dt", pmu_produce=False, drain="manual", quirks=quirks)
    assert reads_whole_events(replace(BASE, spec=spec, read_size=read_size)) is whole


def pmu_run(*, seen: int = 20, irqs: int | None = None) -> DtRun:
    """Profile ticks (pmu_produce on), 1 CPU: 20 overflows, 3 periods skipped, 1 pending.

    The PMU counted 24 full periods (its final count, 24.5 periods' worth): 20 came
    as overflows (the kernel counted 20 interrupts), 3 never did before a later one
    (each overflow handed them to the producer as skipped ticks), 1 was pending at
    STOP. E = 20 (one get per overflow), committed 15, dropevt 5; skiptick = 1 forced
    + 3 = 4 = 1 + 24 - 20 - 1 (DT-L5).
    """
    cpu0 = {"x_calls": 20, "x_committed": 15, "dc_dropevt": 5, "dc_skiptick": 4, "x_seq": 15}
    before = {0: percpu(**cpu0, x_inring=15)}
    after = {0: percpu(**cpu0, dc_readevt=15)}
    kernel = irqs if irqs is not None else seen
    return DtRun(
        spec=AgentSpec(flavour="dt", drain="manual"),
        before_read=DtOpenStats(gstats(0, 5, 4, 0), before, opens(15, 3)),
        after_read=DtOpenStats(gstats(15, 5, 4, 0), after, opens(0, 5)),
        events=events(0, 15),
        bytes_read=EV * 15,
        read_size=EV * 8,
        online_cpus=(0,),
        core={
            0: core(
                x_nmi_total=seen,
                x_nmi_ctx_ok=seen,
                x_periods_undelivered=4,
                x_periods_pending_at_stop=1,
                x_counter_value=24_500_000,
                x_events_created=1,
                x_producer_calls=20,
                x_producer_calls_nmi=seen,
            )
        },
        nmi_expected=True,
        skips={0: 1},
        kernel=KernelEvidence("arm-pmu", {0: 100}, {0: 100 + kernel}, {0: 100 + kernel}),
    )


def test_a_pmu_run_that_keeps_dt_l5_passes() -> None:
    assert check_dt(pmu_run()) == []


L5 = "1 forced + 24 periods - {irqs} irqs - 1 pending = {want}"


@pytest.mark.parametrize(("irqs", "want"), [(19, 5), (21, 3)])
def test_dt_l5_counts_the_kernels_interrupts(irqs: int, want: int) -> None:
    """An overflow more or fewer than the kernel delivered is a skipped tick too few or many."""
    found = brief(check_dt_skipticks(pmu_run(irqs=irqs)))
    assert found == [("DT-O7", 0, f"dc_skiptick = {L5.format(irqs=irqs, want=want)}",
                      "dc_skiptick = 4")]  # fmt: skip


def test_dt_l5_a_lost_skipped_period() -> None:  # the skiptick_pmu_lost mutant's trace
    found = brief(check_dt_skipticks(before(0, dc_skiptick=1)(pmu_run())))
    assert found == [("DT-O7", 0, f"dc_skiptick = {L5.format(irqs=20, want=4)}", "dc_skiptick = 1")]


def nothing_pending(skiptick: int) -> DtRun:
    """pmu_run with the pending period delivered instead: 21 irqs, none pending at STOP."""
    run = before(0, dc_skiptick=skiptick)(pmu_run(irqs=21))
    return replace(run, core={0: {**run.core[0], "x_periods_pending_at_stop": 0}})


@pytest.mark.parametrize(("skiptick", "holds"), [(3, False), (4, True), (5, True), (6, False)])
def test_dt_l5_the_core_may_run_one_period_ahead_when_none_is_pending(
    skiptick: int, holds: bool
) -> None:
    """1 + 24 - 21 - 0 = 4 skipped, or 5 when the core's tally is a period ahead of the count."""
    found = brief(check_dt_skipticks(nothing_pending(skiptick)))
    want = "dc_skiptick = 1 forced + 24 periods - 21 irqs - 0 pending = 4 (or 5: a period ahead)"
    assert found == ([] if holds else [("DT-O7", 0, want, f"dc_skiptick = {skiptick}")])


def test_dt_l5_needs_the_kernels_count_and_one_event() -> None:
    assert check_dt_skipticks(replace(pmu_run(irqs=19), kernel=None)) == []
    twice = replace(pmu_run(irqs=19), core={0: {**pmu_run().core[0], "x_events_created": 2}})
    assert check_dt_skipticks(twice) == []


def test_a_producer_call_that_skipped_the_open_breaks_the_tie() -> None:
    """The producer_skips_open mutant's trace: the core counted 23 calls, dt got 20."""
    run = replace(pmu_run(), core={0: {**pmu_run().core[0], "x_producer_calls": 23}})
    assert brief(check_dt(run)) == [("DT-O1", 0, "x_calls = 20", "x_producer_calls 23 = 23")]


def test_forced_skips_wrap_at_2_32_with_dt_d9() -> None:
    big = replace(BASE, skips={1: 2**32 + 3})
    assert brief(check_dt_skipticks(big)) == [
        ("DT-O7", 1, "dc_skiptick = 4294967299 (forced skips)", "dc_skiptick = 3")
    ]
    quirk = replace(big, spec=replace(BASE.spec, quirks=D9))
    assert check_dt_skipticks(quirk) == []


def two_readers(order: tuple[DtEvent, ...]) -> DtRun:
    """BASE drained by two readers racing each other: their streams come one after the other."""
    return replace(BASE, events=order, concurrent_readers=2)


def test_two_readers_need_not_read_in_seq_order() -> None:
    evens, odds = BASE.events[::2], BASE.events[1::2]  # each reader's own order still rises
    run = two_readers(evens + odds)
    assert "DT-O10" in applicable_dt_oracles(run)
    assert check_dt(run) == []
    assert brief(check_dt(replace(run, concurrent_readers=0)))[0][0] == "DT-O3"  # one reader


def test_two_readers_that_copied_one_slot_twice() -> None:  # no_reader_mutex's trace
    run = two_readers((*BASE.events[:19], event(0, 3)))  # CPU 1's seq 5 lost, CPU 0's 3 twice
    assert brief(check_dt(run)) == [
        ("DT-O3", 0, "events = x_committed = 15", "events = 16"),
        ("DT-O3", 1, "events = x_committed = 5", "events = 4"),
        ("DT-O10", 0, "every seq read once", "1 seqs read twice or more (3)"),
        ("DT-O10", 1, "every seq read", "1 of 1..5 never read (5)"),
    ]


@pytest.mark.parametrize(("end", "fails"), [("EINTR", False), ("0", True), ("EIO", True)])
def test_a_background_reader_must_end_at_its_limit(end: str, fails: bool) -> None:
    run = replace(BASE, reader_during_recording=True, background_errno=end)
    assert "DT-O8" in applicable_dt_oracles(run)
    assert [v.oracle for v in check_dt_reader(run)] == (["DT-O8"] if fails else [])


def test_missing_statistics_read_as_zero() -> None:
    empty = DtOpenStats(gstats={}, percpu={0: {}}, open={})
    run = replace(pmu_run(), before_read=empty, after_read=empty, events=(), bytes_read=0)
    assert brief(check_dt_gstats(run)) == []
    assert check_dt_drain(run) == []


def test_violation_reads_as_a_sentence() -> None:
    (violation,) = check_dt(after_open(x_evtcnt=1)(BASE))
    assert str(violation) == (
        "DT-O3 on all CPUs: expected x_evtcnt = 0, observed x_evtcnt = 1 (after reading everything)"
    )
