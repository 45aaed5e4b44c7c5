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

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.fuzz.invariants import Finding
from harness.scenarios.types import Step

#: What a sequence with no finding expects: the shared interrupt count balances.
CLEAN_EXPECT: tuple[Mapping[str, str | int | bool], ...] = ({"oracle": "CALLS"},)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a TOML basic string: JSON's escapes are TOML's


@dataclass(frozen=True, slots=True)
class ScenarioText:
    """The parts of one scenario file."""

    name: str
    description: str
    seed: int
    topology: str
    agent: Mapping[str, object]
    steps: tuple[Step, ...]
    expect: tuple[Mapping[str, str | int | bool], ...] = CLEAN_EXPECT
    variant: str = "default"
    extra: Mapping[str, object] = field(default_factory=dict)


def scenario_text(parts: ScenarioText) -> str:
    """The TOML text of ``parts``: top-level keys, [guest], [agent], steps, expect."""
    lines = [
        f"name = {_value(parts.name)}",
        f"description = {_value(parts.description)}",
        f"seed = {parts.seed}",
        "",
        "[guest]",
        f"topology = {_value(parts.topology)}",
        f"variant = {_value(parts.variant)}",
        "",
        "[agent]",
    ]
    lines += [f"{key} = {_value(value)}" for key, value in parts.agent.items()]
    for step in parts.steps:
        lines += ["", "[[steps]]", f"op = {_value(step.op)}"]
        lines += [f"{key} = {_value(value)}" for key, value in step.params().items()]
    for item in parts.expect:
        lines += ["", "[[expect]]", *(f"{k} = {_value(v)}" for k, v in item.items())]
    return "\n".join(lines) + "\n"


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
    """What a replay's error must contain: a refused step up to its errno, else the line."""
    first = what.splitlines()[0] if what else what
    found = re.search(r"failed with E[A-Z0-9]+", first)
    return first[: found.end()] if found else first


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
