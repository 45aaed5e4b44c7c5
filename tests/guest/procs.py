"""Process checks shared by the guest tier's cleanup tests."""

from __future__ import annotations

from pathlib import Path


def process_gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (exited and reaped, or a zombie about to be)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"
