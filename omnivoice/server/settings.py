"""Settings of ``omnivoice-server`` (one dataclass, filled from the command line or by a caller)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass
class ServerSettings:
    """What ``create_app`` needs besides the model.

    Attributes:
        voices_dir: Where saved voices live (one ``NAME.npz`` voice-prompt file each, plus the
            OpenAI presets once generated); ``None`` keeps them in memory only.
        api_key: When set, every endpoint but ``/``, ``/health`` and CORS preflights needs
            ``Authorization: Bearer <api_key>``.
        max_queue: Requests that may wait for the engine; one more is answered 429.
        max_batch: Most requests generated together as one MaskGIT batch.
        batch_window: Seconds the engine waits for more requests to batch with the first one.
        max_input_chars: Longest accepted ``input`` (OpenAI's limit is 4096).
        max_upload_bytes: Largest reference audio (multipart upload or decoded ``ref_audio``).
        max_num_step: Largest ``num_step`` a request may ask for.
        max_duration: Longest ``duration`` (seconds) a request may ask for.
        request_timeout: Seconds from arrival to the last audio byte; past it the request is
            cancelled (504 when no audio was sent yet).
        cors_origins: Origins allowed by CORS (``["*"]`` for any); empty turns CORS off.
        model_name: The id listed by ``/v1/models``.
        threads: CPU threads when the app loads the model itself.
        device: Its compute device (``omnivoice.Backend.devices()``, ``rpc://HOST:PORT``); None: the best.
        warmup: Run one short generation before ``/health`` says ready.
        wyoming: ``tcp://HOST:PORT`` to serve the Wyoming protocol (Home Assistant) as well.
    """

    voices_dir: Optional[Path] = None
    api_key: Optional[str] = None
    max_queue: int = 16
    max_batch: int = 4
    batch_window: float = 0.05
    max_input_chars: int = 4096
    max_upload_bytes: int = 10 * 1024 * 1024
    max_num_step: int = 64
    max_duration: float = 600.0
    request_timeout: float = 600.0
    cors_origins: tuple[str, ...] = ()
    model_name: str = "omnivoice"
    threads: Optional[int] = None
    device: Optional[str] = None
    warmup: bool = True
    wyoming: Optional[str] = None

    def validate(self) -> None:
        """Raises ValueError naming the first setting out of range."""
        if self.max_queue < 0:
            raise ValueError(f"max_queue must be >= 0, got {self.max_queue!r}")
        for name in ("max_batch", "max_num_step", "max_input_chars", "max_upload_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        for name in ("request_timeout", "max_duration"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.batch_window < 0:
            raise ValueError(f"batch_window must be >= 0, got {self.batch_window!r}")
