"""The tiny Sopro checkpoint (tests/data/sopro_tiny) converted once per type for the Sopro parity tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from omnivoice.convert.sopro import convert_sopro

SOPRO_TINY = Path(__file__).parents[2] / "data" / "sopro_tiny"


@pytest.fixture(scope="session")
def sopro_gguf(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``sopro_gguf("F32")``: the tiny checkpoint as a sopro-tts GGUF of that type, made on first use."""
    out = tmp_path_factory.mktemp("sopro_tiny")
    made: dict[str, Path] = {}

    def get(outtype: str) -> Path:
        if outtype not in made:
            made[outtype] = out / f"sopro-v2-turbo-{outtype}.gguf"
            convert_sopro(SOPRO_TINY, made[outtype], outtype)
        return made[outtype]

    return get
