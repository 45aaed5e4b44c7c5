"""CHAIN's stop-cause law: the chains a flavour recorded against the walks the core counted.

Pure. The core's ``pa_chain`` counts, per CPU, every walk (``x_chain_walks``), the
frames it wrote (``x_chain_frames``, PCs included) and why each stopped (one of
``x_chain_end … x_chain_no_regs``: `harness.agent.values.info.CORE_PERCPU`). A flavour's
record carries its own copy of the walk: the frame count and the stop cause it
wrote (dt's ``kstack_n``/``kstack_stop``, ``ustack_n``/``ustack_stop``; hwpmc's
``depth``/``chain_stop``; kprof's records carry no stop cause and its synthetic
samples are walked outside the core, so it is not judged here)::

    walks = walks_of(core_percpu)             # (CoreWalks(cpu=0, walks=..., ...), ...)
    violations = check_walks(samples, walks)

The laws, per CPU:

* *bookkeeping* (the core alone, not independent evidence; it shows the counters
  are read and named right): the stop causes add up to the walks;
* *records against counts* (independent of each other: the records are what the
  flavour wrote into its buffer from pa_chain's answer, read back through its
  reader; the counters are the core's, read through debugfs): for each cause a walk
  can stop at (every cause but ``no_regs``, which a flavour also writes for chains
  it never walked: hwpmc's pending entries), the records that say it are at most the
  walks the core counted with it, and the frames of those records at most the frames
  the core counted (a dt kernel event's user walk is one more record). At most, not
  equal: records can be dropped or left unread, and a dt user event's kernel walk
  (no registers) is not kept. A flavour that marks a
  chain truncated the core's walk ended, or records more frames than were walked,
  breaks it once it does so more often than the core walked that way.

Not judged here: whether the walk itself was right (the core's walk writes both
sides); `harness.agent.oracles.frames` judges the frames against the binaries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.agent.oracles.laws import at_most, equal
from harness.agent.values.results import Violation
from harness.agent.values.samples import Sample

#: enum pa_chain_stop (profagent.h), in order: the counter of each is ``x_chain_<cause>``.
STOP_CAUSES = ("end", "truncated", "bad_fp", "off_stack", "fault", "no_regs")
#: The causes only a walk writes (a flavour writes no_regs for chains it did not walk).
WALKED = frozenset(range(len(STOP_CAUSES) - 1))


@dataclass(frozen=True, slots=True)
class CoreWalks:
    """The core's walk counters of one CPU: walks, frames, and walks per stop cause."""

    cpu: int
    walks: int
    frames: int
    causes: tuple[int, ...]  # per STOP_CAUSES


def walks_of(core: Mapping[int, Mapping[str, int]]) -> tuple[CoreWalks, ...]:
    """The walk counters of each CPU in the core's per-CPU statistics (absent: none)."""
    found = []
    for cpu, stats in sorted(core.items()):
        if "x_chain_walks" in stats:
            causes = tuple(stats[f"x_chain_{cause}"] for cause in STOP_CAUSES)
            found.append(CoreWalks(cpu, stats["x_chain_walks"], stats["x_chain_frames"], causes))
    return tuple(found)


def length_of(sample: Sample) -> int:
    """The frames a sample's walk wrote, PC included, as its record says."""
    return sample.length if sample.length is not None else len(sample.chain) + 1


def check_walks(samples: Sequence[Sample], walks: Sequence[CoreWalks]) -> list[Violation]:
    """The stop-cause law on the samples that carry a stop cause (empty: it holds)."""
    out: list[Violation] = []
    for core in walks:
        mine = [s for s in _walked(samples) if s.cpu == core.cpu and s.stop in WALKED]
        out += equal("CHAIN", core.cpu, "x_chain_walks (the sum of the stop causes)",
                     want=sum(core.causes), got=core.walks,
                     detail="the core's own bookkeeping")  # fmt: skip
        for stop in sorted(WALKED):
            name = STOP_CAUSES[stop]
            recorded = sum(1 for s in mine if s.stop == stop)
            out += at_most("CHAIN", core.cpu, f"records whose walk stopped at {name}",
                           bound=core.causes[stop], got=recorded,
                           detail=f"the core's x_chain_{name}")  # fmt: skip
        out += at_most("CHAIN", core.cpu, "frames of the walked records",
                       bound=core.frames, got=sum(length_of(s) for s in mine),
                       detail="the core counted x_chain_frames")  # fmt: skip
    return out


def _walked(samples: Sequence[Sample]) -> list[Sample]:
    """Each walk a record holds, as a sample: its own, and a kernel sample's user walk."""
    found = list(samples)
    found += [Sample(s.cpu, s.user_walk[0] if s.user_walk else 0, s.pid, s.tid, True,
                     s.user_walk[1:], length=len(s.user_walk), stop=s.user_stop)
              for s in samples if s.user_stop is not None]  # fmt: skip
    return found


def walk_numbers(samples: Sequence[Sample], walks: Sequence[CoreWalks]) -> dict[str, int]:
    """The law's counts (``content.chain.walks.…``): records judged and walks counted."""
    judged = [s for s in _walked(samples) if s.stop in WALKED]
    return {"content.chain.walks.records": len(judged),
            "content.chain.walks.core": sum(w.walks for w in walks)}  # fmt: skip
