"""Every call's deadline and the process ops: a sequence's body instrumented, then judged.

Pure. A fuzzed sequence mixes scenario steps (run by the scenario executor in the
flavour's one profctl process, the agent's device open) and process ops
(`harness.agent.controlspec.ProcessOp`: ``count`` guest processes of their own,
each a profctl started by an ``exec`` step, which the sequence's process awaits).
`plan` places, before each step's part of the body, a mark naming the step and a
``clock``; the clocks give each call's guest time, judged against its deadline, and
after a hang the last mark names the call that never returned::

    made = plan(interface, steps, body_of=lambda prefix: program_of(prefix).body[:-1])
    made.body               # mark, clock, the step's part... then the children's exec/await
    deadline_findings(interface, made, recorded_steps, recorded_results)
    child_findings(interface, made, {"/tmp/profagent/fz-2-0.out": "step=0 op=clock ..."})
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from harness.agent import profctl
from harness.agent.controlspec import OK, ControlInterface, OpDecl, ProcessOp
from harness.agent.steps import GUEST_DIR
from harness.errors import InfraError
from harness.fuzz import faults
from harness.fuzz.invariants import Finding
from harness.scenarios.types import Step

#: Marks the sequence's process leaves before each call: ``<MARK><index>``, ``<MARK>end``.
MARK = f"{GUEST_DIR}/fz-call-"
#: The children run the same profctl binary the agent deployed.
PROFCTL = f"{GUEST_DIR}/profctl"
#: The CPU children are forked on: never taken offline (hotplug takes 1 and up).
CHILD_CPU = 0
NS_PER_S = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Child:
    """One process of a process op: the sequence's step ``call``, process ``n``."""

    call: int
    n: int
    op: str
    op_steps: tuple[str, ...]  # the op's steps, as declared

    @property
    def stem(self) -> str:
        """The guest path prefix of its files."""
        return f"{GUEST_DIR}/fz-{self.call}-{self.n}"

    @property
    def done(self) -> str:
        """The mark it leaves once every step ran: the sequence's process awaits it."""
        return f"{self.stem}.done"

    @property
    def out(self) -> str:
        """Its profctl output."""
        return f"{self.stem}.out"

    def steps(self) -> tuple[str, ...]:
        """What it runs: a clock before each of the op's steps and after the last, then done."""
        timed = [s for step in self.op_steps for s in (profctl.clock_step(), step)]
        return (*timed, profctl.clock_step(), profctl.mark_step(self.done))

    def launch(self) -> str:
        """The sequence's ``exec`` step that starts it."""
        argv = (PROFCTL, "-f", f"{self.stem}.steps")
        return profctl.exec_step(CHILD_CPU, self.out, argv)


@dataclass(frozen=True, slots=True)
class Plan:
    """A sequence made runnable: the scenario's steps, the body, the children."""

    steps: tuple[Step, ...]  # the whole sequence, process ops included
    scenario_steps: tuple[Step, ...]
    body: tuple[str, ...]  # without the executor's final wait
    children: tuple[Child, ...]


def scenario_steps(interface: ControlInterface, steps: Sequence[Step]) -> tuple[Step, ...]:
    """The steps a scenario file holds: all but the process ops and the fault ops."""
    return tuple(step for step in steps if not fuzz_only(interface, step.op))


def fuzz_only(interface: ControlInterface, op: str) -> bool:
    """Whether ``op`` runs only under the fuzzer: a process op or a fault op."""
    return interface.process(op) is not None or faults.capability(op) is not None


def decl_of(interface: ControlInterface, op: str) -> OpDecl:
    """The declared op ``op``, a fault op's too.

    :raise KeyError: neither the interface nor fault injection has such an op.
    """
    cap = faults.capability(op)
    return cap.decl() if cap is not None else interface.op(op)


def call_mark(index: int | str) -> tuple[str, str]:
    """The mark naming call ``index`` (or ``end``) and the clock that times it."""
    return profctl.mark_step(f"{MARK}{index}"), profctl.clock_step()


def plan(
    interface: ControlInterface,
    steps: Sequence[Step],
    body_of: Callable[[tuple[Step, ...]], tuple[str, ...]],
    fault_call: faults.FaultCall | None = None,
) -> Plan:
    """The body of ``steps``: per step, its mark and clock, then its part.

    ``body_of(prefix)`` is the executor's body for a prefix of the scenario steps
    (without its final wait); a step's part is what its step added to it. A fault
    op's part is `faults.steps_of` around ``fault_call``.

    :raise InfraError: the executor's body of a prefix is not a prefix of the next one.
    """
    body: list[str] = []
    children: list[Child] = []
    done: list[Step] = []
    before = body_of(())
    body += before
    for index, step in enumerate(steps):
        body += call_mark(index)
        op = interface.process(step.op)
        if op is not None:
            made = _children(op, index, step.count or op.processes[0])
            children += made
            body += [child.launch() for child in made]
            body += [profctl.await_step(child.done) for child in made]
            continue
        cap = faults.capability(step.op)
        if cap is not None:
            if fault_call is None:
                raise InfraError(f"step {index} ({step.op}) on a kernel without fault injection")
            body += faults.steps_of(cap, step.count or 1, fault_call.steps)
            continue
        done.append(step)
        after = body_of(tuple(done))
        if after[: len(before)] != before:
            raise InfraError(f"the executor's body changed before step {index} ({step.op})")
        body += after[len(before) :]
        before = after
    body += call_mark("end")
    return Plan(tuple(steps), tuple(done), tuple(body), tuple(children))


def _children(op: ProcessOp, call: int, count: int) -> list[Child]:
    stems = [f"{GUEST_DIR}/fz-{call}-{n}" for n in range(count)]
    return [Child(call, n, op.op, op.steps(stem)) for n, stem in enumerate(stems)]


def setup_command(made: Plan) -> str:
    """A guest command: the marks of the last sequence gone, every child's steps file."""
    lines = [f"rm -f {GUEST_DIR}/fz-*"]
    for child in made.children:
        words = shlex.join(["printf", "%s\\n", *child.steps()])
        lines.append(f"{words} > {shlex.quote(child.stem + '.steps')}")
    return " && ".join(lines)


#: The line that starts each child's output in `outputs_command`'s text.
HEADER = "==fz== "


def outputs_command(made: Plan) -> str:
    """A guest command printing each child's output after a header naming it."""
    parts = [f"echo {HEADER}{c.out}; cat {c.out} 2>/dev/null" for c in made.children]
    return "; ".join(parts) or "true"


def split_outputs(text: str) -> dict[str, str]:
    """`outputs_command`'s text as each child's output by path."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(HEADER):
            current = out.setdefault(line.removeprefix(HEADER).strip(), [])
        elif current is not None:
            current.append(line)
    return {path: "".join(f"{line}\n" for line in lines) for path, lines in out.items()}


def marks_command() -> str:
    """A guest command listing the call marks the sequence's process left."""
    return f"ls {MARK}* 2>/dev/null || true"


def running_call(made: Plan, listing: str) -> str:
    """The call a sequence that never finished was in: the last mark it left."""
    reached = [int(x) for x in _marked(listing) if x.isdigit()]
    if not reached:
        return "before its first call"
    index = max(reached)
    return f"in call {index} ({made.steps[index].describe()})"


def _marked(listing: str) -> list[str]:
    return [line.strip().removeprefix(MARK) for line in listing.splitlines() if MARK in line]


def call_times_ns(steps: Sequence[str], results: Sequence[profctl.StepResult]) -> dict[str, int]:
    """Each call mark's clock, in guest ns, by its index (``end`` for the last)."""
    times: dict[str, int] = {}
    for at, step in enumerate(steps[:-1]):
        nxt = results[at + 1] if at + 1 < len(results) else None
        if step.startswith(f"mark:{MARK}") and nxt is not None and nxt.ok and nxt.op == "clock":
            times[step.removeprefix(f"mark:{MARK}")] = nxt.int_value("ns")
    return times


def deadline_findings(
    interface: ControlInterface, made: Plan, times_ns: Mapping[str, int]
) -> tuple[Finding, ...]:
    """A finding for each call that took longer than its deadline (guest time)."""
    found = []
    keys = [*(str(i) for i in range(len(made.steps))), "end"]
    for index, step in enumerate(made.steps):
        start, end = times_ns.get(keys[index]), times_ns.get(keys[index + 1])
        if start is None or end is None:
            continue
        limit = decl_of(interface, step.op).deadline_of(step.ms)
        took = (end - start) / NS_PER_S
        if took > limit:
            what = f"call {index} ({step.describe()}) took {took:.1f} s, over its {limit:.0f} s"
            found.append(Finding("deadline", what))
    return tuple(found)


def child_findings(
    interface: ControlInterface, made: Plan, outputs: Mapping[str, str]
) -> tuple[Finding, ...]:
    """A finding for each child step that ended in an outcome its op does not allow, or late.

    A child with no complete output (it never finished) is a finding too.
    """
    found: list[Finding] = []
    for child in made.children:
        op = interface.process(child.op)
        if op is None:
            continue
        text = outputs.get(child.out, "")
        try:
            results = profctl.parse_output(text, child.steps())
        except InfraError:
            reached = sum(line.startswith("step=") for line in text.splitlines())
            steps = child.steps()
            at = steps[reached] if reached < len(steps) else "its end"
            what = f"{child.op} process {child.n} of call {child.call} did not finish: in {at}"
            found.append(Finding("process", what))
            continue
        found += _judge_child(op, child, results)
    return tuple(found)


def _judge_child(
    op: ProcessOp, child: Child, results: Sequence[profctl.StepResult]
) -> list[Finding]:
    found = []
    where = f"{child.op} process {child.n} of call {child.call}"
    for k, step in enumerate(child.op_steps):
        before, result, after = results[2 * k], results[2 * k + 1], results[2 * k + 2]
        outcome = OK if result.ok else (result.errno or "?")
        if outcome not in op.allowed[k]:
            allowed = " or ".join(op.allowed[k])
            found.append(Finding("process", f"{where}: {step} ended {outcome}, not {allowed}"))
        took = (after.int_value("ns") - before.int_value("ns")) / NS_PER_S
        if took > op.deadline_s:
            what = f"{where}: {step} took {took:.1f} s, over its {op.deadline_s:.0f} s"
            found.append(Finding("deadline", what))
    return found
