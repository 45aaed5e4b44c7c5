"""How long a peer run lasts: as long as PROFILE and PEER need for their stated power.

A peer run (`harness.agent.peer.run`) records in rounds. The first round's workload
lasts what the model below gives for the CPUs and period; a round that passed every
check but left PROFILE or PEER short of its need is followed by a longer one, and
the last round is the run::

    size = PeerSize.of(cpus=8, period=1_000_000, usual_ms=1000)
    size.first_ms                      # 500: 600 compared at 1/4 of 8 periods a ms, ≥ MIN_MS
    why = shortfall(run.peer)          # '' or what the round lacked
    size.next_ms(300, run.peer)        # a longer round, at most `CAP_ROUNDS` × usual

**PROFILE's need.** `harness.agent.peer.profile.MIN_COMPARED` (300 a side) is
derived from the least wrong profile it must see (mutant ``fixed_pc_3rd``: a wrong
PC in a third of the samples adds 0.36 n to the statistic, 107 at 300, over twice
the largest critical value). Its margin: `NEED` = `MARGIN` × 300 = 600 compared a
side, so that a round sized from the quiet-host rate still judges when the host
slows it down by half (the compared share moved between 0.29 and 0.53 of the
periods on 8 vCPUs at load average 6-8: dt's pairs, hwpmc's pairs).

**The first round's model.** Compared samples ≈ CPUs × periods per second × `RATE`
× the workload's seconds; `RATE` = 1/4, the low end of those shares (dt's paired
profile: 2545 of 8 × 1100 periods). The first round lasts NEED at that rate, at
least `MIN_MS` and at most the flavour's usual length (its run before this
sizing), so on 1 or 2 vCPUs the run is what it was. On 8 vCPUs at 1 ms the model
asks 300 ms; the floor makes it 500 instead of 1000-1500. The floor is the content
oracles', judged in the same run on the ground-truth workloads: at 300 ms on 8
busy vCPUs (load average 12) dt's peer run had chain 36 and mix 53 user samples,
but its zero workload, sharing a CPU with chain, read /dev/zero once in its phase
and left WHERE's kernel half without a sample (at 1000 ms: 23 reads). dt's own
peer run is not sized (its hooks give no ``sized``): at 500 ms its WHO lanes half
compared nothing in one of two tier runs.

**PEER's need.** PEER's stated power is to see a period 1/8 too long (mutant
``stretched_period``, `harness.agent.peer.counts.stretch_margin`). With n samples
on a CPU of which a share f were fold interrupts, the margin is about
n (1 - f)/9 - 1.05 f n - 3: it grows with n only while f < 1/10.45, and otherwise
no length shows a stretch (8 busy vCPUs on 2 host cores fold most periods). A round
whose margin is ≤ 0 on every CPU although some CPU's fold share is below that is
short of PEER's need: more samples would show the stretch.

**Why the stopping rule cannot bias a verdict.** A round is replaced only when
every check of it passed (`harness.agent.peer.run.run_beside_perf` returns a round
with a violation as the run, so a failure is never hidden by a later round), and
whether it is short is read from counts, not values: how many samples PROFILE
compared (not which symbols) and perf's own samples and folds per CPU (not the
agent's count PEER compares them with). Each round is judged whole on its own
samples, its length fixed before it starts. A right agent's PROFILE may thus be
tested twice (a first round with 300-599 compared, then a second): its false-alarm
rate is at most 2 × `ALPHA`, 1 in 500. Nothing here reads wall time: a busy host
only makes a second round more likely.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.agent.peer.counts import PeerEvidence, peer_range, stretch_margin
from harness.agent.peer.profile import MIN_COMPARED

#: PROFILE's need with its margin: twice `MIN_COMPARED` (the module docstring says why).
MARGIN = 2
NEED = MARGIN * MIN_COMPARED
#: Compared samples per period per CPU the first round expects (the module docstring).
RATE = 0.25
#: The shortest first round: the ground-truth phases judged beside PEER and PROFILE.
MIN_MS = 500
#: A later round lasts at most this many times the flavour's usual length.
CAP_ROUNDS = 4
#: PEER's stretch margin grows with a CPU's samples only below this fold share.
STRETCH_FOLD_SHARE = 1 / 10.45


@dataclass(frozen=True, slots=True)
class PeerSize:
    """The rounds of one peer run: the first round's length and the cap (ms of workload)."""

    first_ms: int
    cap_ms: int

    @classmethod
    def of(cls, *, cpus: int, period: int, usual_ms: int) -> PeerSize:
        """The model's first round for ``cpus`` CPUs sampling every ``period`` events.

        ``usual_ms``: the flavour's run length before sizing (the first round's upper
        bound). Events are the 1 GHz virtual clock's, so a period lasts ``period`` ns.
        """
        per_ms = cpus * 1_000_000 / period * RATE
        wanted = math.ceil(NEED / per_ms) if per_ms > 0 else usual_ms
        return cls(first_ms=max(MIN_MS, min(usual_ms, wanted)), cap_ms=CAP_ROUNDS * usual_ms)

    def next_ms(self, ms: int, peer: PeerEvidence | None) -> int:
        """The next round's length after a round of ``ms`` that fell short (0: no more rounds).

        PROFILE short: scaled by NEED over what it compared; PEER short: doubled. A
        profile that compared nothing gives nothing to scale: more of a run in which
        no sample paired (an agent whose times are off) still pairs none.
        """
        compared = _compared(peer)
        if ms >= self.cap_ms or (peer is not None and peer.profiles is not None and not compared):
            return 0
        scaled = math.ceil(ms * NEED / compared) if compared else self.cap_ms
        return min(self.cap_ms, max(2 * ms, scaled))


def shortfall(peer: PeerEvidence | None) -> str:
    """What a round lacked for PROFILE's and PEER's stated power ('' when nothing).

    Read from counts only (the module docstring): how many samples PROFILE compared,
    and perf's samples and fold interrupts per CPU.
    """
    if peer is None:
        return ""
    lacks = []
    if peer.profiles is not None and (compared := _compared(peer)) < NEED:
        lacks.append(f"PROFILE compared {compared} a side, needs {NEED} ({MARGIN} x "
                     f"{MIN_COMPARED})")  # fmt: skip
    if _stretch_short(peer):
        lacks.append("PEER cannot yet tell a period 1/8 too long, and more samples would")
    return "; ".join(lacks)


def _compared(peer: PeerEvidence | None) -> int:
    if peer is None or peer.profiles is None:
        return 0
    return min(peer.profiles.agent.total, peer.profiles.perf.total)


def _stretch_short(peer: PeerEvidence) -> bool:
    """PEER's stretch margin is ≤ 0, and some CPU folds few enough that more samples help."""
    counts = peer.counts
    if not counts.cpus or stretch_margin(counts, peer.window.bound) > 0:
        return False
    for cpu in counts.cpus:
        folds = peer_range(cpu, counts, peer.window.bound).folds
        if cpu.samples and folds / cpu.samples < STRETCH_FOLD_SHARE:
            return True
    return False
