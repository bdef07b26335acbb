"""Wyoming (Home Assistant's protocol) on the same engine: ``describe`` -> ``info``, ``synthesize``,
and the streaming ``synthesize-start`` / ``-chunk`` / ``-stop``.

Audio goes out as ``audio-start``, ``audio-chunk`` (s16le mono at 24 kHz, one per generated piece)
and ``audio-stop``; a streaming request ends with ``synthesize-stopped``. In a streaming request
the text chunks are fed to one generation as they arrive (the engine speaks each sentence once it
is complete, the voice held across them). Home Assistant also sends a plain ``synthesize`` inside
a streaming request for older servers: it is ignored there.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Optional

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler, AsyncServer
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from .. import __version__
from .encoders import pcm16
from .settings import ServerSettings
from .voices import AUTO, VoiceStore
from .worker import Engine, Job, QueueFull, TextFeed

logger = logging.getLogger(__name__)

_ATTRIBUTION = Attribution(name="k2-fsa OmniVoice on ggml", url="https://github.com/k2-fsa/OmniVoice")
_RATE = 24000  # of the empty answer before a model is loaded


class _Handler(AsyncEventHandler):
    def __init__(self, engine: Engine, store: VoiceStore, settings: ServerSettings, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.engine, self.store, self.settings = engine, store, settings
        self._feed: Optional[TextFeed] = None  # set between synthesize-start and -stop
        self._speaking: Optional[asyncio.Task] = None
        self._job: Optional[Job] = None

    async def handle_event(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            await self.write_event(self._info().event())
        elif SynthesizeStart.is_type(event.type):
            start = SynthesizeStart.from_event(event)
            job = self._job = self._new_job(None, start.voice.name if start.voice else None)
            if job is not None:
                self._feed = job.text  # type: ignore[assignment]
            self._speaking = asyncio.create_task(self._speak(job))
        elif SynthesizeChunk.is_type(event.type):
            if self._feed is not None:
                self._feed.put(SynthesizeChunk.from_event(event).text)
        elif SynthesizeStop.is_type(event.type) and self._speaking is not None:
            if self._feed is not None:
                self._feed.close()
            await self._speaking
            self._feed = self._speaking = self._job = None
            await self.write_event(SynthesizeStopped().event())
        elif Synthesize.is_type(event.type) and self._speaking is None:
            request = Synthesize.from_event(event)
            self._job = self._new_job(request.text, request.voice.name if request.voice else None)
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

    def _new_job(self, text: Optional[str], voice: Optional[str]) -> Optional[Job]:
        """A queued job for ``text`` (``None``: a feed of streamed chunks), or None when it cannot run
        (unknown voice, full queue, engine not ready): Wyoming has no error reply, so the answer is
        empty audio and a log line."""
        if not self.engine.ready.is_set():
            logger.warning("wyoming: the model is not loaded yet; answering no audio")
            return None
        try:
            prompt, prepare = self.store.resolve(voice or AUTO, lambda: self.engine.model)
        except LookupError:
            logger.warning("wyoming: unknown voice %r; answering no audio", voice)
            return None
        options: dict = {}  # the family's defaults
        if prompt is not None:
            options["voice"] = prompt
        job = Job("", options, asyncio.get_running_loop(), prepare=prepare)
        job.text = text[: self.settings.max_input_chars] if text is not None else TextFeed(
            job.cancel, self.settings.request_timeout)
        try:
            self.engine.submit(job)
        except QueueFull:
            logger.warning("wyoming: queue full; answering no audio")
            return None
        return job

    async def _speak(self, job: Optional[Job]) -> None:
        """Writes the job's audio events as its pieces come; errors are logged and end the audio."""
        model = self.engine.model
        rate = model.sampling_rate if model is not None else _RATE  # not loaded: no audio follows anyway
        await self.write_event(AudioStart(rate=rate, width=2, channels=1).event())
        try:
            while job is not None:
                kind, payload = await asyncio.wait_for(job.out.get(), self.settings.request_timeout)
                if kind != "audio":
                    if kind == "error":
                        logger.warning("wyoming: generation failed: %r", payload)
                    break
                await self.write_event(AudioChunk(rate=rate, width=2, channels=1, audio=pcm16(payload)).event())
        finally:
            if job is not None:
                job.cancel.set()
        await self.write_event(AudioStop().event())


async def start_wyoming(uri: str, engine: Engine, store: VoiceStore, settings: ServerSettings) -> AsyncServer:
    """Starts serving Wyoming at ``uri`` (``tcp://HOST:PORT``) in the running event loop."""
    server = AsyncServer.from_uri(uri)
    await server.start(lambda reader, writer: _Handler(engine, store, settings, reader, writer))
    logger.info("Wyoming at %s", uri)
    return server
