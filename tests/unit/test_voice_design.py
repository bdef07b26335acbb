"""Instruct resolution against upstream's ``_resolve_instruct`` (fixture: tests/reference/dump_text_fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnivoice.chunking import contains_chinese
from omnivoice.models.omnivoice.voice_design import VALID_ITEMS_EN, VALID_ITEMS_ZH, resolve_instruct

FIXTURES = Path(__file__).parents[1] / "data" / "fixtures"
CASES = json.loads((FIXTURES / "text_instruct.json").read_text(encoding="utf-8"))["cases"]


def test_corpus_covers_results_and_errors() -> None:
    assert sum("error" in c for c in CASES) >= 10
    assert sum("result" in c for c in CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['instruct']!r}-zh={c['use_zh']}")
def test_resolve_instruct_matches_upstream(case: dict) -> None:
    if "error" in case:
        with pytest.raises(ValueError) as info:
            resolve_instruct(case["instruct"], use_zh=case["use_zh"])
        assert str(info.value) == case["error"]
    else:
        assert resolve_instruct(case["instruct"], use_zh=case["use_zh"]) == case["result"]


def test_vocabulary_sizes() -> None:
    # 2 genders + 5 ages + 5 pitches + whisper + 10 accents (English); the same minus accents plus 12 dialects.
    assert len(VALID_ITEMS_EN) == 23
    assert len(VALID_ITEMS_ZH) == 25


def test_contains_chinese() -> None:
    assert contains_chinese("你好 world")
    assert not contains_chinese("hello")
    assert not contains_chinese(None)


def test_non_string_rejected() -> None:
    with pytest.raises(ValueError, match="must be a string"):
        resolve_instruct(["male"])  # type: ignore[arg-type]
