"""Lanes: jobs that each boot their own guests, run side by side in forked children.

One 2-vCPU guest keeps the two host cores about 60 % busy (its vCPUs wait on SSH
round trips and the host's analysis); a second lane fills that. Each job runs in a
child process of its own, so each child's guests are its own to stop: a child that
ends by an exception, SIGTERM or Ctrl-C leaves its ``with Guest(...)`` blocks, which
stop their QEMUs by PID, and QEMU dies with its child besides (``PR_SET_PDEATHSIG``)::

    rows = run_lanes([lambda: run_half(0), lambda: run_half(1)])  # results in job order

The parent waits; when it is interrupted itself, or a child fails, it sends every
child still running SIGTERM, waits `STOP_WAIT_S` for each, then kills it. A job's
result travels back pickled; its exception travels back as text, raised here as one
`InfraError` naming the job.
"""

from __future__ import annotations

import logging
import multiprocessing
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import TypeVar, cast

from harness.errors import InfraError
from harness.process import handle_sigterm

LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: Seconds a child gets to stop its guests after SIGTERM before it is killed.
STOP_WAIT_S = 60.0


def run_lanes(jobs: Sequence[Callable[[], T]]) -> list[T]:
    """Each of ``jobs`` in a forked child at once; their results in ``jobs``' order.

    Blocks until every child ends. A single job runs here, in this process, unforked.

    :raise InfraError: a job raised (its traceback in the message).
    """
    if len(jobs) == 1:
        return [jobs[0]()]
    context = multiprocessing.get_context("fork")  # the jobs are closures: nothing to pickle
    children: list[tuple[BaseProcess, Connection]] = []
    try:
        for index, job in enumerate(jobs):
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=_child, args=(job, send), name=f"lane-{index}")
            process.start()
            send.close()
            children.append((process, receive))
        results: dict[int, object] = {}
        pending = {receive: index for index, (_, receive) in enumerate(children)}
        while pending:  # the first failure ends the wait: the finally stops the others
            for ready in wait(list(pending)):
                index = pending.pop(cast(Connection, ready))
                results[index] = _result(index, *children[index])
        return [cast(T, results[index]) for index in range(len(jobs))]
    finally:
        for child, receive in children:
            _stop(child)
            receive.close()


def _child(job: Callable[[], object], send: Connection) -> None:
    handle_sigterm()  # the parent stops a lane with SIGTERM: guests leave their blocks
    try:
        outcome: tuple[bool, object] = (True, job())
    except BaseException:  # every failure goes back to the parent, as text
        outcome = (False, traceback.format_exc())
    send.send(outcome)
    send.close()


def _result(index: int, child: BaseProcess, receive: Connection) -> object:
    try:
        ok, value = receive.recv()
    except EOFError:
        child.join()
        raise InfraError(f"lane {index} ended with exit status {child.exitcode} "
                         "and sent no result") from None  # fmt: skip
    child.join()
    if not ok:
        raise InfraError(f"lane {index} failed:\n{value}")
    return value


def _stop(child: BaseProcess) -> None:
    """End ``child`` if it still runs: SIGTERM, then SIGKILL after `STOP_WAIT_S`."""
    if not child.is_alive():
        child.join()
        return
    LOG.warning("stopping %s (pid %s)", child.name, child.pid)
    child.terminate()
    child.join(STOP_WAIT_S)
    if child.is_alive():
        LOG.error("%s (pid %s) did not stop in %.0f s: killed", child.name, child.pid,
                  STOP_WAIT_S)  # fmt: skip
        child.kill()
        child.join()
