"""Voice design: validation and normalisation of ``instruct`` strings.

An instruct is a comma-separated list of speaker attributes, e.g.
``"female, young adult, british accent"`` or ``"男，老年，四川话"``. The vocabulary
(English and Chinese items in mutually exclusive categories: gender, age,
pitch, style, accent, dialect) is data taken from upstream OmniVoice, stored in
``omnivoice/models/omnivoice/data/instruct_items.json``; ``tests/reference/dump_instruct_items.py``
regenerates it. The error messages match upstream's word for word.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Optional

from ...chunking import contains_chinese

__all__ = [
    "INSTRUCT_CATEGORIES",
    "VALID_ITEMS_EN",
    "VALID_ITEMS_ZH",
    "InstructCategory",
    "resolve_instruct",
]

# Items are separated by half- or full-width commas with optional spaces around them.
_SEPARATOR_RE = re.compile(r"\s*[,，]\s*")


@dataclass(frozen=True)
class InstructCategory:
    """A group of mutually exclusive instruct items.

    Attributes:
        name: Category name (gender, age, pitch, style, accent, dialect).
        en_to_zh: Items that exist in both languages, English -> Chinese.
        english_only: Items without a Chinese counterpart (accents).
        chinese_only: Items without an English counterpart (dialects).
    """

    name: str
    en_to_zh: dict[str, str]
    english_only: frozenset[str]
    chinese_only: frozenset[str]

    @property
    def items(self) -> frozenset[str]:
        """Every spelling of every item of the category, English and Chinese."""
        return frozenset(self.en_to_zh) | frozenset(self.en_to_zh.values()) | self.english_only | self.chinese_only


def _load_categories() -> list[InstructCategory]:
    """Read the instruct vocabulary shipped with the package."""
    text = resources.files(__package__).joinpath("data/instruct_items.json").read_text(encoding="utf-8")
    return [
        InstructCategory(
            name=cat["name"],
            en_to_zh=dict(cat.get("pairs", [])),
            english_only=frozenset(cat.get("english_only", [])),
            chinese_only=frozenset(cat.get("chinese_only", [])),
        )
        for cat in json.loads(text)["categories"]
    ]


INSTRUCT_CATEGORIES: list[InstructCategory] = _load_categories()
_EN_TO_ZH: dict[str, str] = {en: zh for cat in INSTRUCT_CATEGORIES for en, zh in cat.en_to_zh.items()}
_ZH_TO_EN: dict[str, str] = {zh: en for en, zh in _EN_TO_ZH.items()}
_ALL_ITEMS: frozenset[str] = frozenset().union(*(cat.items for cat in INSTRUCT_CATEGORIES))
VALID_ITEMS_EN: frozenset[str] = frozenset(x for x in _ALL_ITEMS if not contains_chinese(x))
VALID_ITEMS_ZH: frozenset[str] = frozenset(x for x in _ALL_ITEMS if contains_chinese(x))


def _unsupported_items_error(instruct: str, unknown: list[str]) -> ValueError:
    """Build the error for items outside the vocabulary, with a suggestion per item when one is close."""
    lines = []
    for raw in unknown:
        item = raw.strip().lower()
        close = difflib.get_close_matches(item, _ALL_ITEMS, n=1, cutoff=0.6)
        hint = f"unsupported; did you mean '{close[0]}'?" if close else "unsupported"
        lines.append(f"  '{raw}' -> '{item}' ({hint})")
    message = (
        f"Unsupported instruct items found in {instruct}:\n"
        + "\n".join(lines)
        + "\n\nValid English items: "
        + ", ".join(sorted(VALID_ITEMS_EN))
        + "\nValid Chinese items: "
        + "，".join(sorted(VALID_ITEMS_ZH))
        + "\n\nTip: Use only English or only Chinese instructs. English instructs should use comma + "
        "space (e.g. 'male, indian accent'),\nChinese instructs should use full-width comma "
        "(e.g. '男，河南话')."
    )
    return ValueError(message)


def resolve_instruct(instruct: Optional[str], use_zh: bool = False) -> Optional[str]:
    """Validate a voice-design instruct and normalise it to one language.

    English items are case-insensitive. A wrong separator (half-width comma in a
    Chinese instruct, full-width in an English one) and stray leading or trailing
    commas are tolerated. A dialect forces Chinese output and an accent English;
    otherwise ``use_zh`` decides (upstream passes True when the text to speak
    contains Chinese, see :func:`omnivoice.chunking.contains_chinese`).

    Args:
        instruct: The raw instruct string, or ``None``.
        use_zh: Translate the items to Chinese instead of English.

    Returns:
        The items joined with ``"，"`` if any is Chinese, else with ``", "``;
        ``None`` for ``None`` or a blank string.

    Raises:
        ValueError: ``instruct`` is not a string, an item is not in the
            vocabulary (with close-match suggestions), a dialect is mixed with
            an accent, or two items of one category are given.
    """
    if instruct is None:
        return None
    if not isinstance(instruct, str):
        raise ValueError(f"instruct must be a string or None, got {type(instruct).__name__}")
    instruct = instruct.strip()
    if not instruct:
        return None

    raw_items = [x for x in _SEPARATOR_RE.split(instruct) if x]
    unknown = [raw for raw in raw_items if raw.strip().lower() not in _ALL_ITEMS]
    if unknown:
        raise _unsupported_items_error(instruct, unknown)
    items = [raw.strip().lower() for raw in raw_items]

    has_dialect = any(item.endswith("话") for item in items)
    has_accent = any(" accent" in item for item in items)
    if has_dialect and has_accent:
        raise ValueError(
            "Cannot mix Chinese dialect and English accent in a single instruct. "
            "Dialects are for Chinese speech, accents for English speech."
        )
    if has_dialect or has_accent:
        use_zh = has_dialect

    translation = _EN_TO_ZH if use_zh else _ZH_TO_EN
    items = [translation.get(item, item) for item in items]

    conflicts = []
    for cat in INSTRUCT_CATEGORIES:
        hits = [item for item in items if item in cat.items]
        if len(hits) > 1:
            conflicts.append(" vs ".join(f"'{hit}'" for hit in hits))
    if conflicts:
        raise ValueError(
            "Conflicting instruct items within the same category: "
            + "; ".join(conflicts)
            + ". Each category (gender, age, pitch, style, accent, dialect) allows at most one item."
        )

    separator = "，" if any(contains_chinese(item) for item in items) else ", "
    return separator.join(items)
