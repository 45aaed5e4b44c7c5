"""Reading a guest console log: crash findings and boot-failure classification (pure).

The console is the guest kernel's own testimony. `scan_console` finds every
line that means the kernel is unwell (panic, Oops, BUG, WARNING, lockdep, RCU
stall, soft lockup, hung task) with a few lines of context; `classify_boot`
turns a failed boot into the right exception by the evidence::

    findings = scan_console(console_log.read_text())
    error = classify_boot(text, qemu_exitcode=None, waited_s=120.0)  # BootHang, ...

Classification rules (design §6): crash lines → `GuestCrash`; kernel output
followed by silence → `BootHang`; no output at all → the host is to blame
(`HarnessTimeout`), for example a /dev/kvm that opens but hangs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import (
    BootHang,
    GuestCrash,
    HarnessError,
    HarnessTimeout,
    SanitizerFailure,
    VmLaunchError,
)
from harness.vm.sanitizer import parse_reports

#: (kind, pattern). Order matters only for naming: the first match names a line.
CRASH_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("panic", r"Kernel panic - not syncing"),
        ("oops", r"Internal error: Oops|\bOops\b.*:|Unable to handle kernel"),
        ("lockdep", r"possible (circular|recursive) locking|inconsistent lock state|"
                    r"possible irq lock inversion|suspicious RCU usage|lock held when returning|"
                    r"lock order detected|bad unlock balance detected|held lock freed|"
                    r"releasing a pinned lock|lock\(s\) held when"),
        # Sanitizer reports (harness.vm.sanitizer names their culprit) before plain BUG.
        ("kasan", r"BUG: KASAN: "),
        ("kcsan", r"BUG: KCSAN: "),
        ("ubsan", r"\bUBSAN: "),
        ("soft-lockup", r"BUG: soft lockup|hard LOCKUP"),
        ("atomic-sleep", r"BUG: (sleeping function called from invalid context|"
                         r"scheduling while atomic)"),
        ("bug", r"\bBUG: |kernel BUG at"),
        ("rcu-stall", r"rcu: INFO: rcu_\w+ (self-)?detected stall|detected stalls on CPUs"),
        ("hung-task", r"INFO: task \S+ blocked for more than \d+ seconds"),
        ("nmi-slow", r"INFO: NMI handler \(\S+\) took too long to run"),
        ("warning", r"WARNING: CPU: \d+ PID: \d+ at |------------\[ cut here \]------------"),
    )
)  # fmt: skip

_CONTEXT_AFTER = 12
#: A sanitizer report's stacks run longer: its context reaches its closing rule.
SANITIZER_KINDS = frozenset({"kasan", "kcsan", "ubsan"})
_SANITIZER_CONTEXT_AFTER = 120


@dataclass(frozen=True, slots=True)
class ConsoleFinding:
    """One alarming console line, with the lines that follow it."""

    kind: str
    line_number: int  # 1-based
    line: str
    context: str

    def __str__(self) -> str:
        return f"[{self.kind}] console line {self.line_number}: {self.line.strip()}"


def scan_console(text: str, *, start_line: int = 0) -> list[ConsoleFinding]:
    """Every crash finding in ``text`` from line ``start_line`` (0-based) on.

    A report spans many lines (a WARNING has its cut-here line, the WARNING line
    and a stack): lines inside the context of an earlier finding are not
    reported again unless they name a different kind.
    """
    lines = text.splitlines()
    findings: list[ConsoleFinding] = []
    covered_until = -1
    covered_kinds: set[str] = set()
    for index in range(start_line, len(lines)):
        kind = _kind_of(lines[index])
        if kind is None:
            continue
        if index <= covered_until and kind in covered_kinds | {"warning", "bug"}:
            continue
        after = _SANITIZER_CONTEXT_AFTER if kind in SANITIZER_KINDS else _CONTEXT_AFTER
        context = "\n".join(lines[max(0, index - 2) : index + after])
        findings.append(ConsoleFinding(kind, index + 1, lines[index], context))
        if index > covered_until:
            covered_kinds = set()
        covered_until = index + _CONTEXT_AFTER
        covered_kinds.add(kind)
    return findings


def _kind_of(line: str) -> str | None:
    for kind, pattern in CRASH_PATTERNS:
        if pattern.search(line):
            return kind
    return None


def crash_error(
    findings: list[ConsoleFinding], *, what: str, console_log: Path | None = None
) -> GuestCrash:
    """A `GuestCrash` that carries ``findings`` as its evidence.

    Sanitizer reports make a `SanitizerFailure` whose message names each report,
    its first agent frame (or that the code is the kernel's, not the agent's) and ``what``.
    """
    kinds = ", ".join(sorted({f.kind for f in findings}))
    evidence = "\n\n".join(f"{f}\n{f.context}" for f in findings[:5])
    reports = [r for f in findings if f.kind in SANITIZER_KINDS
               for r in parse_reports(f.context)[:1]]  # fmt: skip
    if reports:
        named = "; ".join(r.describe() for r in reports[:3])
        more = f" (and {len(reports) - 3} more)" if len(reports) > 3 else ""
        described = [(r.tool, r.describe(), r.in_agent) for r in reports]
        return SanitizerFailure(f"{what}: {named}{more}", evidence, console_log,
                                reports=described)  # fmt: skip
    return GuestCrash(f"{what}: the guest console shows {kinds}", evidence, console_log)


def tail(text: str, lines: int = 40) -> str:
    """The last ``lines`` lines of ``text``, or a note that it is empty."""
    return "\n".join(text.splitlines()[-lines:]) or "<console empty>"


def classify_boot(
    text: str,
    *,
    qemu_exitcode: int | None,
    waited_s: float,
    qemu_output: str = "",
    argv: tuple[str, ...] = (),
    console_log: Path | None = None,
) -> HarnessError:
    """The exception a boot that did not reach SSH deserves, by its evidence.

    :param qemu_exitcode: None while QEMU still runs (the boot timed out).
    """
    if findings := scan_console(text):
        return crash_error(findings, what="the guest crashed during boot", console_log=console_log)
    if qemu_exitcode is not None:
        if text.strip():
            return BootHang(
                f"QEMU exited with status {qemu_exitcode} during boot, no crash on the console",
                tail(text),
                console_log,
            )
        return VmLaunchError(
            "QEMU exited before the guest printed anything", argv, qemu_exitcode, qemu_output
        )
    if not text.strip():
        return HarnessTimeout(
            "the first console line (none came: a host problem, such as a KVM that "
            "opens but hangs, or an unusable kernel image)",
            waited_s,
        )
    return BootHang(
        f"the kernel printed, then went silent without SSH for {waited_s:.0f}s",
        tail(text),
        console_log,
    )
