"""Output length estimation from text, as upstream OmniVoice does it.

Upstream (``omnivoice.utils.duration.RuleDurationEstimator``) sums a per-character
"speaking weight" that depends on the character's script, and scales the weight of the
target text by the speaking rate measured on a reference (text, number of audio frames)
pair. Short estimates are boosted along a power curve. Without a reference, the rate of
"Nice to meet you." spoken in 25 frames (one second) is used.
"""

from __future__ import annotations

import bisect
import functools
import math
import numbers
import unicodedata
from collections.abc import Sequence
from typing import Any

__all__ = [
    "FALLBACK_REF_TEXT",
    "FALLBACK_REF_TOKENS",
    "RuleDurationEstimator",
    "estimate_target_tokens",
    "resolve_target_lengths",
]

# Reference pair used when the caller gives no reference (upstream's fallback).
FALLBACK_REF_TEXT = "Nice to meet you."
FALLBACK_REF_TOKENS = 25

# Speaking time of one character of each script class, relative to one Latin letter.
_WEIGHTS: dict[str, float] = {
    "cjk": 3.0,
    "hangul": 2.5,
    "kana": 2.2,
    "ethiopic": 3.0,
    "yi": 3.0,
    "indic": 1.8,
    "thai_lao": 1.5,
    "khmer_myanmar": 1.8,
    "arabic": 1.5,
    "hebrew": 1.5,
    "latin": 1.0,
    "cyrillic": 1.0,
    "greek": 1.0,
    "armenian": 1.0,
    "georgian": 1.0,
    "punctuation": 0.5,
    "space": 0.2,
    "digit": 3.5,
    "mark": 0.0,
    "default": 1.0,
}

# Unicode blocks up to U+FFEF as (last code point, script class), ascending. A code point
# belongs to the first block whose last code point is >= it. Adjacent blocks of the same
# class are merged; the boundaries are upstream's.
_BLOCKS: tuple[tuple[int, str], ...] = (
    (0x02AF, "latin"),
    (0x03FF, "greek"),
    (0x052F, "cyrillic"),
    (0x058F, "armenian"),
    (0x05FF, "hebrew"),
    (0x08FF, "arabic"),
    (0x0DFF, "indic"),
    (0x0EFF, "thai_lao"),
    (0x0FFF, "indic"),
    (0x109F, "khmer_myanmar"),
    (0x10FF, "georgian"),
    (0x11FF, "hangul"),
    (0x139F, "ethiopic"),
    (0x177F, "default"),
    (0x17FF, "khmer_myanmar"),
    (0x18FF, "default"),
    (0x19DF, "indic"),
    (0x19FF, "khmer_myanmar"),
    (0x1C7F, "indic"),
    (0x1C8F, "cyrillic"),
    (0x1CBF, "georgian"),
    (0x1CFF, "indic"),
    (0x1DBF, "latin"),
    (0x1DFF, "default"),
    (0x1EFF, "latin"),
    (0x30FF, "kana"),
    (0x312F, "cjk"),
    (0x318F, "hangul"),
    (0x9FFF, "cjk"),
    (0xA4CF, "yi"),
    (0xA63F, "default"),
    (0xA69F, "cyrillic"),
    (0xA6FF, "default"),
    (0xA7FF, "latin"),
    (0xA82F, "indic"),
    (0xA87F, "default"),
    (0xA95F, "indic"),
    (0xA97F, "hangul"),
    (0xA9DF, "indic"),
    (0xA9FF, "khmer_myanmar"),
    (0xAA5F, "indic"),
    (0xAA7F, "khmer_myanmar"),
    (0xAAFF, "indic"),
    (0xAB2F, "ethiopic"),
    (0xAB6F, "latin"),
    (0xABBF, "default"),
    (0xABFF, "indic"),
    (0xD7AF, "hangul"),
    (0xFAFF, "cjk"),
    (0xFDFF, "arabic"),
    (0xFE6F, "default"),
    (0xFEFF, "arabic"),
    (0xFFEF, "latin"),
)
_BLOCK_ENDS = [end for end, _ in _BLOCKS]

# Supplementary planes above this code point hold CJK extensions.
_CJK_SUPPLEMENT_START = 0x20000
_ARABIC_TATWEEL = 0x0640


@functools.lru_cache(maxsize=8192)
def _char_weight(char: str) -> float:
    """Speaking weight of one character."""
    code = ord(char)
    if char.isascii() and char.isalpha():
        return _WEIGHTS["latin"]
    if char == " ":
        return _WEIGHTS["space"]
    # The tatweel only stretches Arabic letters; it is not pronounced.
    if code == _ARABIC_TATWEEL:
        return _WEIGHTS["mark"]
    # General category first: punctuation, symbols, spaces and digits of every script.
    major = unicodedata.category(char)[0]
    if major == "M":
        return _WEIGHTS["mark"]
    if major in ("P", "S"):
        return _WEIGHTS["punctuation"]
    if major == "Z":
        return _WEIGHTS["space"]
    if major == "N":
        return _WEIGHTS["digit"]
    idx = bisect.bisect_left(_BLOCK_ENDS, code)
    if idx < len(_BLOCKS):
        return _WEIGHTS[_BLOCKS[idx][1]]
    if code > _CJK_SUPPLEMENT_START:
        return _WEIGHTS["cjk"]
    return _WEIGHTS["default"]


class RuleDurationEstimator:
    """Estimates how long a text takes to speak from per-script character weights.

    Args:
        low_threshold: Estimates below this many units are boosted (``None`` disables).
        boost_strength: Exponent of the boost curve; 1 means no boost.
    """

    def __init__(self, low_threshold: float | None = 50.0, boost_strength: float = 3.0) -> None:
        self.low_threshold = low_threshold
        self.boost_strength = boost_strength

    @staticmethod
    def text_weight(text: str) -> float:
        """Sum of the speaking weights of the characters of ``text``."""
        return sum(_char_weight(c) for c in text)

    def estimate(self, text: str, ref_text: str, ref_duration: float) -> float:
        """Duration of ``text`` at the speaking rate of the reference.

        Args:
            text: Text to be spoken.
            ref_text: Reference text.
            ref_duration: Duration of the reference, in any unit (OmniVoice uses frames).

        Returns:
            Estimated duration in the unit of ``ref_duration``; 0 when the reference is
            empty or has no duration.
        """
        ref_weight = self.text_weight(ref_text) if ref_text else 0.0
        if ref_duration <= 0 or ref_weight == 0:
            return 0.0
        # Same operation order as upstream: callers truncate the result to whole frames.
        rate = ref_weight / ref_duration
        duration = self.text_weight(text) / rate
        if self.low_threshold is not None and duration < self.low_threshold:
            # Power curve through 0 and the threshold: short texts get relatively longer.
            return self.low_threshold * (duration / self.low_threshold) ** (1.0 / self.boost_strength)
        return duration


_DEFAULT_ESTIMATOR = RuleDurationEstimator()


def _check_positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def estimate_target_tokens(
    text: str,
    ref_text: str | None = None,
    num_ref_tokens: int | None = None,
    speed: float = 1.0,
    estimator: RuleDurationEstimator = _DEFAULT_ESTIMATOR,
) -> int:
    """Number of audio frames to generate for ``text`` (upstream ``_estimate_target_tokens``).

    Args:
        text: Target text.
        ref_text: Transcript of the reference audio, if any.
        num_ref_tokens: Number of frames of the reference audio, if any.
        speed: Speaking speed factor; > 1 is faster (fewer frames).
        estimator: Weight-based estimator.

    Returns:
        At least one frame.

    Raises:
        ValueError: If ``speed`` is not a positive finite number.
    """
    speed = _check_positive("speed", speed)
    if num_ref_tokens is None or not ref_text:
        ref_text, num_ref_tokens = FALLBACK_REF_TEXT, FALLBACK_REF_TOKENS
    frames = estimator.estimate(text, ref_text, num_ref_tokens)
    if speed != 1.0:
        frames /= speed
    return max(1, int(frames))


def resolve_target_lengths(
    texts: Sequence[str],
    ref_texts: Sequence[str | None],
    ref_lengths: Sequence[int | None],
    frame_rate: float,
    speed: float | list[float | None] | None = None,
    duration: float | list[float | None] | None = None,
    estimator: RuleDurationEstimator = _DEFAULT_ESTIMATOR,
) -> tuple[list[int], list[float] | None]:
    """Target frame counts and effective speeds of a batch, as upstream ``generate`` sets them.

    A per-item ``duration`` (seconds) overrides ``speed``: the item gets exactly
    ``int(duration * frame_rate)`` frames (at least one) and its effective speed becomes
    the speed-1 estimate divided by that count, so that chunked generation scales the
    same way. Items without a duration use their ``speed`` (default 1).

    Args:
        texts: Target texts.
        ref_texts: Reference transcripts (``None`` where there is no reference).
        ref_lengths: Reference lengths in frames (``None`` where there is no reference).
        frame_rate: Audio frames per second of the codec.
        speed: One factor for all items, one per item (``None`` entries mean 1), or ``None``.
        duration: One duration for all items, one per item (``None`` entries: estimate), or
            ``None``.
        estimator: Weight-based estimator.

    Returns:
        ``(target_lengths, speeds)``; ``speeds`` is ``None`` when neither speed nor
        duration was given, as upstream.

    Raises:
        ValueError: On a list of the wrong length or a non-positive speed or duration.
    """
    n = len(texts)
    if len(ref_texts) != n or len(ref_lengths) != n:
        raise ValueError(f"got {n} texts but {len(ref_texts)} reference texts and {len(ref_lengths)} reference lengths")
    speeds = [None if v is None else _check_positive("speed", v) for v in per_item(speed, n, "speed")]
    durations = [None if v is None else _check_positive("duration", v) for v in per_item(duration, n, "duration")]

    lengths: list[int] = []
    effective: list[float] = []
    for i in range(n):
        item_speed = 1.0 if speeds[i] is None else speeds[i]
        if durations[i] is None:
            lengths.append(estimate_target_tokens(texts[i], ref_texts[i], ref_lengths[i], item_speed, estimator))
            effective.append(item_speed)
        else:
            estimate = estimate_target_tokens(texts[i], ref_texts[i], ref_lengths[i], 1.0, estimator)
            frames = max(1, int(durations[i] * frame_rate))
            lengths.append(frames)
            effective.append(estimate / frames)
    if speed is None and duration is None:
        return lengths, None
    return lengths, effective


def per_item(value: Any, n: int, what: str) -> list[Any]:
    """Upstream's ``_ensure_list``: a list holds one value per item (or one for all); anything
    else, ``None`` and tuples included, is one value for every item.

    Raises:
        ValueError: A list of neither 1 nor ``n`` entries; ``what`` names the argument.
    """
    values = value if isinstance(value, list) else [value]
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise ValueError(f"{what} has {len(values)} entries for {n} texts")
    return values
