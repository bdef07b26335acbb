"""Session-wide fixtures: GGUF files converted from the tiny random checkpoint in tests/data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from omnivoice import _core

TINY_HF = Path(__file__).parent / "data" / "tiny_hf"


@pytest.fixture(scope="session")
def tiny_codec_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny audio tokenizer (encoder and decoder) converted to F32 GGUF by our converter."""
    from omnivoice.convert import convert_codec

    out = tmp_path_factory.mktemp("tiny_codec") / "omnivoice-tokenizer-F32.gguf"
    convert_codec(TINY_HF / "audio_tokenizer", out)
    return out


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both tiny GGUFs (LM and codec, F32) converted by our converter into one directory."""
    from omnivoice.convert import convert_model

    out = tmp_path_factory.mktemp("tiny_model")
    convert_model(TINY_HF, out)
    return out


def simd_builds() -> list[str]:
    """Our kernels' instruction-set builds this CPU can run, narrowest first."""
    order = ["base", "avx2", "avx512"]
    previous = _core.set_simd_cap("avx512")
    widest = _core.simd()
    _core.set_simd_cap(previous)
    return order[: order.index(widest) + 1]


@pytest.fixture(params=simd_builds())
def simd_build(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs the test with our hand-dispatched CPU kernels forced to one build, then restores the cap."""
    previous = _core.set_simd_cap(request.param)
    assert _core.simd() == request.param
    yield request.param
    _core.set_simd_cap(previous)
