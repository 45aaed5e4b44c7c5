"""Content oracles on hand-written samples: each law holds on truth and fails on its sabotage."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.agent import content_oracles as co
from harness.agent.elfsyms import Function, FunctionTable
from harness.agent.samples import Sample
from harness.agent.truth import TruthImage, WorkloadRun

BASE = 0x5100_0000
F = {name: Function(name, BASE + 0x100 * i, BASE + 0x100 * i + 0x40,
                    (BASE + 0x100 * i + 8, BASE + 0x100 * i + 0x30))
     for i, name in enumerate(("main", "outer", "middle", "leaf", "hot", "cold"))}  # fmt: skip
IMAGE = TruthImage(FunctionTable(tuple(F.values())), (BASE, BASE + 0x1000), (0x400000, 0x480000))
KBASE = 0xFFFF_8000_0800_0000
MODULE = FunctionTable(tuple(
    Function(name, KBASE + 0x100 * i, KBASE + 0x100 * i + 0x40,
             (KBASE + 0x100 * i + 8, KBASE + 0x100 * i + 0x30))
    for i, name in enumerate(co.PROBE_PATH)))  # fmt: skip
CHAIN = WorkloadRun("chain", 1, 71, 71, calls=3, rounds=0, faults=10)
MIX = WorkloadRun("mix", 0, 72, 72, calls=0, rounds=64, faults=10)
RET = {name: F[name].start + 0x20 for name in F}  # a return address inside each function


def leaf_sample(**changes: object) -> Sample:
    sample = Sample(1, F["leaf"].start + 0x10, 71, 71, True,
                    (RET["middle"], RET["outer"], RET["main"], 0x1234), False)  # fmt: skip
    return replace(sample, **changes)  # type: ignore[arg-type]


def view(samples: list[Sample], depth: int | None = 8) -> co.ContentView:
    probe = Sample(1, MODULE.named("pa_probe_spin").start + 0x10, 0, 0, False,
                   (MODULE.named("pa_probe_middle").start + 0x20,
                    MODULE.named("pa_probe_outer").start + 0x20), False)  # fmt: skip
    if depth is not None and depth < 3:  # the probe's chain as a walk of that depth writes it
        probe = replace(probe, chain=probe.chain[: depth - 1], truncated=True)
    mix = [Sample(0, F["hot"].start + 0x10, 72, 72, True)] * 300 + [
        Sample(0, F["cold"].start + 0x10, 72, 72, True)
    ] * 100
    return co.ContentView((*samples, probe, *mix), (CHAIN, MIX), IMAGE, depth, MODULE)


def oracles(v: co.ContentView) -> set[str]:
    return {violation.oracle for violation in co.check_content(v)}


def test_a_true_profile_passes_every_oracle() -> None:
    v = view([leaf_sample()] * 500)
    assert co.check_content(v) == []
    numbers = co.content_numbers(v)
    assert numbers["content.chain.cpu1.leaf"] == 500
    assert numbers["content.chain.leaf_checked"] == 500
    assert numbers["content.chain.probe_checked"] == 1
    assert numbers["content.mix.cpu0.hot"] == 300


def test_the_handlers_own_pc_fails_mode_and_where() -> None:
    handler = leaf_sample(pc=KBASE + 0x10)
    assert oracles(view([leaf_sample()] * 400 + [handler] * 100)) >= {"MODE", "WHERE"}


def test_a_flipped_flag_fails_mode() -> None:
    assert oracles(view([leaf_sample()] * 499 + [leaf_sample(user=False)])) == {"MODE"}


def test_pid_zero_fails_who() -> None:
    assert "WHO" in oracles(view([leaf_sample()] * 499 + [leaf_sample(pid=0)]))
    assert oracles(view([leaf_sample(tid=None)] * 500)) == set()  # no tid recorded: pid only


def test_samples_away_from_leaf_fail_the_model_bound() -> None:
    elsewhere = leaf_sample(pc=F["outer"].start + 0x10)
    assert oracles(view([leaf_sample()] * 400 + [elsewhere] * 100)) == {"WHERE"}
    # a few are within the model: 2 x (calls + 1 + startup syscalls + faults) EL changes
    assert oracles(view([leaf_sample()] * 480 + [elsewhere] * 20)) == set()


def test_chain_sabotage_is_caught() -> None:
    skipped = leaf_sample(chain=(RET["outer"], RET["main"]))
    assert oracles(view([leaf_sample()] * 499 + [skipped])) == {"CHAIN"}
    cut = leaf_sample(chain=())
    assert oracles(view([leaf_sample()] * 499 + [cut])) == {"CHAIN"}
    # cut to the depth and said so: right
    assert oracles(view([leaf_sample(chain=(RET["middle"],), truncated=True)] * 500, 2)) == set()
    assert oracles(view([leaf_sample(chain=(RET["middle"],))] * 500, 2)) == {"CHAIN"}
    too_long = leaf_sample(chain=(RET["middle"], RET["outer"], RET["main"], 1, 2, 3, 4, 5))
    assert oracles(view([too_long])) == {"CHAIN"}


def test_chain_is_not_applicable_without_chains() -> None:
    v = view([leaf_sample(chain=())] * 500, depth=None)
    assert co.applicable_content(v) == {"MODE", "WHO", "WHERE"}
    assert co.check_content(v) == []
    assert "not applicable" in co.format_content(v)


@pytest.mark.parametrize(("n", "p"), [(1000, 0.001), (200, 0.25), (50, 0.5)])
def test_the_binomial_quantile_bounds_its_tail(n: int, p: float) -> None:
    k = co.binomial_upper(n, p, 1e-6)
    assert n * p < k <= n
    assert co.binomial_upper(n, 0.0, 1e-6) == 0
