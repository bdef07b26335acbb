"""Text splitting for long-form generation, and end punctuation for reference texts.

Behaviour matches upstream OmniVoice (``omnivoice/utils/text.py``): lengths are
counted in characters, sentences end at ASCII or CJK punctuation except after
common abbreviations ("Mr.", "e.g."), and short chunks are merged into a
neighbour.
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["HAN", "add_punctuation", "chunk_text_for_generation", "chunk_text_punctuation", "contains_chinese"]

# CJK Unified Ideographs, as a regex character range: what upstream takes as "this text is Chinese"
# (for end punctuation, voice-design language and whitespace around Chinese characters).
HAN = "\u4e00-\u9fff"
_HAN_RE = re.compile(f"[{HAN}]")

# A sentence may end after any of these.
SPLIT_PUNCTUATION = frozenset(".,;:!?。，；：！？")
# Quotes and brackets that close a sentence: they stay with the sentence before them.
CLOSING_MARKS = frozenset("\"'“”‘’）]》>」】")
# Text ending in one of these already has end punctuation. (Upstream also lists "……", which
# a single last character never equals.)
END_PUNCTUATION = frozenset(";:,.!?…)]}\"'“”‘’；：，。！？、）】")
# A period after one of these words does not end the sentence.
ABBREVIATIONS = frozenset(
    "Mr. Mrs. Ms. Dr. Prof. Sr. Jr. Rev. Fr. Hon. Pres. Gov. Capt. Gen. Sen. Rep. Col. Maj. Lt. "
    "Cmdr. Sgt. Cpl. Co. Corp. Inc. Ltd. Est. Dept. St. Ave. Blvd. Rd. Mt. Ft. No. Jan. Feb. Mar. "
    "Apr. Aug. Sep. Sept. Oct. Nov. Dec. i.e. e.g. vs. Vs. Etc. approx. fig. def.".split()
)


def contains_chinese(text: Optional[str]) -> bool:
    """Return True if ``text`` contains a CJK ideograph (upstream's test for Chinese text)."""
    return bool(text) and _HAN_RE.search(text) is not None


def _ends_sentence(sentence: list[str]) -> bool:
    """Whether the punctuation just appended to ``sentence`` ends it (not an abbreviation's period)."""
    if sentence[-1] != ".":
        return True
    words = "".join(sentence).split()
    return not words or words[-1] not in ABBREVIATIONS


def _split_sentences(text: str) -> list[list[str]]:
    """Split ``text`` into sentences, each a list of characters keeping its punctuation."""
    sentences: list[list[str]] = []
    current: list[str] = []
    for char in text:
        # Punctuation or a closing mark right after a sentence end belongs to that sentence.
        if not current and sentences and (char in SPLIT_PUNCTUATION or char in CLOSING_MARKS):
            sentences[-1].append(char)
            continue
        current.append(char)
        if char in SPLIT_PUNCTUATION and _ends_sentence(current):
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return sentences


def _pack(sentences: list[list[str]], chunk_len: int) -> list[list[str]]:
    """Greedily join consecutive sentences while a chunk stays within ``chunk_len`` characters.

    A single sentence longer than ``chunk_len`` becomes a chunk of its own, unsplit.
    """
    chunks: list[list[str]] = []
    current: list[str] = []
    for sentence in sentences:
        if len(current) + len(sentence) <= chunk_len:
            current = current + sentence
            continue
        if current:
            chunks.append(current)
        current = list(sentence)
    if current:
        chunks.append(current)
    return chunks


def _merge_short(chunks: list[list[str]], min_chunk_len: int) -> list[list[str]]:
    """Fold chunks shorter than ``min_chunk_len`` into the previous chunk.

    A short first chunk takes the second chunk in, whatever its length.
    """
    first_is_short = bool(chunks) and len(chunks[0]) < min_chunk_len
    merged: list[list[str]] = []
    for i, chunk in enumerate(chunks):
        if merged and ((i == 1 and first_is_short) or len(chunk) < min_chunk_len):
            merged[-1] = merged[-1] + chunk
        else:
            merged.append(chunk)
    return merged


def chunk_text_punctuation(text: str, chunk_len: int, min_chunk_len: int | None = None) -> list[str]:
    """Split text into chunks of at most about ``chunk_len`` characters at sentence ends.

    Args:
        text: The text to split.
        chunk_len: Target maximum chunk length in characters. Sentences are never
            cut, so a longer sentence makes a longer chunk.
        min_chunk_len: If given, chunks shorter than this are merged into a
            neighbour (the previous one; the first chunk absorbs the second).

    Returns:
        The stripped, non-empty chunks in order.
    """
    chunks = _pack(_split_sentences(text), chunk_len)
    if min_chunk_len is not None:
        chunks = _merge_short(chunks, min_chunk_len)
    stripped = ("".join(chunk).strip() for chunk in chunks)
    return [chunk for chunk in stripped if chunk]


def chunk_text_for_generation(text: str, target_tokens: int, chunk_duration: float, frame_rate: float) -> list[str]:
    """Split a long text into chunks of about ``chunk_duration`` seconds of speech.

    As upstream's chunked generation: the chunk length in characters follows from
    the text's estimated audio length (``target_tokens`` frames at ``frame_rate``),
    and chunks under 3 characters are merged.

    Args:
        text: The text to speak (non-empty).
        target_tokens: Estimated number of audio frames for the whole text.
        chunk_duration: Wanted audio length per chunk, in seconds.
        frame_rate: Audio frames per second.

    Returns:
        The chunks, in order.

    Raises:
        ValueError: ``text`` is empty or ``target_tokens`` is not positive.
    """
    if not text or target_tokens <= 0:
        raise ValueError("chunking needs a non-empty text and a positive target length")
    tokens_per_char = target_tokens / len(text)
    chunk_len = int(chunk_duration * frame_rate / tokens_per_char)
    return chunk_text_punctuation(text, chunk_len, min_chunk_len=3)


def add_punctuation(text: str) -> str:
    """Strip ``text`` and end it with a period if it lacks end punctuation.

    The period is ``"。"`` if the text contains a CJK ideograph, else ``"."``.

    Args:
        text: Text, typically a reference transcript.

    Returns:
        The stripped text with end punctuation (empty text stays empty).
    """
    text = text.strip()
    if not text or text[-1] in END_PUNCTUATION:
        return text
    return text + ("。" if contains_chinese(text) else ".")
