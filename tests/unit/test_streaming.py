"""The streaming engine without a model: incremental sentence splitting in several scripts, pieces,
and piecewise post-processing against generate's whole-signal functions."""

from __future__ import annotations

import numpy as np
import pytest

from omnivoice.models.omnivoice.duration import speech_seconds
from omnivoice.postprocess import cross_fade_chunks, post_process_audio
from omnivoice.streaming import (
    FIRST_PIECE_SECONDS,
    MIN_PIECE_SECONDS,
    PieceFinisher,
    SentenceSplitter,
    iter_pieces,
    split_long,
)

MEASURE = speech_seconds(25.0)

MIXED = ('Mr. Smith paid $3.50 for it. "Really?" she asked! J. R. R. Tolkien wrote e.g. books.\n'
         "A heading without a stop\n你好。我很好！「是的。」 नमस्ते। दूसरा वाक्य। The end")
MIXED_SENTENCES = ["Mr. Smith paid $3.50 for it.", '"Really?" she asked!',
                   "J. R. R. Tolkien wrote e.g. books.", "A heading without a stop", "你好。", "我很好！",
                   "「是的。」", "नमस्ते।", "दूसरा वाक्य।", "The end"]


def _split(fragments: list[str]) -> list[str]:
    splitter = SentenceSplitter()
    out = [s for f in fragments for s in splitter.feed(f)]
    return out + splitter.close()


def test_sentences_in_every_script_whatever_the_fragments() -> None:
    assert _split([MIXED]) == MIXED_SENTENCES
    assert _split(list(MIXED)) == MIXED_SENTENCES
    rng = np.random.default_rng(0)
    cuts = sorted(rng.choice(len(MIXED), 12, replace=False))
    assert _split([MIXED[a:b] for a, b in zip([0, *cuts], [*cuts, len(MIXED)])]) == MIXED_SENTENCES


def test_a_sentence_is_returned_once_the_next_character_decides() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed("It costs 3.") == []  # "3.5" or a sentence end: not known yet
    assert splitter.feed("5 euros. ") == []  # a lowercase word could still follow
    assert splitter.feed("Then") == ["It costs 3.5 euros."]
    assert splitter.feed(" 好的。") == []
    assert splitter.feed("对") == ["Then 好的。"]
    assert splitter.close() == ["对"]
    with pytest.raises(TypeError, match="fragments must be str"):
        splitter.feed(b"bytes")  # type: ignore[arg-type]


def test_long_sentences_are_cut_at_clauses_then_words_then_characters() -> None:
    long = ("This is a long sentence, which goes on and on, with many clauses; it keeps going: more words "
            "here, and even more words there, until the reader is tired.")
    parts = split_long(long, 4.0, MEASURE)
    assert len(parts) > 2 and all(MEASURE(p) <= 4.0 for p in parts)
    assert all(p.endswith((",", ";", ":", ".")) for p in parts)
    assert " ".join(parts) == long
    words = split_long("word " * 60, 3.0, MEASURE)
    assert len(words) > 2 and all(MEASURE(p) <= 3.0 for p in words)
    cjk = "一二三四五六七八九十" * 20
    chars = split_long(cjk, 3.0, MEASURE)
    assert "".join(chars) == cjk and all(MEASURE(p) <= 3.0 for p in chars)


def test_pieces_first_short_none_too_short_nothing_lost() -> None:
    text = ("Hi. " + "The first real sentence is long enough, with a clause or two, and it runs past the first "
            "limit for sure. Short one. " + "Another full sentence follows here, plain and simple. " * 4)
    pieces = list(iter_pieces(text, MEASURE, max_seconds=6.0))
    assert MEASURE(pieces[0]) <= FIRST_PIECE_SECONDS
    assert all(MEASURE(p) <= 6.0 for p in pieces)
    assert all(MEASURE(p) >= MIN_PIECE_SECONDS for p in pieces[:-1])
    assert pieces[0].startswith("Hi. The first")  # "Hi." alone is too short: joined with the next
    assert "".join(pieces).replace(" ", "") == text.replace(" ", "")
    assert list(iter_pieces(list(text), MEASURE, max_seconds=6.0)) == pieces


def test_pieces_are_yielded_before_the_text_ends() -> None:
    fed: list[str] = []

    def fragments():
        for word in "One whole sentence comes first. Then the rest, much later. And more.".split(" "):
            fed.append(word)
            yield word + " "

    pieces = iter_pieces(fragments(), MEASURE, max_seconds=15.0)
    assert next(pieces) == "One whole sentence comes first."
    assert fed[-1] == "Then"  # the first word after the stop decided the boundary; nothing more read


def _noise(rng: np.random.Generator, n: int) -> np.ndarray:
    return (rng.standard_normal(n) * 0.2).astype(np.float32)


@pytest.mark.parametrize("ref_rms", [0.05, None])
@pytest.mark.parametrize("known_end", [True, False])
def test_finisher_equals_generate_post_processing(ref_rms: float | None, known_end: bool) -> None:
    rng = np.random.default_rng(1)
    pieces = [_noise(rng, n) for n in (30000, 17000, 26000)]
    pieces[0][12345] = 0.9  # the global peak is in the first piece
    finisher = PieceFinisher(24000, ref_rms, postprocess=False)
    chunks = [finisher.push(f"p{i}", a, (i == 2) if known_end else None) for i, a in enumerate(pieces)]
    tail = finisher.close()
    assert (tail is None) == known_end
    chunks += [] if tail is None else [tail]
    whole = post_process_audio(cross_fade_chunks(pieces, 24000), 24000, ref_rms, postprocess_output=False)
    np.testing.assert_array_equal(np.concatenate([c.audio for c in chunks]), whole)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    # Each piece is out at once, less the 0.1 s tail that the next chunk starts with.
    assert chunks[0].audio.size == 2400 + 30000 - 2400


def test_finisher_removes_silence_like_generate() -> None:
    rng = np.random.default_rng(2)
    silence = np.zeros(24000, np.float32)
    # Silences at the signal's edges and inside a piece; none at the junction (there, each side is
    # cut to 0.5 s on its own: documented).
    pieces = [np.concatenate([silence, _noise(rng, 20000), silence, _noise(rng, 5000)]),
              np.concatenate([_noise(rng, 15000), silence])]
    finisher = PieceFinisher(24000, 0.2, postprocess=True)
    streamed = np.concatenate([finisher.push("a", pieces[0], None).audio, finisher.push("b", pieces[1], None).audio,
                               finisher.close().audio])
    whole = post_process_audio(cross_fade_chunks(pieces, 24000), 24000, 0.2, postprocess_output=True)
    # Edges trimmed to 0.1 s, the inner 1 s kept (2 x 0.5 s); silence is found on a 10 ms grid that
    # starts at each piece rather than at the signal's start.
    assert abs(streamed.size - whole.size) <= 480
    first_sound = [int(np.argmax(np.abs(x) > 1e-3)) for x in (streamed, whole)]
    assert first_sound[0] == first_sound[1]
