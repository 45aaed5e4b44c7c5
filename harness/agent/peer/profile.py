r"""PROFILE: the agent's leaf profile against Linux perf's over the same run.

Both profiles are folded by one symboliser (`harness.agent.peer.symbols`) from the
samples `harness.agent.peer.pairing` picks; this module tests them and shows them::

    verdict = compare(pair.agent.leaves(), pair.perf.leaves())   # chi-square homogeneity
    verdict.passed, verdict.statistic, verdict.critical
    print(top_symbols(pair))

**The test.** Chi-square homogeneity of a 2 × k table: the agent's and perf's leaf
symbols, k categories being every symbol whose smaller side expects at least
`MIN_EXPECTED` samples (at most `TOP`), the rest pooled as ``other``. With both
profiles independent multinomial draws from one distribution, the statistic is
chi-square with k - 1 degrees of freedom and the test rejects a right profile with
probability `ALPHA` (1 in 1000): that is its false-alarm rate. Here the two are
not independent but positively correlated: both counters count the same event
(QEMU's virtual clock) on the same CPU, and one PMU interrupt usually handles both
(`harness.agent.peer.counts`'s model), so both record the same interrupted PC; only
split pairs and the window edges draw apart. Positive correlation shrinks the
difference of the two histograms, so the false-alarm rate is at most `ALPHA`.
TCG's folding (periods the emulator never raised in time) thins both alike, for
the same reason: it is one interrupt for both. The period must be the same too:
TCG notices an overflow at the guest's own events (exceptions, its 4 ms tick), so
where a sample lands depends on how the period aliases with them. An agent whose
counter runs 1/8 slow (mutant ``stretched_period``) was apart from perf in one kprof
run of two on 2 vCPUs (chi2 43.7 against 22.5; [user] 80.3 % against 74.1 %). A
wrong profile (a third of the agent's samples moved to one kernel address: mutant
``fixed_pc_3rd``) shifts a third of the mass and gives a statistic in the hundreds
or thousands for one or a few thousand samples.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.agent.peer.counts import PeerEvidence, peer_range
from harness.agent.peer.pairing import ProfilePair
from harness.agent.peer.symbols import OTHER, Profile
from harness.agent.values.results import Judged
from harness.agent.values.stats import chi2_quantile

#: The false-alarm rate of `compare` for independent draws of one distribution.
ALPHA = 1e-3
MIN_EXPECTED = 5  # the chi-square approximation's usual floor per cell
TOP = 20  # at most this many symbols are tested one by one; the rest are "other"
#: PROFILE judges a run on at least this many samples a side (`unjudgeable`). The
#: least wrong profile it must see is a wrong PC in a third of the agent's samples
#: (mutant fixed_pc_3rd). A wrong PC in a fraction f of n samples a side adds about
#: n·f (the wrong symbol's cell) + n·f²/(2 - f) (every other cell short by f) to the
#: statistic: 0.36 n for a third, 107 at 300, over twice the largest critical value
#: (45.3 at df 20).
MIN_COMPARED = 300


def unjudgeable(pair: ProfilePair) -> str:
    """Why PROFILE cannot judge ``pair`` ('' when it can): fewer than `MIN_COMPARED` a side."""
    agent, perf = pair.agent.total, pair.perf.total
    if min(agent, perf) >= MIN_COMPARED:
        return ""
    return (f"too few samples to judge (agent {agent}, perf {perf}; "
            f"PROFILE needs {MIN_COMPARED} a side)")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Homogeneity:
    """A chi-square homogeneity test of two leaf profiles."""

    statistic: float
    df: int
    critical: float  # the statistic's bound at `alpha`
    alpha: float
    categories: tuple[tuple[str, int, int], ...]  # (symbol, agent, perf); "other" last

    @property
    def passed(self) -> bool:
        """Whether the profiles are alike at the test's false-alarm rate."""
        return self.statistic <= self.critical


def compare(agent: Mapping[str, int], perf: Mapping[str, int]) -> Homogeneity:
    """Chi-square homogeneity of two leaf profiles (the module docstring states the model).

    :raise ValueError: either profile is empty (nothing to compare).
    """
    total_a, total_b = sum(agent.values()), sum(perf.values())
    if total_a <= 0 or total_b <= 0:
        raise ValueError(f"an empty profile: agent {total_a}, perf {total_b} samples")
    categories = _categories(agent, perf, min(total_a, total_b) / (total_a + total_b))
    statistic = 0.0
    for _, a, b in categories:
        pooled = a + b
        for seen, side in ((a, total_a), (b, total_b)):
            expected = side * pooled / (total_a + total_b)
            statistic += (seen - expected) ** 2 / expected
    df = len(categories) - 1
    critical = chi2_quantile(1 - ALPHA, df) if df > 0 else 0.0
    return Homogeneity(statistic, df, critical, ALPHA, tuple(categories))


def _categories(
    agent: Mapping[str, int], perf: Mapping[str, int], smaller_share: float
) -> list[tuple[str, int, int]]:
    """Symbols tested alone (enough expected on the smaller side), the rest as ``other``."""
    pooled = Counter(agent) + Counter(perf)
    ranked = sorted(pooled, key=lambda name: (-pooled[name], name))
    kept = [n for n in ranked if pooled[n] * smaller_share >= MIN_EXPECTED][:TOP]
    rest = [n for n in ranked if n not in kept]
    found = [(n, agent.get(n, 0), perf.get(n, 0)) for n in kept]
    other = (OTHER, sum(agent.get(n, 0) for n in rest), sum(perf.get(n, 0) for n in rest))
    if other[1] + other[2] == 0:
        return found
    if (other[1] + other[2]) * smaller_share >= MIN_EXPECTED or not found:
        return [*found, other]
    name, a, b = found[-1]  # too few to stand alone: pooled with the smallest kept
    return [*found[:-1], (f"{name}+{OTHER}", a + other[1], b + other[2])]


def top_symbols(pair: ProfilePair, rows: int = 10) -> str:
    """The agent's and perf's top leaf symbols side by side, with their shares."""
    sides = [_ranked(pair.agent), _ranked(pair.perf)]
    width = max([len(name) for side in sides for name, _ in side[:rows]] + [12])
    head = f"{'#':>3}  {'agent':<{width}} {'share':>6}   {'perf':<{width}} {'share':>6}"
    lines = [f"top symbols (leaf): agent {pair.agent.total} samples, perf {pair.perf.total}", head]
    for i in range(min(rows, max(len(sides[0]), len(sides[1])))):
        cells = [_cell(side, i, width) for side in sides]
        lines.append(f"{i + 1:>3}  {cells[0]}   {cells[1]}")
    return "\n".join(lines)


def _ranked(profile: Profile) -> list[tuple[str, float]]:
    total = profile.total or 1
    leaves = profile.leaves()
    return [(n, c / total) for n, c in sorted(leaves.items(), key=lambda kv: (-kv[1], kv[0]))]


def _cell(side: Sequence[tuple[str, float]], i: int, width: int) -> str:
    if i >= len(side):
        return f"{'':<{width}} {'':>6}"
    name, share = side[i]
    return f"{name:<{width}} {100 * share:5.1f}%"


def profile_report(peer: PeerEvidence | None) -> str:
    """The PEER range of each CPU, the top symbols and PROFILE's statistic ('' without a peer)."""
    if peer is None:
        return ""
    ranges = ((c.cpu, c.samples, peer_range(c, peer.counts, peer.window.bound))
              for c in peer.counts.cpus)  # fmt: skip
    line = "PEER: perf's samples per CPU in the window (the agent's overflows must lie in): "
    line += ", ".join(f"{cpu}: {n} ({r.low}..{r.high})" for cpu, n, r in ranges)
    if recorded := dict(peer.counts.totals).get("SAMPLE"):  # perf's whole record, for sizing
        line += f"; of {recorded} samples recorded"
    if peer.profiles is None:
        return f"{line}\n"
    pair = peer.profiles
    return f"{line}\n{top_symbols(pair)}\n{_test_line(pair)}\n"


def profile_summary(peer: PeerEvidence | None) -> dict[str, str]:
    """Both profiles as folded text and PROFILE's line, for a matrix cell ({} without a peer)."""
    if peer is None or peer.profiles is None:
        return {}
    pair = peer.profiles
    return {"agent": pair.agent.folded(), "perf": pair.perf.folded(),
            "test": _test_line(pair)}  # fmt: skip


def _test_line(pair: ProfilePair) -> str:
    agent, perf = pair.agent, pair.perf
    left_out = f"; {text}" if (text := pair.excluded_text()) else ""
    if not agent.total or not perf.total:
        return (f"PROFILE: nothing to compare (agent {agent.total}, perf {perf.total} samples)"
                f"{left_out}")  # fmt: skip
    test = compare(agent.leaves(), perf.leaves())
    verdict = "alike" if test.passed else "APART"
    if why := unjudgeable(pair):
        verdict = f"not judged, {why}"
    return (f"PROFILE: chi2 {test.statistic:.1f} vs {test.critical:.1f} at alpha {test.alpha:g} "
            f"(df {test.df}, {len(test.categories)} symbols): {verdict}{left_out}")  # fmt: skip


def profile_judged(profile: ProfilePair) -> Judged:
    """How many samples a side PROFILE compared, or why it compared none."""
    n_agent, n_perf = profile.agent.total, profile.perf.total
    what = "paired samples" if profile.pairing is not None else "samples a side (perf's count)"
    if not n_perf:
        why = "perf sampled nothing in the window"
        if profile.pairing is not None and profile.pairing[2]:
            why = f"no agent sample paired with one of perf's {profile.pairing[2]}"
        return Judged("PROFILE", 0, what, why=f"{why}{_left_out(profile)}")
    if not n_agent:  # a violation of its own: perf sampled, the agent did not
        return Judged("PROFILE", n_perf, what)
    if reason := unjudgeable(profile):
        return Judged("PROFILE", 0, what, why=f"{reason}{_left_out(profile)}")
    return Judged("PROFILE", min(n_agent, n_perf), what)


def _left_out(profile: ProfilePair) -> str:
    text = profile.excluded_text()
    return f"; {text}" if text else ""
