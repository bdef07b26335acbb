"""CPU thread counts: the cores this process may use, and a count that follows their load.

ggml's CPU threads meet at a spinning barrier after every graph node (hundreds per LM step). A
thread that shares its core with another busy process is off the core for whole scheduler
slices while the others spin, so more threads than free cores is far slower than fewer
(tiny LM, 2 cores: 2 threads 0.21 s, 8 threads 3.7 s; with one core busy elsewhere, 1 thread
0.32 s against 1.25 s with 2; figures in bench/threads.py's table in the README). Hence:
``n_threads`` is capped at the usable cores, and by default (:class:`LoadAwareThreads`) each
run of steps uses the cores the rest of the machine left idle during the previous steps.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Optional

__all__ = ["LoadAwareThreads", "resolve_n_threads", "usable_cores"]

# Seconds of steps over which the other processes' load is averaged before the count changes:
# /proc/stat counts in 10 ms ticks, so shorter windows are mostly rounding.
_WINDOW_S = 0.25


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask; all cores where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def resolve_n_threads(n_threads: Optional[int], name: str = "n_threads") -> Optional[int]:
    """Checks a user's thread count and caps it at the usable cores.

    Args:
        n_threads: A positive int, or None for the default (load-aware, up to every usable core).
        name: The argument's name in messages.

    Returns:
        ``n_threads`` capped at :func:`usable_cores`, or None.

    Raises:
        TypeError: ``n_threads`` is not an int (a str such as ``"2"`` included).
        ValueError: ``n_threads`` is below 1.
    """
    if n_threads is None:
        return None
    if isinstance(n_threads, bool) or not isinstance(n_threads, int):
        raise TypeError(f"{name} must be a positive int or None, got {type(n_threads).__name__} {n_threads!r}")
    if n_threads < 1:
        raise ValueError(f"{name} must be >= 1, got {n_threads}")
    cores = usable_cores()
    if n_threads > cores:
        warnings.warn(
            f"{name}={n_threads} is more than the {cores} usable cores; using {cores} (threads beyond the "
            "cores wait on each other and make every step many times slower)",
            stacklevel=3,
        )
        return cores
    return n_threads


def _cpu_ticks(cpus: set[int]) -> Optional[int]:
    """Busy ticks (not idle, not iowait) summed over ``cpus``, from /proc/stat; None elsewhere."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    busy = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        fields = [int(v) for v in rest.split()]
        # user nice system idle iowait irq softirq steal (guest time is inside user already)
        busy += sum(fields[:8]) - fields[3] - fields[4]
    return busy


class LoadAwareThreads:
    """Thread count for a run of equal steps, following how busy the other processes keep the cores.

    Between steps it compares the cores' busy time (``/proc/stat``) with this process's own CPU
    time: the difference is what other processes used, and the next steps run on the cores
    they left, ``round(cores - others)``, at least 1. Off Linux it keeps ``max_threads``.

    Args:
        max_threads: The most threads to use (the usable cores, or the user's capped count).
    """

    def __init__(self, max_threads: int) -> None:
        self.max_threads = max_threads
        self.n_threads = max_threads
        self._cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._start: Optional[tuple[float, float, int]] = None

    def _sample(self) -> Optional[tuple[float, float, int]]:
        ticks = _cpu_ticks(self._cpus)
        return None if ticks is None else (time.monotonic(), time.process_time(), ticks)

    def update(self) -> int:
        """Call between steps; returns the thread count for the next step."""
        now = self._sample()
        if now is None or self.max_threads == 1:
            return self.n_threads
        if self._start is None:
            self._start = now
            return self.n_threads
        wall = now[0] - self._start[0]
        if wall < _WINDOW_S:
            return self.n_threads
        ours = now[1] - self._start[1]
        others = max(0.0, (now[2] - self._start[2]) / self._tick - ours) / wall
        self.n_threads = max(1, min(self.max_threads, round(len(self._cpus) - others)))
        self._start = now
        return self.n_threads
