"""Process checks shared by the guest tier: host processes, and the guest's profctl spins."""

from __future__ import annotations

from pathlib import Path


def process_gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (exited and reaped, or a zombie about to be)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def qemu_children(parent: int) -> list[int]:
    """PIDs of running QEMU processes whose parent is ``parent`` (ours, never others')."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            stat = stat_file.read_text()
        except OSError:  # gone meanwhile
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        if name.startswith("qemu-system") and int(fields[1]) == parent and fields[0] != "Z":
            found.append(int(stat_file.parent.name))
    return found


def kill_spins(pidfile: str) -> str:
    """A guest shell command: kill the spin children whose ``pid=`` profctl printed to
    ``pidfile`` (``profctl spin:CPU:MS ... > pidfile``)."""
    return f"kill $(sed -n 's/.* pid=\\([0-9]*\\).*/\\1/p' {pidfile})"
