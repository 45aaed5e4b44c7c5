"""Sanitizer reports on a guest console: KASAN, KCSAN and UBSAN, read as verdicts (pure).

The ``debug`` kernel has KASAN and UBSAN, the ``kcsan`` kernel KCSAN (see
``guest/kconfig``). Each prints a report between two ``=====`` rules: a title
(``BUG: KASAN: use-after-free in pa_stop+0x84/0x120 [profagent]``,
``BUG: KCSAN: data-race in pa_x / tp_y``, ``UBSAN: array-index-out-of-bounds in
.../core.c:412:9``) and one or more stacks. `parse_reports` names each report's tool,
title, first agent frame (a frame in the ``profagent`` module, or a symbol with an
agent prefix) and the first frame outside the sanitizer's own runtime, so a
failure says whether the agent or the rest of the kernel is at fault::

    for report in parse_reports(console_text):
        print(report.describe())
    # KASAN use-after-free in tp_stop+0x84/0x120 [profagent];
    #   first agent frame tp_stop+0x84/0x120 [profagent]

Every report is a finding: no list accepts one. The kcsan kernel instruments none of
its own code (``KCSAN_SANITIZE=n``, `harness.builder.kernels.VARIANT_MAKE_VARS`), so a
KCSAN report there has the agent's access on at least one side; the accept-lists of
kernel races the bench once kept (seen while the kernel was instrumented) could only
have hidden a race of the agent with the kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The agent's module; its frames carry ``[profagent]`` in a stack.
AGENT_MODULE = "profagent"
#: Symbol prefixes of the agent's C: the core (pa_) and the flavours (tp_, dt_, kp_, hw_).
#: A KCSAN title names functions without their module, so the prefix tells.
AGENT_PREFIXES = ("pa_", "tp_", "dt_", "kp_", "hw_")
#: Title lines, by tool.
HEADERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("KASAN", re.compile(r"BUG: KASAN: (?P<title>.*)$")),
    ("KCSAN", re.compile(r"BUG: KCSAN: (?P<title>.*)$")),
    ("UBSAN", re.compile(r"\bUBSAN: (?P<title>.*)$")),
)
_STAMP = re.compile(r"^\[\s*\d+\.\d+\]\s?")
_FRAME = re.compile(r"^\s*(?P<frame>(?P<sym>[A-Za-z_.$][\w.$]*)\+0x[0-9a-f]+/0x[0-9a-f]+"
                    r"(?:\s+\[(?P<module>\w+)\])?)\s*$")  # fmt: skip
_RULE = re.compile(r"^={20,}\s*$")
#: The sanitizers' own runtime and the stack printer: never the culprit.
_RUNTIME = re.compile(
    r"^(dump_backtrace|show_stack|dump_stack|dump_stack_lvl|print_report|print_address_description"
    r"|kasan_|__kasan|__asan|__hwasan|check_region|kcsan_|__kcsan|__tsan|ubsan_|__ubsan"
    r"|memcpy|memmove|memset"  # KASAN's checking versions: the caller made the access
    r"|arch_stack_walk|stack_trace_save|report_bug|__warn|warn_)"
)
#: Sections of a KASAN report after the access's own stack (who allocated, who freed).
_LATER_STACKS = re.compile(r"^(Allocated by task|Freed by task|Last potentially related|"
                           r"Second to last potentially|The buggy address belongs)")  # fmt: skip
_MAX_LINES = 160


@dataclass(frozen=True, slots=True)
class SanitizerReport:
    """One sanitizer report: what it says, and whose code it points at."""

    tool: str  # KASAN, KCSAN or UBSAN
    title: str  # the title line after "BUG: KASAN: " / "UBSAN: "
    line_number: int  # 1-based, the title line
    agent_frame: str | None  # the first frame of the agent, None when none
    first_frame: str | None  # the first frame outside the sanitizer runtime
    text: str  # the report, title to closing rule

    @property
    def in_agent(self) -> bool:
        """Whether the report names the agent's code at all."""
        return self.agent_frame is not None

    def describe(self) -> str:
        """One line: tool, title, and the agent's frame or that it is the kernel's."""
        if self.agent_frame is not None and self.first_frame not in (None, self.agent_frame):
            return (f"{self.tool} {self.title}; in kernel code {self.first_frame}, "
                    f"first agent frame {self.agent_frame}")  # fmt: skip
        if self.agent_frame is not None:
            return f"{self.tool} {self.title}; first agent frame {self.agent_frame}"
        shown = self.first_frame or "no frame printed"
        return f"{self.tool} {self.title}; in kernel code, not the agent's (first frame {shown})"


def tool_of(line: str) -> str | None:
    """The sanitizer whose title ``line`` is, or None."""
    for tool, pattern in HEADERS:
        if pattern.search(line):
            return tool
    return None


def parse_reports(text: str, *, start_line: int = 0) -> list[SanitizerReport]:
    """Every sanitizer report in ``text`` from line ``start_line`` (0-based) on."""
    lines = [_STAMP.sub("", line) for line in text.splitlines()]
    reports = []
    index = start_line
    while index < len(lines):
        report = _report_at(lines, index)
        if report is None:
            index += 1
            continue
        reports.append(report)
        index += max(1, report.text.count("\n") + 1)
    return reports


def _report_at(lines: list[str], index: int) -> SanitizerReport | None:
    for tool, pattern in HEADERS:
        if match := pattern.search(lines[index]):
            body = _body(lines, index)
            own = _own_stack(body) if tool == "KASAN" else body
            return SanitizerReport(
                tool=tool,
                title=match["title"].strip(),
                line_number=index + 1,
                agent_frame=_first_agent_frame(own, match["title"]) or _first_agent_frame(body),
                first_frame=_first_frame(own),
                text="\n".join([lines[index], *body]),
            )
    return None


def _body(lines: list[str], index: int) -> list[str]:
    """The lines after the title up to the closing rule (or the next title)."""
    body = []
    for line in lines[index + 1 : index + _MAX_LINES]:
        if _RULE.match(line) or tool_of(line) is not None:
            break
        body.append(line)
    return body


def _own_stack(body: list[str]) -> list[str]:
    """A KASAN report's lines before its allocation and free stacks."""
    for number, line in enumerate(body):
        if _LATER_STACKS.match(line):
            return body[:number]
    return body


def _frames(body: list[str]) -> list[tuple[str, str, str | None]]:
    return [(m["frame"], m["sym"], m["module"]) for line in body if (m := _FRAME.match(line))]


def _is_agent(symbol: str, module: str | None) -> bool:
    return module == AGENT_MODULE or symbol.startswith(AGENT_PREFIXES)


def _first_agent_frame(body: list[str], title: str = "") -> str | None:
    for frame, symbol, module in _frames(body):
        if _is_agent(symbol, module):
            return frame
    # A KCSAN title names the racing functions: "data-race in pa_x / tp_y".
    words: list[str] = re.findall(r"[A-Za-z_][\w.]*(?:\+0x[0-9a-f]+/0x[0-9a-f]+)?", title)
    for word in words:
        if word.startswith(AGENT_PREFIXES):
            return word
    return None


def _first_frame(body: list[str]) -> str | None:
    for frame, symbol, _module in _frames(body):
        if not _RUNTIME.match(symbol):
            return frame
    return None
