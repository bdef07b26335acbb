"""Checks of user arguments that name the argument and what is allowed (ValueError / TypeError).

One place for the rules that several entry points share (the API, both CLIs, voice files), so a
bad value fails before any work, with the same message everywhere.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any, Optional

__all__ = ["check_finite", "check_sample_rate", "check_seed", "check_text", "check_texts", "check_optional_text"]


def check_text(value: Any, name: str = "text", allow_empty: bool = False) -> str:
    """A str of valid Unicode (no lone surrogates), non-blank unless ``allow_empty``.

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: It is blank, or holds a code point that is not valid Unicode.
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__} {_short(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"{name} holds {value[err.start]!r} at position {err.start}, a lone surrogate that is "
                         "not valid Unicode (text decoded with errors='surrogateescape'?)") from None
    if not allow_empty and not value.strip():
        raise ValueError(f"{name} is empty")
    return value


def check_texts(value: Any) -> list[str]:
    """``text`` of generate: a str or a non-empty list of str."""
    if isinstance(value, str):
        return [check_text(value)]
    if not isinstance(value, (list, tuple)) or not value:
        raise TypeError(f"text must be a str or a non-empty list of str, got {type(value).__name__} {_short(value)}")
    return [check_text(t, f"text[{i}]") for i, t in enumerate(value)]


def check_optional_text(value: Any, name: str) -> Any:
    """A per-item str argument (``ref_text``, ``instruct``, ``language``): None, a str, or a list of
    those; returned unchanged."""
    for i, v in enumerate(value if isinstance(value, (list, tuple)) else [value]):
        if v is not None:
            check_text(v, name if not isinstance(value, (list, tuple)) else f"{name}[{i}]")
    return value


def check_finite(value: Any, name: str, minimum: float = 0.0) -> float:
    """A real number, finite and >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {_short(value)}")
    if not (math.isfinite(value) and value >= minimum):
        raise ValueError(f"{name} must be a finite number >= {minimum:g}, got {value!r}")
    return float(value)


def check_seed(value: Any) -> Optional[int]:
    """``seed``: None or an int in [0, 2**64)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"seed must be an int or None, got {type(value).__name__} {_short(value)}")
    if not 0 <= value < 2**64:
        raise ValueError(f"seed must be in [0, 2**64), got {value}")
    return int(value)


def check_sample_rate(value: Any, name: str = "sample_rate") -> int:
    """A sample rate: a positive int, or a float with an integer value (22050.0); 22050.9 is refused
    rather than truncated."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive int (Hz), got {type(value).__name__} {_short(value)}")
    if not (math.isfinite(value) and value == int(value) and value > 0):
        raise ValueError(f"{name} must be a positive whole number of Hz, got {value!r}")
    return int(value)


def path_hint(value: Any) -> str:
    """For messages about a path given where an object was expected."""
    return f"VoiceClonePrompt.load({os.fspath(value)!r})" if isinstance(value, (str, os.PathLike)) else ""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
