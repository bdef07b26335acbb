"""Sentence-level streaming: incremental text splitting, cancellation and piecewise audio finishing.

The engine behind :meth:`OmniVoice.generate_stream` (and the CLI and server on top of it):

- :class:`SentenceSplitter` cuts text that arrives in fragments into sentences as soon as each is
  complete, whatever the script: ``. ! ?`` end a sentence before whitespace (not after
  abbreviations, initials or inside ``3.14``); CJK and other scripts' full stops (``。！？``,
  ``।``, ``۔``, ``።`` ...) end it at once; a line break ends it too.
- :func:`iter_pieces` turns those sentences into generation pieces: sentences under
  ``min_seconds`` of estimated speech are joined with the next, sentences over the limit are cut
  at clause marks (``, ; :``, ``，、；``), then between words, then between characters; the first
  piece has a lower limit so that the first audio comes early. Pieces depend only on the text,
  never on how it was fragmented.
- :class:`PieceFinisher` applies upstream's post-processing piece by piece: each piece is yielded
  as soon as it is decoded, holding back only its last 0.1 s (and any trailing silence) until it
  is known whether another piece follows (cross-fade) or not (fade-out and pad).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Optional, Union

import numpy as np

from .postprocess import apply_volume, fade_edges, remove_silence
from .chunking import ABBREVIATIONS, CLOSING_MARKS
from .models.omnivoice.duration import FALLBACK_REF_TEXT, FALLBACK_REF_TOKENS, RuleDurationEstimator

__all__ = [
    "AudioChunk",
    "Cancelled",
    "CancelCheck",
    "PieceFinisher",
    "SentenceSplitter",
    "TextPiece",
    "as_cancel_check",
    "iter_pieces",
    "split_long",
]

CancelCheck = Callable[[], bool]

# Seconds of estimated speech: first piece at most, any piece at least (shorter ones are joined
# with the next sentence, also so that the first piece is a usable voice prompt for the rest).
FIRST_PIECE_SECONDS = 4.0
MIN_PIECE_SECONDS = 1.5

# End a sentence when followed by whitespace (or a CJK character, or the end of the text).
_SPACED_ENDS = frozenset(".!?…‽")
# End a sentence at once: CJK, fullwidth and halfwidth stops; Devanagari danda and double danda;
# Arabic question mark and Urdu full stop; Armenian, Ethiopic, Myanmar, Tibetan and Khmer stops.
_UNSPACED_ENDS = frozenset("。！？．｡।॥؟۔։።፧။།។")
# Clause marks where an over-long sentence may be cut (ASCII ones before whitespace).
_SPACED_CLAUSE = frozenset(",;:")
_UNSPACED_CLAUSE = frozenset("，、；：،؛")
# CJK punctuation, after which text goes on without a space.
_CJK_MARKS = frozenset("。！？．｡，、；：」』）】》〉")
# Closing quotes and brackets stay with the sentence they close (upstream's, and a few more).
_CLOSERS = CLOSING_MARKS | frozenset(")]}»』〉")
# A period after these is not a sentence end: upstream's list, any case, and a few more.
_ABBREVIATIONS = frozenset(a.lower() for a in ABBREVIATIONS) | {"vol.", "pp.", "cf.", "al."}


class Cancelled(Exception):
    """Raised inside a generation whose ``cancel`` event was set (or callback returned True)."""


@dataclass
class AudioChunk:
    """One piece of streamed audio (float32 at 24 kHz) and the text it speaks."""

    audio: np.ndarray
    text: str
    index: int


@dataclass
class TextPiece:
    """A piece of text generated whole (never split), optionally with its own duration in seconds."""

    text: str
    duration: Optional[float] = None


def as_cancel_check(cancel: Union[threading.Event, CancelCheck, None]) -> Optional[CancelCheck]:
    """The zero-argument check behind a ``cancel`` argument (an Event or a callable), or None."""
    if cancel is None:
        return None
    if isinstance(cancel, threading.Event):
        return cancel.is_set
    if callable(cancel):
        return cancel
    raise TypeError(f"cancel must be a threading.Event or a callable returning bool, "
                    f"got {type(cancel).__name__}")


def _wide(char: str) -> bool:
    """CJK ideographs, kana and hangul: scripts written without spaces between sentences."""
    code = ord(char)
    return (0x3040 <= code <= 0x30FF or 0x3400 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF
            or 0xF900 <= code <= 0xFAFF or code >= 0x20000)


def _is_abbreviation(before: str) -> bool:
    """Whether the period just appended to ``before`` belongs to a word, not a sentence end."""
    words = before.split()
    if not words:
        return False
    word = words[-1].lstrip("\"'“‘([{«")
    if word.lower() in _ABBREVIATIONS:
        return True
    core = word[:-1]
    # Initials ("J. R. R.") and numbers before a period ("No. 3. item") do not end a sentence
    # when they are a single letter; decimals never reach here (no whitespace after the dot).
    return len(core) == 1 and core.isalpha() and core.isupper()


class SentenceSplitter:
    """Splits text fed in fragments into sentences, each returned once it is complete.

    Whether ``"."`` ends a sentence depends on the character after it, so a sentence is returned
    when the next character arrives (or on :meth:`close`). Sentences keep their punctuation and
    inner whitespace; leading and trailing whitespace is stripped and empty ones are dropped.
    """

    def __init__(self) -> None:
        self._buf = ""
        self._scan = 0  # buffer positions before this are known not to end a sentence

    def feed(self, fragment: str) -> list[str]:
        """Adds text; returns the sentences completed by it."""
        if not isinstance(fragment, str):
            raise TypeError(f"text fragments must be str, got {type(fragment).__name__}")
        self._buf += fragment
        out = []
        while True:
            end = self._find_end()
            if end is None:
                break
            sentence, self._buf, self._scan = self._buf[:end].strip(), self._buf[end:], 0
            if sentence:
                out.append(sentence)
        return out

    def close(self) -> list[str]:
        """Ends the input; returns what is left as a last sentence (if any)."""
        rest, self._buf, self._scan = self._buf.strip(), "", 0
        return [rest] if rest else []

    def _find_end(self) -> Optional[int]:
        """Index just past the first complete sentence in the buffer, or None."""
        buf = self._buf
        i = self._scan
        while i < len(buf):
            char = buf[i]
            if char == "\n":
                return i + 1
            if char in _SPACED_ENDS or char in _UNSPACED_ENDS:
                j = i + 1
                while j < len(buf) and (buf[j] in _CLOSERS or buf[j] in _SPACED_ENDS or buf[j] in _UNSPACED_ENDS):
                    j += 1
                if j == len(buf):
                    self._scan = i
                    return None  # the next character decides
                nxt = buf[j]
                if char in _UNSPACED_ENDS or _wide(nxt):
                    return j
                if not nxt.isspace() or (char == "." and _is_abbreviation(buf[: i + 1])):
                    i = j
                    continue
                # Before whitespace: a sentence end unless a lowercase word follows
                # ('"Really?" she asked.'), which the next word's first letter tells.
                k = j
                while k < len(buf) and buf[k].isspace() and buf[k] != "\n":
                    k += 1
                if k == len(buf):
                    self._scan = i
                    return None
                if not buf[k].islower():
                    return j
                i = k
                continue
            i += 1
        self._scan = len(buf)
        return None


def _cut_after(text: str, spaced: frozenset[str], unspaced: frozenset[str]) -> list[str]:
    """``text`` cut after each mark (a spaced mark only when whitespace follows); pieces keep it."""
    parts, start = [], 0
    for i, char in enumerate(text):
        nxt = text[i + 1] if i + 1 < len(text) else " "
        if char in unspaced or (char in spaced and (nxt.isspace() or _wide(nxt))):
            parts.append(text[start : i + 1])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def _pack(parts: list[str], limit: float, measure: Callable[[str], float]) -> list[str]:
    """Greedily joins consecutive parts while the estimate stays within ``limit``."""
    out: list[str] = []
    for part in parts:
        if out and measure(out[-1] + part) <= limit:
            out[-1] += part
        else:
            out.append(part)
    return out


def split_long(text: str, limit: float, measure: Callable[[str], float]) -> list[str]:
    """Cuts ``text`` into parts of at most ``limit`` estimated seconds.

    Cuts go after sentence and clause marks first, then between words, then (for a run without
    spaces, as in CJK text without punctuation) between characters.

    Args:
        text: The text to cut.
        limit: Longest part, in estimated seconds.
        measure: Estimated seconds of speech of a text.

    Returns:
        The stripped, non-empty parts in order.
    """
    out: list[str] = []
    clauses = _cut_after(text, _SPACED_ENDS | _SPACED_CLAUSE, _UNSPACED_ENDS | _UNSPACED_CLAUSE)
    for clause in _pack(clauses, limit, measure):
        if measure(clause) <= limit:
            out.append(clause)
            continue
        words = [w for w in clause.replace("\n", " ").split(" ") if w]
        for word in _pack([w + " " for w in words], limit, measure):
            if measure(word) <= limit:
                out.append(word)
                continue
            chars = list(word)
            out.extend(_pack(chars, limit, measure))
    return [p.strip() for p in out if p.strip()]


def speech_seconds(frame_rate: float) -> Callable[[str], float]:
    """Estimated seconds of speech of a text at the default speaking rate (no reference)."""
    ref_weight = RuleDurationEstimator.text_weight(FALLBACK_REF_TEXT)
    seconds_per_weight = FALLBACK_REF_TOKENS / ref_weight / frame_rate
    return lambda text: RuleDurationEstimator.text_weight(text) * seconds_per_weight


def _join(a: str, b: str) -> str:
    """Two pieces of text joined with a space, or without one where the script uses none."""
    tight = _wide(a[-1]) or a[-1] in _CJK_MARKS
    return a + b if tight else f"{a} {b}"


def iter_pieces(fragments: Union[str, Iterable[str]], measure: Callable[[str], float], max_seconds: float,
                first_seconds: float = FIRST_PIECE_SECONDS,
                min_seconds: float = MIN_PIECE_SECONDS) -> Iterator[str]:
    """Generation pieces from text fragments, each yielded as soon as its text is complete.

    Args:
        fragments: The text, whole or in fragments of any size.
        measure: Estimated seconds of speech of a text.
        max_seconds: Longest piece.
        first_seconds: Longest first piece (capped by ``max_seconds``).
        min_seconds: Shortest piece: a shorter sentence (or the short tail of a cut one) waits
            for the next sentence; the last piece may be shorter.

    Yields:
        Stripped, non-empty pieces; their order and content depend only on the text.
    """

    def split(text: str, first: bool) -> list[str]:
        limit = min(first_seconds, max_seconds) if first else max_seconds
        if measure(text) <= limit:
            return [text]
        parts = split_long(text, limit, measure)
        if first and limit < max_seconds and len(parts) > 2:
            # Only the first piece is kept short: the rest of it is packed up to max_seconds.
            rest = [parts[1]]
            for part in parts[2:]:
                joined = _join(rest[-1], part)
                if measure(joined) <= max_seconds:
                    rest[-1] = joined
                else:
                    rest.append(part)
            parts = parts[:1] + rest
        return parts

    splitter = SentenceSplitter()
    pending = ""  # complete sentences not yet yielded
    first = True
    for fragment in [fragments] if isinstance(fragments, str) else fragments:
        for sentence in splitter.feed(fragment):
            pending = _join(pending, sentence) if pending else sentence
            if measure(pending) < min_seconds:
                continue
            parts = split(pending, first)
            pending = parts.pop() if len(parts) > 1 and measure(parts[-1]) < min_seconds else ""
            for part in parts:
                yield part
                first = False
    for sentence in splitter.close():
        pending = _join(pending, sentence) if pending else sentence
    if pending:
        yield from split(pending, first)


class PieceFinisher:
    """Upstream's post-processing (cross-fade, silence removal, volume, fade and pad) per piece.

    :func:`OmniVoice.generate` joins chunks with :func:`~omnivoice.postprocess.cross_fade_chunks` and
    finishes the whole with :func:`~omnivoice.postprocess.post_process_audio`. Here each decoded piece
    is finished as it comes, in the same order of operations, so that it can be played at once:
    only its last ``fade`` samples (and, with silence removal, its trailing silence) are held back
    until the next piece (then they get the cross-fade) or the end (then the fade-out and pad).

    Args:
        sample_rate: Audio rate in Hz.
        ref_rms: The reference's RMS (cloning), or None: then the first piece's peak is scaled to
            0.5 for every piece (generate uses the global peak).
        postprocess: Remove silences (per piece: inner silences longer than 0.5 s are cut within a
            piece, not across a junction).
    """

    def __init__(self, sample_rate: int, ref_rms: Optional[float], postprocess: bool) -> None:
        self.sample_rate = sample_rate
        self.ref_rms = ref_rms
        self.postprocess = postprocess
        self.fade = int(0.1 * sample_rate)  # edge fade and pad of post_process_audio
        self.third = int(0.3 * sample_rate) // 3  # cross_fade_chunks: fade-out, gap, fade-in
        self._held: Optional[np.ndarray] = None  # raw tail of the previous piece
        self._held_end = 0  # of the held tail, what survives if it is the signal's end
        self._peak: Optional[float] = None
        self._index = 0
        self._signal = 0  # samples of the signal so far, pads excluded

    def push(self, text: str, audio: np.ndarray, last: Optional[bool]) -> AudioChunk:
        """Finishes a decoded piece; ``last``: whether it ends the signal (None: not known yet)."""
        first = self._index == 0
        if self.postprocess:
            # An edge that is not the signal's keeps its silence (None).
            audio = remove_silence(audio, self.sample_rate, mid_sil=500, lead_sil=100 if first else None,
                                   trail_sil=100 if last else None)
            end = audio.size if last else remove_silence(audio, self.sample_rate, mid_sil=0,
                                                          lead_sil=None, trail_sil=100).size
        else:
            end = audio.size
        audio = audio.astype(np.float32, copy=False)
        if not self._peak:  # the first piece with any sound sets it
            self._peak = float(np.abs(audio).max(initial=0.0))
        head: list[np.ndarray] = []
        if self._held is not None:
            held = fade_edges(self._held, fade_out=min(self.third, self._held.size))
            head = [self._volume(held), np.zeros(self.third, np.float32)]
            audio = fade_edges(audio, fade_in=min(self.third, audio.size))
            self._signal += self.third
        self._signal += audio.size
        if last:
            body, self._held = audio, None
        else:
            cut = max(0, end - self.fade)
            body, self._held, self._held_end = audio[:cut], audio[cut:], end - cut
        body = self._volume(body)
        if first:
            # generate's fade-in covers min(0.1 s, half the signal); the signal is at least this piece.
            body = fade_edges(body, fade_in=min(self.fade, audio.size // 2, body.size))
            head.insert(0, np.zeros(self.fade, np.float32))
        out = np.concatenate(head + [body])
        if last:
            out = self._finish(out)
        return self._chunk(out, text)

    def close(self) -> Optional[AudioChunk]:
        """Ends the signal; returns the held tail (fade-out and pad) as a chunk with empty text."""
        if self._held is None:
            return None
        tail = self._volume(self._held[: self._held_end].copy())
        self._signal -= self._held.size - self._held_end
        self._held = None
        return self._chunk(self._finish(tail), "")

    def _volume(self, audio: np.ndarray) -> np.ndarray:
        return apply_volume(audio, self.ref_rms, self._peak).astype(np.float32, copy=False)

    def _finish(self, out: np.ndarray) -> np.ndarray:
        out = fade_edges(out, fade_out=min(self.fade, self._signal // 2, out.size))
        return np.concatenate([out, np.zeros(self.fade, np.float32)])

    def _chunk(self, audio: np.ndarray, text: str) -> AudioChunk:
        chunk = AudioChunk(audio=audio, text=text, index=self._index)
        self._index += 1
        return chunk
