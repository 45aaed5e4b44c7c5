"""A fuzzed sequence as a scenario file's text (`scenarios/FORMAT.md`).

Pure: the text `harness.scenarios.load.load_scenario` reads back. Every sequence the
fuzzer runs goes through this text and the loader, so a finding's scenario is the
very file that ran. A finding's expectations are the defect's own numbers (``invoke
repro`` reproduces it when they recur); a finding without numbers expects the
oracles it broke to fail; a console report or an error adds its text::

    text = scenario_text(ScenarioText(name="fuzz-dt-1", description="...", seed=1,
                         topology="1s1cl1c1t", agent={"flavour": "dt"}, steps=steps))
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from harness.fuzz.invariants import Finding
from harness.scenarios.text import CLEAN_EXPECT, ScenarioText, scenario_text

__all__ = ["CLEAN_EXPECT", "ScenarioText", "scenario_text"]  # written by harness.scenarios.text


def finding_expect(findings: Sequence[Finding]) -> tuple[Mapping[str, str | int | bool], ...]:
    """The expectations a finding's scenario carries, each of which the defect makes hold.

    The numbers it showed; else the oracles it broke (``fails = true``); and the console
    line or the error it ended in, as text a replay's line contains. A replay
    reproduces the finding when every one holds again.
    """
    numbers = dict(pair for f in findings for pair in f.numbers)
    expect: list[Mapping[str, str | int | bool]] = [
        {"value": name, "equals": value} for name, value in sorted(numbers.items())
    ]
    if not expect:
        oracles = sorted({f.oracle for f in findings if f.oracle is not None})
        expect += [{"oracle": name, "fails": True} for name in oracles]
    texts = [console_text(f.what) for f in findings if f.kind == "console"]
    texts += [LEAK_TEXT for f in findings if f.kind == "kmemleak"]
    expect += [{"console": text} for text in dict.fromkeys(texts)][:1]
    errors = [error_text(f.what) for f in findings if f.kind in ("call", "guest")]
    expect += [{"error": text} for text in dict.fromkeys(errors)][:1]
    return tuple(expect) or CLEAN_EXPECT


#: A kmemleak report's block starts so (`invoke repro` scans on the debug kernel).
LEAK_TEXT = "unreferenced object"
_WARNING = re.compile(r"WARNING: CPU: \d+ PID: \d+ at \S+ ([\w.]+)\+0x")
_STAMP = re.compile(r"^\[\s*\d+\.\d+\]\s*")


def console_text(line: str) -> str:
    """What a replay's console line must contain to be the same report.

    A WARN's line names CPU, PID and a build path that differ between runs: the
    function it names, as its call trace prints it (`` tp_stop+0x``). Any other
    report: the line without its time stamp, up to the first offset (``+0x``).
    """
    found = _WARNING.search(line)
    if found:
        return f" {found.group(1)}+0x"
    return _STAMP.sub("", line).split("+0x")[0].strip()


def error_text(what: str) -> str:
    """What a replay's error must contain: a refused step up to its errno, else the line.

    Not the step's index: the fuzzer's sequence has steps of its own (each call's mark
    and clock read), so a replay's index differs (KP-D5 on 6.12: step 34 found, step 28
    replayed). The op and its errno are what recur: ``(open, failed with EDEADLK``.
    """
    first = what.splitlines()[0] if what else what
    found = re.search(r"failed with E[A-Z0-9]+", first)
    text = first[: found.end()] if found else first
    return re.sub(r"^.*?\bstep \d+ \(", "(", text) if found else text


def describe(findings: Sequence[Finding], seed: int, flavour: str) -> str:
    """The scenario's description: what broke, how it was found, what its expects mean."""
    lines = [
        f"Found by `invoke fuzz --flavour {flavour} --seed {seed}` and shrunk. "
        "The expectations are what the defect showed: its numbers, else the oracles it "
        "broke (fails = true), and the console report or the error it ended in; a "
        "replay reproduces it when every one holds again."
    ]
    lines += [f"- {f.kind}: {f.what}" for f in findings]
    return "\n".join(lines)
