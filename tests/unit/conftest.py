"""The unit tier's guard: no test leaves the process changed for the tests after it.

The unit tier shares xdist workers with the guest tier in CI, and a worker runs its
tests one after another in one process. A test that leaves a ``PROFBENCH_*`` variable
or ``sys.path`` changed changes what every later test of that worker sees, and every
command it starts (issue 42: a unit test's flavour path made six CLI tests fail, by
test order). So after each test both are compared with what they were before it; a
difference is put back and fails that test, naming what changed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

PREFIX = "PROFBENCH_"


def _ours() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key.startswith(PREFIX)}


def leaked(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs between two ``PROFBENCH_*`` environments, one line a variable."""
    lines = []
    for key in sorted(before.keys() | after.keys()):
        if before.get(key) != after.get(key):
            lines.append(f"{key}: {before.get(key)!r} before, {after.get(key)!r} after")
    return lines


@pytest.fixture(autouse=True)
def nothing_leaks() -> Iterator[None]:
    environment, path = _ours(), list(sys.path)
    yield
    changed = leaked(environment, _ours())
    if sys.path != path:
        changed.append(f"sys.path: {len(path)} entries before, {len(sys.path)} after")
    for key in _ours().keys() - environment.keys():
        del os.environ[key]
    os.environ.update(environment)
    sys.path[:] = path
    if changed:
        pytest.fail("the test left the process changed for the tests after it:\n"
                    + "\n".join(changed), pytrace=False)  # fmt: skip
