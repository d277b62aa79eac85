"""SIGTERM and Ctrl-C during a run: raised as exceptions, so the run's cleanup runs.

:func:`signals_raise` (the CLI's ``run`` and ``demo``) installs handlers that raise
:class:`Terminated` on SIGTERM (the first one; later ones are ignored so that the cleanup can
finish) and :class:`KeyboardInterrupt` on SIGINT, in the main thread. The runner then removes
its temporary outputs (:func:`dppca_dask.results.base.write_atomically`) and refunds or keeps the
ledger reservation as for any failure. Inside :func:`critical` (the ledger's writes around a
reservation) an interrupt is held back until the section ends, so a reservation is never left
half-recorded. A ``kill -9`` cannot be caught: its reservation stays ``reserved`` until the
custodian releases it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["Terminated", "critical", "signals_raise"]


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM (raised in the main thread by :func:`signals_raise`)."""


class _State:
    depth = 0
    pending: BaseException | None = None
    terminated = False


def _deliver(exc: BaseException) -> None:
    if _State.depth:
        _State.pending = _State.pending or exc
        return
    raise exc


@contextmanager
def critical() -> Iterator[None]:
    """Hold back interrupts delivered by :func:`signals_raise` until the block ends."""
    _State.depth += 1
    try:
        yield
    finally:
        _State.depth -= 1
    if _State.depth == 0 and _State.pending is not None:
        exc, _State.pending = _State.pending, None
        raise exc


def _on_term(signum: int, frame: FrameType | None) -> None:
    if _State.terminated:  # already stopping: let the cleanup finish
        return
    _State.terminated = True
    _deliver(Terminated(f"terminated by signal {signum} (SIGTERM)"))


def _on_int(signum: int, frame: FrameType | None) -> None:
    _deliver(KeyboardInterrupt())


@contextmanager
def signals_raise() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated`, SIGINT :class:`KeyboardInterrupt` (main thread only;
    elsewhere this does nothing). The previous handlers are restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[signal.Signals, Any] = {}
    for sig, handler in ((signal.SIGTERM, _on_term), (signal.SIGINT, _on_int)):
        previous[sig] = signal.signal(sig, handler)
    _State.terminated = False
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _State.pending = None
