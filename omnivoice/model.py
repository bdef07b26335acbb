"""The OmniVoice text-to-speech model: upstream's ``OmniVoice`` API on the ggml core.

``OmniVoice.from_pretrained(...)`` loads the LM and codec GGUFs; ``generate(...)`` takes the same
arguments as upstream's and returns a list of float32 numpy arrays at 24 kHz, one per text.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence, Union

import numpy as np

from . import _core
from .audio import (
    apply_volume,
    cross_fade_chunks,
    load_audio,
    post_process_audio,
    preprocess_reference,
    truncate_to_hop,
)
from .audio_tokenizer import AudioTokenizer
from .chunking import add_punctuation, chunk_text_for_generation
from .duration import estimate_target_tokens, resolve_target_lengths
from .lang_map import resolve_language
from .maskgit import MaskGITConfig, generate as maskgit_generate, pack_prompts
from .model_files import resolve_model
from .prompt import build_prompt
from .streaming import (
    AudioChunk,
    Cancelled,
    CancelCheck,
    PieceFinisher,
    TextPiece,
    as_cancel_check,
    iter_pieces,
    speech_seconds,
)
from .tokenizer import TextTokenizer
from .voice_design import contains_chinese, resolve_instruct

logger = logging.getLogger(__name__)

AudioInput = Union[str, os.PathLike, tuple[np.ndarray, int]]
Progress = Callable[[str, int, int], None]
Cancel = Union[threading.Event, CancelCheck, None]


@dataclass
class OmniVoiceGenerationConfig(MaskGITConfig):
    """Generation settings, with upstream's names and defaults: the MaskGIT options
    (``num_step``, ``guidance_scale``, ``t_shift``, ``layer_penalty_factor``,
    ``position_temperature``, ``class_temperature``) and the pipeline's below."""

    denoise: bool = True
    preprocess_prompt: bool = True
    postprocess_output: bool = True
    audio_chunk_duration: float = 15.0
    audio_chunk_threshold: float = 30.0

    @classmethod
    def from_dict(cls, kwargs: dict[str, Any]) -> "OmniVoiceGenerationConfig":
        """Builds a config from keyword arguments; unknown names raise TypeError."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise TypeError(f"unknown generation argument(s): {', '.join(unknown)}")
        return cls(**kwargs)

    def validate(self) -> None:
        super().validate()
        if not self.audio_chunk_duration > 0:
            raise ValueError(f"audio_chunk_duration must be > 0, got {self.audio_chunk_duration!r}")


@dataclass
class VoiceClonePrompt:
    """A reusable cloning prompt: the reference's codes, its transcript and loudness."""

    ref_audio_tokens: np.ndarray  # int32 [n_codebooks, T]
    ref_text: str
    ref_rms: float

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes the prompt to ``path`` (a ``.npz`` file)."""
        with open(path, "wb") as f:
            np.savez(f, ref_audio_tokens=np.asarray(self.ref_audio_tokens, dtype=np.int32),
                     ref_text=np.array(self.ref_text), ref_rms=np.float64(self.ref_rms),
                     format=np.array("omnivoice-voice-1"))

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "VoiceClonePrompt":
        """Reads a prompt written by :meth:`save`."""
        try:
            with np.load(path, allow_pickle=False) as z:
                if str(z["format"]) != "omnivoice-voice-1":
                    raise ValueError
                tokens = z["ref_audio_tokens"].astype(np.int32)
                text, rms = str(z["ref_text"]), float(z["ref_rms"])
        except FileNotFoundError:
            raise
        except Exception:
            raise ValueError(f"{path} is not an omnivoice voice prompt file") from None
        if tokens.ndim != 2 or tokens.shape[1] == 0:
            raise ValueError(f"{path}: voice prompt codes have shape {tokens.shape}")
        return cls(ref_audio_tokens=tokens, ref_text=text, ref_rms=rms)


@dataclass
class _Item:
    """One text to generate, after resolving language, instruct, reference and length."""

    text: str
    target_len: int
    lang: Optional[str]
    instruct: Optional[str]
    ref_text: Optional[str] = None
    ref_tokens: Optional[np.ndarray] = None
    ref_rms: Optional[float] = None
    speed: float = 1.0


def _as_list(x: Any, n: int, what: str) -> list[Any]:
    """Upstream's ``_ensure_list``: one value for all items, or one per item."""
    xs = x if isinstance(x, list) else [x]
    if len(xs) == 1:
        return xs * n
    if len(xs) != n:
        raise ValueError(f"{what}: expected 1 or {n} values (one per text), got {len(xs)}")
    return xs


class OmniVoice:
    """OmniVoice TTS: text (plus an optional voice description or reference) to 24 kHz speech."""

    def __init__(self, lm: "_core.LM", audio_tokenizer: AudioTokenizer, text_tokenizer: TextTokenizer,
                 backend: "_core.Backend") -> None:
        self.lm = lm
        self.audio_tokenizer = audio_tokenizer
        self.text_tokenizer = text_tokenizer
        self.backend = backend
        self.sampling_rate: int = audio_tokenizer.sample_rate
        self.frame_rate: float = audio_tokenizer.sample_rate / audio_tokenizer.hop_length

    @classmethod
    def from_pretrained(cls, model: Union[str, os.PathLike], codec: Union[str, os.PathLike, None] = None,
                        n_threads: Optional[int] = None, convert_type: str = "BF16") -> "OmniVoice":
        """Loads the model.

        Args:
            model: The LM GGUF (``omnivoice-base-*.gguf``; the codec GGUF is found beside it), a
                directory holding both GGUFs, a Hugging Face snapshot directory (converted once
                into ``~/.cache/omnivoice``), or a Hub id such as ``"k2-fsa/OmniVoice"``.
            codec: The codec GGUF, when it is not beside the LM.
            n_threads: CPU threads; ``None`` uses every core.
            convert_type: LM weight type used when a snapshot must be converted.
        """
        files = resolve_model(model, codec, convert_type=convert_type)
        backend = _core.Backend(n_threads or 0)
        lm = _core.LM(str(files.lm), backend)
        audio_tokenizer = AudioTokenizer(_core.Codec(str(files.codec), backend))
        return cls(lm, audio_tokenizer, TextTokenizer.from_metadata(lm.metadata), backend)

    @property
    def n_threads(self) -> int:
        return self.backend.n_threads

    @n_threads.setter
    def n_threads(self, value: int) -> None:
        self.backend.n_threads = value

    # ------------------------------------------------------------------ public API

    def generate(
        self,
        text: Union[str, list[str]],
        language: Union[str, list[Optional[str]], None] = None,
        ref_text: Union[str, list[Optional[str]], None] = None,
        ref_audio: Union[AudioInput, list[AudioInput], None] = None,
        voice_clone_prompt: Union[VoiceClonePrompt, list[VoiceClonePrompt], None] = None,
        instruct: Union[str, list[Optional[str]], None] = None,
        duration: Union[float, list[Optional[float]], None] = None,
        speed: Union[float, list[Optional[float]], None] = None,
        generation_config: Optional[OmniVoiceGenerationConfig] = None,
        seed: Optional[int] = None,
        progress: Optional[Progress] = None,
        cancel: Cancel = None,
        **kwargs: Any,
    ) -> list[np.ndarray]:
        """Generates speech for one text or a batch.

        Modes: voice cloning (``voice_clone_prompt``, or ``ref_audio`` + ``ref_text``), voice
        design (``instruct``, e.g. ``"female, low pitch, british accent"``), or auto voice
        (neither). Per-item values may be given as lists, one per text.

        Args:
            text: The text, or a list of texts generated as one batch.
            language: Language name or code (``"English"``, ``"en"``); ``None`` is language-agnostic.
            ref_text: Transcript of ``ref_audio`` (required: no ASR model is bundled).
            ref_audio: Reference audio: a file path or ``(waveform, sample_rate)``.
            voice_clone_prompt: A prompt from :meth:`create_voice_clone_prompt`; overrides
                ``ref_audio``/``ref_text``.
            instruct: Voice design attributes.
            duration: Output duration in seconds (overrides ``speed``).
            speed: Speaking speed factor (> 1 faster).
            generation_config: Settings; by default built from ``**kwargs``.
            seed: Seed of the sampler; the same seed gives the same audio. ``None`` is random.
            progress: Called as ``progress(label, done, total)`` after each step.
            cancel: A ``threading.Event`` or a zero-argument callable; checked before every
                MaskGIT step and every decode, and once set (True) the call raises
                :class:`~omnivoice.Cancelled`, having freed what it allocated.
            **kwargs: Fields of :class:`OmniVoiceGenerationConfig` (``num_step``,
                ``guidance_scale``, ``t_shift``, ``layer_penalty_factor``,
                ``position_temperature``, ``class_temperature``, ``denoise``,
                ``preprocess_prompt``, ``postprocess_output``, ``audio_chunk_duration``,
                ``audio_chunk_threshold``).

        Returns:
            One float32 array at :attr:`sampling_rate` per text.

        Raises:
            Cancelled: ``cancel`` was set.
        """
        config = generation_config or OmniVoiceGenerationConfig.from_dict(kwargs)
        config.validate()  # before any work
        check = as_cancel_check(cancel)
        rng = np.random.default_rng(seed)
        items = self._prepare_items(text, language, ref_text, ref_audio, voice_clone_prompt, instruct,
                                    duration, speed, config)
        threshold = int(config.audio_chunk_threshold * self.frame_rate)
        short = [i for i, it in enumerate(items) if it.target_len <= threshold]
        long = [i for i, it in enumerate(items) if it.target_len > threshold]

        tokens: list[list[np.ndarray]] = [[] for _ in items]
        if short:
            for i, t in zip(short, self._generate_tokens([items[i] for i in short], config, rng, progress, check)):
                tokens[i] = [t]
        if long:
            for i, chunks in zip(long, self._generate_chunked([items[i] for i in long], config, rng, progress,
                                                              check)):
                tokens[i] = chunks
        return [self._decode_and_post_process(toks, item.ref_rms, config, check)
                for toks, item in zip(tokens, items)]

    def generate_stream(
        self,
        text: Union[str, Iterable[str]],
        language: Optional[str] = None,
        ref_text: Optional[str] = None,
        ref_audio: Optional[AudioInput] = None,
        voice_clone_prompt: Optional[VoiceClonePrompt] = None,
        instruct: Optional[str] = None,
        duration: Optional[float] = None,
        speed: Optional[float] = None,
        generation_config: Optional[OmniVoiceGenerationConfig] = None,
        seed: Optional[int] = None,
        progress: Optional[Progress] = None,
        cancel: Cancel = None,
        split: str = "sentence",
        **kwargs: Any,
    ) -> Iterator[AudioChunk]:
        """Generates speech for one text piece by piece, yielding each piece's audio once decoded.

        With ``split="sentence"`` (the default) the text is cut at sentence ends (see
        :mod:`omnivoice.streaming`): sentences under 1.5 s of estimated speech are joined with the
        next, sentences over ``audio_chunk_duration`` are cut at clause marks, and the first piece
        is cut to at most 4 s so that the first audio comes early. ``text`` may then be an
        iterable of fragments (e.g. tokens from a language model) consumed as it goes: a piece is
        generated as soon as its sentence is complete. ``split="chunk"`` is the behaviour of
        :meth:`generate` (and of this method before sentence streaming): the whole text in one
        piece up to ``audio_chunk_threshold`` seconds, upstream's chunks of about
        ``audio_chunk_duration`` seconds above it; ``text`` must then be a str.

        The voice is held across pieces as in :meth:`generate`'s long-form chunking: every piece
        is cloned from the reference when there is one, otherwise the first piece is generated
        freely (or designed from ``instruct``) and its tokens and text become the voice prompt of
        all later pieces. The tokens of each piece are exactly those :meth:`generate` produces for
        the same pieces and seed (``split="chunk"``: the same as :meth:`generate` itself). The
        audio differs only in post-processing, which streaming applies piecewise (see
        :class:`~omnivoice.streaming.PieceFinisher`): each piece is yielded at once except its
        last 0.1 s, which opens the next chunk with the cross-fade (or, at the end, gets the
        fade-out and pad); silences are removed per piece, not across a junction; without a
        reference the 0.5 peak normalisation uses the first piece's peak for all pieces. With a
        reference and ``postprocess_output=False``, the chunks concatenated equal the output of
        :meth:`generate` on the same pieces exactly; a text that makes a single piece gives
        :meth:`generate`'s output exactly. When ``text`` is an iterable, whether a piece is the
        last is only known when the iterable ends, so a last chunk with empty text carries the
        held 0.1 s tail.

        Args:
            text: The text, or an iterable of str fragments (``split="sentence"`` only).
            language, ref_text, ref_audio, voice_clone_prompt, instruct, speed, generation_config,
                seed, progress, cancel, kwargs: As :meth:`generate`.
            duration: Total duration in seconds, spread over the pieces as a speed factor; needs
                ``text`` as a str.
            split: ``"sentence"`` or ``"chunk"``.

        Yields:
            :class:`AudioChunk` ``(audio, text, index)``, float32 at :attr:`sampling_rate`.

        Raises:
            Cancelled: ``cancel`` was set; the generator is finished.
        """
        config = generation_config or OmniVoiceGenerationConfig.from_dict(kwargs)
        config.validate()  # before any work
        check = as_cancel_check(cancel)
        if split not in ("sentence", "chunk"):
            raise ValueError(f"split must be 'sentence' or 'chunk', got {split!r}")
        voice = (language, ref_text, ref_audio, voice_clone_prompt, instruct)
        count: Optional[int] = None
        if isinstance(text, str):
            # The whole text is known: so are the pieces, and which one is last.
            (item,) = self._prepare_items(text, *voice, duration, speed, config)
            if split == "sentence":
                texts = list(iter_pieces(text, speech_seconds(self.frame_rate), config.audio_chunk_duration))
            elif item.target_len <= int(config.audio_chunk_threshold * self.frame_rate):
                texts = [text]
            else:
                texts = chunk_text_for_generation(text, item.target_len, config.audio_chunk_duration,
                                                  self.frame_rate)
            count, pieces = len(texts), iter(texts)
        elif split == "chunk":
            raise ValueError("split='chunk' needs text as a str (it chunks the whole text)")
        elif duration is not None:
            raise ValueError("duration needs text as a str: the length of an iterable text is not known")
        else:
            pieces = iter_pieces(text, speech_seconds(self.frame_rate), config.audio_chunk_duration)
            first = next(pieces, None)
            if first is None:
                raise ValueError("text is empty")
            (item,) = self._prepare_items(first, *voice, None, speed, config)
            pieces = itertools.chain([first], pieces)
        rng = np.random.default_rng(seed)
        finisher = PieceFinisher(self.sampling_rate, item.ref_rms, config.postprocess_output)
        for index, (piece, tokens) in enumerate(self._piece_tokens(item, pieces, count, config, rng, progress,
                                                                   check)):
            audio = self._decode(tokens, check)
            yield finisher.push(piece.text, audio, None if count is None else index == count - 1)
        tail = finisher.close()
        if tail is not None:
            yield tail

    def generate_pieces(
        self,
        pieces: Iterable[Union[str, TextPiece]],
        language: Optional[str] = None,
        ref_text: Optional[str] = None,
        ref_audio: Optional[AudioInput] = None,
        voice_clone_prompt: Optional[VoiceClonePrompt] = None,
        instruct: Optional[str] = None,
        speed: Optional[float] = None,
        generation_config: Optional[OmniVoiceGenerationConfig] = None,
        seed: Optional[int] = None,
        progress: Optional[Progress] = None,
        cancel: Cancel = None,
        **kwargs: Any,
    ) -> Iterator[AudioChunk]:
        """Generates given pieces of text in one voice, yielding each piece's raw audio.

        For callers that place the audio themselves (subtitle dubbing): each piece is generated
        whole (never split), with its own ``duration`` when it is a :class:`TextPiece` that has
        one, and the voice is held across pieces as in :meth:`generate_stream`. The audio is the
        decode with the volume rule only (cloning: the reference's loudness; otherwise the first
        piece's peak at 0.5): no silence removal, fades, pads or cross-fades.

        Args:
            pieces: Texts, or :class:`TextPiece` items, consumed as they come.
            language, ref_text, ref_audio, voice_clone_prompt, instruct, speed, generation_config,
                seed, progress, cancel, kwargs: As :meth:`generate`.

        Yields:
            :class:`AudioChunk` per piece, float32 at :attr:`sampling_rate`.
        """
        config = generation_config or OmniVoiceGenerationConfig.from_dict(kwargs)
        config.validate()
        check = as_cancel_check(cancel)
        pieces = iter(pieces)
        first = next(pieces, None)
        if first is None:
            return
        (item,) = self._prepare_items(first.text if isinstance(first, TextPiece) else first, language, ref_text,
                                      ref_audio, voice_clone_prompt, instruct, None, speed, config)
        rng = np.random.default_rng(seed)
        peak: Optional[float] = None
        tokens = self._piece_tokens(item, itertools.chain([first], pieces), None, config, rng, progress, check)
        for index, (piece, piece_tokens) in enumerate(tokens):
            audio = self._decode(piece_tokens, check)
            if peak is None:
                peak = float(np.abs(audio).max(initial=0.0))
            yield AudioChunk(apply_volume(audio, item.ref_rms, peak).astype(np.float32, copy=False),
                             piece.text, index)

    def create_voice_clone_prompt(self, ref_audio: AudioInput, ref_text: Optional[str] = None,
                                  preprocess_prompt: bool = True) -> VoiceClonePrompt:
        """Encodes a reference recording into a reusable cloning prompt.

        Args:
            ref_audio: A file path, or ``(waveform, sample_rate)`` with a mono ``[n]`` or
                channels-first ``[channels, n]`` float or int array at any rate.
            ref_text: Its transcript. Required: upstream transcribes with Whisper when it is
                missing, and no ASR model is bundled here.
            preprocess_prompt: Trim silences (and over-long references) and add terminal
                punctuation to the transcript, as upstream does.
        """
        if ref_text is None or not ref_text.strip():
            raise ValueError("ref_text is required with ref_audio: give the transcript of the "
                             "reference audio (no ASR model is bundled)")
        wav = self._load_reference(ref_audio)
        wav, ref_rms = preprocess_reference(wav, self.sampling_rate, ref_text_given=True,
                                            preprocess=preprocess_prompt)
        wav = truncate_to_hop(wav, self.audio_tokenizer.hop_length)
        if wav.size == 0:
            raise ValueError(f"reference audio is shorter than one codec frame "
                             f"({self.audio_tokenizer.hop_length} samples)")
        tokens = self.audio_tokenizer.encode(wav, self.sampling_rate)
        if preprocess_prompt:
            ref_text = add_punctuation(ref_text)
        return VoiceClonePrompt(ref_audio_tokens=tokens, ref_text=ref_text, ref_rms=ref_rms)

    # ------------------------------------------------------------------ preparation

    def _load_reference(self, ref_audio: AudioInput) -> np.ndarray:
        """Mono float32 at the model rate."""
        if isinstance(ref_audio, (str, os.PathLike)):
            return load_audio(ref_audio, self.sampling_rate)
        if not (isinstance(ref_audio, tuple) and len(ref_audio) == 2):
            raise ValueError("ref_audio must be a path or a (waveform, sample_rate) tuple")
        wave, sr = ref_audio
        return self.audio_tokenizer.to_mono(np.asarray(wave), int(sr), self.sampling_rate)

    def _prepare_items(self, text: Union[str, list[str]], language: Any, ref_text: Any, ref_audio: Any,
                       voice_clone_prompt: Any, instruct: Any, duration: Any, speed: Any,
                       config: OmniVoiceGenerationConfig) -> list[_Item]:
        texts = [text] if isinstance(text, str) else list(text)
        if not texts or not all(isinstance(t, str) for t in texts):
            raise ValueError("text must be a string or a non-empty list of strings")
        for t in texts:
            if not t.strip():
                raise ValueError("text is empty")
        n = len(texts)
        langs = [resolve_language(x) for x in _as_list(language, n, "language")]
        instructs = [None if s is None else resolve_instruct(s, use_zh=contains_chinese(t))
                     for s, t in zip(_as_list(instruct, n, "instruct"), texts)]

        if voice_clone_prompt is not None and (ref_text is not None or ref_audio is not None):
            logger.warning("both voice_clone_prompt and ref_text/ref_audio given: using voice_clone_prompt")
        elif ref_audio is not None:
            # One reference for the whole batch is encoded once, then shared.
            m = max(len(x) if isinstance(x, list) else 1 for x in (ref_audio, ref_text))
            voice_clone_prompt = [
                self.create_voice_clone_prompt(a, t, preprocess_prompt=config.preprocess_prompt)
                for a, t in zip(_as_list(ref_audio, m, "ref_audio"), _as_list(ref_text, m, "ref_text"))
            ]
        elif ref_text is not None:
            raise ValueError("ref_text was given without ref_audio")
        prompts = _as_list(voice_clone_prompt, n, "voice_clone_prompt")

        ref_tokens = [None if p is None else np.asarray(p.ref_audio_tokens, dtype=np.int32) for p in prompts]
        ref_texts = [None if p is None else p.ref_text for p in prompts]
        lengths, speeds = resolve_target_lengths(
            texts, ref_texts, [None if t is None else t.shape[1] for t in ref_tokens], self.frame_rate,
            speed=speed, duration=duration)
        items = [
            _Item(text=texts[i], target_len=lengths[i], lang=langs[i], instruct=instructs[i],
                  ref_text=ref_texts[i], ref_tokens=ref_tokens[i],
                  ref_rms=None if prompts[i] is None else prompts[i].ref_rms,
                  speed=1.0 if speeds is None else speeds[i])
            for i in range(n)
        ]
        return items

    # ------------------------------------------------------------------ generation

    def _generate_tokens(self, items: Sequence[_Item], config: OmniVoiceGenerationConfig,
                         rng: np.random.Generator, progress: Optional[Progress],
                         cancel: Optional[CancelCheck] = None) -> list[np.ndarray]:
        """MaskGIT over a batch of items: one int32 ``[8, target_len]`` grid per item."""
        prompts = [
            build_prompt(self.text_tokenizer, it.text, it.target_len, ref_text=it.ref_text,
                         ref_codes=it.ref_tokens, lang=it.lang, instruct=it.instruct, denoise=config.denoise)
            for it in items
        ]
        batch = pack_prompts(prompts, guided=config.guidance_scale != 0)
        session = self.lm.session(batch.segments)
        steps = 0

        def forward(input_ids: np.ndarray, audio_mask: np.ndarray) -> np.ndarray:
            nonlocal steps
            _check_cancel(cancel)
            logits = session.forward(input_ids, audio_mask)
            steps += 1
            if progress is not None:
                progress("steps", steps, config.num_step)
            return logits

        try:
            tokens = maskgit_generate(forward, batch, config, rng)
        finally:
            # The session holds the graph's buffers: free them now, not when a Cancelled's
            # traceback (which keeps this frame) is dropped.
            session = None
        if progress is not None and steps < config.num_step:
            progress("steps", config.num_step, config.num_step)  # steps with nothing to unmask are skipped
        return tokens

    def _piece_item(self, item: _Item, text: str, prompt: Optional[tuple[np.ndarray, str]],
                    duration: Optional[float] = None) -> _Item:
        """``item``'s settings for one piece of its text: cloned from its reference when it has
        one, else from ``prompt`` (the first piece's tokens and text; None for the first piece)."""
        ref_tokens, ref_text = (item.ref_tokens, item.ref_text) if item.ref_tokens is not None else prompt or (None, None)
        if duration is not None:
            target_len = max(1, int(duration * self.frame_rate))
        else:
            target_len = estimate_target_tokens(text, ref_text, None if ref_tokens is None else ref_tokens.shape[1],
                                                item.speed)
        return _Item(text=text, target_len=target_len, lang=item.lang, instruct=item.instruct, ref_text=ref_text,
                     ref_tokens=ref_tokens, ref_rms=item.ref_rms, speed=item.speed)

    def _chunk_batches(self, items: Sequence[_Item], config: OmniVoiceGenerationConfig,
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
            batch = [self._piece_item(items[i], texts[i][ci], (first[i], texts[i][0]) if i in first else None)
                     for i in idx]
            tokens = self._generate_tokens(batch, config, rng, progress, cancel)
            if ci == 0 and not all(with_ref):
                first = dict(zip(idx, tokens))
            if progress is not None:
                progress("chunks", ci + 1, n_chunks)
            yield [(i, texts[i][ci], t) for i, t in zip(idx, tokens)]

    def _generate_chunked(self, items: Sequence[_Item], config: OmniVoiceGenerationConfig,
                          rng: np.random.Generator, progress: Optional[Progress],
                          cancel: Optional[CancelCheck]) -> list[list[np.ndarray]]:
        out: list[list[np.ndarray]] = [[] for _ in items]
        for batch in self._chunk_batches(items, config, rng, progress, cancel):
            for i, _, tokens in batch:
                out[i].append(tokens)
        return out

    def _piece_tokens(self, item: _Item, pieces: Iterator[Union[str, TextPiece]], count: Optional[int],
                      config: OmniVoiceGenerationConfig, rng: np.random.Generator, progress: Optional[Progress],
                      cancel: Optional[CancelCheck]) -> Iterator[tuple[TextPiece, np.ndarray]]:
        """One voice over pieces of text that come one by one (the streaming engine).

        The voice is held as :meth:`_chunk_batches` holds it; ``count`` (when known) 1 means the
        piece is ``item``'s whole text and is generated exactly as ``item``.
        """
        prompt: Optional[tuple[np.ndarray, str]] = None
        for index, piece in enumerate(pieces):
            if not isinstance(piece, TextPiece):
                piece = TextPiece(piece.strip())
            if not piece.text.strip():
                raise ValueError(f"text piece {index} is empty")
            it = item if count == 1 else self._piece_item(item, piece.text, prompt, piece.duration)
            (tokens,) = self._generate_tokens([it], config, rng, progress, cancel)
            if index == 0 and item.ref_tokens is None:
                prompt = (tokens, piece.text)
            if progress is not None and count is not None:
                progress("pieces", index + 1, count)
            yield piece, tokens

    # ------------------------------------------------------------------ audio out

    def _decode(self, tokens: np.ndarray, cancel: Optional[CancelCheck]) -> np.ndarray:
        _check_cancel(cancel)
        return self.audio_tokenizer.decode(tokens)

    def _decode_and_post_process(self, tokens: list[np.ndarray], ref_rms: Optional[float],
                                 config: OmniVoiceGenerationConfig, cancel: Optional[CancelCheck] = None
                                 ) -> np.ndarray:
        audios = [self._decode(t, cancel) for t in tokens]
        audio = audios[0] if len(audios) == 1 else cross_fade_chunks(audios, self.sampling_rate)
        return post_process_audio(audio, self.sampling_rate, ref_rms, config.postprocess_output).astype(
            np.float32, copy=False)


def _check_cancel(cancel: Optional[CancelCheck]) -> None:
    if cancel is not None and cancel():
        raise Cancelled("generation cancelled")
