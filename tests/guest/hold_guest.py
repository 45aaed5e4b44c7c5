"""Boot one guest and hold it until a signal arrives (driven by test_cleanup.py).

Run as ``python -m tests.guest.hold_guest WORKDIR``: prints ``QEMU_PID <pid>``
once the guest answers SSH, then sleeps. SIGTERM and SIGINT must unwind through
`Guest.__exit__`; SIGKILL must take QEMU along through its death signal.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness.build.cache import Cache
from harness.cli.session import GuestRequest, resolve
from harness.process import handle_sigterm
from harness.timeouts import Timeouts
from harness.vm.guest import Guest


def main(workdir: Path) -> None:
    handle_sigterm()
    spec, images = resolve(GuestRequest(cpus=1), Cache.default())
    with Guest(spec, images, workdir, timeouts=Timeouts.from_env()) as guest:
        print(f"QEMU_PID {guest.vm.pid}", flush=True)
        time.sleep(600)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
