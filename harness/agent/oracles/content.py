r"""Content oracles: each sample's mode, owner, place and call chain, against ground truth.

Pure. The ground truth is the workload the harness launched (`harness.agent.truth.program`:
its pid and tid as it printed them, its functions from its own symbol table) and the
agent's own functions at their kernel addresses (``/proc/kallsyms``), never a number
the agent derived::

    view = view_of(samples, run.truth, chain_depth=None)   # harness.agent.oracles.content_view
    violations = check_content(view)           # MODE, WHO, WHERE (CHAIN: not applicable)
    content_numbers(view)["content.chain.leaf"]

**MODE** (no bound, every sample): the user/kernel flag agrees with the PC's half of the
address space (arm64: top 16 bits clear for user, set for kernel).

Every oracle says what it compared (`judge_content`, `harness.agent.values.results.Judged`):
``PASS`` only with n > 0; a half that compared nothing is ``UNJUDGED`` with the reason.
Each family's population is chosen by evidence the agent does not write, or does not
have judged by the oracle that selects with it: the CPU and pid the workload printed,
the time span it read on the guest clock, the isolation's task lists.

One module a family, each with its model: WHO (`harness.agent.oracles.who`), WHERE
(`harness.agent.oracles.where`), CHAIN (`harness.agent.oracles.chain`, with
`harness.agent.oracles.frames` and `harness.agent.oracles.walks`). This module holds
MODE and what a flavour calls: `check_content`, `judge_content`, `content_numbers`,
`content_report`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from harness.agent.oracles.chain import chain_checked, check_chain, frame_verdict
from harness.agent.oracles.content_view import (
    CONTENT_ORACLES,
    ContentView,
    applicable_content,
    first_wrong,
    in_text,
    timed,
)
from harness.agent.oracles.laws import zero
from harness.agent.oracles.memo import by_identity
from harness.agent.oracles.report import verdict_lines
from harness.agent.oracles.walks import walk_numbers
from harness.agent.oracles.where import (
    check_where,
    function_counts,
    in_zeroing,
    judge_where,
    kernel_population,
    leaf_bound,
    life_outside,
    mix_bound,
    mix_interval,
    population,
    zero_bound,
)
from harness.agent.oracles.who import (
    carried_by,
    check_who,
    exclusive_samples,
    judge_who,
    lane_samples,
    worker_samples,
    workload_threads,
)
from harness.agent.truth import program
from harness.agent.truth.isolation import Isolation
from harness.agent.values.results import Judged, Violation
from harness.agent.values.samples import Sample, kernel_address, user_address


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
        detail=first_wrong(samples, cpu, lambda s: not (user_address(s.pc) if s.user
                                                     else kernel_address(s.pc))))]  # fmt: skip


@by_identity  # asked by ``judged`` and the report of one view (`memo`)
def judge_content(view: ContentView) -> tuple[Judged, ...]:
    """What each applicable content oracle compared (`Judged`; n = 0: UNJUDGED, with why).

    MODE: every sample. WHO: the samples in the workload's text, those in code only a
    worker thread runs (where the flavour records a tid), every user sample on each
    CPU kept for the harness. WHERE: each workload's `population`. CHAIN: every
    chain (depth), the leaf and probe samples whose callers are known, the return
    addresses its every-frame law judged as calls (frames) and, where the flavour
    records why a walk stopped, the records its walk law held to the core's walks.
    """
    applicable = applicable_content(view)
    found = [Judged("MODE", len(view.samples), "samples", why="the run recorded no sample")]
    if "WHO" in applicable:
        found += judge_who(view)
        found += judge_where(view)
    if "CHAIN" in applicable:
        leaf, probe = chain_checked(view)
        found.append(Judged("CHAIN", len(view.samples), "chains (depth)", part="depth",
                            why="the run recorded no chain"))  # fmt: skip
        found.append(Judged("CHAIN", len(leaf) + len(probe), "leaf and probe samples (callers)",
                            part="callers", why="no sample in leaf's or pa_probe_spin's "
                            "framed body"))  # fmt: skip
        found.append(Judged("CHAIN", frame_verdict(view).frames, "return addresses judged as "
                            "calls (frames)", part="frames",
                            why="no return address in code the harness knows"))  # fmt: skip
        if view.walks:
            walked = walk_numbers(view.samples, view.walks)["content.chain.walks.records"]
            found.append(Judged("CHAIN", walked, "records' stop causes against the core's "
                                "walks (walk)", part="walk",
                                why="no record carries a walk's stop cause"))  # fmt: skip
    return tuple(found)


def content_numbers(view: ContentView) -> dict[str, int]:
    """The content oracles' counts under flat names (``content.…``), for summary.json.

    Per workload (``content.<mode>.cpu<N>.``): ``population`` (WHERE's: `population`),
    ``in_text``, ``worker`` (WHO's thread half) and the modelled counts and bounds.
    """
    numbers = {"content.samples": len(view.samples),
               "content.user": sum(1 for s in view.samples if s.user),
               "content.timed": int(timed(view))}  # fmt: skip
    for iso in view.isolation:
        user, foreign = exclusive_samples(view, iso.cpu)
        own = workload_threads(view, iso.cpu)
        key = f"content.exclusive.cpu{iso.cpu}"
        numbers |= {f"{key}.exclusive": int(iso.exclusive), f"{key}.user": len(user),
                    f"{key}.harness": len(user) - len(foreign),
                    f"{key}.workload": sum(carried_by(own, s) for s in user)}  # fmt: skip
    for w in view.workloads if view.image is not None else ():
        chosen, life = population(view, w), life_outside(view, w)
        names = function_counts(view, chosen)
        key = f"content.{w.kind}.cpu{w.cpu}"
        numbers |= {f"{key}.population": len(chosen),
                    f"{key}.in_text": sum(1 for s in chosen if in_text(view, s)),
                    f"{key}.worker": len(worker_samples(view, w))}  # fmt: skip
        if w.kind == "zero":
            kernel = kernel_population(view, w)
            if kernel is not None:
                numbers[f"{key}.kernel_population"] = len(kernel)
                numbers[f"{key}.in_zeroing"] = in_zeroing(view, kernel)
                numbers[f"{key}.zeroing_bound"] = zero_bound(len(kernel))
        elif w.kind == "chain":
            numbers[f"{key}.leaf"] = names["leaf"]
            numbers[f"{key}.leaf_bound"] = leaf_bound(len(chosen), w, life)
        elif w.kind == "lanes":
            found = Counter(k for k, _ in lane_samples(view, w))
            numbers |= {f"content.lanes.lane{k}.cpu{cpu}": found[k]
                        for k, (cpu, _) in enumerate(w.lanes)}  # fmt: skip
        else:
            numbers[f"{key}.hot"], numbers[f"{key}.cold"] = names["hot"], names["cold"]
            numbers[f"{key}.hot_or_cold_bound"] = mix_bound(len(chosen), w, life)
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
    oracles = tuple(o for o in CONTENT_ORACLES if o[0] != "CHAIN" or view.chain_depth is not None)
    verdicts = verdict_lines(own, oracles, applicable_content(view), judged=judge_content(view))
    return f"{format_content(view)}\n{verdicts}"


def format_content(view: ContentView) -> str:
    """One line per workload: where its samples fell against the model."""
    numbers = content_numbers(view)
    span = "its phase" if timed(view) else "its whole life (tprof's samples carry no time)"
    lines = []
    for w in view.workloads if view.image is not None else ():
        key = f"content.{w.kind}.cpu{w.cpu}"
        n, worker = numbers[f"{key}.population"], numbers[f"{key}.worker"]
        head = (f"truth {w.kind} on CPU {w.cpu} (pid {w.pid}, worker tid {w.tid}): {n} user "
                f"samples of its pid there in {span}, {numbers[f'{key}.in_text']} in its text, "
                f"{worker} in worker-only code")  # fmt: skip
        if w.kind == "zero":
            if f"{key}.kernel_population" not in numbers:
                why = (
                    "kernel samples carry neither pid nor time"
                    if not view.kernel_pids
                    else "not read"
                )
                lines.append(f"{head}; kernel half not applicable: {why}")
                continue
            k, z = numbers[f"{key}.kernel_population"], numbers[f"{key}.in_zeroing"]
            lines.append(f"{head}; {w.calls} reads; {k} kernel samples "
                         f"{'of its pid' if view.kernel_pids else 'of any task'} there, {z} in "
                         f"{program.KERNEL_ZERO} ({100 * z / max(k, 1):.1f} %), model bound "
                         f"{numbers[f'{key}.zeroing_bound']}")  # fmt: skip
        elif w.kind == "chain":
            leaf = numbers[f"{key}.leaf"]
            lines.append(f"{head}, {leaf} in leaf ({100 * leaf / max(n, 1):.1f} %), model "
                         f"bound {numbers[f'{key}.leaf_bound']}")  # fmt: skip
        elif w.kind == "lanes":
            each = ", ".join(f"lane{k} (CPU {cpu}, tid {tid}) "
                             f"{numbers[f'content.lanes.lane{k}.cpu{cpu}']}"
                             for k, (cpu, tid) in enumerate(w.lanes))  # fmt: skip
            lines.append(f"truth lanes (pid {w.pid}, main on CPU {w.cpu}): samples in each "
                         f"lane's function: {each}")  # fmt: skip
        else:
            hot, cold = numbers[f"{key}.hot"], numbers[f"{key}.cold"]
            low, high = mix_interval(hot + cold)
            lines.append(
                f"{head}, hot {hot} + cold {cold} (model bound "
                f"{numbers[f'{key}.hot_or_cold_bound']}; hot allowed {low}..{high})"
            )
    if view.samples and all(s.tid is None for s in view.samples):
        lines.append("tids: not recorded by this flavour (WHO judges pids only)")
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
