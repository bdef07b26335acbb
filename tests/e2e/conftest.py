"""The tiny model behind the public API, as the end-to-end tests share it."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnivoice import OmniVoice


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> OmniVoice:
    # One thread: the tiny model gains nothing from more on a shared 2-core machine.
    return OmniVoice.from_pretrained(tiny_model_dir, n_threads=1)
