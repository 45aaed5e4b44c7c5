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
_SUFFIX = re.compile(r"(\.(isra|constprop|part|cold)\.\d+)+$")  # GCC's clones of a function
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
#: KCSAN reports about kernel code (not the agent's) the bench accepts, keyed by the
#: functions at the top of the report's stacks (one: a race of a function with itself, or
#: a "race at unknown origin"; two: a race between them), with why. A report whose top
#: functions are a key here is not a finding (`SanitizerReport.known`); any other report
#: in kernel code still is, even between two functions each known for another race.
_VIRTQUEUE_HINTS = (
    "6.1's virtio_ring keeps two notification hints in plain fields: the avail-ring flags "
    "shadow, which start_xmit (task) and the transmit interrupt's skb_xmit_done both set to "
    "'no interrupt' (value 0 -> 1 seen), and event_triggered, which vring_interrupt sets and "
    "virtqueue_disable_cb reads (later kernels mark it data_race()). A stale hint costs one "
    "extra or one late notification; the used index decides what was done. virtio_net's "
    "traffic, the bench's own SSH, not the agent (seen four times in one 8-vCPU kcsan tier)"
)
KNOWN_KERNEL_RACES: dict[frozenset[str], str] = {
    frozenset({"__kstat_incr_irqs_this_cpu"}): (
        "a real race in 6.1's interrupt accounting, not the agent's: kstat.irqs_sum, the "
        "per-CPU total of /proc/stat's 'intr' line, is a plain increment in every IRQ, and "
        "the PMU's pseudo-NMI increments it too; an NMI between the IRQ's load and store "
        "loses one count of that total. The bench reads the PMU's own per-CPU count in "
        "/proc/interrupts (desc->kstat_irqs, touched by the NMI path only). Seen on 8 vCPUs "
        "(twice in kprof's test), at kstat+0 of the CPU's per-CPU area"
    ),
    frozenset({"__kstat_incr_irqs_this_cpu", "show_interrupts"}): (
        "/proc/interrupts reads each IRQ's per-CPU count with a plain load while that IRQ "
        "increments it on its CPU: an aligned 4-byte counter, read before or after the "
        "increment. The bench reads /proc/interrupts around the runs it judges exactly, "
        "never during one (seen once, 8 vCPUs)"
    ),
    frozenset({"ktime_get_mono_fast_ns"}): (
        "timekeeping's NMI-safe clock reads its base under a seqcount latch and retries "
        "when the sequence moved; KCSAN learnt latch readers only in Linux 6.13, so 6.1 "
        "(and 6.12) report every read a clock update overlaps ('race at unknown origin'). "
        "Seen 43 times in one 2-vCPU kcsan run, all from pa_produce's and the probe's clock"
    ),
    frozenset({"napi_complete_done", "napi_schedule_prep"}): (
        "6.1's napi_complete_done tests n->state for NPSVC and IN_BUSY_POLL with a plain "
        "read while virtio_net's receive interrupt on the same CPU sets SCHED or MISSED "
        "with a cmpxchg: bits the read does not test, and the cmpxchg loop that follows "
        "rereads the word. Networking, not the agent (seen once, the 8-vCPU kcsan tier's "
        "NMI-off guest, its profagent unloaded 0.1 s before)"
    ),
    frozenset({"virtqueue_disable_cb", "vring_interrupt"}): _VIRTQUEUE_HINTS,
    frozenset({"do_select", "pollwake"}): (
        "select()'s wake-up flag: pollwake sets pwq->triggered for the poller, which reads "
        "it plainly in do_select's loop and rechecks under its own wait (the kernel's "
        "comments call it intentional). The harness's own shells and SSH, not the agent "
        "(seen once, the 8-vCPU kcsan tier)"
    ),
    frozenset({"print_cpu", "tick_nohz_idle_stop_tick"}): (
        "/proc/timer_list prints each CPU's tick_sched fields with plain reads while that "
        "CPU's idle entry updates them: a diagnostic snapshot, not a state the kernel acts "
        "on. A task read it during the run (not the agent; seen once, 8 vCPUs)"
    ),
    frozenset({"start_dir_add"}): (
        "the dcache's in-lookup directory sequence: start_dir_add reads i_dir_seq plainly, "
        "then claims it with a cmpxchg that fails and retries if the read was stale; the "
        "'race at unknown origin' is another CPU's claim between the two. /proc's pid "
        "lookups under the harness's own execs, not the agent (seen once, 8 vCPUs)"
    ),
}


#: Families of kernel functions that share state 6.1 reads and writes racily by design:
#: a report whose top functions all belong to one family is known, for the family's reason
#: (the pairs seen so far are in the reason). Three 8-vCPU kcsan runs of the whole tier each
#: found pairs of these families not seen before; the families end that churn, and a race
#: between a family and anything else stays a finding.
@dataclass(frozen=True, slots=True)
class RaceFamily:
    """Kernel functions matching ``pattern`` race among themselves by design, for ``reason``.

    ``seen``: the members seen in reports so far (the reason names their pairs).
    """

    pattern: re.Pattern[str]
    reason: str
    seen: tuple[str, ...]


KNOWN_RACE_FAMILIES: tuple[RaceFamily, ...] = (
    RaceFamily(
        re.compile(r"^tick_(nohz|sched)_\w+$"),
        "6.1's tick_sched flags (inidle, tick_stopped, idle_active, got_idle_tick, ...) are "
        "bit-fields sharing a byte: an interrupt's irq_enter (or the tick) on a CPU writes one "
        "while that CPU's idle loop reads got_idle_tick, and the interrupt watcher sees the "
        "byte change. Same CPU, no lost update; the agent has no code there (seen with "
        "tick_nohz_stop_idle once, an idle CPU under a hwpmc run; with tick_sched_do_timer in "
        "the kcsan mutant guest). Seen as pairs of tick_nohz_idle_got_tick, "
        "tick_nohz_stop_idle, tick_sched_do_timer, tick_nohz_idle_stop_tick and "
        "tick_nohz_next_event: the per-CPU tick_sched state and the global tick_do_timer_cpu, "
        "which the tick and the idle entry read and hand over without locks (later kernels "
        "annotate them)",
        ("tick_nohz_idle_got_tick", "tick_nohz_stop_idle", "tick_sched_do_timer",
         "tick_nohz_idle_stop_tick", "tick_nohz_next_event"),
    ),
    RaceFamily(
        re.compile(r"^virtqueue_\w+$"),
        _VIRTQUEUE_HINTS + ". Seen as virtqueue_disable_cb with itself and with "
        "virtqueue_enable_cb_delayed: both write the same hints",
        ("virtqueue_disable_cb", "virtqueue_enable_cb_delayed"),
    ),
)  # fmt: skip


#: KCSAN reports of memory a device writes, accepted only as a "race at unknown origin"
#: (one stack: no CPU of the guest wrote it), by the top frame of that stack.
KNOWN_DEVICE_RACES: dict[str, str] = dict.fromkeys(
    ("virtqueue_get_buf_ctx", "vring_interrupt", "virtqueue_poll", "more_used_split"),
    "virtio's used ring is written by the device, here QEMU, which KCSAN cannot see: a "
    "read of the used index or flags that a device write overlaps is a 'race at unknown "
    "origin'. Seen at boot in virtio_net's control queue (virtqueue_get_buf_ctx, no agent "
    "loaded) and in virtio's interrupt handler under TCP traffic (vring_interrupt)",
)


@dataclass(frozen=True, slots=True)
class SanitizerReport:
    """One sanitizer report: what it says, and whose code it points at."""

    tool: str  # KASAN, KCSAN or UBSAN
    title: str  # the title line after "BUG: KASAN: " / "UBSAN: "
    line_number: int  # 1-based, the title line
    agent_frame: str | None  # the first frame of the agent, None when none
    first_frame: str | None  # the first frame outside the sanitizer runtime
    text: str  # the report, title to closing rule
    known: str | None = None  # why this KCSAN report is about correct kernel code

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
                known=_known_race(body) if tool == "KCSAN" else None,
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


def _known_race(body: list[str]) -> str | None:
    """Why the race is correct kernel code, when its stacks' top functions say so."""
    tops, top_next = [], True
    for line in body:
        if re.search(r"\b(read|write)\b.* (to|at) 0x[0-9a-f]+ of \d+ bytes by ", line):
            top_next = True
        elif top_next and (m := _FRAME.match(line)):
            tops.append(m["sym"])
            top_next = False
    if not tops:
        return None
    names = frozenset(_SUFFIX.sub("", symbol) for symbol in tops)
    if len(tops) == 1 and any("race at unknown origin" in line for line in body):
        device = KNOWN_DEVICE_RACES.get(next(iter(names)))  # one stack: no guest CPU wrote it
        if device is not None:
            return device
    if (known := KNOWN_KERNEL_RACES.get(names)) is not None:
        return known
    for family in KNOWN_RACE_FAMILIES:
        if all(family.pattern.match(name) for name in names):
            return family.reason
    return None


def known_race_functions() -> tuple[str, ...]:
    """Every kernel function a known race (kernel, device or family) was seen in, sorted."""
    names = {name for key in KNOWN_KERNEL_RACES for name in key} | set(KNOWN_DEVICE_RACES)
    return tuple(sorted(names | {name for f in KNOWN_RACE_FAMILIES for name in f.seen}))
