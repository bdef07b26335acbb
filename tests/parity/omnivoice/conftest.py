"""The tiny codec as the codec parity tests share it: through the public API and the core."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnivoice import _core
from omnivoice.models.omnivoice.audio_tokenizer import AudioTokenizer


@pytest.fixture(scope="session")
def tok(tiny_codec_gguf: Path) -> AudioTokenizer:
    # One thread: the tiny codec gains little from more on shared cores.
    return AudioTokenizer.from_file(tiny_codec_gguf, n_threads=1)


@pytest.fixture(scope="session", params=[False, True], ids=["custom-ops", "stock-ops"])
def core(tiny_codec_gguf: Path, request: pytest.FixtureRequest) -> _core.Codec:
    """The core codec, for what the public API does not expose (intermediates, Snake form), with
    our CPU ops and with the stock ggml ops a GPU backend takes."""
    return _core.Codec(str(tiny_codec_gguf), _core.Backend(1, stock_ops=request.param))
