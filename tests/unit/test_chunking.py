"""Text chunking and end punctuation against upstream (fixture: tests/reference/dump_text_fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnivoice.chunking import add_punctuation, chunk_text_for_generation, chunk_text_punctuation

FIXTURES = Path(__file__).parents[1] / "data" / "fixtures"
DATA = json.loads((FIXTURES / "text_chunking.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "case", DATA["chunk_text_punctuation"], ids=lambda c: f"{c['text'][:20]!r}-{c['chunk_len']}-{c['min_chunk_len']}"
)
def test_chunk_text_punctuation(case: dict) -> None:
    assert chunk_text_punctuation(case["text"], case["chunk_len"], case["min_chunk_len"]) == case["chunks"]


@pytest.mark.parametrize("case", DATA["add_punctuation"], ids=lambda c: repr(c["text"]))
def test_add_punctuation(case: dict) -> None:
    assert add_punctuation(case["text"]) == case["result"]


@pytest.mark.parametrize("case", DATA["generation_chunks"], ids=lambda c: c["text"][:20])
def test_chunk_text_for_generation(case: dict) -> None:
    chunks = chunk_text_for_generation(case["text"], case["target_tokens"], case["chunk_duration"], case["frame_rate"])
    assert len(chunks) > 1
    assert chunks == case["chunks"]


def test_chunk_text_for_generation_rejects_empty() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        chunk_text_for_generation("", 10, 15.0, 25)
