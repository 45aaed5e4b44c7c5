from __future__ import annotations

import re
from dataclasses import fields, replace

import pytest

from harness.agent.flavours.tprof.data import MAX_BUFFER_SAMPLES, S_CAP, samples_per_buffer
from harness.agent.flavours.tprof.data import TPROF as TPROF_INFO
from harness.agent.module.spec import (
    MAX_PERIOD,
    MIN_PERIOD,
    AgentSpec,
    event_available,
)
from harness.errors import ConfigError

TPROF = TPROF_INFO
D1_D2 = TPROF.quirk_bit("TP-D1") | TPROF.quirk_bit("TP-D2")
#: Every field away from its default (and every value possible).
ODD = AgentSpec(
    flavour="tprof",
    event="cpu-clock",
    period=250_000,
    drain="manual",
    drain_ms=50,
    quirks=D1_D2,
    pmu_produce=False,
    params=(("buffer_samples", 8), ("est_freq", 123), ("list_limit", 2)),
)

# --- validate: every impossible value names its field and the value ------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"event": "branches"}, "event='branches' is not one of cycles, instructions, cpu-clock"),
        ({"event": "Cycles"}, "event='Cycles'"),
        ({"drain": "sometimes"}, "drain='sometimes' is not one of manual, auto"),
        ({"period": 0}, f"period=0 is outside {MIN_PERIOD}..{MAX_PERIOD}"),
        ({"period": MIN_PERIOD - 1}, f"period={MIN_PERIOD - 1} is outside"),
        ({"period": MAX_PERIOD + 1}, f"period={MAX_PERIOD + 1} is outside"),
        ({"period": -MIN_PERIOD}, f"period={-MIN_PERIOD} is outside"),
        ({"drain_ms": 0}, "drain_ms=0 is outside 10..60000"),
        ({"drain_ms": 9}, "drain_ms=9 is outside"),
        ({"drain_ms": 60_001}, "drain_ms=60001 is outside"),
        ({"params": (("est_freq", -1),)}, "est_freq=-1 is outside 0..10000000"),
        ({"params": (("est_freq", 10_000_001),)}, "est_freq=10000001 is outside"),
        (
            {"params": (("buffer_samples", MAX_BUFFER_SAMPLES + 1),)},
            f"buffer_samples={MAX_BUFFER_SAMPLES + 1} is outside 0..{MAX_BUFFER_SAMPLES}",
        ),
        ({"params": (("buffer_samples", -8),)}, "buffer_samples=-8 is outside"),
        ({"params": (("list_limit", 0),)}, "list_limit=0 is outside 1..100000"),
        ({"params": (("list_limit", 100_001),)}, "list_limit=100001 is outside"),
        ({"quirks": 1 << 8}, "quirks=0x100 sets bits 0x100 that flavour tprof does not have"),
        ({"quirks": D1_D2 | 1 << 5}, "quirks=0x23 sets bits 0x20 that flavour tprof"),
        ({"quirks": -1}, "quirks=-1 is negative"),
        ({"quirks": -(1 << 40)}, f"quirks={-(1 << 40)} is negative"),
    ],
)
def test_validate_rejects(changes: dict[str, object], message: str) -> None:
    spec = replace(AgentSpec(), **changes)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=re.escape(message)):
        spec.validate()


def test_unknown_flavour_lists_the_known_ones() -> None:
    with pytest.raises(
        ConfigError, match=re.escape("unknown agent flavour 'perf'; known: dt, hwpmc, kprof, tprof")
    ):
        AgentSpec(flavour="perf").validate()


def test_quirk_error_shows_the_flavours_bits() -> None:
    with pytest.raises(ConfigError, match=re.escape(f"(its bits: {TPROF.quirk_mask:#x})")):
        AgentSpec(quirks=1 << 8).validate()


@pytest.mark.parametrize(
    "spec",
    [
        AgentSpec(),
        ODD,
        AgentSpec(period=MIN_PERIOD, drain_ms=10).with_params(est_freq=0, list_limit=1),
        AgentSpec(period=MAX_PERIOD, drain_ms=60_000).with_params(list_limit=100_000),
        AgentSpec().with_params(buffer_samples=1),
        AgentSpec().with_params(buffer_samples=MAX_BUFFER_SAMPLES),
        AgentSpec(event="instructions", quirks=TPROF.quirk_mask),
    ],
    ids=["default", "odd", "low-limits", "high-limits", "s1", "s-max", "all-quirks"],
)
def test_validate_accepts_and_returns_the_spec(spec: AgentSpec) -> None:
    assert spec.validate() is spec


def test_each_known_quirk_is_accepted_alone() -> None:
    for quirk in TPROF.quirks:
        assert AgentSpec(quirks=TPROF.quirk_bit(quirk.defect)).validate().quirks == 1 << quirk.bit


# --- samples_per_buffer: S = min(2 est_freq, 10000) unless overridden ------------------------


@pytest.mark.parametrize(
    ("est_freq", "buffer_samples", "expected"),
    [
        (5000, 0, S_CAP),
        (3000, 0, 6000),
        (4999, 0, 9998),
        (5001, 0, S_CAP),
        (10_000_000, 0, S_CAP),
        (1, 0, 2),
        (0, 0, 0),  # the seed's TP-D2: nothing fits
        (0, 8, 8),
        (5000, 8, 8),
        (5000, 20_000, 20_000),  # the override is not capped at 10000
    ],
)
def test_samples_per_buffer(est_freq: int, buffer_samples: int, expected: int) -> None:
    assert samples_per_buffer(est_freq, buffer_samples) == expected
    assert S_CAP == 10_000  # the seed's cap


# --- module_params ------------------------------------------------------------------------


def spec_from_params(params: tuple[str, ...]) -> AgentSpec:
    """Read ``module_params()`` back the way the module does: name=value, ints, 0/1 bools."""
    types = {f.name: f.type for f in fields(AgentSpec)}
    values: dict[str, object] = {}
    own: dict[str, int] = {}
    for param in params:
        name, sep, text = param.partition("=")
        assert sep, f"{param!r} is not name=value"
        if name in {p.name for p in TPROF.params}:
            assert name not in own, f"{name} given twice"
            own[name] = int(text)
            continue
        field = name
        assert field in types, f"{name} is no spec field"
        assert field not in values, f"{name} given twice"
        if types[field] == "bool":
            assert text in {"0", "1"}, param
            values[field] = text == "1"
        elif types[field] == "int":
            values[field] = int(text)
        else:
            values[field] = text
    return AgentSpec(**values, params=tuple(sorted(own.items())))  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", [AgentSpec(), ODD], ids=["default", "odd"])
def test_module_params_round_trip_every_field(spec: AgentSpec) -> None:
    # `params` is one field for one insmod word per flavour parameter (tprof has three)
    params = spec.module_params()
    expected = len(fields(AgentSpec)) - 1 + len(TPROF.params)
    back = spec_from_params(params)
    assert (len(params), back.flavour_params()) == (expected, spec.flavour_params())
    assert replace(back, params=()) == replace(spec, params=())


def test_module_params_are_single_insmod_words() -> None:
    assert [p for p in ODD.module_params() if " " in p or p.count("=") != 1] == []


def test_odd_differs_from_the_default_in_every_field() -> None:
    same = [
        f.name for f in fields(AgentSpec) if getattr(ODD, f.name) == getattr(AgentSpec(), f.name)
    ]
    assert same == ["flavour"]  # tprof is the default flavour


# --- event_available ----------------------------------------------------------------------

ARM64_TCG_EVENTS = frozenset({"cpu_cycles", "sw_incr", "l1d_cache"})  # no inst_retired


@pytest.mark.parametrize(
    ("pmu_events", "has_pmu"),
    [(frozenset(), False), (ARM64_TCG_EVENTS, True), (frozenset(), True)],
)
def test_cpu_clock_runs_anywhere(pmu_events: frozenset[str], has_pmu: bool) -> None:
    assert event_available("cpu-clock", pmu_events, has_pmu) is None


@pytest.mark.parametrize("event", ["cycles", "instructions"])
def test_hardware_events_need_a_pmu(event: str) -> None:
    why = event_available(event, frozenset({"cpu_cycles", "inst_retired"}), has_pmu=False)
    assert why is not None
    assert (f"{event!r}" in why, "has none" in why, "'cpu-clock'" in why) == (True, True, True)


def test_instructions_without_inst_retired_points_at_icount() -> None:
    why = event_available("instructions", ARM64_TCG_EVENTS, has_pmu=True)
    assert why is not None
    assert ("'inst_retired'" in why, "-icount" in why) == (True, True)


def test_cycles_without_cpu_cycles_names_it() -> None:
    why = event_available("cycles", frozenset({"inst_retired"}), has_pmu=True)
    assert why is not None
    assert "'cpu_cycles'" in why


@pytest.mark.parametrize("event", ["cycles", "instructions"])
def test_hardware_events_run_on_a_pmu_that_has_them(event: str) -> None:
    pmu_events = ARM64_TCG_EVENTS | {"inst_retired"}
    assert event_available(event, pmu_events, has_pmu=True) is None
