"""Write omnivoice/models/omnivoice/data/instruct_items.json from upstream's voice-design vocabulary.

Run with the reference environment (upstream ``omnivoice==0.2.1``), from any
directory other than the repository root::

    PYTHONPATH=<repo>/tests/reference/torchaudio_stub \
        /work/refvenv/bin/python <repo>/tests/reference/dump_instruct_items.py

Each category is a group of mutually exclusive items. ``pairs`` are items that
exist in English and Chinese (``[english, chinese]``); ``english_only`` (accents)
and ``chinese_only`` (dialects) have no translation. Category names follow the
order upstream's conflict error message lists them in.
"""

from __future__ import annotations

import json
from pathlib import Path

from omnivoice.utils.voice_design import _INSTRUCT_CATEGORIES, _ZH_RE

OUT = Path(__file__).resolve().parents[2] / "omnivoice" / "models" / "omnivoice" / "data" / "instruct_items.json"
CATEGORY_NAMES = ["gender", "age", "pitch", "style", "accent", "dialect"]


def main() -> None:
    """Dump the categories and print a one-line summary."""
    if len(_INSTRUCT_CATEGORIES) != len(CATEGORY_NAMES):
        raise RuntimeError("upstream category list changed; update CATEGORY_NAMES")
    categories = []
    for name, cat in zip(CATEGORY_NAMES, _INSTRUCT_CATEGORIES):
        if isinstance(cat, dict):
            entry = {"name": name, "pairs": [[en, zh] for en, zh in cat.items()]}
        else:
            entry = {
                "name": name,
                "english_only": sorted(x for x in cat if not _ZH_RE.search(x)),
                "chinese_only": sorted(x for x in cat if _ZH_RE.search(x)),
            }
        categories.append(entry)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8") as f:
        json.dump(
            {"source": "omnivoice==0.2.1 omnivoice/utils/voice_design.py", "categories": categories},
            f,
            ensure_ascii=False,
            indent=1,
        )
        f.write("\n")
    print(f"wrote {len(categories)} categories to {OUT}")


if __name__ == "__main__":
    main()
