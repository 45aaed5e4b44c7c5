"""Golden-file comparison with one regeneration switch.

A golden file is the reviewed, expected text of something the harness renders
(an argv, a generated source). Tests compare against it with `check_golden`::

    check_golden("argv-arm64-2s2cl1c2t.txt", "\\n".join(argv) + "\\n")

Golden files live in ``tests/data/golden/``. To regenerate them after an
intended change, run the tests with ``HARNESS_UPDATE_GOLDEN=1``; each
`check_golden` call then rewrites its file instead of comparing. Review the
diff before committing it: a golden file is only as good as that review.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
GOLDEN_DIR = DATA_DIR / "golden"
LOGS_DIR = DATA_DIR / "logs"
UPDATE_ENV = "HARNESS_UPDATE_GOLDEN"


def updating() -> bool:
    """Whether this run regenerates golden files instead of comparing."""
    return os.environ.get(UPDATE_ENV) == "1"


def check_golden(name: str, actual: str) -> None:
    """Assert that ``actual`` equals ``tests/data/golden/<name>``, or rewrite it.

    With ``HARNESS_UPDATE_GOLDEN=1`` the file is (re)written from ``actual``.
    Otherwise a missing file or any difference fails the calling test.
    """
    path = GOLDEN_DIR / name
    if updating():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
        return
    assert path.is_file(), f"no golden file {path}; create it with {UPDATE_ENV}=1 and review it"
    assert actual == path.read_text(), f"differs from {path} ({UPDATE_ENV}=1 rewrites it)"
