"""The server's VoiceStore when several server processes (Ray Serve replicas) share voices_dir."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from omnivoice import VoiceClonePrompt
from omnivoice.server.voices import VoiceStore


def _prompt(text: str) -> VoiceClonePrompt:
    return VoiceClonePrompt(ref_audio_tokens=np.arange(16, dtype=np.int32).reshape(8, 2), ref_text=text, ref_rms=0.1)


def _saved(store: VoiceStore) -> list[str]:
    return [v.name for v in store.list() if v.kind in ("clone", "design")]


def test_a_voice_saved_by_one_store_reaches_another(tmp_path: Path) -> None:
    one, two = VoiceStore(tmp_path), VoiceStore(tmp_path)
    assert two.get("narrator") is None and _saved(two) == []
    one.save("narrator", _prompt("First take."), "design", "male, low pitch")
    assert two.exists("narrator") and two.get("narrator").ref_text == "First take."
    (listed,) = [v for v in two.list() if v.name == "narrator"]
    assert (listed.kind, listed.instructions) == ("design", "male, low pitch")

    # Removed and saved again under the same name elsewhere: the other store follows the file.
    assert one.delete("narrator")
    assert two.get("narrator") is None and _saved(two) == [] and not two.delete("narrator")
    one.save("narrator", _prompt("Second take, longer."), "clone")
    assert two.get("narrator").ref_text == "Second take, longer."
    (tmp_path / "stray.npz").write_bytes(b"not a voice")  # not ours: never listed
    assert _saved(two) == ["narrator"] and two.get("stray") is None and two.get("../narrator") is None
