"""The streaming engine on the tiny model: the stream against generate() on the same pieces, text
consumed as it arrives, the voice held across pieces, and cancellation between MaskGIT steps."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import omnivoice.models.omnivoice.pipeline as pipeline_module
from omnivoice import Cancelled, OmniVoice, TextPiece
from omnivoice.streaming import iter_pieces, speech_seconds

FIXTURES = Path(__file__).parents[1] / "data" / "fixtures"
MEASURE = speech_seconds(25.0)


@pytest.fixture(scope="module")
def voice(model: OmniVoice):
    enc = np.load(FIXTURES / "codec_encode.npz")
    return model.create_voice_clone_prompt((enc["audio_24k"], 24000), "Nice to meet you.")


TEXT = ("The first sentence is here and it is long. Then a second one follows it. A third sentence comes "
        "next, with a clause. And the fourth one closes the paragraph.")
FAST = dict(num_step=3, position_temperature=0.0, postprocess_output=False, seed=3)


def _spy_tokens(model: OmniVoice, monkeypatch: pytest.MonkeyPatch) -> list:
    calls = []
    inner = model.pipeline.generate_tokens

    def spy(items, *args, **kwargs):
        out = inner(items, *args, **kwargs)
        calls.append((list(items), out))
        return out

    monkeypatch.setattr(model.pipeline, "generate_tokens", spy)
    return calls


@pytest.mark.slow
@pytest.mark.parametrize("clone", [True, False])
def test_stream_is_generate_on_the_same_pieces(model: OmniVoice, voice, monkeypatch: pytest.MonkeyPatch,
                                               clone: bool) -> None:
    kw = dict(FAST, voice_clone_prompt=voice if clone else None)
    calls = _spy_tokens(model, monkeypatch)
    chunks = list(model.generate_stream(TEXT, **kw))
    pieces = [c.text for c in chunks]
    assert len(pieces) >= 3 and pieces == list(iter_pieces(TEXT, MEASURE, 15.0))
    streamed = np.concatenate([c.audio for c in chunks])
    stream_tokens = [out[0] for _, out in calls]
    calls.clear()
    # generate() chunking the text into exactly these pieces.
    monkeypatch.setattr(pipeline_module, "chunk_text_for_generation", lambda *a: pieces)
    whole = model.generate(TEXT, audio_chunk_threshold=0.0, **kw)[0]
    for a, (_, b) in zip(stream_tokens, calls, strict=True):
        np.testing.assert_array_equal(a, b[0])
    if clone:
        np.testing.assert_array_equal(streamed, whole)
    else:
        # Pieces after the first are cloned from the first piece's tokens.
        assert calls[1][0][0].ref_text == pieces[0]
        assert streamed.shape == whole.shape  # peak of the first piece, not the global one


def test_single_piece_stream_is_generate(model: OmniVoice) -> None:
    kw = dict(num_step=3, position_temperature=0.0, seed=1, duration=0.8)
    (chunk,) = model.generate_stream("  Just one sentence.  ", **kw)
    np.testing.assert_array_equal(chunk.audio, model.generate("  Just one sentence.  ", **kw)[0])


@pytest.mark.slow
def test_fragments_are_spoken_as_they_come(model: OmniVoice, voice) -> None:
    words = TEXT.split(" ")
    fed = []

    def fragments():
        for w in words:
            fed.append(w)
            yield w + " "

    stream = model.generate_stream(fragments(), voice_clone_prompt=voice, **FAST)
    first = next(stream)
    assert len(fed) < len(words) // 2  # the first piece spoke before most of the text came
    rest = list(stream)
    assert rest[-1].text == ""  # the end was not known: the held tail comes last
    whole = list(model.generate_stream(TEXT, voice_clone_prompt=voice, **FAST))
    np.testing.assert_array_equal(np.concatenate([c.audio for c in [first, *rest]]),
                                  np.concatenate([c.audio for c in whole]))


def test_pieces_with_durations_hold_the_voice(model: OmniVoice, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _spy_tokens(model, monkeypatch)
    chunks = list(model.generate_pieces([TextPiece("First cue here.", 1.2), "Second cue.", TextPiece("Third.", 0.4)],
                                        instruct="female", num_step=2, position_temperature=0.0))
    assert [c.audio.size for c in (chunks[0], chunks[2])] == [30 * 960, 10 * 960]
    first_tokens = calls[0][1][0]
    for items, _ in calls[1:]:
        np.testing.assert_array_equal(items[0].ref_tokens, first_tokens)
        assert items[0].instruct == calls[0][0][0].instruct


def test_cancel_stops_before_the_next_step_and_leaves_the_model_usable(model: OmniVoice) -> None:
    kw = dict(num_step=6, position_temperature=0.0, duration=1.0, seed=0)
    want = model.generate("Cancel me.", **kw)[0]
    threads = threading.active_count()
    stop = threading.Event()
    steps = []

    def progress(label: str, done: int, total: int) -> None:
        steps.append(done)
        if done == 2:
            stop.set()

    with pytest.raises(Cancelled):
        model.generate("Cancel me.", progress=progress, cancel=stop, **kw)
    assert steps == [1, 2]
    calls = iter(range(100))
    with pytest.raises(Cancelled):  # a callable, in a stream
        list(model.generate_stream(TEXT, cancel=lambda: next(calls) == 4, **kw))
    np.testing.assert_array_equal(model.generate("Cancel me.", **kw)[0], want)
    assert threading.active_count() == threads


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(text="Hi.", cancel=3), TypeError, "cancel must be"),
    (dict(text="Hi.", split="words"), ValueError, "split must be"),
    (dict(text=iter(["Hi."]), split="chunk"), ValueError, "needs text as a str"),
    (dict(text=iter(["Hi."]), duration=2.0), ValueError, "duration needs text as a str"),
    (dict(text=iter([" ", ""])), ValueError, "text is empty"),
    (dict(text="   "), ValueError, "text is empty"),
])
def test_bad_stream_arguments(model: OmniVoice, kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        list(model.generate_stream(**kwargs))
