"""A wall-clock bound on work done in the main process, where no worker timeout applies.

What the main process analyses (the training path over every file's facts) comes from the
scanned tree; whatever a hostile tree makes slow, the scan must still end. SIGALRM interrupts
Python code and the regex engine alike; outside the main thread (or without SIGALRM) there is no
bound, and the work runs as before.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import Iterator

ENV_REACH_TIMEOUT = "NEURON_READY_REACH_TIMEOUT"  # seconds the training-path analysis may take
DEFAULT_REACH_TIMEOUT = 300.0


class TimeBoundExceeded(Exception):
    pass


def reach_timeout() -> float:
    try:
        value = float(os.environ.get(ENV_REACH_TIMEOUT, ""))
    except ValueError:
        return DEFAULT_REACH_TIMEOUT
    return value if value > 0 else DEFAULT_REACH_TIMEOUT


@contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    """Raise TimeBoundExceeded in the body once `seconds` of wall time have passed."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum, frame):
        raise TimeBoundExceeded(f"took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
