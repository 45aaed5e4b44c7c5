"""What the agent's NMI handler called at run time, as the guest kernel's own tracer saw it.

The kernel's function_graph tracer, started at the agent's NMI entry
(``set_graph_function pa_overflow``), writes every function the handler reaches, the
kernel's included, whatever path led there (an indirect call the module's static graph
could not follow, `harness.agent.truth.nmigraph`). The agent writes none of it: the
evidence is the kernel's. `nmi_trace` reads its text into each forbidden call (a lock,
an allocation, a sleep: `forbidden_kind`) with the function that made it::

    trace = nmi_trace(text)          # the 'trace' file, function_graph format
    trace.entries                    # pa_overflow calls traced
    [str(r) for r in trace.forbidden]   # ['lock _raw_spin_lock via pa_overflow -> dt_get']

Lines look like `` 1)   0.875 us    |    pa_produce [profagent]();`` (a leaf) and
`` 1)               |  pa_overflow [profagent]() {`` (a call that returns later, its
``}`` on a line of its own); two spaces of indent a level. Comments (``/* */``), the
header and the interrupt markers are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.agent.truth.nmigraph import NMI_ENTRY, Reach, forbidden_kind

#: `` 1) + 12.345 us   |    name [module]() {``: the CPU, the graph part after ``|``.
_LINE = re.compile(r"^\s*(?P<cpu>\d+)\)(?P<rest>.*?)\|(?P<graph>.*)$")
_CALL = re.compile(r"^(?P<indent> *)(?P<name>[\w.$]+)(?: \[[\w]+\])?\(\)\s*(?P<end>[{;])\s*$")
_CLOSE = re.compile(r"^(?P<indent> *)\}")


@dataclass(frozen=True, slots=True)
class NmiTrace:
    """The traced calls below the NMI entry: how many entries, how many calls, which bad.

    ``lost``: the tracer dropped events (its ring was overrun): the counts are a floor.
    """

    entries: int
    calls: int
    forbidden: tuple[Reach, ...]
    lost: bool = False


def nmi_trace(text: str, *, entry: str = NMI_ENTRY) -> NmiTrace:
    """The function_graph ``trace`` text as calls under ``entry``, per CPU's own stack."""
    stacks: dict[int, list[str]] = {}
    entries = calls = 0
    forbidden: list[Reach] = []
    for line in text.splitlines():
        found = _LINE.match(line)
        if not found:
            continue
        graph = found["graph"].rstrip()
        stack = stacks.setdefault(int(found["cpu"]), [])
        if _CLOSE.match(graph):
            if stack:
                stack.pop()
            continue
        call = _CALL.match(graph)
        if not call:
            continue  # a comment, an interrupt marker
        depth = len(call["indent"]) // 2 - 1  # one leading space, then two a level
        del stack[max(depth, 0) :]
        name = call["name"]
        if name == entry and not stack:
            entries += 1
        elif stack:
            calls += 1
            if kind := forbidden_kind(name):
                forbidden.append(Reach((*stack, name), kind))
        if call["end"] == "{":
            stack.append(name)
    overrun = any(int(n) for n in re.findall(r"^overrun: (\d+)$", text, re.MULTILINE))
    lost = overrun or ("LOST" in text and "EVENTS" in text)
    return NmiTrace(entries, calls, tuple(forbidden), lost)


#: The kernel variant built with the tracer (guest/kconfig/debug.config), and the run it
#: follows there: the exact run, whose samples' chains no oracle judges. A traced kernel
#: call passes ftrace's trampoline, whose frame records CHAIN's frames law does not model.
TRACED_VARIANT, TRACED_CASE = "debug", "exact"
#: The kernel's tracing file system (mounted by `arm_command` where it is not).
TRACING = "/sys/kernel/tracing"
#: Per CPU: KiB of the tracer's ring; the oldest events are overwritten past it.
BUFFER_KIB = 4096


def arm_command(entry: str = NMI_ENTRY) -> str:
    """One guest command: function_graph from ``entry`` on, its ring empty.

    ``entry`` is a module's function: run it after the module loaded.
    """
    t = TRACING
    return (f"{{ [ -e {t}/trace ] || mount -t tracefs nodev {t}; }} && echo 0 > {t}/tracing_on"
            f" && echo nop > {t}/current_tracer && echo {BUFFER_KIB} > {t}/buffer_size_kb"
            f" && echo {entry} > {t}/set_graph_function && echo function_graph > "
            f"{t}/current_tracer && echo > {t}/trace && echo 1 > {t}/tracing_on")  # fmt: skip


def collect_command() -> str:
    """One guest command: the tracer stopped, its ``trace`` text and overrun counts, reset."""
    t = TRACING
    return (f"echo 0 > {t}/tracing_on && cat {t}/trace && grep -h overrun "
            f"{t}/per_cpu/cpu*/stats && echo nop > {t}/current_tracer && "
            f"echo > {t}/set_graph_function")  # fmt: skip
