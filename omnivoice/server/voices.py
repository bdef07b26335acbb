"""Voices of the server: saved voices (voice-prompt files in a directory), OpenAI's preset names,
and ``auto``.

A saved voice is ``<voices_dir>/<name>.npz``, the file the model's ``Voice.save`` writes
(the reference encoded once), with ``<name>.json`` beside it for what the listing shows. OpenAI's
13 names map to the voice-design presets in :data:`OPENAI_PRESETS`: the first request for one
generates :data:`PRESET_TEXT` with that design and a fixed seed, keeps the result as a clone
prompt (``<voices_dir>/openai-presets/<name>.npz``) and clones it from then on, so ``alloy`` is
the same speaker on every request and after restarts.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ..protocol import SpeechModel, Voice
from ..registry import load_voice

AUTO = "auto"

# OpenAI voice name -> (voice-design instruct, seed). The seeds only make each preset
# reproducible; the designs are what tell the speakers apart.
OPENAI_PRESETS: dict[str, tuple[str, int]] = {
    "alloy": ("female, young adult, moderate pitch, american accent", 1),
    "ash": ("male, young adult, low pitch, american accent", 2),
    "ballad": ("male, middle-aged, moderate pitch, british accent", 3),
    "coral": ("female, young adult, high pitch, australian accent", 4),
    "echo": ("male, young adult, moderate pitch, canadian accent", 5),
    "fable": ("female, middle-aged, moderate pitch, british accent", 6),
    "onyx": ("male, middle-aged, very low pitch, american accent", 7),
    "nova": ("female, young adult, high pitch, american accent", 8),
    "sage": ("female, middle-aged, low pitch, american accent", 9),
    "shimmer": ("female, teenager, high pitch, american accent", 10),
    "verse": ("male, young adult, high pitch, british accent", 11),
    "marin": ("female, young adult, low pitch, canadian accent", 12),
    "cedar": ("male, elderly, low pitch, american accent", 13),
}
# What a preset (or a designed saved voice) speaks once, to become a clone prompt.
PRESET_TEXT = "The quick brown fox jumps over the lazy dog, and then it rests in the warm afternoon sun."
PRESET_LANGUAGE = "en"

# Letters, digits, '_', '-' and '.', starting with a letter or digit: no separators, no '..'.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_PRESET_DIR = "openai-presets"


def check_name(name: Any) -> str:
    """Returns ``name`` if it may name a saved voice, else raises ValueError saying what is allowed."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or ".." in name:
        raise ValueError("voice name must be 1-64 characters of letters, digits, '_', '-' and '.', "
                         f"starting with a letter or digit, without '..'; got {name!r}")
    if name.lower() == AUTO or name.lower() in OPENAI_PRESETS:
        raise ValueError(f"voice name {name!r} is reserved for a built-in voice")
    return name


@dataclass
class VoiceInfo:
    """A listed voice. ``kind``: ``clone`` or ``design`` (saved), ``preset`` or ``auto`` (built in)."""

    id: str
    name: str
    kind: str
    instructions: Optional[str] = None
    created_at: Optional[int] = None

    def as_json(self) -> dict[str, Any]:
        out = {"id": self.id, "name": self.name, "type": self.kind}
        if self.instructions is not None:
            out["instructions"] = self.instructions
        if self.created_at is not None:
            out["created_at"] = self.created_at
        return out


class VoiceStore:
    """Saved voices and generated presets, on disk when ``directory`` is given, else in memory.

    The directory is the truth: other server processes (Ray Serve replicas, a second server) may
    share it, so a lookup or a listing reads what it holds now, a voice file being loaded once
    and again only when its file changes (one ``stat`` per lookup).

    Thread-safe: the event loop lists and looks up, the engine thread saves.
    """

    def __init__(self, directory: Optional[Path]) -> None:
        self.directory = None if directory is None else Path(directory)
        self._lock = threading.Lock()
        self._prompts: dict[str, Voice] = {}
        self._info: dict[str, VoiceInfo] = {}
        self._stamps: dict[str, tuple[int, int]] = {}  # (mtime_ns, size) of each loaded file
        self._presets: dict[str, Voice] = {}
        if self.directory is not None:
            (self.directory / _PRESET_DIR).mkdir(parents=True, exist_ok=True)
            self.list()

    def _sync(self, name: str) -> bool:
        """Brings ``name``'s entry in line with its file (lock held): loads a new or changed file,
        forgets a removed one or one that is not a voice. Returns whether the voice exists."""
        if self.directory is None:
            return name in self._prompts
        try:
            path = self.directory / f"{check_name(name)}.npz"  # no path from a name not allowed
            stat = path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if self._stamps.get(name) != stamp:
                prompt = load_voice(path)
                meta_path = path.with_suffix(".json")
                meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
                self._prompts[name], self._stamps[name] = prompt, stamp
                self._info[name] = VoiceInfo(name, name, meta.get("type", "clone"), meta.get("instructions"),
                                             meta.get("created_at", int(stat.st_mtime)))
            return True
        except (FileNotFoundError, ValueError):  # gone, or not ours: left alone, not listed
            self._forget(name)
            return False

    def _forget(self, name: str) -> None:
        for entries in (self._prompts, self._info, self._stamps):
            entries.pop(name, None)

    # ------------------------------------------------------------------ saved voices

    def list(self) -> list[VoiceInfo]:
        """Saved voices by name, then the presets and ``auto``."""
        with self._lock:
            names = set(self._info)
            if self.directory is not None:
                names |= {path.stem for path in self.directory.glob("*.npz")}
            saved = [self._info[n] for n in sorted(names) if self._sync(n)]
        built_in = [VoiceInfo(n, n, "preset", instruct) for n, (instruct, _) in OPENAI_PRESETS.items()]
        return saved + built_in + [VoiceInfo(AUTO, AUTO, "auto")]

    def get(self, name: str) -> Optional[Voice]:
        """A saved voice's prompt, or None."""
        with self._lock:
            return self._prompts[name] if self._sync(name) else None

    def exists(self, name: str) -> bool:
        with self._lock:
            return self._sync(name)

    def save(self, name: str, prompt: Voice, kind: str, instructions: Optional[str] = None) -> VoiceInfo:
        """Stores a new voice; ValueError if the name is not allowed, FileExistsError if taken."""
        check_name(name)
        info = VoiceInfo(name, name, kind, instructions, int(time.time()))
        with self._lock:
            if self._sync(name):
                raise FileExistsError(f"a voice named {name!r} already exists")
            if self.directory is not None:
                meta = {"type": kind, "created_at": info.created_at}
                if instructions is not None:
                    meta["instructions"] = instructions
                _write_atomic(self.directory / f"{name}.json", json.dumps(meta).encode())
                path = self.directory / f"{name}.npz"
                _save_atomic(path, prompt)
                stat = path.stat()
                self._stamps[name] = (stat.st_mtime_ns, stat.st_size)
            self._prompts[name] = prompt
            self._info[name] = info
        return info

    def delete(self, name: str) -> bool:
        """Removes a saved voice; False if there is none of that name."""
        with self._lock:
            if not self._sync(name):
                return False
            self._forget(name)
            if self.directory is not None:
                for suffix in (".npz", ".json"):
                    (self.directory / f"{name}{suffix}").unlink(missing_ok=True)
            return True

    # ------------------------------------------------------------------ presets

    def preset(self, name: str) -> Optional[Voice]:
        """The generated prompt of an OpenAI preset, or None when it was never generated."""
        with self._lock:
            if name not in self._presets and self.directory is not None:
                path = self.directory / _PRESET_DIR / f"{name}.npz"
                if path.is_file():
                    self._presets[name] = load_voice(path)
            return self._presets.get(name)

    def save_preset(self, name: str, prompt: Voice) -> None:
        with self._lock:
            if self.directory is not None:
                _save_atomic(self.directory / _PRESET_DIR / f"{name}.npz", prompt)
            self._presets[name] = prompt

    def resolve(self, name: str, model: Callable[[], SpeechModel]
                ) -> tuple[Optional[Voice], Optional[Callable[[], dict[str, Any]]]]:
        """A voice name to its clone prompt (``None`` for ``auto``), or to a function that makes it
        on the engine thread (a preset not generated yet).

        Args:
            name: ``auto``, a saved voice, or one of OpenAI's names.
            model: Returns the loaded model (called on the engine thread).

        Raises:
            LookupError: No voice has that name.
        """
        if name == AUTO:
            return None, None
        saved = self.get(name)
        if saved is not None:
            return saved, None
        if name not in OPENAI_PRESETS:
            raise LookupError(name)
        prompt = self.preset(name)
        if prompt is not None:
            return prompt, None

        def make() -> dict[str, Any]:
            # Two requests may both find the preset missing; the second reuses the first's.
            made = self.preset(name)
            if made is None:
                instruct, seed = OPENAI_PRESETS[name]
                made = design_prompt(model(), instruct, seed)
                self.save_preset(name, made)
            return {"voice": made}

        return None, make


class DesignFailed(RuntimeError):
    """The model's own audio for a designed voice cannot be kept as a prompt: the server's outcome,
    not the request's fault (a 500, not a 400)."""


def design_prompt(model: SpeechModel, instruct: str, seed: Optional[int]) -> Voice:
    """Speaks :data:`PRESET_TEXT` in a designed voice and keeps it as a clone prompt.

    Raises:
        DesignFailed: The generated audio is empty or silent after post-processing (silence
            removal can remove all of it), so there is no voice to keep.
    """
    audio = model.generate(PRESET_TEXT, instruct=instruct, language=PRESET_LANGUAGE, seed=seed)[0]
    try:
        return model.create_voice((audio, model.sampling_rate), PRESET_TEXT)
    except ValueError as e:
        raise DesignFailed(f"the model's speech for the voice design {instruct!r} came out unusable as a voice "
                           f"({e}); another seed or design may work") from None


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _save_atomic(path: Path, prompt: Voice) -> None:
    """A crash mid-write leaves the old file or none, never half a voice."""
    tmp = path.with_name(f".{path.stem}.tmp.npz")
    prompt.save(tmp)
    os.replace(tmp, path)
