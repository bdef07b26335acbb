"""Duration rules against upstream ``RuleDurationEstimator`` / ``_estimate_target_tokens``.

Expected values: tests/data/fixtures/python_duration.json and python_char_weights.npz,
written by tests/reference/dump_python_fixtures.py from upstream omnivoice 0.2.1.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from omnivoice.models.omnivoice import duration
from omnivoice.models.omnivoice.duration import RuleDurationEstimator, estimate_target_tokens, resolve_target_lengths

FIXTURES = Path(__file__).parents[1] / "data" / "fixtures"


@pytest.fixture(scope="module")
def ref() -> dict:
    with open(FIXTURES / "python_duration.json", encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.slow
def test_weight_of_every_code_point() -> None:
    data = np.load(FIXTURES / "python_char_weights.npz")
    starts, weights = data["starts"], data["weights"]
    expected = np.repeat(weights, np.diff(np.append(starts, 0x110000)))
    ours = np.array([duration._char_weight.__wrapped__(chr(c)) for c in range(0x110000)], dtype=np.float32)
    wrong = np.flatnonzero(ours != expected)
    assert wrong.size == 0, (
        f"{wrong.size} code points differ, first U+{wrong[0]:04X}: {ours[wrong[0]]} vs {expected[wrong[0]]}"
    )


def test_same_unicode_database(ref: dict) -> None:
    # The category-based rules depend on the Unicode version of unicodedata.
    assert unicodedata.unidata_version == ref["unidata_version"]


def test_text_weights_and_estimates(ref: dict) -> None:
    est = RuleDurationEstimator()
    for text, weight, row in zip(ref["texts"], ref["text_weights"], ref["estimates"]):
        assert est.text_weight(text) == pytest.approx(weight, rel=1e-12, abs=1e-12), text
        for (ref_text, ref_len), expected in zip(ref["refs"], row):
            if ref_text is not None:
                assert est.estimate(text, ref_text, ref_len) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_target_tokens_with_speed(ref: dict) -> None:
    for text, table in zip(ref["texts"], ref["target_tokens"]):
        for (ref_text, ref_len), row in zip(ref["refs"], table):
            got = [estimate_target_tokens(text, ref_text, ref_len, speed=s) for s in ref["speeds"]]
            assert got == row, (text, ref_text)


def test_duration_overrides_speed(ref: dict) -> None:
    for case in ref["batches"]:
        lengths, speeds = resolve_target_lengths(
            case["texts"],
            case["ref_texts"],
            case["ref_lengths"],
            ref["frame_rate"],
            speed=case["speed"],
            duration=case["duration"],
        )
        assert lengths == case["target_lens"], case
        if case["speeds"] is None:
            assert speeds is None
        else:
            assert speeds == pytest.approx(case["speeds"], rel=1e-12)


def test_empty_reference_gives_zero() -> None:
    est = RuleDurationEstimator()
    assert est.estimate("text", "", 10) == 0.0
    assert est.estimate("text", "...", 0) == 0.0


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_speed_and_duration(bad: float) -> None:
    with pytest.raises(ValueError, match="speed"):
        estimate_target_tokens("hello", speed=bad)
    with pytest.raises(ValueError, match="duration"):
        resolve_target_lengths(["hello"], [None], [None], 25, duration=[bad])


def test_numpy_scalars() -> None:
    lengths, speeds = resolve_target_lengths(["hello"], [None], [None], 25, speed=np.float32(2.0))
    assert lengths == [estimate_target_tokens("hello", speed=2.0)] and speeds == [2.0]


def test_list_length_mismatch() -> None:
    with pytest.raises(ValueError, match="speed has 2 entries for 1 texts"):
        resolve_target_lengths(["hello"], [None], [None], 25, speed=[1.0, 2.0])


def test_reference_duration_cases() -> None:
    # Made by the reference helper's tests/reference/dump_fixtures.py (see tests/data/README.md).
    with open(FIXTURES / "prompts.json", encoding="utf-8") as f:
        cases = json.load(f)["duration_cases"]
    for case in cases:
        got = estimate_target_tokens(case["text"], case["ref_text"], case["num_ref_audio_tokens"], speed=case["speed"])
        assert got == case["target_tokens"], case
