"""SSH logins to a guest that may still be booting: how long each waits, where failures go.

A login's waits (TCP connect, sshd's banner, authentication) stretch with each one that
failed (`login_waits`); a login to a guest known to be up waits its longest at once.
paramiko's own records of a failed login go to a `ProbeLog` file, not the log stream::

    probe = ProbeLog(workdir / "ssh-probe.log", "guest")
    client.set_log_channel(probe.open())      # before the login
    connect_s, banner_s, auth_s = login_waits(probe.attempts)
    probe.failed(port, exc)                   # after one failed; a summary line
    probe.report()                            # for an error message; None if none failed
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

#: paramiko's default log channel (``Transport.log_name``): where a logged-in link reports.
PARAMIKO_CHANNEL = "paramiko.transport"
#: The probes' loggers are named under the guest shell's (`harness.vm.ssh`), beside its
#: own records.
_PROBE_PARENT = "harness.vm.ssh"
_PROBES = itertools.count(1)

#: A first login's waits, in seconds: the TCP connect, sshd's banner, authentication.
FIRST_LOGIN_WAITS = (3.0, 3.0, 10.0)
#: Each failed login stretches them by this factor, up to `LOGIN_STRETCH_MAX` times.
LOGIN_STRETCH = 1.25
LOGIN_STRETCH_MAX = 8.0
#: A later login (a new thread's, a reconnect) is to a guest known to be up: it waits
#: as long as the most stretched first login at once. A local CI run beside another
#: guest (load 11-13 on 2 cores) saw a new thread's login miss sshd's banner in 3 s.
LATER_LOGIN_FAILED = 10


def login_waits(failed: int) -> tuple[float, float, float]:
    """The waits of a login after ``failed`` failed ones (see `FIRST_LOGIN_WAITS`).

    Each wait is a limit, not a sleep: a guest that answers sooner is in sooner. A guest
    that is alive but slow (a debug kernel beside an 8-vCPU guest on 2 host cores) can
    take longer than 3 s to send its banner; with fixed waits each login gave up
    before it came, 85 times in a row (CI of c9353d7), until the boot budget ran out.
    """
    stretch = min(LOGIN_STRETCH**failed, LOGIN_STRETCH_MAX)
    connect, banner, auth = FIRST_LOGIN_WAITS
    return connect * stretch, banner * stretch, auth * stretch


class ProbeLog:
    """Where paramiko's records of SSH logins go: a file, not the log stream.

    paramiko's transport thread logs a failed login itself, at ERROR with a
    traceback ("Exception (client): Error reading SSH protocol banner ...
    Connection reset by peer"), on the logger named by the transport's log
    channel. While a guest boots that failure is expected, so every login runs
    on this probe's own channel: a logger that does not propagate and writes to
    ``path`` (kept with the run's artifacts). A login that succeeds is switched
    back to `PARAMIKO_CHANNEL`, so a link that breaks later is logged as usual.
    """

    def __init__(self, path: Path | None, name: str) -> None:
        self.path = path
        self.channel = f"{_PROBE_PARENT}.probe.{name}.{next(_PROBES)}"
        self.attempts = 0
        self.last_error: str | None = None
        self._logger = logging.getLogger(self.channel)
        self._logger.propagate = False
        self._logger.setLevel(logging.DEBUG)
        # Always one handler: without any, logging's lastResort prints WARNING+ to stderr.
        self._logger.addHandler(logging.NullHandler())
        self._file: logging.Handler | None = None

    def open(self) -> str:
        """Start writing to ``path`` (before a login); returns the channel to log on."""
        if self._file is None and self.path is not None:
            self._file = logging.FileHandler(self.path)
            self._file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            self._logger.addHandler(self._file)
        return self.channel

    def failed(self, port: int, exc: BaseException) -> str:
        """Record one failed login; returns its one-line summary."""
        self.attempts += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        self._logger.info("attempt %d on port %d failed: %s", self.attempts, port, self.last_error)
        return self.last_error

    def report(self) -> str | None:
        """What the failed logins were, for an error message; None when none failed."""
        if self.last_error is None:
            return None
        where = f"; every attempt: {self.path}" if self.path else ""
        return f"{self.attempts} SSH login(s) failed, the last: {self.last_error}{where}"

    def close(self) -> None:
        """Stop writing to the file (late records of old transports are dropped); idempotent."""
        if self._file is not None:
            self._logger.removeHandler(self._file)
            self._file.close()
            self._file = None
