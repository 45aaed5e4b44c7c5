"""Boot one guest and hold it until a signal arrives (driven by test_cleanup.py).

Run as ``python -m tests.guest.hold_guest WORKDIR [--snapshot]``: prints
``QEMU_PID <pid>`` once the guest answers SSH (booted, or restored from its
snapshot with ``--snapshot``), then sleeps. SIGTERM and SIGINT must unwind through
`Guest.__exit__`; SIGKILL must take QEMU along through its death signal.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness.builder.cache import Cache
from harness.cli.session import GuestRequest, resolve
from harness.process import handle_sigterm
from harness.timeouts import Timeouts
from harness.vm.snapstore import SnapshotStore, running_guest


def main(workdir: Path, *, snapshot: bool) -> None:
    handle_sigterm()
    cache, timeouts = Cache.default(), Timeouts.from_env()
    spec, images = resolve(GuestRequest(cpus=1), cache)
    store = SnapshotStore(cache, timeouts) if snapshot else None
    with running_guest(spec, images, workdir, timeouts=timeouts, snapshots=store) as guest:
        print(f"QEMU_PID {guest.vm.pid}", flush=True)
        time.sleep(600)


if __name__ == "__main__":
    main(Path(sys.argv[1]), snapshot="--snapshot" in sys.argv[2:])
