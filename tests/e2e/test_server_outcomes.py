"""What the server answers when it has no speech to give: Wyoming's ``error`` event (unknown voice,
full queue, failed or empty generation), read with the wyoming client, and a 5xx (never a 4xx:
the client cannot fix it) for a generation whose audio came out empty, over HTTP and SSE.

The app runs in-process (FastAPI's TestClient) and Wyoming on 127.0.0.1; an empty generation is
made by a codec that decodes every code to silence, which post-processing then removes whole, as
upstream's silence removal can remove everything from a model's output."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from fastapi.testclient import TestClient

from omnivoice import OmniVoice
from omnivoice.server import ServerSettings, create_app
from omnivoice.server.voices import VoiceStore
from omnivoice.server.worker import Engine

# wyoming's audio module imports the standard library's audioop, deprecated in Python 3.11.
pytestmark = pytest.mark.filterwarnings("ignore:'audioop' is deprecated:DeprecationWarning")

FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")


async def _exchange(port: int, events: list[Any], last: str) -> list[Any]:
    """Sends ``events`` to the Wyoming server at ``port``; returns the events read up to one of type
    ``last`` or an ``error``."""
    from wyoming.client import AsyncTcpClient

    got = []
    async with AsyncTcpClient("127.0.0.1", port) as client:
        for event in events:
            await client.write_event(event.event())
        while not got or got[-1].type not in (last, "error"):
            got.append(await asyncio.wait_for(client.read_event(), 120))
    return got


def _error(events: list[Any]) -> tuple[str, str]:
    from wyoming.error import Error

    assert [e.type for e in events] == ["error"], [e.type for e in events]
    error = Error.from_event(events[0])
    return error.code, error.text


def test_wyoming_refusals_are_error_events(model: OmniVoice, free_port: Callable[[], int]) -> None:
    from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

    from omnivoice.server.wyoming_server import start_wyoming

    # max_queue 0: every request finds the queue full
    engine = Engine(lambda: model, max_queue=0, max_batch=1, batch_window=0.0)
    engine.start()
    assert engine.ready.wait(60)
    port = free_port()

    async def talk() -> None:
        server = await start_wyoming(f"tcp://127.0.0.1:{port}", engine, VoiceStore(None), ServerSettings())
        try:
            code, text = _error(await _exchange(port, [Synthesize(text="Hi.", voice=SynthesizeVoice(name="nobody"))],
                                                "audio-stop"))
            assert code == "voice_not_found" and "'nobody'" in text and "alloy" in text
            code, text = _error(await _exchange(port, [Synthesize(text="Hi.")], "audio-stop"))
            assert code == "queue_full" and "busy" in text
            # the streaming form: the error at once, and the request still ends when the client stops it
            events = await _exchange(port, [SynthesizeStart(voice=SynthesizeVoice(name="nobody")),
                                            SynthesizeChunk(text="Hello there."), SynthesizeStop()],
                                     "synthesize-stopped")
            assert [e.type for e in events] == ["error"]
        finally:
            await server.stop()

    try:
        asyncio.run(asyncio.wait_for(talk(), 300))
    finally:
        engine.stop()


@pytest.fixture
def silent_model(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> OmniVoice:
    model = OmniVoice.from_pretrained(tiny_model_dir, n_threads=1)
    hop = model.audio_tokenizer.hop_length
    monkeypatch.setattr(model.audio_tokenizer, "decode", lambda codes: np.zeros(codes.shape[-1] * hop, np.float32))
    assert model.generate("Hello.", num_step=2)[0].size == 0  # what the library returns
    return model


def test_an_empty_generation_is_a_5xx_and_a_wyoming_error(silent_model: OmniVoice,
                                                          free_port: Callable[[], int]) -> None:
    from wyoming.tts import Synthesize, SynthesizeVoice

    wyoming_port = free_port()
    # A long batch window and max_batch 2: two requests without a seed are generated as one batch
    # (one generate() call, whose audio is empty); seeded ones run alone at once.
    settings = ServerSettings(warmup=False, max_batch=2, batch_window=60.0, wyoming=f"tcp://127.0.0.1:{wyoming_port}")
    with TestClient(create_app(silent_model, settings)) as client:
        end = time.monotonic() + 60
        while client.get("/health").status_code != 200:
            assert time.monotonic() < end
            time.sleep(0.05)

        # OpenAI's preset voices are designed from the model's own speech: here there is none.
        for fields in [{"response_format": f} for f in FORMATS] + [{"stream_format": "sse"}]:
            r = client.post("/v1/audio/speech", json={"input": "Hello.", "voice": "alloy", "num_step": 2, "seed": 1,
                                                      **fields})
            assert r.status_code == 500, (fields, r.status_code, r.text)
            error = r.json()["error"]
            assert error["type"] == "server_error" and "came out unusable as a voice" in error["message"]
        r = client.post("/v1/audio/voices", data={"name": "designed", "instructions": "male, low pitch"})
        assert r.status_code == 500 and "came out unusable as a voice" in r.json()["error"]["message"], r.text

        answers: dict[str, Any] = {}

        def speak(fmt: str) -> None:
            answers[fmt] = client.post("/v1/audio/speech", json={"input": "Hi.", "response_format": fmt,
                                                                 "num_step": 2})

        batch = [threading.Thread(target=speak, args=(fmt,)) for fmt in ("mp3", "wav")]
        for t in batch:
            t.start()
        for t in batch:
            t.join(120)
        for fmt, r in answers.items():
            assert r.status_code == 500 and r.json()["error"]["code"] == "empty_audio", (fmt, r.text)
            assert "post-processing removed all of the model's audio" in r.json()["error"]["message"]

        async def talk() -> None:
            code, text = _error(await _exchange(wyoming_port, [Synthesize(text="Hello.",
                                                                          voice=SynthesizeVoice(name="alloy"))],
                                                "audio-stop"))
            assert code == "generation_failed" and "came out unusable as a voice" in text

        asyncio.run(asyncio.wait_for(talk(), 300))
