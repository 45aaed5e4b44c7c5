r"""CHAIN: every call chain's depth, truncation and frames, against the code it names.

Pure. Judges a `harness.agent.oracles.content_view.ContentView`.

**CHAIN** (flavours that record chains; ``chain_depth`` frames at most, the PC
included): no chain is longer than that; a chain says truncated only when it is that
long; a user sample of the chain workload where leaf's frame record is set up
(`Function.framed`: a PC in the prologue or epilogue has the caller's record in x29,
and a frame-pointer walk skips one frame there, as Linux perf's does) carries
``middle, outer, work, main`` next (as far as the depth allows, truncated when it cuts
them); a kernel sample inside ``pa_probe_spin``'s framed body carries
``pa_probe_middle, pa_probe_outer`` next. Return addresses are looked up at
address - 1 (the call instruction's function). Every frame of every chain whose code
is known (`harness.agent.oracles.frames`: user samples of the workloads' pids against the
workload, kernel samples against the module and vmlinux): each return address follows
a call, a direct one to the frame below's function. Where the record holds the walk's
frame count and stop cause (dt, hwpmc), those decide "longer than the depth" and
"truncated", and the records' stop causes stay within the core's per-CPU counts
(`harness.agent.oracles.walks`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from harness.agent.oracles.content_view import ContentView
from harness.agent.oracles.frames import FrameVerdict, judge_frames
from harness.agent.oracles.laws import zero
from harness.agent.oracles.memo import by_identity
from harness.agent.oracles.walks import WALKED, check_walks, length_of
from harness.agent.truth import program
from harness.agent.truth.elfsyms import FunctionTable
from harness.agent.values.results import Violation
from harness.agent.values.samples import Sample

PROBE_PATH = ("pa_probe_spin", "pa_probe_middle", "pa_probe_outer")


def _names(table: FunctionTable, chain: Sequence[int]) -> tuple[str, ...]:
    found = (table.at(address - 1) for address in chain)
    return tuple(f.name if f else f"{a:#x}" for f, a in zip(found, chain, strict=True))


def _chain_wrong(sample: Sample, table: FunctionTable, want: tuple[str, ...], depth: int) -> bool:
    room = depth - 1
    expected = want[:room]
    cut = room < len(want)
    if cut and not sample.truncated:
        return True
    return _names(table, sample.chain[: len(expected)]) != expected


def chain_checked(view: ContentView) -> tuple[list[Sample], list[Sample]]:
    """The leaf samples and the probe samples CHAIN judges by their next frames."""
    leaf: list[Sample] = []
    probe: list[Sample] = []
    chain_pids = {w.pid for w in view.workloads if w.kind == "chain"}
    if view.image is not None:
        framed = view.image.functions.named("leaf")
        leaf = [s for s in view.samples
                if s.user and s.pid in chain_pids and framed.holds_framed(s.pc)]  # fmt: skip
    if view.module is not None:
        spin = view.module.named(PROBE_PATH[0])
        probe = [s for s in view.samples if not s.user and spin.holds_framed(s.pc)]
    return leaf, probe


@by_identity  # asked by check, judged and the report's numbers of one view (`memo`)
def frame_verdict(view: ContentView) -> FrameVerdict:
    """CHAIN's general law (`harness.agent.oracles.frames`) on every chain whose code is known.

    Kernel samples against the module's functions at their kernel addresses and the
    kernel's own (vmlinux, where known: without it the exception entries are not
    known, and no address after an unknown frame is judged); user samples of the
    workloads' pids (picked by pid, which the harness knows) against the workload's
    image. Frames elsewhere are counted as not judged.
    """
    pids = {w.pid for w in view.workloads}
    user: tuple[FunctionTable, ...] = (view.image.functions,) if view.image else ()
    kernel = tuple(t for t in (view.module, view.kernel) if t is not None)
    judged = [s for s in view.samples if s.chain
              and ((s.user and s.pid in pids and user) or (not s.user and kernel))]  # fmt: skip
    # a kernel sample's user stack (dt): the task's user PC at its kernel entry, callers
    judged += [Sample(s.cpu, s.user_walk[0], s.pid, s.tid, True, s.user_walk[1:])
               for s in view.samples
               if len(s.user_walk) > 1 and s.pid in pids and user]  # fmt: skip
    return judge_frames(judged, lambda s: user if s.user else kernel,
                        entry_known=lambda s: s.user or view.kernel is not None)  # fmt: skip


def check_frames(view: ContentView) -> list[Violation]:
    """CHAIN's general law: every judged return address follows a call to the frame below."""
    faults = frame_verdict(view).faults
    out = []
    for cpu, n in sorted(Counter(f.sample.cpu for f in faults).items()):
        first = next(f for f in faults if f.sample.cpu == cpu)
        mode = "user" if first.sample.user else "kernel"
        out += zero("CHAIN", cpu, "return addresses not after a call to the frame below", got=n,
                    detail=f"first: {mode} pc {first.sample.pc:#x}, caller {first.index + 1}: "
                    f"{first.why}")  # fmt: skip
    return out


def check_chain(view: ContentView) -> list[Violation]:
    """CHAIN: depth and truncation honest; every frame a call; leaf and probe paths."""
    depth = view.chain_depth
    assert depth is not None
    too_long = Counter(s.cpu for s in view.samples if length_of(s) > depth)
    false_cut = Counter(s.cpu for s in view.samples if s.truncated and length_of(s) != depth)
    # a walk that wrote depth frames stopped there (pa_chain_walk checks the depth first)
    false_end = Counter(s.cpu for s in view.samples if s.stop in WALKED
                        and not s.truncated and length_of(s) == depth)  # fmt: skip
    out = [v for cpu, n in sorted(too_long.items()) for v in zero(
        "CHAIN", cpu, f"chains longer than {depth} frames", got=n, detail="")]  # fmt: skip
    out += [v for cpu, n in sorted(false_cut.items()) for v in zero(
        "CHAIN", cpu, "chains marked truncated below the depth", got=n, detail="")]  # fmt: skip
    out += [v for cpu, n in sorted(false_end.items()) for v in zero(
        "CHAIN", cpu, "chains of the depth whose walk says it ended", got=n,
        detail="the record's stop cause")]  # fmt: skip
    out += check_walks(view.samples, view.walks)
    leaf, probe = chain_checked(view)
    for samples, table, want in ((leaf, view.image.functions if view.image else None,
                                  program.CHAIN_PATH[1:]),
                                 (probe, view.module, PROBE_PATH[1:])):  # fmt: skip
        if table is None:
            continue
        wrong = [s for s in samples if _chain_wrong(s, table, want, depth)]
        for cpu, n in sorted(Counter(s.cpu for s in wrong).items()):
            first = next(s for s in wrong if s.cpu == cpu)
            out += zero("CHAIN", cpu, f"samples in {want[0]}'s callee without {', '.join(want)}",
                        got=n, detail=f"first: {', '.join(_names(table, first.chain))}"
                        f"{' (truncated)' if first.truncated else ''}")  # fmt: skip
    return out + check_frames(view)
