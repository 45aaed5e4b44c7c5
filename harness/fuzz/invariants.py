r"""What must hold after every fuzzed sequence: pure checks over what the run left.

The guest's console and dmesg show no crash, warning or sanitizer report; the
interface's laws and its model's predicted numbers hold in the run's numbers; the
flavour's oracles hold (those the interface leaves unjudged aside)::

    console_findings("[ 1.2] WARNING: CPU: 0 PID: 1 at kernel/x.c:1 f+0x1/0x2\\n")
    # (Finding(kind='console', what='WARNING: CPU: 0 PID: 1 at kernel/x.c:1 f+0x1/0x2'),)
    number_findings(INTERFACE, {"samples": 1, "stats.readevt": 2}, {})
    # (Finding(kind='law', what='DT-readevt: samples 1 != stats.readevt 2 (...)', ...),)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness.agent.controlspec import ControlInterface

#: Console and dmesg lines that are a finding wherever they appear.
CRASH_PATTERNS = (
    r"\bBUG: ",
    r"\bWARNING: ",
    r"\bOops\b",
    r"Unable to handle kernel",
    r"Internal error: ",
    r"Kernel panic",
    r"\bKASAN\b",
    r"\bKCSAN\b",
    r"\bUBSAN\b",
    r"possible (recursive|circular) locking",
    r"inconsistent lock state",
    r"suspicious RCU usage",
    r"blocked for more than \d+ seconds",
    r"kmemleak: \d+ new suspected memory leaks",
    r"rcu: INFO: rcu_\w+ detected stalls",
    r"soft lockup",
)
_CRASH = re.compile("|".join(CRASH_PATTERNS))


@dataclass(frozen=True, slots=True)
class Finding:
    """One broken invariant: its kind, one line, and the numbers a scenario can expect.

    ``numbers`` holds (value name, observed) pairs: what the run showed, so that the
    scenario written for the finding expects the defect's own numbers.
    """

    kind: str  # console, law, model, oracle, call, guest, kmemleak
    what: str
    numbers: tuple[tuple[str, int], ...] = ()
    oracle: str | None = None


def console_findings(text: str) -> tuple[Finding, ...]:
    """A finding per console or dmesg line that shows a crash, warning or report."""
    return tuple(
        Finding("console", line.strip()) for line in text.splitlines() if _CRASH.search(line)
    )


def number_findings(
    interface: ControlInterface, observed: Mapping[str, int], expected: Mapping[str, int]
) -> tuple[Finding, ...]:
    """The interface's laws and the model's predictions, against the run's numbers."""
    found = []
    for law in interface.laws:
        left, right = observed.get(law.left), observed.get(law.right)
        if left is not None and right is not None and left != right:
            found.append(
                Finding(
                    "law",
                    f"{law.name}: {law.left} {left} != {law.right} {right} ({law.why})",
                    ((law.left, left), (law.right, right)),
                )
            )
    for name, value in sorted(expected.items()):
        seen = observed.get(name)
        if seen is not None and seen != value:
            found.append(
                Finding("model", f"{name} is {seen}, the model expects {value}", ((name, seen),))
            )
    return tuple(found)


def oracle_findings(
    interface: ControlInterface, failed: Iterable[tuple[str, str]], unjudged: Iterable[str] = ()
) -> tuple[Finding, ...]:
    """A finding per failed oracle (name, why) the interface, and the sequence, judge."""
    skipped = {*interface.unjudged, *unjudged}
    return tuple(
        Finding("oracle", f"{name}: {why}", oracle=name)
        for name, why in failed
        if name not in skipped
    )


def leak_findings(leaks: Sequence[str]) -> tuple[Finding, ...]:
    """One finding for the module's objects kmemleak reports once the agent was closed.

    ``leaks`` are the report's blocks that name the module
    (`harness.agent.oracles.evidence.module_leaks`); the first one's first lines say
    what was allocated where.
    """
    if not leaks:
        return ()
    first = " | ".join(line.strip() for line in leaks[0].splitlines()[:3])
    what = f"memory left behind by the closed agent: {len(leaks)} object(s); first: {first}"
    return (Finding("kmemleak", what),)
