"""A peer mutant's case: the peer run, again while a run could not judge the mutant.

A peer mutant (caught by PEER or PROFILE, which compare the agent with Linux perf
beside it) runs the flavour's peer run. A run that could not tell (too few on-time
overflows to see a 1/8 stretch; no CPU's profile compared) neither catches nor clears
it: it is run again, up to `PEER_ATTEMPTS` times, and each such run is a note::

    peer_row(bench, guest, images, behaviour("tprof"), mutants.get("stretched_period"))
"""

from __future__ import annotations

from harness.agent.flavour import Flavour
from harness.agent.mutants import MutantRow
from harness.agent.peer.counts import PeerEvidence, peer_range, stretch_margin
from harness.agent.peer.profile import unjudgeable
from harness.agent.values.info import Mutant
from harness.builder.images import GuestImages
from harness.mutation.cases import Bench, judge_case, mutant_row
from harness.vm.guest import Guest
from harness.vm.perf import PerfCpu

#: Peer runs a mutant gets while a run could not judge it (see `peer_row`).
PEER_ATTEMPTS = 3


def peer_row(bench: Bench, guest: Guest, images: GuestImages, flavour: Flavour,
             mutant: Mutant) -> MutantRow:  # fmt: skip
    """The peer case, run again (up to `PEER_ATTEMPTS`) while a run could not tell.

    A run that could not judge the mutant neither catches nor clears it; each such
    run is named in the row's notes with its numbers: for PEER, a perf record with
    too few on-time overflows to see a 1/8 stretch (`harness.agent.peer.counts.stretch_margin`
    ≤ 0); for PROFILE, a run where every CPU was left out of the comparison because
    the agent dropped samples there (`harness.agent.peer.pairing`: a thinned profile is
    not compared), so there was nothing to compare.
    """
    notes: list[str] = []
    for attempt in range(1, PEER_ATTEMPTS + 1):
        failed, run, _ = judge_case(bench, guest, images, flavour, mutant, "peer")
        peer = getattr(run, "peer", None)  # every flavour's peer run keeps perf's evidence
        if failed & set(mutant.caught_by) or not isinstance(peer, PeerEvidence):
            break
        why = _peer_unjudged(mutant, peer)
        if not why:
            break
        notes.append(f"peer run {attempt} {why}")
    unjudged = len(notes) == PEER_ATTEMPTS  # no run could tell: reported, never a catch
    return mutant_row(flavour, mutant, [("peer", failed)], notes, unjudged=unjudged)


def _peer_unjudged(mutant: Mutant, peer: PeerEvidence) -> str:
    """Why this peer run could not judge ``mutant`` ('' when it could)."""
    if "PEER" in mutant.caught_by:
        margin = stretch_margin(peer.counts, peer.window.bound)  # the run's own edges
        if margin <= 0:
            folded = ", ".join(f"{c.cpu}: {_folded_share(c, peer)}" for c in peer.counts.cpus)
            return (f"could not tell a 1/8 stretch (margin {margin}); periods the emulator "
                    f"folded, per CPU: {folded}")  # fmt: skip
    pair = peer.profiles if "PROFILE" in mutant.caught_by else None
    if pair is None:
        return ""
    if not pair.perf.total:
        return f"compared no profile ({pair.excluded_text() or 'no perf sample'})"
    if not (why := unjudgeable(pair)):
        return ""
    return f"compared {why}" + (f"; {text}" if (text := pair.excluded_text()) else "")


def _folded_share(cpu: PerfCpu, peer: PeerEvidence) -> str:
    """The samples perf took on ``cpu``, and the share of its window's periods that folded."""
    allowed = peer_range(cpu, peer.counts, peer.window.bound)
    periods = cpu.samples + cpu.lost + allowed.folded
    share = allowed.folded / periods if periods else 0.0
    return f"{allowed.folded} of {periods} ({share:.0%}), {cpu.samples} samples"
