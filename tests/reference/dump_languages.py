"""Write omnivoice/models/omnivoice/data/languages.json from upstream omnivoice's language table.

Run with the reference environment (upstream ``omnivoice==0.2.1``), from any
directory other than the repository root so that upstream's package is imported::

    PYTHONPATH=<repo>/tests/reference/torchaudio_stub \
        /work/refvenv/bin/python <repo>/tests/reference/dump_languages.py

The file holds one ``[name, id, display_name]`` row per supported language,
sorted by name: ``name`` is the lower-case key upstream resolves, ``id`` the
language code and ``display_name`` what upstream's ``lang_display_name`` shows.
"""

from __future__ import annotations

import json
from pathlib import Path

from omnivoice.utils.lang_map import LANG_NAME_TO_ID, lang_display_name

OUT = Path(__file__).resolve().parents[2] / "omnivoice" / "models" / "omnivoice" / "data" / "languages.json"


def main() -> None:
    """Dump the table and print a one-line summary."""
    rows = [[name, LANG_NAME_TO_ID[name], lang_display_name(name)] for name in sorted(LANG_NAME_TO_ID)]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8") as f:
        f.write('{"source": "omnivoice==0.2.1 omnivoice/utils/lang_map.py",\n "languages": [\n')
        f.write(",\n".join("  " + json.dumps(row, ensure_ascii=False) for row in rows))
        f.write("\n]}\n")
    print(f"wrote {len(rows)} languages to {OUT}")


if __name__ == "__main__":
    main()
