"""The generation pipeline behind :class:`omnivoice.OmniVoice`: request preparation and chunk scheduling.

:class:`~omnivoice.OmniVoice` is the model and its public API (kokoro's ``KModel``); this module is
its ``KPipeline``: it resolves a request into :class:`GenerationItem` s (language, voice design,
reference, target length), runs MaskGIT over batches of them, splits long texts into chunks
generated batch by batch, and turns the codes into post-processed audio, whole or streamed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, Sequence, Union

import numpy as np

from ... import _core
from ...arguments import check_optional_text, check_texts, path_hint
from .audio_tokenizer import AudioTokenizer
from ...chunking import chunk_text_for_generation, contains_chinese
from .duration import estimate_target_tokens, per_item, resolve_target_lengths
from .lang_map import resolve_language
from .maskgit import generate as maskgit_generate, pack_prompts
from ...postprocess import ChunkJoiner, apply_volume
from .prompt import build_prompt
from ...streaming import AudioChunk, Cancelled, CancelCheck, PieceFinisher, TextPiece
from ...threads import LoadAwareThreads
from .tokenizer import TextTokenizer
from .voice_design import resolve_instruct

if TYPE_CHECKING:
    from .model import AudioInput, OmniVoiceGenerationConfig, VoiceClonePrompt

logger = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]
# Encodes one reference: (ref_audio, ref_text, preprocess_prompt) -> its cloning prompt.
CloneFn = Callable[["AudioInput", Optional[str], bool], "VoiceClonePrompt"]


@dataclass
class GenerationItem:
    """One text to generate, after resolving language, instruct, reference and length."""

    text: str
    target_len: int
    lang: Optional[str]
    instruct: Optional[str]
    ref_text: Optional[str] = None
    ref_tokens: Optional[np.ndarray] = None
    ref_rms: Optional[float] = None
    speed: float = 1.0


class Pipeline:
    """Runs requests on a loaded LM, codec and text tokenizer."""

    def __init__(self, lm: "_core.LM", audio_tokenizer: AudioTokenizer, text_tokenizer: TextTokenizer,
                 backend: Optional["_core.Backend"] = None) -> None:
        self.lm = lm
        self.backend = backend
        # Sets the backend's thread count before each LM step; None keeps the count as it is.
        self.threads: Optional[LoadAwareThreads] = None
        self.audio_tokenizer = audio_tokenizer
        self.text_tokenizer = text_tokenizer
        self.sampling_rate: int = audio_tokenizer.sample_rate
        self.frame_rate: float = audio_tokenizer.sample_rate / audio_tokenizer.hop_length

    def prepare(self, text: Union[str, list[str]], language: Any, ref_text: Any, ref_audio: Any,
                voice_clone_prompt: Any, instruct: Any, duration: Any, speed: Any,
                config: OmniVoiceGenerationConfig, clone: CloneFn) -> list[GenerationItem]:
        """Resolves one request into items: texts checked, language and instruct resolved, each
        reference encoded by ``clone`` (once when shared by the batch), target lengths set."""
        texts = check_texts(text)
        for name, value in (("language", language), ("instruct", instruct), ("ref_text", ref_text)):
            check_optional_text(value, name)
        for p in voice_clone_prompt if isinstance(voice_clone_prompt, list) else [voice_clone_prompt]:
            if p is not None and not hasattr(p, "ref_audio_tokens"):
                hint = path_hint(p)
                raise TypeError("voice_clone_prompt must be a VoiceClonePrompt" +
                                (f"; load the file first: {hint}" if hint else f", got {type(p).__name__}"))
            if p is not None and not p.ref_rms > 0:  # as VoiceClonePrompt.load refuses it
                raise ValueError(f"voice_clone_prompt.ref_rms is {p.ref_rms!r}: a silent (or invalid) reference "
                                 "has no voice to clone; make the prompt from a recording of the voice")
        n = len(texts)
        langs = [resolve_language(x) for x in per_item(language, n, "language")]
        instructs = [None if s is None else resolve_instruct(s, use_zh=contains_chinese(t))
                     for s, t in zip(per_item(instruct, n, "instruct"), texts)]

        if voice_clone_prompt is not None and (ref_text is not None or ref_audio is not None):
            logger.warning("both voice_clone_prompt and ref_text/ref_audio given: using voice_clone_prompt")
        elif ref_audio is not None:
            # One reference for the whole batch is encoded once, then shared.
            m = max(len(x) if isinstance(x, list) else 1 for x in (ref_audio, ref_text))
            voice_clone_prompt = [
                clone(a, t, config.preprocess_prompt)
                for a, t in zip(per_item(ref_audio, m, "ref_audio"), per_item(ref_text, m, "ref_text"))
            ]
        elif ref_text is not None:
            raise ValueError("ref_text was given without ref_audio")
        prompts = per_item(voice_clone_prompt, n, "voice_clone_prompt")

        ref_tokens = [None if p is None else np.asarray(p.ref_audio_tokens, dtype=np.int32) for p in prompts]
        ref_texts = [None if p is None else p.ref_text for p in prompts]
        lengths, speeds = resolve_target_lengths(
            texts, ref_texts, [None if t is None else t.shape[1] for t in ref_tokens], self.frame_rate,
            speed=speed, duration=duration)
        items = [
            GenerationItem(text=texts[i], target_len=lengths[i], lang=langs[i], instruct=instructs[i],
                           ref_text=ref_texts[i], ref_tokens=ref_tokens[i],
                           ref_rms=None if prompts[i] is None else prompts[i].ref_rms,
                           speed=1.0 if speeds is None else speeds[i])
            for i in range(n)
        ]
        given = per_item(duration, n, "duration")
        for item, dur in zip(items, given):
            self._check_fits(item, config, dur)
        return items

    def _check_fits(self, item: GenerationItem, config: OmniVoiceGenerationConfig, duration: Any) -> None:
        """Refuses, before any work, an item whose longest LM pass (the whole target, or its
        longest chunk) would not fit in the LM's positions: ``speed=1e-9`` would otherwise try
        to allocate hundreds of GiB, ``duration=1e6`` fail deep inside the LM."""
        if item.target_len <= int(config.audio_chunk_threshold * self.frame_rate):
            chunks = [(item.text, item.target_len)]
        else:
            n_ref = None if item.ref_tokens is None else item.ref_tokens.shape[1]
            chunks = [(c, estimate_target_tokens(c, item.ref_text, n_ref, item.speed))
                      for c in chunk_text_for_generation(item.text, item.target_len, config.audio_chunk_duration,
                                                         self.frame_rate)]
        ref_len = 0 if item.ref_tokens is None else item.ref_tokens.shape[1]
        for text, frames in chunks:
            # Text tokens plus the prompt's markers (language, instruct, text start/end): < 64.
            positions = frames + ref_len + len(self.text_tokenizer.encode(text)) + 64
            if positions > self.lm.context_length and ref_len >= frames:
                # The reference takes more of the positions than the speech: it is what to shorten.
                room = (self.lm.context_length - positions + ref_len) / self.frame_rate
                raise ValueError(
                    f"the reference is too long: {ref_len / self.frame_rate:.0f} s ({ref_len} frames), and the "
                    f"model holds {self.lm.context_length} positions for the reference, the text and the speech "
                    f"together: for this text the reference may be at most about {max(room, 0):.0f} s "
                    "(3-10 s clones best)")
            if positions > self.lm.context_length:
                limit = (self.lm.context_length - positions + frames) / self.frame_rate
                what = (f"duration={duration!r} s" if duration is not None else f"speed={item.speed!r}")
                raise ValueError(
                    f"{what} asks for {frames} frames ({frames / self.frame_rate:.0f} s) of audio in one LM pass, "
                    f"but the model holds {self.lm.context_length} positions: at most about {max(limit, 0):.0f} s "
                    f"for {'this text' if len(chunks) == 1 else 'each text chunk'}")

    def run(self, items: Sequence[GenerationItem], config: OmniVoiceGenerationConfig, rng: np.random.Generator,
            progress: Optional[Progress], cancel: Optional[CancelCheck] = None) -> list[np.ndarray]:
        """Generates every item (short ones batched, long ones chunked) and returns its finished audio."""
        threshold = int(config.audio_chunk_threshold * self.frame_rate)
        short = [i for i, it in enumerate(items) if it.target_len <= threshold]
        long = [i for i, it in enumerate(items) if it.target_len > threshold]

        # Each chunk is decoded and joined as soon as it is generated: only one growing buffer per
        # item lives until the end (see ChunkJoiner).
        joiners = [ChunkJoiner(self.sampling_rate, it.ref_rms, config.postprocess_output) for it in items]
        if short:
            for i, t in zip(short, self.generate_tokens([items[i] for i in short], config, rng, progress, cancel)):
                joiners[i].add(self._decode(t, cancel))
        if long:
            for batch in self._chunk_batches([items[i] for i in long], config, rng, progress, cancel):
                for i, _, tokens in batch:
                    joiners[long[i]].add(self._decode(tokens, cancel))
        return [joiner.finish() for joiner in joiners]

    def chunk_texts(self, item: GenerationItem, config: OmniVoiceGenerationConfig) -> list[str]:
        """The texts :meth:`run` generates ``item`` in: the whole, or upstream's chunks when long."""
        if item.target_len <= int(config.audio_chunk_threshold * self.frame_rate):
            return [item.text]
        return chunk_text_for_generation(item.text, item.target_len, config.audio_chunk_duration, self.frame_rate)

    def stream(self, item: GenerationItem, pieces: Iterable[Union[str, TextPiece]], count: Optional[int],
               config: OmniVoiceGenerationConfig, rng: np.random.Generator, progress: Optional[Progress],
               cancel: Optional[CancelCheck]) -> Iterator[AudioChunk]:
        """Generates pieces of ``item``'s text in its voice, yielding finished audio as each is decoded
        (see OmniVoice.generate_stream); ``count``: the number of pieces, when known."""
        finisher = PieceFinisher(self.sampling_rate, item.ref_rms, config.postprocess_output)
        for index, (piece, tokens) in enumerate(self.piece_tokens(item, pieces, count, config, rng, progress,
                                                                  cancel)):
            audio = self._decode(tokens, cancel)
            yield finisher.push(piece.text, audio, None if count is None else index == count - 1)
        tail = finisher.close()
        if tail is not None:
            yield tail

    def raw_pieces(self, item: GenerationItem, pieces: Iterable[Union[str, TextPiece]],
                   config: OmniVoiceGenerationConfig, rng: np.random.Generator, progress: Optional[Progress],
                   cancel: Optional[CancelCheck]) -> Iterator[AudioChunk]:
        """Each piece's decode with the volume rule only (see OmniVoice.generate_pieces)."""
        peak: Optional[float] = None
        for index, (piece, tokens) in enumerate(self.piece_tokens(item, pieces, None, config, rng, progress,
                                                                  cancel)):
            audio = self._decode(tokens, cancel)
            if peak is None:
                peak = float(np.abs(audio).max(initial=0.0))
            yield AudioChunk(apply_volume(audio, item.ref_rms, peak).astype(np.float32, copy=False), piece.text, index)

    def piece_tokens(self, item: GenerationItem, pieces: Iterable[Union[str, TextPiece]], count: Optional[int],
                     config: OmniVoiceGenerationConfig, rng: np.random.Generator, progress: Optional[Progress],
                     cancel: Optional[CancelCheck]) -> Iterator[tuple[TextPiece, np.ndarray]]:
        """One voice over pieces of text that come one by one (the streaming engine).

        The voice is held as :meth:`_chunk_batches` holds it; ``count == 1`` means the piece is
        ``item``'s whole text, generated exactly as ``item``.
        """
        prompt: Optional[tuple[np.ndarray, str]] = None
        for index, piece in enumerate(pieces):
            if not isinstance(piece, TextPiece):
                piece = TextPiece(piece.strip())
            if not piece.text.strip():
                raise ValueError(f"text piece {index} is empty")
            it = item if count == 1 else self.piece_item(item, piece.text, prompt, piece.duration)
            (tokens,) = self.generate_tokens([it], config, rng, progress, cancel)
            if index == 0 and item.ref_tokens is None:
                prompt = (tokens, piece.text)
            if progress is not None and count is not None:
                progress("pieces", index + 1, count)
            yield piece, tokens

    def piece_item(self, item: GenerationItem, text: str, prompt: Optional[tuple[np.ndarray, str]],
                   duration: Optional[float] = None) -> GenerationItem:
        """``item``'s settings for one piece of its text: cloned from its reference when it has
        one, else from ``prompt`` (the first piece's tokens and text; None for the first piece)."""
        if item.ref_tokens is not None:
            ref_tokens, ref_text = item.ref_tokens, item.ref_text
        else:
            ref_tokens, ref_text = prompt or (None, None)
        if duration is not None:
            target_len = max(1, int(duration * self.frame_rate))
        else:
            n_ref = None if ref_tokens is None else ref_tokens.shape[1]
            target_len = estimate_target_tokens(text, ref_text, n_ref, item.speed)
        return GenerationItem(text=text, target_len=target_len, lang=item.lang, instruct=item.instruct,
                              ref_text=ref_text, ref_tokens=ref_tokens, ref_rms=item.ref_rms, speed=item.speed)

    def generate_tokens(self, items: Sequence[GenerationItem], config: OmniVoiceGenerationConfig,
                        rng: np.random.Generator, progress: Optional[Progress],
                        cancel: Optional[CancelCheck] = None) -> list[np.ndarray]:
        """MaskGIT over a batch of items: one int32 ``[num_audio_codebook, target_len]`` grid per item;
        ``cancel`` is checked before every step."""
        prompts = [
            build_prompt(self.text_tokenizer, it.text, it.target_len, ref_text=it.ref_text,
                         ref_codes=it.ref_tokens, lang=it.lang, instruct=it.instruct, denoise=config.denoise,
                         num_codebooks=self.lm.num_audio_codebook, mask_id=self.lm.audio_mask_id)
            for it in items
        ]
        batch = pack_prompts(prompts, guided=config.guidance_scale != 0)
        # Greedy token choice (class_temperature 0) is scored inside the LM's graph: only each
        # cell's confidence and best token come back, not 16 MB of logits per step.
        greedy = config.class_temperature <= 0
        session = self.lm.session(batch.segments, guidance_scale=config.guidance_scale if greedy else None)
        steps = 0

        def counted(call: Callable[[np.ndarray, np.ndarray], Any]) -> Callable[[np.ndarray, np.ndarray], Any]:
            def step(input_ids: np.ndarray, audio_mask: np.ndarray) -> Any:
                nonlocal steps
                check_cancel(cancel)
                if self.threads is not None and self.backend is not None:
                    self.backend.n_threads = self.threads.update()
                out = call(input_ids, audio_mask)
                steps += 1
                if progress is not None:
                    progress("steps", steps, config.num_step)
                return out
            return step

        try:
            tokens = maskgit_generate(counted(session.forward), batch, config, rng, mask_id=self.lm.audio_mask_id,
                                      score=counted(session.score) if greedy else None)
        finally:
            # The session holds the graph's buffers: free them now, not when a Cancelled's
            # traceback (which keeps this frame) is dropped.
            session = None
        if progress is not None and steps < config.num_step:
            progress("steps", config.num_step, config.num_step)  # steps with nothing to unmask are skipped
        return tokens

    def _chunk_batches(self, items: Sequence[GenerationItem], config: OmniVoiceGenerationConfig,
                       rng: np.random.Generator, progress: Optional[Progress], cancel: Optional[CancelCheck]
                       ) -> Iterator[list[tuple[int, str, np.ndarray]]]:
        """Upstream's ``_generate_chunked``, as a generator of ``(item, chunk text, tokens)`` per batch.

        Chunk ``ci`` of every item runs in one batch. With a reference every chunk is cloned from
        it; without, chunk 0 is generated first and becomes the voice prompt of the later chunks.
        """
        texts = [chunk_text_for_generation(it.text, it.target_len, config.audio_chunk_duration, self.frame_rate)
                 for it in items]
        with_ref = [it.ref_tokens is not None for it in items]
        if any(with_ref) and not all(with_ref):
            raise ValueError("long-form batch mixes texts with and without a reference voice; "
                             "generate them in separate calls")
        first: dict[int, np.ndarray] = {}
        n_chunks = max(len(t) for t in texts)
        for ci in range(n_chunks):
            idx = [i for i in range(len(items)) if ci < len(texts[i])]
            batch = [self.piece_item(items[i], texts[i][ci], (first[i], texts[i][0]) if i in first else None)
                     for i in idx]
            tokens = self.generate_tokens(batch, config, rng, progress, cancel)
            if ci == 0 and not all(with_ref):
                first = dict(zip(idx, tokens))
            if progress is not None:
                progress("chunks", ci + 1, n_chunks)
            yield [(i, texts[i][ci], t) for i, t in zip(idx, tokens)]

    def _decode(self, tokens: np.ndarray, cancel: Optional[CancelCheck]) -> np.ndarray:
        check_cancel(cancel)
        return self.audio_tokenizer.decode(tokens)


def check_cancel(cancel: Optional[CancelCheck]) -> None:
    """Raises :class:`Cancelled` when ``cancel`` says so."""
    if cancel is not None and cancel():
        raise Cancelled("generation cancelled")
