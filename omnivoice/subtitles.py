"""SubRip (``.srt``) subtitles: parsing, and laying dubbed cues onto one timeline.

Used by ``omnivoice-tts --srt``: each cue is spoken with its duration fitted to its slot
(``end - start``), placed at its start, clipped where the next cue starts, with short fades at
both edges so that a clip never clicks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import numpy as np

from .postprocess import fade_edges

__all__ = ["Cue", "parse_srt", "read_srt", "Timeline"]

_TIME = r"(\d+):([0-5]?\d):([0-5]?\d)[,.](\d{1,3})"
_TIMING = re.compile(rf"^\s*{_TIME}\s*-->\s*{_TIME}(?:\s+.*)?$")
# Markup that is not spoken: HTML-like tags (<i>, <font ...>) and ASS override blocks ({\an8}).
_MARKUP = re.compile(r"<[^>\n]*>|\{\\[^}\n]*\}")
# Edge fade of a placed cue, in seconds.
EDGE_FADE = 0.01


@dataclass
class Cue:
    """One subtitle: its number, start and end in seconds, spoken text, and where it was read."""

    index: int
    start: float
    end: float
    text: str
    line: int


def _seconds(h: str, m: str, s: str, frac: str) -> float:
    return int(h) * 3600 + int(m) * 60 + int(s) + int(frac.ljust(3, "0")) / 1000


def parse_srt(text: str, name: str = "<srt>") -> list[Cue]:
    """Parses SubRip text into cues sorted by start time.

    Tolerates a byte-order mark, Windows line ends, a missing or non-numeric cue number, ``.``
    instead of ``,`` before the milliseconds, cue settings after the timing, and markup in the
    text (removed). Cues whose text is empty after removing markup are dropped.

    Args:
        text: The file's content.
        name: Name used in error messages.

    Returns:
        The cues, sorted by start time.

    Raises:
        ValueError: naming ``name:line`` for a block without a timing line, a malformed timing,
            or an end not after the start; or when there are no cues at all.
    """
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    cues: list[Cue] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        block_start = i
        block = []
        while i < len(lines) and lines[i].strip():
            block.append(lines[i])
            i += 1
        timing_at = next((k for k, ln in enumerate(block[:2]) if "-->" in ln), None)
        if timing_at is None:
            raise ValueError(f"{name}:{block_start + 1}: expected a cue number and a timing line "
                             f"'HH:MM:SS,mmm --> HH:MM:SS,mmm', got {block[0].strip()!r}")
        line_no = block_start + timing_at + 1
        match = _TIMING.match(block[timing_at])
        if match is None:
            raise ValueError(f"{name}:{line_no}: malformed timing {block[timing_at].strip()!r} "
                             f"(expected 'HH:MM:SS,mmm --> HH:MM:SS,mmm')")
        start, end = _seconds(*match.groups()[:4]), _seconds(*match.groups()[4:])
        if end <= start:
            raise ValueError(f"{name}:{line_no}: cue ends at {end:.3f} s, not after its start {start:.3f} s")
        number = block[0].strip() if timing_at == 1 else ""
        spoken = " ".join(_MARKUP.sub("", ln).strip() for ln in block[timing_at + 1:])
        spoken = " ".join(spoken.split())
        if spoken:
            cues.append(Cue(index=int(number) if number.isdigit() else len(cues) + 1, start=start, end=end,
                            text=spoken, line=line_no))
    if not cues:
        raise ValueError(f"{name}: no subtitle cues with text")
    return sorted(cues, key=lambda c: c.start)


def read_srt(path: Union[str, Path]) -> list[Cue]:
    """Reads and parses an ``.srt`` file (UTF-8; see :func:`parse_srt`)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    return parse_srt(text, str(path))


class Timeline:
    """A mono float32 track at ``sample_rate`` on which clips are placed by start time.

    Args:
        cues: The cues to be placed (sorted), which fix the track length (the last end) and each
            clip's limit (the next cue's start).
        sample_rate: Samples per second.
    """

    def __init__(self, cues: list[Cue], sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.cues = cues
        self.audio = np.zeros(self._at(max(c.end for c in cues)), np.float32)

    def _at(self, seconds: float) -> int:
        return int(round(seconds * self.sample_rate))

    def place(self, i: int, clip: np.ndarray) -> None:
        """Puts cue ``i``'s clip at its start, clipped at the next cue's start, faded at both edges."""
        start = self._at(self.cues[i].start)
        limit = self._at(self.cues[i + 1].start) if i + 1 < len(self.cues) else self.audio.size
        clip = np.array(clip[: max(0, min(limit, self.audio.size) - start)], np.float32)
        fade = min(int(EDGE_FADE * self.sample_rate), clip.size // 2)
        clip = fade_edges(clip, fade, fade)
        self.audio[start : start + clip.size] = clip
