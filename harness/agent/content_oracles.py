r"""Content oracles: each sample's mode, owner, place and call chain, against ground truth.

Pure. The ground truth is the workload the harness launched (`harness.agent.truth`:
its pid and tid as it printed them, its functions from its own symbol table) and the
agent's own functions at their kernel addresses (``/proc/kallsyms``), never a number
the agent derived::

    view = ContentView(samples, workloads, image, chain_depth=None)
    violations = check_content(view)           # MODE, WHO, WHERE (CHAIN: not applicable)
    content_numbers(view)["content.chain.leaf"]

**MODE** (exact, every sample): the user/kernel flag agrees with the PC's half of the
address space (arm64: top 16 bits clear for user, set for kernel).

**WHO** (exact): a user sample whose PC lies in the workload's text (linked at
`truth_build.TEXT_BASE`, where nothing else in the guest maps code) carries the pid
and tid of a workload pinned to that CPU. (exact, exclusive half) On a CPU the harness
kept for its own tasks (`harness.agent.isolation`: every other user task moved off it
before the run, profctl included, and every live user task's Cpus_allowed_list read
after it), every user sample carries the pid (and tid, where recorded) of a task the
harness pinned there: the chain workload, or a busy loop the flavour's standard run
spins beside it. A CPU where a task could not be moved, or where one that is not the
harness's was allowed after the run, is not exclusive: the half is not applicable
there, and the report says why. With one CPU nothing is isolated.

**WHERE**: (exact) a user sample of the workload's pid lies in its text, or in
profctl's (the child between fork and exec); (bound) of chain mode's samples in the
code its chain phase runs (`truth.CHAIN_PHASE`: leaf, middle, outer, now_ns, libc's
syscall; start-up and exit run once, elsewhere), ``leaf`` holds at least as many as
this model allows:

* *Instruction mix.* Per leaf call, leaf runs ``LEAF_ITERATIONS × LEAF_LOOP_INSNS``
  (2^22 × 6) instructions, everything else of the workload's user code at most
  ``OUT_OF_LEAF_INSNS`` (400). A timer-delivered overflow is noticed at a translation
  block boundary, with probability proportional to host time; let one instruction
  outside leaf cost up to ``COST_RATIO`` (100) times one of leaf's (cold code, block
  lookups). So a timer-delivered sample lies outside leaf with probability at most
  p = 100 × 400 / (2^22 × 6) ≈ 0.0016.
* *When TCG delivers.* QEMU 7.2 also notices a pending overflow at an exception-level
  change or a PMU register access. The workload touches no PMU register; its EL changes
  that can put a sample outside leaf are its clock syscalls and page faults in that
  phase, two each (entry and return): at most 2 × (calls + 1 + faults) samples, with
  calls and faults as the workload reported them (getrusage: the kernel's count).
  Interrupts of leaf itself put a sample in leaf or in the kernel, never elsewhere in
  user code.
* So of the n user samples in the chain phase's code, leaf holds at least
  n - 2 × (calls + 1 + faults) - Q, where Q is the upper ``1 - ALPHA`` quantile
  of Binomial(n, p): a false alarm at most ``ALPHA`` = 1e-6 per run, under the model.

Mix mode: hot and cold run the same body, hot 3 parts, cold 1, each round's slice
drawn at random (2048 to 6143 iterations), so a sampling clock as regular as TCG's
cannot alias with a fixed round length and consecutive samples fall at independent
phases; of the m samples in either, hot's count lies within the two-sided ``ALPHA``
interval of Binomial(m, 3/4), widened by 2 on each side for the page faults of the
first call of each.

**CHAIN** (flavours that record chains; ``chain_depth`` frames at most, the PC
included): no chain is longer than that; a chain says truncated only when it is that
long; a user sample of the chain workload where leaf's frame record is set up
(`Function.framed`: a PC in the prologue or epilogue has the caller's record in x29,
and a frame-pointer walk skips one frame there, as Linux perf's does) carries
``middle, outer, main`` next (as far as the depth allows, truncated when it cuts
them); a kernel sample inside ``pa_probe_spin``'s framed body carries
``pa_probe_middle, pa_probe_outer`` next. Return addresses are looked up at
address - 1 (the call instruction's function). Every frame of every chain whose code
is known (`harness.agent.frames`: user samples of the workloads' pids against the
workload, kernel samples against the module and vmlinux): each return address follows
a call, a direct one to the frame below's function. Where the record holds the walk's
frame count and stop cause (dt, hwpmc), those decide "longer than the depth" and
"truncated", and the records' stop causes stay within the core's per-CPU counts
(`harness.agent.walks`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.agent import truth
from harness.agent.elfsyms import FunctionTable
from harness.agent.frames import FrameVerdict, judge_frames
from harness.agent.isolation import Isolation
from harness.agent.laws import at_least, zero
from harness.agent.report import verdict_lines
from harness.agent.results import Violation
from harness.agent.samples import Sample, kernel_address, user_address
from harness.agent.walks import WALKED, CoreWalks, check_walks, length_of, walk_numbers

CONTENT_ORACLES: tuple[tuple[str, str], ...] = (
    ("MODE", "every sample's user/kernel flag matches its PC's address space"),
    ("WHO", "user samples in the workload's text carry its pid and tid"),
    ("WHERE", "workload samples lie in its text; in leaf at least as the model allows"),
    ("CHAIN", "leaf samples carry middle, outer, main; probe samples its frames; depth"),
)
ALPHA = 1e-6
COST_RATIO = 100
PROBE_PATH = ("pa_probe_spin", "pa_probe_middle", "pa_probe_outer")
_FAULT_SLACK = 2  # mix: the page faults of hot's and cold's first calls


@dataclass(frozen=True, slots=True)
class ContentView:
    """What the content oracles judge: samples, and the ground truth beside them.

    ``chain_depth`` None: the flavour records no call chain (CHAIN not applicable).
    ``module``: the agent's functions at their kernel addresses (None: not read).
    ``isolation``: the CPUs the harness kept for its own tasks (WHO's exclusive half).
    ``kernel``: the guest kernel's functions (vmlinux; None: not known).
    ``walks``: the core's per-CPU walk counters (CHAIN's stop-cause law,
    `harness.agent.walks`; empty: the flavour's records carry no stop cause).
    """

    samples: tuple[Sample, ...]
    workloads: tuple[truth.WorkloadRun, ...]
    image: truth.TruthImage | None
    chain_depth: int | None = None
    module: FunctionTable | None = None
    isolation: tuple[Isolation, ...] = ()
    walks: tuple[CoreWalks, ...] = ()
    kernel: FunctionTable | None = None


def view_of(
    samples: Sequence[Sample],
    evidence: truth.TruthEvidence | None,
    chain_depth: int | None,
    walks: tuple[CoreWalks, ...] = (),
) -> ContentView:
    """The content view of a run's samples and the ground truth it kept (None: none)."""
    if evidence is None:
        return ContentView(tuple(samples), (), None, chain_depth, walks=walks)
    return ContentView(tuple(samples), evidence.workloads, evidence.image, chain_depth,
                       evidence.module, evidence.isolation, walks, evidence.kernel)  # fmt: skip


def oracles_for(chains: bool) -> tuple[tuple[str, str], ...]:
    """The content oracles of a flavour that records call chains or not."""
    return tuple(o for o in CONTENT_ORACLES if chains or o[0] != "CHAIN")


def applicable_content(view: ContentView) -> frozenset[str]:
    """The content oracles ``view`` can be judged by."""
    names = {"MODE"}
    if view.image is not None and view.workloads:
        names |= {"WHO", "WHERE"}
    if view.chain_depth is not None:
        names.add("CHAIN")
    return frozenset(names)


def check_content(view: ContentView) -> list[Violation]:
    """Every content law ``view`` breaks (empty: all applicable ones held)."""
    applicable = applicable_content(view)
    out = check_mode(view.samples)
    if "WHO" in applicable:
        out += check_who(view)
        out += check_where(view)
    if "CHAIN" in applicable:
        out += check_chain(view)
    return out


def check_mode(samples: Sequence[Sample]) -> list[Violation]:
    """MODE: the flag of every sample matches its PC's half of the address space."""
    bad = Counter(s.cpu for s in samples
                  if not (user_address(s.pc) if s.user else kernel_address(s.pc)))  # fmt: skip
    return [v for cpu, n in sorted(bad.items()) for v in zero(
        "MODE", cpu, "samples whose mode flag disagrees with their PC", got=n,
        detail=_example(samples, cpu, lambda s: not (user_address(s.pc) if s.user
                                                     else kernel_address(s.pc))))]  # fmt: skip


def _example(samples: Sequence[Sample], cpu: int, wrong: Callable[[Sample], bool]) -> str:
    first = next(s for s in samples if s.cpu == cpu and wrong(s))
    mode = "user" if first.user else "kernel"
    return f"first: pc {first.pc:#x} flagged {mode}, pid {first.pid} tid {first.tid}"


def _in_text(view: ContentView, sample: Sample) -> bool:
    assert view.image is not None
    low, high = view.image.text
    return sample.user and low <= sample.pc < high


def _owned(view: ContentView, sample: Sample) -> bool:
    """Whether a workload pinned to the sample's CPU has its pid (and tid, if recorded)."""
    return any(w.cpu == sample.cpu and w.pid == sample.pid
               and (sample.tid is None or w.tid == sample.tid) for w in view.workloads)  # fmt: skip


def check_who(view: ContentView) -> list[Violation]:
    """WHO: workload-text samples are a workload's there; exclusive CPUs: `check_exclusive`."""
    bad = Counter(s.cpu for s in view.samples if _in_text(view, s) and not _owned(view, s))
    out = [v for cpu, n in sorted(bad.items()) for v in zero(
        "WHO", cpu, "samples in the workload's text with another pid/tid", got=n,
        detail=_example(view.samples, cpu, lambda s: _in_text(view, s)
                        and not _owned(view, s)))]  # fmt: skip
    return out + check_exclusive(view)


def harness_tasks(view: ContentView, cpu: int) -> frozenset[tuple[int, int]]:
    """(pid, tid) of each task the harness pinned to ``cpu``: workloads and busy loops."""
    return frozenset((p, t) for w in view.workloads if w.cpu == cpu
                     for p, t in ((w.pid, w.tid), *((n, n) for n in w.neighbours)))  # fmt: skip


def _harness_owned(tasks: frozenset[tuple[int, int]], sample: Sample) -> bool:
    return any(p == sample.pid and (sample.tid is None or t == sample.tid) for p, t in tasks)


def exclusive_samples(view: ContentView, cpu: int) -> tuple[list[Sample], list[Sample]]:
    """The user samples on ``cpu``, and those of them no harness task there carries."""
    tasks = harness_tasks(view, cpu)
    user = [s for s in view.samples if s.user and s.cpu == cpu]
    return user, [s for s in user if not _harness_owned(tasks, s)]


def check_exclusive(view: ContentView) -> list[Violation]:
    """WHO's exclusive half: on a CPU kept for the harness's tasks, every user sample is theirs.

    Exact: only those tasks could run user code there (the isolation's evidence, not
    the agent's); a CPU that is not exclusive is not judged.
    """
    out: list[Violation] = []
    for iso in view.isolation:
        if not iso.exclusive:
            continue
        _, foreign = exclusive_samples(view, iso.cpu)
        first = f"first: pid {foreign[0].pid} tid {foreign[0].tid} pc {foreign[0].pc:#x}; " \
            if foreign else ""  # fmt: skip
        out += zero("WHO", iso.cpu, "user samples on the isolated CPU not the harness's tasks'",
                    got=len(foreign), detail=f"{first}{iso.describe()}")  # fmt: skip
    return out


def binomial_upper(n: int, p: float, alpha: float) -> int:
    """The smallest k with P[Binomial(n, p) > k] ≤ ``alpha``."""
    if p <= 0 or n == 0:
        return 0
    if p >= 1:
        return n
    log_p, log_q = math.log(p), math.log1p(-p)
    tail, k = 1.0, 0
    for k in range(n + 1):
        tail -= math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                         + k * log_p + (n - k) * log_q)  # fmt: skip
        if tail <= alpha:
            return k
    return n


def leaf_bound(n: int, workload: truth.WorkloadRun) -> int:
    """WHERE's lower bound on chain samples in leaf, of ``n`` in its chain phase's code."""
    p_out = COST_RATIO * truth.OUT_OF_LEAF_INSNS / (truth.LEAF_ITERATIONS * truth.LEAF_LOOP_INSNS)
    el_changes = 2 * (workload.calls + 1 + workload.faults)
    return max(0, n - el_changes - binomial_upper(n, p_out, ALPHA))


def mix_interval(m: int) -> tuple[int, int]:
    """WHERE's two-sided interval for hot's samples of ``m`` in hot or cold."""
    share = truth.MIX_HOT_PARTS / (truth.MIX_HOT_PARTS + truth.MIX_COLD_PARTS)
    high = binomial_upper(m, share, ALPHA / 2)
    low = m - binomial_upper(m, 1 - share, ALPHA / 2)
    return (max(0, low - _FAULT_SLACK), min(m, high + _FAULT_SLACK))


def _counts(view: ContentView, workload: truth.WorkloadRun) -> Counter[str]:
    assert view.image is not None
    names: Counter[str] = Counter()
    for s in view.samples:
        if s.user and s.pid == workload.pid and _in_text(view, s):
            found = view.image.functions.at(s.pc)
            names[found.name if found else "?"] += 1
    return names


def check_where(view: ContentView) -> list[Violation]:
    """WHERE: the workload's user samples lie in its text, and in leaf / hot as modelled."""
    assert view.image is not None
    pids = {w.pid for w in view.workloads}
    text, profctl_text = view.image.text, view.image.profctl_text
    stray = Counter(s.cpu for s in view.samples if s.user and s.pid in pids
                    and not any(lo <= s.pc < hi for lo, hi in (text, profctl_text)))  # fmt: skip
    out = [v for cpu, n in sorted(stray.items()) for v in zero(
        "WHERE", cpu, "workload user samples outside its text", got=n,
        detail="neither the workload's text nor profctl's (before exec)")]  # fmt: skip
    for w in view.workloads:
        names = _counts(view, w)
        if w.mode == "chain":
            phase = sum(names[name] for name in truth.CHAIN_PHASE)
            out += at_least("WHERE", w.cpu, f"samples in leaf (of {phase} in the chain phase)",
                            bound=leaf_bound(phase, w), got=names["leaf"],
                            detail=f"model: {w.calls} leaf calls, {w.faults} faults")  # fmt: skip
        else:
            m = names["hot"] + names["cold"]
            low, high = mix_interval(m)
            for name, bound in (("hot", low), ("cold", m - high)):
                what = f"samples in {name} (of {m} in hot or cold)"
                out += at_least("WHERE", w.cpu, what, bound=bound, got=names[name],
                                detail="3:1 mix, two-sided")  # fmt: skip
    return out


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
    chain_pids = {w.pid for w in view.workloads if w.mode == "chain"}
    if view.image is not None:
        framed = view.image.functions.named("leaf")
        leaf = [s for s in view.samples
                if s.user and s.pid in chain_pids and framed.holds_framed(s.pc)]  # fmt: skip
    if view.module is not None:
        spin = view.module.named(PROBE_PATH[0])
        probe = [s for s in view.samples if not s.user and spin.holds_framed(s.pc)]
    return leaf, probe


def frame_verdict(view: ContentView) -> FrameVerdict:
    """CHAIN's general law (`harness.agent.frames`) on every chain whose code is known.

    Kernel samples against the module's functions at their kernel addresses and the
    kernel's own (vmlinux, where known); user
    samples of the workloads' pids (picked by pid, which the harness knows) against
    the workload's image. Frames elsewhere are counted as not judged.
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
    return judge_frames(judged, lambda s: user if s.user else kernel)


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
                                  truth.CHAIN_PATH[1:]),
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


def content_numbers(view: ContentView) -> dict[str, int]:
    """The content oracles' counts under flat names (``content.…``), for summary.json."""
    numbers = {"content.samples": len(view.samples),
               "content.user": sum(1 for s in view.samples if s.user)}  # fmt: skip
    for iso in view.isolation:
        user, foreign = exclusive_samples(view, iso.cpu)
        chain = frozenset((w.pid, w.tid) for w in view.workloads if w.cpu == iso.cpu)
        key = f"content.exclusive.cpu{iso.cpu}"
        numbers |= {f"{key}.exclusive": int(iso.exclusive), f"{key}.user": len(user),
                    f"{key}.harness": len(user) - len(foreign),
                    f"{key}.workload": sum(_harness_owned(chain, s) for s in user)}  # fmt: skip
    for w in view.workloads if view.image is not None else ():
        names = _counts(view, w)
        key = f"content.{w.mode}.cpu{w.cpu}"
        numbers[f"{key}.in_text"] = sum(names.values())
        if w.mode == "chain":
            phase = sum(names[name] for name in truth.CHAIN_PHASE)
            numbers[f"{key}.leaf"] = names["leaf"]
            numbers[f"{key}.chain_phase"] = phase
            numbers[f"{key}.leaf_bound"] = leaf_bound(phase, w)
        else:
            numbers[f"{key}.hot"], numbers[f"{key}.cold"] = names["hot"], names["cold"]
    if view.chain_depth is not None:
        leaf, probe = chain_checked(view)
        cut = sum(1 for s in view.samples if s.truncated)
        frames = frame_verdict(view)
        numbers |= {"content.chain.leaf_checked": len(leaf),
                    "content.chain.probe_checked": len(probe),
                    "content.chain.truncated": cut,
                    "content.chain.frames_samples": frames.samples,
                    "content.chain.frames": frames.frames,
                    "content.chain.frames_targets": frames.targets,
                    "content.chain.frames_unknown": frames.unknown}  # fmt: skip
        numbers |= walk_numbers(view.samples, view.walks)
    return numbers


def content_report(view: ContentView, violations: Sequence[Violation]) -> str:
    """Where the workloads' samples fell, then one verdict line per content oracle."""
    names = {name for name, _ in CONTENT_ORACLES}
    own = [v for v in violations if v.oracle in names]
    oracles = oracles_for(view.chain_depth is not None)
    return f"{format_content(view)}\n{verdict_lines(own, oracles, applicable_content(view))}"


def format_content(view: ContentView) -> str:
    """One line per workload: where its samples fell against the model."""
    numbers = content_numbers(view)
    lines = []
    for w in view.workloads if view.image is not None else ():
        key = f"content.{w.mode}.cpu{w.cpu}"
        n = numbers[f"{key}.in_text"]
        if w.mode == "chain":
            leaf, phase = numbers[f"{key}.leaf"], numbers[f"{key}.chain_phase"]
            lines.append(f"truth chain on CPU {w.cpu} (pid {w.pid}): {n} user samples in its "
                         f"text, {phase} in the chain phase, {leaf} in leaf "
                         f"({100 * leaf / max(phase, 1):.1f} %), model bound "
                         f"{numbers[f'{key}.leaf_bound']}")  # fmt: skip
        else:
            hot, cold = numbers[f"{key}.hot"], numbers[f"{key}.cold"]
            low, high = mix_interval(hot + cold)
            lines.append(f"truth mix on CPU {w.cpu} (pid {w.pid}): hot {hot}, cold {cold} "
                         f"(hot allowed {low}..{high})")  # fmt: skip
    lines += [_exclusive_line(view, iso, numbers) for iso in view.isolation]
    if not view.isolation:
        lines.append("no CPU isolated for the workload (one CPU): WHO's exclusive half "
                     "not applicable")  # fmt: skip
    if view.chain_depth is not None:
        lines.append(f"chains (depth {view.chain_depth}): "
                     f"{numbers['content.chain.leaf_checked']} leaf samples checked, "
                     f"{numbers['content.chain.probe_checked']} probe samples checked, "
                     f"{numbers['content.chain.truncated']} truncated; "
                     f"{numbers['content.chain.frames']} return addresses of "
                     f"{numbers['content.chain.frames_samples']} samples judged as calls, "
                     f"{numbers['content.chain.frames_targets']} of them direct calls to the "
                     f"frame below, {numbers['content.chain.frames_unknown']} in unknown "
                     f"code not judged; {_walks_text(view, numbers)}")  # fmt: skip
    else:
        lines.append("chains: not recorded by this flavour (CHAIN not applicable)")
    return "\n".join(lines)


def _walks_text(view: ContentView, numbers: dict[str, int]) -> str:
    if not view.walks:
        return "the records carry no stop cause (stop causes not judged)"
    return (f"{numbers['content.chain.walks.records']} records' stop causes against "
            f"{numbers['content.chain.walks.core']} walks the core counted")  # fmt: skip


def _exclusive_line(view: ContentView, iso: Isolation, numbers: dict[str, int]) -> str:
    key = f"content.exclusive.cpu{iso.cpu}"
    if not iso.exclusive:
        return f"CPU {iso.cpu} {iso.describe()}: WHO's exclusive half not applicable"
    return (f"CPU {iso.cpu} {iso.describe()}: {numbers[f'{key}.user']} user samples, "
            f"{numbers[f'{key}.harness']} the harness's tasks' "
            f"({numbers[f'{key}.workload']} the workload's)")  # fmt: skip
