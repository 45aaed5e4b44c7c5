r"""WHO: whose sample it is, against the ids the workload printed and the CPUs the harness kept.

Pure. Judges a `harness.agent.oracles.content_view.ContentView`.

**WHO** (no bound): *text half*: a user sample whose PC lies in the workload's text
(linked at `harness.agent.truth.build.TEXT_BASE`, where nothing else in the guest maps code)
carries the pid and the tid of a thread of a workload pinned to that CPU (main's, tid
= pid, or its worker's). *Thread half* (flavours that record a tid): a sample of the
workload's pid in code only its working thread runs (`program.WORKER_ONLY`: mix runs in
a second thread, tid ≠ pid) carries that thread's tid, as the workload printed it
(population: pid and PC, never the tid judged). *Lanes half* (three CPUs or more): a
sample of the lanes workload's pid in ``lane{k}``, the function only its thread k runs,
was taken on the CPU that thread was pinned to and carries its tid, as the thread
printed them (population: pid and PC; kprof records no tid: its CPU is still judged).
*Exclusive half*: on a CPU the harness
kept for its own tasks (`harness.agent.truth.isolation`: every other user task moved off it
before the run, profctl included, and every live user task's Cpus_allowed_list read
after it), every user sample carries the pid (and tid, where recorded) of a task the
harness pinned there: the workload's threads, or a busy loop the flavour's standard
run spins beside it (population: the CPU). A CPU where a task could not be moved, or
where one that is not the harness's was allowed after the run, is not exclusive: the
half is not applicable there, and the report says why. With one CPU nothing is
isolated.
"""

from __future__ import annotations

from collections import Counter

from harness.agent.oracles.content_view import ContentView, first_wrong, in_text
from harness.agent.oracles.laws import zero
from harness.agent.truth import program
from harness.agent.values.results import Judged, Violation
from harness.agent.values.samples import Sample


def workload_threads(view: ContentView, cpu: int) -> frozenset[tuple[int, int]]:
    """(pid, tid) of each thread of a workload pinned to ``cpu`` (main's, its worker's, lanes')."""
    return frozenset(t for w in view.workloads for t in w.threads_on(cpu))


def owned(view: ContentView, sample: Sample) -> bool:
    """Whether a thread of a workload pinned to the sample's CPU has its pid (and tid)."""
    return carried_by(workload_threads(view, sample.cpu), sample)


def worker_samples(view: ContentView, workload: program.WorkloadRun) -> list[Sample]:
    """WHO's thread half: samples of ``workload``'s pid in code only its working thread runs.

    Its population is chosen by the pid and the PC, never by the tid it judges.
    """
    assert view.image is not None
    only = [view.image.functions.named(name) for name in program.WORKER_ONLY[workload.kind]]
    return [s for s in view.samples if s.user and s.pid == workload.pid and s.tid is not None
            and any(f.holds(s.pc) for f in only)]  # fmt: skip


def check_who(view: ContentView) -> list[Violation]:
    """WHO: text samples carry a workload thread's ids, worker-only code the worker's tid.

    Exclusive CPUs: `check_exclusive`.
    """
    bad = Counter(s.cpu for s in view.samples if in_text(view, s) and not owned(view, s))
    out = [v for cpu, n in sorted(bad.items()) for v in zero(
        "WHO", cpu, "samples in the workload's text with another pid/tid", got=n,
        detail=first_wrong(view.samples, cpu, lambda s: in_text(view, s)
                        and not owned(view, s)))]  # fmt: skip
    for w in view.workloads:
        wrong = [s for s in worker_samples(view, w) if s.tid != w.tid]
        if wrong:
            first = wrong[0]
            out += zero("WHO", w.cpu, f"samples in {w.kind}'s worker code with another tid than "
                        f"{w.tid}", got=len(wrong),
                        detail=f"first: pid {first.pid} tid {first.tid} pc {first.pc:#x}; "
                        f"the worker printed tid {w.tid}, its process pid {w.pid}")  # fmt: skip
    return out + check_lanes(view) + check_exclusive(view)


def lane_samples(view: ContentView, workload: program.WorkloadRun) -> list[tuple[int, Sample]]:
    """WHO's lanes half: (k, sample) for each user sample of the pid in ``lane{k}``.

    Chosen by pid and PC (the function only thread k runs), never by the tid or CPU
    it judges.
    """
    assert view.image is not None
    found = []
    for k in range(len(workload.lanes)):
        lane = view.image.functions.named(f"lane{k}")
        found += [(k, s) for s in view.samples
                  if s.user and s.pid == workload.pid and lane.holds(s.pc)]  # fmt: skip
    return found


def check_lanes(view: ContentView) -> list[Violation]:
    """WHO's lanes half: a sample in ``lane{k}`` ran on lane k's CPU, in lane k's thread.

    Where the flavour records no tid (kprof), its CPU (and, by the population, its
    pid) is still judged.
    """
    out: list[Violation] = []
    for w in view.workloads:
        wrong = [
            (k, s)
            for k, s in lane_samples(view, w)
            if s.cpu != w.lanes[k][0] or (s.tid is not None and s.tid != w.lanes[k][1])
        ]
        if wrong:
            k, first = wrong[0]
            cpu, tid = w.lanes[k]
            out += zero("WHO", first.cpu, "samples in a lane's function off its thread or CPU",
                        got=len(wrong), detail=f"first: lane{k} sampled on CPU {first.cpu} "
                        f"tid {first.tid}; lane {k} printed CPU {cpu} tid {tid}")  # fmt: skip
    return out


def harness_tasks(view: ContentView, cpu: int) -> frozenset[tuple[int, int]]:
    """(pid, tid) of each task the harness pinned to ``cpu``: workloads' threads, busy loops."""
    return frozenset(
        (p, t)
        for w in view.workloads
        for p, t in (*w.threads_on(cpu), *((n, n) for n in (w.neighbours if w.cpu == cpu else ())))
    )


def carried_by(tasks: frozenset[tuple[int, int]], sample: Sample) -> bool:
    """Whether one of ``tasks`` (pid, tid) carries ``sample`` (its pid alone where no tid)."""
    return any(p == sample.pid and (sample.tid is None or t == sample.tid) for p, t in tasks)


def exclusive_samples(view: ContentView, cpu: int) -> tuple[list[Sample], list[Sample]]:
    """The user samples on ``cpu``, and those of them no harness task there carries."""
    tasks = harness_tasks(view, cpu)
    user = [s for s in view.samples if s.user and s.cpu == cpu]
    return user, [s for s in user if not carried_by(tasks, s)]


def check_exclusive(view: ContentView) -> list[Violation]:
    """WHO's exclusive half: on a CPU kept for the harness's tasks, every user sample is theirs.

    With no bound: only those tasks could run user code there (the isolation's evidence, not
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


def judge_who(view: ContentView) -> list[Judged]:
    """What WHO's halves compared (`harness.agent.oracles.content.judge_content`)."""
    text = sum(1 for s in view.samples if in_text(view, s))
    found = [Judged("WHO", text, "samples in the workload's text", part="text",
                    why="no sample in the workload's text")]  # fmt: skip
    if any(s.tid is not None for s in view.samples):
        workers = sum(len(worker_samples(view, w)) for w in view.workloads)
        found.append(Judged("WHO", workers, "samples in worker-only code (tid)", part="threads",
                            why="no sample where only a worker thread runs"))  # fmt: skip
    if any(w.lanes for w in view.workloads):
        lanes = sum(len(lane_samples(view, w)) for w in view.workloads)
        what = "samples in a lane's own function (" + (
            "tid, CPU)" if any(s.tid is not None for s in view.samples) else "CPU; no tid)"
        )
        found.append(Judged("WHO", lanes, what, part="lanes",
                            why="no sample in any lane's function"))  # fmt: skip
    for iso in view.isolation:
        if iso.exclusive:
            user, _ = exclusive_samples(view, iso.cpu)
            found.append(Judged("WHO", len(user), f"user samples on isolated CPU {iso.cpu}",
                                part="exclusive", why="no user sample there"))  # fmt: skip
    return found
