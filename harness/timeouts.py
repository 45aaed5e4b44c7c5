"""One timeout budget for every blocking call, and the one polling loop.

Every budget is multiplied by `Timeouts.scale`, so a slow host (TCG on a loaded
CI runner, a debug kernel) is handled in one place. ``PROFBENCH_TIMEOUT_SCALE``
sets the scale from the environment::

    timeouts = Timeouts.from_env()
    port = wait_until(probe, timeout_s=timeouts.boot_s, what="SSH", abort=vm.failure)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from harness.errors import ConfigError, HarnessTimeout

T = TypeVar("T")

SCALE_ENV = "PROFBENCH_TIMEOUT_SCALE"

#: How much longer the same work takes on each kernel variant under TCG, as a budget
#: factor: the debug kernel's KASAN and lockdep about twice the default kernel's, the
#: kcsan kernel's watchpoints (a delay per watched access) about three times. Measured:
#: kprof's exact run on 8 vCPUs (4369 task-context injections per CPU against one lock)
#: did not finish in 120 s on the kcsan kernel, every vCPU in the lock's slow path, the
#: holder in KCSAN's runtime; `invoke mutants` runs its debug and sanitizer guests at 2
#: and 3 for the same reason.
VARIANT_SCALE: dict[str, float] = {"default": 1.0, "debug": 2.0, "kcsan": 3.0}

#: vCPUs per host core the budgets were measured with. Under TCG each vCPU is a host
#: thread: with v vCPUs on c cores each runs c/v of the time, and a guest command whose
#: work is serial (one CPU's loop, a lock whose holder is a descheduled vCPU) slows in
#: proportion. Beyond this share the budgets grow with it (`for_overcommit`): an
#: 8-vCPU guest on 2 cores gets twice the time. Seen: the cold CI of 24dc21b, dt's
#: content run on 8 vCPUs beside another guest, a command past its 120 s.
VCPUS_PER_CORE = 2


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Budgets in seconds, already multiplied by ``scale``; build with `scaled_by`."""

    scale: float = 1.0
    boot_s: float = 120.0
    qmp_s: float = 10.0
    command_s: float = 120.0
    shutdown_s: float = 15.0
    #: A console that grew but then stayed silent this long, with no SSH, is a boot hang.
    silence_s: float = 60.0

    def scaled_by(self, scale: float) -> Timeouts:
        """Return these budgets multiplied by ``scale``."""
        if scale <= 0:
            raise ConfigError(f"timeout scale must be > 0, got {scale}")
        return replace(
            self,
            scale=self.scale * scale,
            boot_s=self.boot_s * scale,
            qmp_s=self.qmp_s * scale,
            command_s=self.command_s * scale,
            shutdown_s=self.shutdown_s * scale,
            silence_s=self.silence_s * scale,
        )

    def for_variant(self, variant: str) -> Timeouts:
        """These budgets times the kernel variant's factor (`VARIANT_SCALE`; 1 if unlisted)."""
        return self.scaled_by(VARIANT_SCALE.get(variant, 1.0))

    def for_overcommit(self, vcpus: int, host_cores: int | None = None) -> Timeouts:
        """These budgets times the guest's overcommit past `VCPUS_PER_CORE` (at least 1)."""
        cores = host_cores or os.cpu_count() or 1
        return self.scaled_by(max(1.0, vcpus / (VCPUS_PER_CORE * cores)))

    @classmethod
    def from_env(cls) -> Timeouts:
        """Default budgets scaled by ``$PROFBENCH_TIMEOUT_SCALE`` (default 1)."""
        raw = os.environ.get(SCALE_ENV, "1")
        try:
            scale = float(raw)
        except ValueError:
            raise ConfigError(
                f"{SCALE_ENV}={raw!r} is not a number; unset it or use e.g. 2"
            ) from None
        return cls().scaled_by(scale)


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.2,
    abort: Callable[[], BaseException | None] = lambda: None,
) -> T:
    """Call ``probe`` until it returns something other than None; blocks ≤ ``timeout_s``.

    :param abort: checked before each attempt; an exception it returns is raised at
        once (for example "QEMU exited"), so a caller never waits out a dead process.
    :raise HarnessTimeout: when ``timeout_s`` elapses first; carries the last OSError.
    """
    start = time.monotonic()
    last_error: BaseException | None = None
    while True:
        if (fatal := abort()) is not None:
            raise fatal
        try:
            if (result := probe()) is not None:
                return result
        except OSError as exc:  # refused, reset, not yet there: keep polling
            last_error = exc
        waited = time.monotonic() - start
        if waited >= timeout_s:
            raise HarnessTimeout(what, waited, last_error)
        time.sleep(min(interval_s, max(0.0, timeout_s - waited)))
