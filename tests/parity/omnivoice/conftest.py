"""The tiny codec as the codec parity tests share it: through the public API, and the core on
each compute path (``device_backend``, tests/parity/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnivoice import _core
from omnivoice.models.omnivoice.audio_tokenizer import AudioTokenizer


@pytest.fixture(scope="session")
def tok(tiny_codec_gguf: Path) -> AudioTokenizer:
    # One thread: the tiny codec gains little from more on shared cores.
    return AudioTokenizer.from_file(tiny_codec_gguf, n_threads=1)


@pytest.fixture(scope="session")
def core(tiny_codec_gguf: Path, device_backend: _core.Backend) -> _core.Codec:
    """The core codec on each compute path, for what the public API does not expose
    (intermediates, Snake form)."""
    return _core.Codec(str(tiny_codec_gguf), device_backend)
