"""Wyoming (Home Assistant's protocol) on the same engine: ``describe`` -> ``info``, ``synthesize``,
and the streaming ``synthesize-start`` / ``-chunk`` / ``-stop``.

Audio goes out as ``audio-start``, ``audio-chunk`` (s16le mono at 24 kHz, one per generated piece)
and ``audio-stop``; a streaming request ends with ``synthesize-stopped``. Home Assistant also sends
a plain ``synthesize`` inside a streaming request for older servers: it is ignored there.
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
from ..lang_map import LANG_IDS
from .encoders import pcm16
from .settings import ServerSettings
from .voices import AUTO, VoiceStore
from .worker import Engine, Job, QueueFull

logger = logging.getLogger(__name__)

_ATTRIBUTION = Attribution(name="k2-fsa OmniVoice on ggml", url="https://github.com/k2-fsa/OmniVoice")


class _Handler(AsyncEventHandler):
    def __init__(self, engine: Engine, store: VoiceStore, settings: ServerSettings, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.engine, self.store, self.settings = engine, store, settings
        self._voice: Optional[str] = None
        self._text: Optional[list[str]] = None  # set between synthesize-start and -stop

    async def handle_event(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            await self.write_event(self._info().event())
        elif SynthesizeStart.is_type(event.type):
            start = SynthesizeStart.from_event(event)
            self._voice = start.voice.name if start.voice else None
            self._text = []
        elif SynthesizeChunk.is_type(event.type) and self._text is not None:
            self._text.append(SynthesizeChunk.from_event(event).text)
        elif SynthesizeStop.is_type(event.type) and self._text is not None:
            text, self._text = "".join(self._text), None
            if text.strip():
                await self._speak(text, self._voice)
            await self.write_event(SynthesizeStopped().event())
        elif Synthesize.is_type(event.type) and self._text is None:
            request = Synthesize.from_event(event)
            await self._speak(request.text, request.voice.name if request.voice else None)
        return True

    def _info(self) -> Info:
        languages = sorted(LANG_IDS)
        names = [v.name for v in self.store.list()]
        voices = [TtsVoice(name=n, attribution=_ATTRIBUTION, installed=True, description=n, version=None,
                           languages=languages) for n in names]
        program = TtsProgram(name="omnivoice", attribution=_ATTRIBUTION, installed=True,
                             description="OmniVoice text-to-speech (ggml)", version=__version__, voices=voices,
                             supports_synthesize_streaming=True)
        return Info(tts=[program])

    async def _speak(self, text: str, voice: Optional[str]) -> None:
        """Generates ``text`` and writes the audio events; errors are logged and end the audio."""
        rate = 24000
        loop = asyncio.get_running_loop()
        options = {"num_step": 32, "guidance_scale": 2.0}
        try:
            prompt, prepare = self.store.resolve(voice or AUTO, lambda: self.engine.model)
        except LookupError:
            logger.warning("wyoming: unknown voice %r; answering no audio", voice)
            await self._empty_audio(rate)
            return
        if prompt is not None:
            options["voice_clone_prompt"] = prompt
        job = Job(text[: self.settings.max_input_chars], options, loop, prepare=prepare)
        try:
            self.engine.submit(job)
        except QueueFull:
            logger.warning("wyoming: queue full; answering no audio")
            await self._empty_audio(rate)
            return
        await self.write_event(AudioStart(rate=rate, width=2, channels=1).event())
        try:
            while True:
                kind, payload = await asyncio.wait_for(job.out.get(), self.settings.request_timeout)
                if kind == "audio":
                    await self.write_event(AudioChunk(rate=rate, width=2, channels=1, audio=pcm16(payload)).event())
                else:
                    if kind == "error":
                        logger.warning("wyoming: generation failed: %s", payload)
                    break
        finally:
            job.cancel.set()
        await self.write_event(AudioStop().event())

    async def _empty_audio(self, rate: int) -> None:
        await self.write_event(AudioStart(rate=rate, width=2, channels=1).event())
        await self.write_event(AudioStop().event())


async def start_wyoming(uri: str, engine: Engine, store: VoiceStore, settings: ServerSettings) -> AsyncServer:
    """Starts serving Wyoming at ``uri`` (``tcp://HOST:PORT``) in the running event loop."""
    server = AsyncServer.from_uri(uri)
    await server.start(lambda reader, writer: _Handler(engine, store, settings, reader, writer))
    logger.info("Wyoming at %s", uri)
    return server
