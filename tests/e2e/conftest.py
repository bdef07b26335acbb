"""The tiny model behind the public API, as the end-to-end tests share it, and free ports for the
servers they start."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Callable

import pytest

from omnivoice import OmniVoice


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> OmniVoice:
    # One thread: the tiny model gains nothing from more on a shared 2-core machine.
    return OmniVoice.from_pretrained(tiny_model_dir, n_threads=1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    """A function giving an unused ephemeral port on 127.0.0.1 (for a server the test starts)."""
    return _free_port
