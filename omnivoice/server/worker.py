"""The engine thread: the only thread that runs the model; requests queue for it.

Requests become :class:`Job` objects in a bounded queue. When the engine is free it takes the
oldest job and, if that job can be batched, every other waiting job with the same batch key
(same ``num_step`` and ``guidance_scale``, no seed, all cloning or none), waiting up to
``batch_window`` for more, up to ``max_batch`` in all. One job is streamed with
``generate_stream`` (sentence pieces, each sent once decoded; a text feed is consumed as its
fragments arrive); a batch runs as one
``generate`` call, one MaskGIT batch, and each job gets its whole audio as one piece (batched
requests trade early first audio for throughput). Seeded requests run alone, because the
random stream of a batch depends on its other members.

Cancellation (client gone, timeout) is an event per job; the library checks it before every
MaskGIT step (``cancel=``) and raises ``omnivoice.Cancelled``; a batch stops when all its jobs
are cancelled. Results go back to the event loop through an
``asyncio.Queue`` per job: ``("audio", float32 array)`` ... (never empty), then ``("done", None)``, or
``("error", exception)``. A generation whose audio came out empty sends ``("done", None)`` alone.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional, Union

from ..protocol import SpeechModel
from ..streaming import Cancelled

logger = logging.getLogger(__name__)

# How often a waiting TextFeed checks for cancellation (seconds).
_FEED_POLL = 0.1
# What a client is told when a generation's audio came out empty (HTTP 500, Wyoming's error event).
EMPTY_AUDIO = ("the generation came out empty: post-processing removed all of the model's audio as silence; "
               "another seed or voice may work")
# Keyword arguments of generate that a batch takes as one list per item.
_PER_ITEM = ("language", "instruct", "voice", "speed", "duration")


class QueueFull(Exception):
    """The queue holds ``max_queue`` waiting requests."""


class TextFeed:
    """Text fragments handed from the event loop to the engine thread as they arrive (Wyoming's
    streaming synthesis). Iterating blocks the engine thread until the next fragment, the end, the
    job's cancellation, or ``timeout`` seconds without a fragment (TimeoutError)."""

    def __init__(self, cancel: threading.Event, timeout: float) -> None:
        self._queue: queue.Queue[Optional[str]] = queue.Queue()
        self._cancel, self._timeout = cancel, timeout

    def put(self, text: str) -> None:
        self._queue.put(text)

    def close(self) -> None:
        self._queue.put(None)

    def __iter__(self) -> Iterator[str]:
        while True:
            waited = 0.0
            while True:
                if self._cancel.is_set():
                    raise Cancelled
                try:
                    item = self._queue.get(timeout=_FEED_POLL)
                    break
                except queue.Empty:
                    waited += _FEED_POLL
                    if waited >= self._timeout:
                        raise TimeoutError(f"no text for {self._timeout:g} s") from None
            if item is None:
                return
            yield item


@dataclass(eq=False)
class Job:
    """One request for audio.

    Attributes:
        text: The text, or an iterable of text fragments (never batched).
        options: Keyword arguments of ``generate`` / ``generate_stream``.
        prepare: Run on the engine thread before generating (e.g. encoding a reference or
            generating a preset voice); returns options to add. May raise ValueError.
        batch_key: Jobs with equal keys may share a batch; ``None`` runs alone.
    """

    text: Union[str, Iterable[str]]
    options: dict[str, Any]
    loop: asyncio.AbstractEventLoop
    prepare: Optional[Callable[[], dict[str, Any]]] = None
    batch_key: Optional[tuple] = None
    out: asyncio.Queue = field(default_factory=asyncio.Queue)
    cancel: threading.Event = field(default_factory=threading.Event)
    created: float = field(default_factory=time.monotonic)
    started: Optional[float] = None

    def send(self, kind: str, payload: Any = None) -> None:
        """Hands an event to the job's event loop (from any thread)."""
        try:
            self.loop.call_soon_threadsafe(self.out.put_nowait, (kind, payload))
        except RuntimeError:  # the loop is closed: the server is shutting down
            pass


@dataclass(eq=False)
class _Task:
    """A function to run on the engine thread (voice encoding, design), with its result future."""

    fn: Callable[[], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future


class Engine:
    """Owns the model and the queue; see the module docstring.

    Args:
        load: Returns the model (called on the engine thread, so loading does not block serving).
        max_queue: Waiting requests allowed; more raise :class:`QueueFull`.
        max_batch: Most jobs in one batch.
        batch_window: Seconds to wait for more jobs to batch with the first.
        warmup: Called with the model once loaded, before :attr:`ready` is set.
        on_batch: Called with the number of jobs of every generation started.
    """

    def __init__(self, load: Callable[[], SpeechModel], max_queue: int, max_batch: int, batch_window: float,
                 warmup: Optional[Callable[[SpeechModel], None]] = None,
                 on_batch: Optional[Callable[[int], None]] = None) -> None:
        self._load, self._warmup, self._on_batch = load, warmup, on_batch
        self.max_queue, self.max_batch, self.batch_window = max_queue, max_batch, batch_window
        self.model: Optional[SpeechModel] = None
        self.ready = threading.Event()
        self.load_error: Optional[BaseException] = None
        self._pending: deque[Union[Job, _Task]] = deque()
        self._running: list[Job] = []  # the jobs of the generation in progress
        self._cv = threading.Condition()
        self._stopping = False
        self._busy_seconds = 1.0  # running mean of a generation's time, for Retry-After
        self._thread = threading.Thread(target=self._run, name="omnivoice-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Cancels every job, waiting or running (a generation stops before its next MaskGIT step),
        and waits at most 30 s for the engine thread."""
        with self._cv:
            self._stopping = True
            for item in [*self._pending, *self._running]:
                if isinstance(item, Job):
                    item.cancel.set()
            self._cv.notify_all()
        self._thread.join(timeout=30)

    @property
    def queue_depth(self) -> int:
        return len(self._pending)

    def retry_after(self) -> int:
        """Seconds after which a slot is likely free (the mean generation time, at least 1)."""
        return max(1, int(self._busy_seconds + 0.999))

    def submit(self, job: Job) -> None:
        """Queues a job; raises :class:`QueueFull` when ``max_queue`` jobs already wait."""
        self._enqueue(job)

    async def run(self, fn: Callable[[], Any]) -> Any:
        """Runs ``fn`` on the engine thread, in queue order, and returns its result."""
        loop = asyncio.get_running_loop()
        task = _Task(fn, loop, loop.create_future())
        self._enqueue(task)
        return await task.future

    def _enqueue(self, item: Union[Job, _Task]) -> None:
        with self._cv:
            if len(self._pending) >= self.max_queue and self.ready.is_set():
                raise QueueFull
            self._pending.append(item)
            self._cv.notify_all()

    # ------------------------------------------------------------------ engine thread

    def _run(self) -> None:
        try:
            self.model = self._load()
            if self._warmup is not None:
                self._warmup(self.model)
        except BaseException as e:  # reported by /health; requests get 503
            logger.exception("loading the model failed")
            self.load_error = e
            return
        self.ready.set()
        while True:
            with self._cv:
                while not self._pending and not self._stopping:
                    self._cv.wait()
                if self._stopping:
                    return
                head = self._pending.popleft()
                if isinstance(head, _Task):
                    group: list[Job] = []
                else:
                    group = self._gather(head)
            if isinstance(head, _Task):
                self._run_task(head)
                continue
            t0 = time.monotonic()
            self._generate(group)
            self._busy_seconds = 0.8 * self._busy_seconds + 0.2 * (time.monotonic() - t0)

    def _gather(self, head: Job) -> list[Job]:
        """The head job and the waiting jobs that may share its batch (called holding the lock)."""
        group = [head]
        if head.batch_key is None or self.max_batch == 1:
            return group
        deadline = time.monotonic() + self.batch_window
        while True:
            for job in list(self._pending):
                if len(group) < self.max_batch and isinstance(job, Job) and job.batch_key == head.batch_key:
                    self._pending.remove(job)
                    group.append(job)
            left = deadline - time.monotonic()
            if len(group) >= self.max_batch or left <= 0 or self._stopping:
                return group
            self._cv.wait(left)

    def _run_task(self, task: _Task) -> None:
        def settle(ok: bool, value: Any) -> None:
            if not task.future.done():
                (task.future.set_result if ok else task.future.set_exception)(value)
        try:
            result, ok = task.fn(), True
        except Exception as e:
            result, ok = e, False
        task.loop.call_soon_threadsafe(settle, ok, result)

    def _generate(self, group: list[Job]) -> None:
        jobs = []
        for job in group:
            if job.cancel.is_set():
                job.send("error", Cancelled("cancelled before it started"))
                continue
            job.started = time.monotonic()
            try:
                if job.prepare is not None:
                    job.options.update(job.prepare())
            except Exception as e:
                job.send("error", e)
                continue
            jobs.append(job)
        if not jobs:
            return
        with self._cv:
            self._running = jobs
            if self._stopping:  # stop() came while this batch was being prepared
                for job in jobs:
                    job.cancel.set()
        try:
            self._generate_jobs(jobs)
        finally:
            with self._cv:
                self._running = []

    def _generate_jobs(self, jobs: list[Job]) -> None:
        if self._on_batch is not None:
            self._on_batch(len(jobs))

        def cancelled() -> bool:
            return all(j.cancel.is_set() for j in jobs)

        model = self.model
        assert model is not None
        try:
            if len(jobs) == 1:
                job = jobs[0]
                for chunk in model.generate_stream(job.text, cancel=cancelled, **job.options):
                    if chunk.audio.size:
                        job.send("audio", chunk.audio)
            else:
                shared = {k: v for k, v in jobs[0].options.items() if k not in _PER_ITEM}
                per_item = {k: [j.options.get(k) for j in jobs] for k in _PER_ITEM}
                if all(p is None for p in per_item["voice"]):
                    del per_item["voice"]
                audios = model.generate([j.text for j in jobs], cancel=cancelled, **shared, **per_item)
                for job, audio in zip(jobs, audios):
                    if audio.size:  # no audio at all: "done" alone says so
                        job.send("audio", audio)
        except Exception as e:
            for job in jobs:
                job.send("error", e)
            return
        for job in jobs:
            job.send("done")


def warm_up(model: SpeechModel) -> None:
    """One short generation, so that the first request does not pay for first-call setup."""
    model.warm_up()
