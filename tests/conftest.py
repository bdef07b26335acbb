"""Session-wide fixtures: GGUF files converted from the tiny random checkpoint in tests/data."""

from __future__ import annotations

from pathlib import Path

import pytest

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
