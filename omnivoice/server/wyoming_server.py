"""Wyoming (Home Assistant's protocol) on the same engine: ``describe`` -> ``info``, ``synthesize``,
and the streaming ``synthesize-start`` / ``-chunk`` / ``-stop``.

Audio goes out as ``audio-start``, ``audio-chunk`` (s16le mono at 24 kHz, one per generated piece)
and ``audio-stop``; a streaming request ends with ``synthesize-stopped``. In a streaming request
the text chunks are fed to one generation as they arrive (the engine speaks each sentence once it
is complete, the voice held across them). Home Assistant also sends a plain ``synthesize`` inside
a streaming request for older servers: it is ignored there.

A request that cannot run (unknown voice, full queue, model not loaded) or fails is answered with
Wyoming's ``error`` event (``text``, ``code``), which Home Assistant shows; never with silence.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Optional

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler, AsyncServer
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from .. import __version__
from .encoders import pcm16
from .settings import ServerSettings
from .voices import AUTO, OPENAI_PRESETS, VoiceStore
from .worker import EMPTY_AUDIO, Engine, Job, QueueFull, TextFeed

logger = logging.getLogger(__name__)

_ATTRIBUTION = Attribution(name="k2-fsa OmniVoice on ggml", url="https://github.com/k2-fsa/OmniVoice")
_RATE = 24000  # of the empty answer before a model is loaded


class _Refused(Exception):
    """A request that cannot run, answered with Wyoming's ``error`` event (``text``, ``code``)."""

    def __init__(self, text: str, code: str) -> None:
        super().__init__(text)
        self.text, self.code = text, code

    def event(self) -> Event:
        return Error(text=self.text, code=self.code).event()


class _Handler(AsyncEventHandler):
    def __init__(self, engine: Engine, store: VoiceStore, settings: ServerSettings, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.engine, self.store, self.settings = engine, store, settings
        self._streaming = False  # between synthesize-start and -stop
        self._feed: Optional[TextFeed] = None  # the streaming request's text, when it runs
        self._speaking: Optional[asyncio.Task] = None
        self._job: Optional[Job] = None

    async def handle_event(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            await self.write_event(self._info().event())
        elif SynthesizeStart.is_type(event.type):
            start = SynthesizeStart.from_event(event)
            self._streaming = True
            try:
                job = self._job = self._new_job(None, start.voice.name if start.voice else None)
            except _Refused as refused:
                await self.write_event(refused.event())
            else:
                self._feed = job.text  # type: ignore[assignment]
                self._speaking = asyncio.create_task(self._speak(job))
        elif SynthesizeChunk.is_type(event.type):
            if self._feed is not None:
                self._feed.put(SynthesizeChunk.from_event(event).text)
        elif SynthesizeStop.is_type(event.type) and self._streaming:
            if self._feed is not None:
                self._feed.close()
            if self._speaking is not None:
                await self._speaking
            self._streaming, self._feed, self._speaking, self._job = False, None, None, None
            await self.write_event(SynthesizeStopped().event())
        elif Synthesize.is_type(event.type) and not self._streaming:
            request = Synthesize.from_event(event)
            try:
                self._job = self._new_job(request.text, request.voice.name if request.voice else None)
            except _Refused as refused:
                await self.write_event(refused.event())
            else:
                await self._speak(self._job)
        return True

    async def disconnect(self) -> None:
        if self._job is not None:
            self._job.cancel.set()

    def _info(self) -> Info:
        languages = list(self.engine.model.capabilities.languages or ()) if self.engine.model else []
        voices = [TtsVoice(name=v.name, attribution=_ATTRIBUTION, installed=True, description=v.name,
                           version=None, languages=languages) for v in self.store.list()]
        program = TtsProgram(name="omnivoice", attribution=_ATTRIBUTION, installed=True,
                             description="OmniVoice text-to-speech (ggml)", version=__version__, voices=voices,
                             supports_synthesize_streaming=True)
        return Info(tts=[program])

    def _new_job(self, text: Optional[str], voice: Optional[str]) -> Job:
        """A queued job for ``text`` (``None``: a feed of streamed chunks).

        Raises:
            _Refused: The engine is not ready, the voice is unknown or the queue is full.
        """
        if not self.engine.ready.is_set():
            failed = self.engine.load_error is not None
            raise _Refused("the model failed to load" if failed else "the model is loading; retry shortly",
                           "model_not_ready")
        try:
            prompt, prepare = self.store.resolve(voice or AUTO, lambda: self.engine.model)
        except LookupError:
            raise _Refused(f"unknown voice {voice!r}: use 'auto', one of OpenAI's names ({', '.join(OPENAI_PRESETS)})"
                           " or a saved voice (listed by describe)", "voice_not_found") from None
        options: dict = {}  # the family's defaults
        if prompt is not None:
            options["voice"] = prompt
        job = Job("", options, asyncio.get_running_loop(), prepare=prepare)
        job.text = text[: self.settings.max_input_chars] if text is not None else TextFeed(
            job.cancel, self.settings.request_timeout)
        try:
            self.engine.submit(job)
        except QueueFull:
            raise _Refused(f"the server is busy: {self.engine.max_queue} requests are already waiting; retry "
                           f"in {self.engine.retry_after()} s", "queue_full") from None
        return job

    async def _speak(self, job: Job) -> None:
        """Writes the job's audio events as its pieces come: ``audio-start``, a chunk per piece,
        ``audio-stop``. A failure, the timeout or a generation without any audio is an ``error``
        event instead (after the chunks already sent, without ``audio-stop``)."""
        model = self.engine.model
        rate = model.sampling_rate if model is not None else _RATE
        started = False
        try:
            while True:
                try:
                    kind, payload = await asyncio.wait_for(job.out.get(), self.settings.request_timeout)
                except asyncio.TimeoutError:
                    kind, payload = "error", TimeoutError(f"no audio within {self.settings.request_timeout:g} s")
                if kind == "error":
                    logger.warning("wyoming: generation failed: %s", payload)
                    code = "timeout" if isinstance(payload, TimeoutError) else "generation_failed"
                    await self.write_event(_Refused(f"generation failed: {payload}", code).event())
                    return
                if kind == "done" and not started:
                    await self.write_event(_Refused(EMPTY_AUDIO, "empty_audio").event())
                    return
                if not started:
                    await self.write_event(AudioStart(rate=rate, width=2, channels=1).event())
                    started = True
                if kind == "done":
                    break
                await self.write_event(AudioChunk(rate=rate, width=2, channels=1, audio=pcm16(payload)).event())
        finally:
            job.cancel.set()
        await self.write_event(AudioStop().event())


async def start_wyoming(uri: str, engine: Engine, store: VoiceStore, settings: ServerSettings) -> AsyncServer:
    """Starts serving Wyoming at ``uri`` (``tcp://HOST:PORT``) in the running event loop."""
    server = AsyncServer.from_uri(uri)
    await server.start(lambda reader, writer: _Handler(engine, store, settings, reader, writer))
    logger.info("Wyoming at %s", uri)
    return server
