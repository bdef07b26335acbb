"""Supported languages: names, codes and the resolution of a user's ``language``.

The table (646 languages) is data taken from upstream OmniVoice and stored in
``omnivoice/models/omnivoice/data/languages.json``; ``tests/reference/dump_languages.py``
regenerates it.
"""

from __future__ import annotations

import json
import warnings
from importlib import resources
from typing import Optional

__all__ = [
    "LANG_IDS",
    "LANG_NAMES",
    "LANG_NAME_TO_ID",
    "lang_display_name",
    "resolve_language",
]

def _load_table() -> tuple[dict[str, str], dict[str, str]]:
    """Read the language table shipped with the package.

    Returns:
        ``(name_to_id, display_names)``, both keyed by lower-case language name.
    """
    text = resources.files(__package__).joinpath("data/languages.json").read_text(encoding="utf-8")
    rows = json.loads(text)["languages"]
    name_to_id = {name: lang_id for name, lang_id, _ in rows}
    display = {name: shown for name, _, shown in rows}
    return name_to_id, display


LANG_NAME_TO_ID, _DISPLAY_NAMES = _load_table()
"""Lower-case language name -> language code (ISO 639-1 where one exists, else 639-3)."""

LANG_NAMES: frozenset[str] = frozenset(LANG_NAME_TO_ID)
LANG_IDS: frozenset[str] = frozenset(LANG_NAME_TO_ID.values())


def lang_display_name(name: str) -> str:
    """Return the display spelling of a language name (e.g. ``"Santiago del Estero Quichua"``).

    Args:
        name: A language name, any case.

    Returns:
        The canonical capitalisation for a supported language, else ``name.title()``.
    """
    return _DISPLAY_NAMES.get(name.lower(), name.title())


def resolve_language(language: Optional[str]) -> Optional[str]:
    """Map a language name or code to the code the model was trained with.

    Matching is case-insensitive for names and codes (upstream matches codes
    case-sensitively, so ``"EN"`` resolves here but not there). ``None`` and the
    string ``"none"`` select the language-agnostic mode.

    Args:
        language: A language code (``"en"``, ``"yue"``), a name (``"English"``),
            ``"none"`` or ``None``.

    Returns:
        The language code, or ``None`` for language-agnostic generation.

    Raises:
        ValueError: ``language`` is not a string.

    Warns:
        UserWarning: The language is not recognised; ``None`` is returned, as
            upstream does.
    """
    if language is None:
        return None
    if not isinstance(language, str):
        raise ValueError(f"language must be a string or None, got {type(language).__name__}")
    key = language.lower()
    if key == "none":
        return None
    # Names that are also codes ("vai", "luo", "cen") map to themselves, so the order is free.
    if key in LANG_IDS:
        return key
    if key in LANG_NAME_TO_ID:
        return LANG_NAME_TO_ID[key]
    warnings.warn(
        f"Language '{language}' is not recognized. Use a language ID (e.g. 'en', 'zh', 'ja', "
        "'de') or a full language name (e.g. 'English', 'Chinese', 'Japanese'); see "
        "omnivoice.models.omnivoice.lang_map.LANG_IDS and LANG_NAMES. Falling back to None "
        "(language-agnostic mode).",
        stacklevel=2,
    )
    return None
