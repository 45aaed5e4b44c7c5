"""A pooled guest's state at boot, and putting it back before the next test (deciding is pure).

A test may offline CPUs (hotplug), change the perf sysctls (throttling) or leave a
module loaded (the agent). `GuestPool` reads the state once right after boot and,
before it hands the guest out again, puts back what differs in one SSH round trip:
a script that prints the state, restores each item only where it differs from the
baseline (every write guarded by a read, in the shell's builtins: no process is
started for a check under TCG), and prints the state again if it wrote anything::

    baseline = read_state(guest.shell)       # right after boot
    ...                                      # a test runs
    outcome = reset(guest.shell, baseline)
    outcome.found                            # what the test left behind (readable)
    outcome.left                             # what is still different: discard the guest
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import InfraError
from harness.vm.shell import CommandShell
from harness.vm.topology import parse_cpu_list

CPU_TIME = "kernel.perf_cpu_time_max_percent"
SAMPLE_RATE = "kernel.perf_event_max_sample_rate"
SYSCTLS = (CPU_TIME, SAMPLE_RATE)
#: Any value of kernel.perf_cpu_time_max_percent but 0 and 100 lets the rate be written.
_RATE_WRITABLE_PERCENT = "25"
_SECTIONS = ("online", "sysctl", "modules")


def _proc_path(sysctl: str) -> str:
    return "/proc/sys/" + sysctl.replace(".", "/")


#: One shell command printing everything `parse_state` reads (busybox sh in the guest).
STATE_COMMAND = "; ".join(
    (
        "echo '### online'",
        "cat /sys/devices/system/cpu/online",
        "echo '### sysctl'",
        "grep -H . " + " ".join(_proc_path(name) for name in SYSCTLS),
        "echo '### modules'",
        "cat /proc/modules",
    )
)
#: Where `reset_script`'s output gives the state after it restored something.
AFTER = "### after"


@dataclass(frozen=True, slots=True)
class GuestState:
    """What a test may change in a guest and the pool puts back."""

    online: frozenset[int]
    sysctls: tuple[tuple[str, str], ...]  # (name, value) of each of SYSCTLS the guest has
    modules: tuple[str, ...]  # loaded, as /proc/modules lists them (newest first)


@dataclass(frozen=True, slots=True)
class ResetOutcome:
    """What `reset` found different from the baseline, and what it could not restore."""

    found: tuple[str, ...]
    left: tuple[str, ...]


def _sections(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("### ") and line[4:].strip() in _SECTIONS:
            current = found.setdefault(line[4:].strip(), [])
        elif current is not None and line.strip():
            current.append(line.strip())
    return found


def parse_state(text: str) -> GuestState:
    """Read `STATE_COMMAND` output.

    :raise InfraError: a section is missing or does not parse (not the guest's output).
    """
    sections = _sections(text)
    if missing := [name for name in _SECTIONS if name not in sections]:
        raise InfraError(f"guest state without {', '.join(missing)}: {text[-300:]!r}")
    paths = {_proc_path(name): name for name in SYSCTLS}
    sysctls = {}
    for line in sections["sysctl"]:
        path, _, value = line.partition(":")
        if path in paths:
            sysctls[paths[path]] = value
    try:
        online = parse_cpu_list(",".join(sections["online"]))
    except ValueError as exc:
        raise InfraError(f"unreadable online CPU list {sections['online']!r}") from exc
    return GuestState(
        online=online,
        sysctls=tuple((name, sysctls[name]) for name in SYSCTLS if name in sysctls),
        modules=tuple(line.split()[0] for line in sections["modules"]),
    )


def differences(baseline: GuestState, now: GuestState) -> list[str]:
    """What differs from ``baseline``, one readable line each; empty when nothing does."""
    lines = [f"CPU {n} is offline (online at boot)" for n in sorted(baseline.online - now.online)]
    lines += [f"CPU {n} is online (offline at boot)" for n in sorted(now.online - baseline.online)]
    was, is_ = dict(baseline.sysctls), dict(now.sysctls)
    lines += [
        f"{name} is {is_.get(name, '<unreadable>')} ({value} at boot)"
        for name, value in was.items()
        if is_.get(name) != value
    ]
    lines += [f"module {name} is loaded (not at boot)" for name in _new_modules(baseline, now)]
    lines += [f"module {name} is gone (loaded at boot)" for name in baseline.modules
              if name not in now.modules]  # fmt: skip
    return lines


def _new_modules(baseline: GuestState, now: GuestState) -> list[str]:
    return [name for name in now.modules if name not in baseline.modules]


def read_state(shell: CommandShell) -> GuestState:
    """The guest's state now, in one round trip (≤ the shell's command budget).

    :raise HarnessError: SSH failed, or the output does not parse.
    """
    return parse_state(shell.run(STATE_COMMAND).stdout)


def guarded_commands(baseline: GuestState) -> tuple[str, ...]:
    """Shell commands that put back what differs from ``baseline``, read from the guest.

    Modules first (``rmmod`` in /proc/modules order, so users before what they
    use), then CPUs (online first), then the sysctls: the kernel refuses a new sample
    rate while the CPU-time limit is 0 or 100 (throttling off or unlimited), so the
    limit goes to 25 first when it must. Each write happens only where a read
    (``read``, a builtin) finds the value different, and sets ``w``. A module that
    was loaded at boot and is gone cannot be put back here: `differences` still
    reports it.
    """
    modules = " ".join(baseline.modules)
    online = " ".join(str(n) for n in sorted(baseline.online))
    cpus = "/sys/devices/system/cpu"
    commands = [
        f"while read -r m _; do case ' {modules} ' in *\" $m \"*) ;; *) g=\"$g $m\";; esac; "
        "done < /proc/modules",
        'for m in $g; do rmmod "$m" && w=1; done',
        *(f"for f in {cpus}/cpu[0-9]*/online; do [ -e \"$f\" ] || continue; "
          f"n=${{f%/online}}; n=${{n##*/cpu}}; case ' {online} ' in *\" $n \"*) v=1;; *) v=0;; "
          f'esac; read -r c < "$f"; [ "$c" = {want} ] || [ $v != {want} ] || '
          f'{{ echo {want} > "$f"; w=1; }}; done' for want in (1, 0)),
    ]  # fmt: skip
    was = dict(baseline.sysctls)
    percent, rate = _proc_path(CPU_TIME), _proc_path(SAMPLE_RATE)
    if SAMPLE_RATE in was:
        commands.append(
            f'read -r c < {rate}; if [ "$c" != {was[SAMPLE_RATE]} ]; then read -r c < {percent}; '
            f'case "$c" in 0|100) echo {_RATE_WRITABLE_PERCENT} > {percent};; esac; '
            f"echo {was[SAMPLE_RATE]} > {rate}; w=1; fi"
        )
    if CPU_TIME in was:
        commands.append(f'read -r c < {percent}; [ "$c" = {was[CPU_TIME]} ] || '
                        f"{{ echo {was[CPU_TIME]} > {percent}; w=1; }}")  # fmt: skip
    return tuple(commands)


def reset_script(baseline: GuestState) -> str:
    """One command: the state, the guarded restore, the state after it if it wrote.

    The restore's own output goes to stderr; the state after it follows `AFTER`.
    """
    guarded = "; ".join(guarded_commands(baseline))
    return (f"w=; g=; {STATE_COMMAND}; {{ {guarded}; }} >&2; "
            f"[ -z \"$w\" ] || {{ echo '{AFTER}'; {STATE_COMMAND}; }}")  # fmt: skip


def reset(shell: CommandShell, baseline: GuestState) -> ResetOutcome:
    """Compare the guest with ``baseline``, restore what differs and read it back.

    One round trip (`reset_script`), ≤ the shell's command budget.

    :raise HarnessError: SSH failed, or the output does not parse.
    """
    text = shell.run(reset_script(baseline), check=False).stdout
    before, marked, after = text.partition(f"\n{AFTER}\n")
    found = tuple(differences(baseline, parse_state(before)))
    if not marked:
        return ResetOutcome(found=found, left=found)
    return ResetOutcome(found=found, left=tuple(differences(baseline, parse_state(after))))
