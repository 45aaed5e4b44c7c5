"""PROFILE: symbols, folded stacks, the two-sample test and the top-symbol table."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from harness.agent.peer.pairing import ProfilePair, paired, profile_pair
from harness.agent.peer.profile import ALPHA, compare, top_symbols
from harness.agent.peer.symbols import (
    Symboliser,
    UserSymbols,
    agent_stack,
    fold,
    parse_kallsyms,
    perf_stack,
)
from harness.agent.values.samples import Sample
from harness.agent.values.stats import chi2_quantile, chi2_sf
from harness.vm.perf import PerfFrame, PerfSample

KALLSYMS = """\
ffffffc008009000 T gic_ipi_send_mask
ffffffc008010000 t gic_handle_irq
ffffffc008010000 T _stext
ffffffc00801028c T __irqentry_text_end
ffffffc008011000 D some_data
ffffffc008012000 T cpu_do_idle
0000000000000000 T hidden
ffffffc00a000000 t pa_produce\t[profagent]
"""
SYMBOLS = Symboliser(
    parse_kallsyms(KALLSYMS), UserSymbols("truth", ((0x400100, 0x400140, "leaf"),))
)


def test_kallsyms_names_an_address_by_the_text_symbol_at_or_below_it() -> None:
    kernel = SYMBOLS.kernel
    assert kernel.name(0xFFFFFFC008010004) == "gic_handle_irq"  # preferred over _stext
    assert kernel.name(0xFFFFFFC008011004) == "__irqentry_text_end"  # data is not text
    assert kernel.name(0xFFFFFFC008012010) == "cpu_do_idle"
    assert kernel.name(0xFFFFFFC00A000010) == "pa_produce"
    assert kernel.name(0x10) == "[kernel]"  # below every symbol
    assert "hidden" not in kernel.names  # a zero address names nothing


def test_a_user_pc_is_named_in_the_workload_else_user() -> None:
    assert SYMBOLS.frame(0x400104, user=True) == "leaf"
    assert SYMBOLS.frame(0x400140, user=True) == "[user]"  # the end is outside
    assert Symboliser(SYMBOLS.kernel).frame(0x400104, user=True) == "[user]"


def test_agent_and_perf_stacks_fold_root_first_with_the_same_names() -> None:
    agent = Sample(0, 0xFFFFFFC008012010, 0, None, user=False, chain=(0xFFFFFFC008010008,))
    perf = PerfSample(0, 1, (PerfFrame(0xFFFFFFC008012010, "cpu_do_idle", "[kernel.kallsyms]"),
                             PerfFrame(0xFFFFFFC008010008, "x", "[kernel.kallsyms]")))  # fmt: skip
    assert (
        agent_stack(agent, SYMBOLS)
        == perf_stack(perf, SYMBOLS)
        == (
            "gic_handle_irq",
            "cpu_do_idle",
        )
    )
    user = PerfSample(0, 1, (PerfFrame(0x104, "leaf+0x4", "/bin/truth"),
                             PerfFrame(0x9, "[unknown]", "/bin/truth"),
                             PerfFrame(0x5, "main", "/bin/busybox")))  # fmt: skip
    assert perf_stack(user, SYMBOLS) == ("[user]", "leaf")  # a run of [user] is one frame


def test_callers_are_named_at_their_return_address_minus_one() -> None:
    # gic_handle_irq's call never returns: its return address is __irqentry_text_end's start
    ret = 0xFFFFFFC00801028C
    agent = Sample(0, 0xFFFFFFC008012000, 0, None, user=False, chain=(ret,))
    kernel = "[kernel.kallsyms]"
    perf = PerfSample(0, 1, (PerfFrame(0xFFFFFFC008012000, "cpu_do_idle", kernel),
                             PerfFrame(ret, "__irqentry_text_end", kernel)))  # fmt: skip
    want = ("gic_handle_irq", "cpu_do_idle")  # the PC itself at the PC: cpu_do_idle's start
    assert agent_stack(agent, SYMBOLS) == perf_stack(perf, SYMBOLS) == want
    # a user caller whose return address is the next function's start: perf names the next
    ranges = ((0x400100, 0x400140, "leaf"), (0x400140, 0x400180, "next"))
    user = Symboliser(SYMBOLS.kernel, UserSymbols("truth", ranges))
    perf_user = PerfSample(0, 1, (PerfFrame(0x400144, "next", "/bin/truth"),
                                  PerfFrame(0x400140, "next", "/bin/truth")))  # fmt: skip
    assert perf_stack(perf_user, user) == ("leaf", "next")
    assert agent_stack(Sample(0, 0x400144, 0, None, True, (0x400140,)), user) == ("leaf", "next")


def test_folded_text_is_one_line_per_stack_most_frequent_first() -> None:
    profile = fold([("a", "b"), ("a", "c"), ("a", "b"), ("d",)])
    assert profile.folded() == "a;b 2\na;c 1\nd 1\n"
    assert profile.leaves() == {"b": 2, "c": 1, "d": 1}
    assert profile.total == 4


@pytest.mark.parametrize(
    ("x", "df", "p"),
    [(3.841459, 1, 0.05), (29.588298, 10, 0.001), (10.827566, 1, 0.001), (0.0, 3, 1.0)],
)
def test_chi2_tail_matches_the_tables(x: float, df: int, p: float) -> None:
    assert chi2_sf(x, df) == pytest.approx(p, rel=1e-5)


def test_chi2_quantile_inverts_the_tail() -> None:
    assert chi2_quantile(1 - ALPHA, 4) == pytest.approx(18.46683, rel=1e-5)


def _draw(rng: random.Random, weights: dict[str, float], n: int) -> dict[str, int]:
    names = list(weights)
    found: dict[str, int] = {}
    for name in rng.choices(names, [weights[k] for k in names], k=n):
        found[name] = found.get(name, 0) + 1
    return found


WEIGHTS = {"spin": 0.6, "cpu_do_idle": 0.25, "gic_handle_irq": 0.1, "rare": 0.04, "rarer": 0.01}


def test_independent_draws_of_one_profile_are_alike_about_as_often_as_alpha_says() -> None:
    rng = random.Random(24)
    rejected = sum(
        not compare(_draw(rng, WEIGHTS, 3000), _draw(rng, WEIGHTS, 2500)).passed for _ in range(400)
    )
    assert rejected <= 3  # 400 x 1e-3 = 0.4 expected


def test_a_third_of_the_samples_at_one_address_is_apart() -> None:
    rng = random.Random(7)
    perf = _draw(rng, WEIGHTS, 3000)
    agent = _draw(rng, WEIGHTS, 2000)
    agent["pa_produce"] = 1000  # mutant fixed_pc_3rd: every 3rd sample's PC
    test = compare(agent, perf)
    assert not test.passed
    assert test.statistic > 20 * test.critical
    assert ("pa_produce", 1000, 0) in test.categories


def test_rare_symbols_are_pooled_so_every_category_expects_enough() -> None:
    test = compare({"a": 500, "b": 500, "x": 2, "y": 1}, {"a": 480, "b": 520, "z": 3})
    names = [name for name, _, _ in test.categories]
    assert names == ["b", "a+other"]  # 6 others expect 3 a side: pooled with the smallest
    assert sum(a for _, a, _ in test.categories) == 1003
    assert test.df == len(test.categories) - 1


def test_an_empty_profile_cannot_be_compared() -> None:
    with pytest.raises(ValueError, match="empty profile"):
        compare({}, {"a": 1})


def test_top_symbols_sit_side_by_side() -> None:
    pair = ProfilePair(fold([("a",)] * 3 + [("b",)]), fold([("b",)] * 2 + [("c",)] * 2))
    lines = top_symbols(pair, rows=5).splitlines()
    assert lines[0] == "top symbols (leaf): agent 4 samples, perf 4"
    assert lines[2].split() == ["1", "a", "75.0%", "b", "50.0%"]
    assert lines[3].split() == ["2", "b", "25.0%", "c", "50.0%"]
    assert len(lines) == 4


def test_a_workload_frame_perf_could_not_name_is_named_from_its_mapping() -> None:
    mapped = Symboliser(SYMBOLS.kernel, UserSymbols("truth", ((0x400100, 0x400140, "leaf"),),
                                                    base=0x400000))  # fmt: skip
    frame = PerfFrame(0x104, "[unknown]", "/root/truth")  # perf: relative to the mapping
    assert perf_stack(PerfSample(0, 1, (frame,)), mapped) == ("leaf",)


def test_a_cpu_where_the_agent_dropped_samples_is_left_out_of_both_profiles() -> None:
    """The lost samples cluster where the reader starved: that CPU is not compared."""
    symbols = Symboliser(parse_kallsyms(KALLSYMS))
    pc = 0xFFFFFFC008012010
    agent = [Sample(0, pc, 0, None, user=False), Sample(1, pc, 0, None, user=False),
             Sample(1, 0x1000, 0, None, user=True)]  # fmt: skip
    frame = (PerfFrame(pc, "cpu_do_idle", "[kernel.kallsyms]"),)
    perf = [PerfSample(0, 1, frame), PerfSample(1, 2, frame), PerfSample(1, 3, frame)]
    pair = profile_pair(agent, perf, symbols, {0: 0, 1: 7})
    assert pair.excluded == ((1, 7),)
    assert (pair.agent.total, pair.perf.total) == (1, 1)  # CPU 0's only
    assert pair.excluded_text() == "left out, the agent dropped samples there: CPU 1 (7 lost)"
    kept = profile_pair(agent, perf, symbols, {0: 0})
    assert (kept.agent.total, kept.perf.total, kept.excluded_text()) == (3, 3, "")


IDLE = 0xFFFFFFC008012010  # cpu_do_idle
IRQ = 0xFFFFFFC008010010  # gic_handle_irq: where a later interrupt of perf's lands
WAKE = 0xFFFFFFC008009010  # gic_ipi_send_mask: dt's reader wakeup, which perf samples


def test_a_whole_profile_leaves_the_shared_interrupts_exit_out_and_counts_it() -> None:
    """tprof at 1 vCPU: the agent's overflows fall due in perf's longer handler."""
    symbols = Symboliser(parse_kallsyms(KALLSYMS))
    agent = [Sample(0, IDLE, 0, None, user=False)] * 100 + [
        Sample(0, IRQ, 0, None, user=False)
    ] * 30
    perf = [perf_at(0, t, IDLE) for t in range(100)] + [perf_at(0, 100, IRQ)] * 2
    raw = compare(
        {"cpu_do_idle": 100, "gic_handle_irq": 30}, {"cpu_do_idle": 100, "gic_handle_irq": 2}
    )
    assert not raw.passed  # compared as they are, the exit alone tells them apart
    pair = profile_pair(agent, perf, symbols, {})
    assert pair.exits == (30, 2)
    assert compare(pair.agent.leaves(), pair.perf.leaves()).passed
    assert pair.excluded_text() == ("left out in the PMU interrupt's exit (gic_handle_irq): "
                                    "the agent's 30, perf's 2")  # fmt: skip


def perf_at(cpu: int, time_ns: int, pc: int) -> PerfSample:
    return PerfSample(cpu, time_ns, (PerfFrame(pc, "?", "[kernel.kallsyms]"),))


def test_paired_takes_perf_s_sample_of_the_same_interrupt_once_per_cpu() -> None:
    agent = [Sample(0, IDLE, 0, None, user=False, time_ns=1_000_040),
             Sample(0, IDLE, 0, None, user=False, time_ns=5_000_030),
             Sample(1, IDLE, 0, None, user=False, time_ns=1_000_020)]  # fmt: skip
    perf = [perf_at(0, 1_000_000, IDLE),  # 40 µs before the agent's: one interrupt
            perf_at(0, 1_000_010, IDLE),  # a second candidate, farther: left unpaired
            perf_at(0, 5_400_000, IRQ),  # 370 µs after: a later interrupt
            perf_at(1, 1_000_000, IDLE)]  # fmt: skip
    pairs = paired(agent, perf, 100_000)
    assert [(a.cpu, a.time_ns, p.time_ns) for a, p in pairs] == [
        (0, 1_000_040, 1_000_010), (1, 1_000_020, 1_000_000)]  # fmt: skip
    with pytest.raises(ValueError, match="without a time"):
        paired([Sample(0, IDLE, 0, None, user=False)], perf, 100_000)


def test_paired_keeps_the_run_s_handling_order_and_not_a_later_interrupt() -> None:
    """dt at 4 ms: perf's record came after dt's in one interrupt; perf first was a later one."""
    agent = [Sample(0, IDLE, 0, None, user=False, time_ns=t) for t in range(0, 10**8, 4 * 10**6)]
    perf = [perf_at(0, t + 30_000, IDLE) for t in range(0, 10**8, 8 * 10**6)]  # joint: after
    perf += [perf_at(0, t - 50_000, IRQ) for t in range(4 * 10**6, 10**8, 8 * 10**6)]  # before
    pairs = paired(agent, perf, 200_000)
    assert len(pairs) == 13  # perf after the agent's in 13, before in 12: the run's order
    assert {p.time_ns - (a.time_ns or 0) for a, p in pairs} == {30_000}
    mirrored = [perf_at(0, t - 30_000, IDLE) for t in range(0, 10**8, 4 * 10**6)]
    assert [(a.time_ns or 0) - p.time_ns for a, p in paired(agent, mirrored, 200_000)] == [
        30_000
    ] * 25


def test_a_paired_profile_leaves_out_the_peer_s_later_interrupts_and_no_cpu() -> None:
    """dt's case: perf's split-pair samples land in the agent's own wakeup path."""
    symbols = Symboliser(parse_kallsyms(KALLSYMS))
    agent = [
        Sample(0, IDLE, 0, None, user=False, time_ns=t + 30_000) for t in range(0, 10**9, 10**7)
    ]
    perf = [perf_at(0, t, IDLE) for t in range(0, 10**9, 10**7)]
    perf += [perf_at(0, t + 2_000_000, WAKE) for t in range(0, 10**9, 5 * 10**7)]  # aftermath
    whole = profile_pair(agent, perf, symbols, {})
    assert not compare(whole.agent.leaves(), whole.perf.leaves()).passed  # 20 % apart
    pair = profile_pair(agent, perf, symbols, {0: 7}, pair_within_ns=100_000)
    assert (pair.agent.total, pair.perf.total, pair.excluded) == (100, 100, ())
    assert compare(pair.agent.leaves(), pair.perf.leaves()).passed
    assert pair.excluded_text() == (
        "paired samples only: 100 of the agent's 100 and perf's 120 (83% of perf's)"
    )
    # A wrong PC in a third of the agent's samples is still a third of the pairs.
    wrong = [replace(s, pc=WAKE) if i % 3 == 0 else s for i, s in enumerate(agent)]
    moved = profile_pair(wrong, perf, symbols, {}, pair_within_ns=100_000)
    assert not compare(moved.agent.leaves(), moved.perf.leaves()).passed
    # A pair with a side in the PMU interrupt's exit (a split pair's second interrupt,
    # taken on the first one's way out) leaves with its pair, counted.
    exits = [replace(s, pc=IRQ) if i % 3 == 0 else s for i, s in enumerate(agent)]
    out = profile_pair(exits, perf, symbols, {}, pair_within_ns=100_000)
    assert (out.agent.total, out.perf.total, out.exits) == (66, 66, (34, 0))
    assert "left out in the PMU interrupt's exit (gic_handle_irq): the agent's 34, perf's 0" in (
        out.excluded_text())  # fmt: skip
