"""Prometheus metrics of one app (its own registry, so several apps can live in one process)."""

from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]


class Metrics:
    """Requests by status, queue depth, audio produced, real-time factor, time to first audio."""

    def __init__(self, queue_depth: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("omnivoice_requests", "HTTP requests answered, by path and status",
                                ["path", "status"], registry=self.registry)
        self.queue = Gauge("omnivoice_queue_depth", "Requests waiting for the engine", registry=self.registry)
        self.queue.set_function(queue_depth)
        self.audio_seconds = Counter("omnivoice_audio_seconds", "Seconds of audio produced",
                                     registry=self.registry)
        self.rtf = Histogram("omnivoice_real_time_factor",
                             "Generation time divided by the audio's duration, per request",
                             buckets=(0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0),
                             registry=self.registry)
        self.first_audio = Histogram("omnivoice_time_to_first_audio_seconds",
                                     "From the request's arrival to its first audio piece",
                                     buckets=(0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 20, 30, 60, 120),
                                     registry=self.registry)

        self.batch_size = Histogram("omnivoice_batch_size", "Requests generated together, per generation",
                                    buckets=(1, 2, 3, 4, 6, 8, 12, 16), registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)
