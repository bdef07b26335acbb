"""The OmniVoice text-to-speech model: upstream's ``OmniVoice`` API on the ggml core.

``OmniVoice.from_pretrained(...)`` loads the LM and codec GGUFs; ``generate(...)`` takes the same
arguments as upstream's and returns a list of float32 numpy arrays at 24 kHz, one per text.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import warnings
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Hashable, Iterable, Iterator, Optional, Union

import numpy as np

from ... import _core
from ...arguments import check_finite, check_sample_rate, check_seed, check_text
from ...audio import load_audio, to_mono, truncate_to_hop
from .audio_tokenizer import AudioTokenizer
from ...chunking import add_punctuation
from .maskgit import MaskGITConfig
from ...model_files import resolve_model
from .pipeline import Pipeline, Progress
from ...postprocess import preprocess_reference
from ...protocol import DEFAULT_VOICE_FAMILY, VOICE_FAMILY_KEY, Capabilities, OptionError, WrongFamily
from ...streaming import AudioChunk, CancelCheck, TextPiece, as_cancel_check, iter_pieces
from ...threads import LoadAwareThreads, resolve_n_threads, usable_cores
from .duration import speech_seconds
from .lang_map import LANG_IDS, resolve_language
from .tokenizer import TextTokenizer
from .voice_design import contains_chinese, resolve_instruct

FAMILY = "omnivoice"
# The GGUF architecture of the file that names the family (the LM; the codec GGUF rides along).
ARCHITECTURE = "omnivoice-lm"

AudioInput = Union[str, os.PathLike, tuple[np.ndarray, int]]
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

    @classmethod
    def for_request(cls, config: Optional["OmniVoiceGenerationConfig"],
                    kwargs: dict[str, Any]) -> "OmniVoiceGenerationConfig":
        """The checked config of one request: ``config`` (checked again, as its fields may have
        changed since it was made) or, without one, a config built from ``kwargs``."""
        if config is None:
            return cls.from_dict(kwargs)  # checked as it is made
        config.validate()
        return config

    def validate(self) -> None:
        super().validate()
        if not check_finite(self.audio_chunk_duration, "audio_chunk_duration") > 0:
            raise ValueError(f"audio_chunk_duration must be > 0, got {self.audio_chunk_duration!r}")
        check_finite(self.audio_chunk_threshold, "audio_chunk_threshold")


@dataclass
class VoiceClonePrompt:
    """A reusable cloning prompt: the reference's codes, its transcript and loudness."""

    ref_audio_tokens: np.ndarray  # int32 [n_codebooks, T]
    ref_text: str
    ref_rms: float
    family: ClassVar[str] = FAMILY

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes the prompt to ``path`` (a ``.npz`` file)."""
        with open(path, "wb") as f:
            np.savez(f, ref_audio_tokens=np.asarray(self.ref_audio_tokens, dtype=np.int32),
                     ref_text=np.array(self.ref_text), ref_rms=np.float64(self.ref_rms),
                     format=np.array("omnivoice-voice-1"), **{VOICE_FAMILY_KEY: np.array(FAMILY)})

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "VoiceClonePrompt":
        """Reads a prompt written by :meth:`save`.

        Raises:
            FileNotFoundError: No such file.
            WrongFamily: A voice file of another family.
            ValueError: Not a voice file, or values no reference could give: codes that are not
                ``[n_codebooks, T]`` ids >= 0, an empty or invalid ``ref_text``, a ``ref_rms`` that
                is not a positive finite number (0 is a silent reference: silent output).
        """
        try:
            with np.load(path, allow_pickle=False) as z:
                # Files written before voices named their family are OmniVoice's.
                family = str(z[VOICE_FAMILY_KEY]) if VOICE_FAMILY_KEY in z.files else DEFAULT_VOICE_FAMILY
                if family != FAMILY:
                    raise WrongFamily(str(path), family, FAMILY)
                if str(z["format"]) != "omnivoice-voice-1":
                    raise ValueError
                tokens = z["ref_audio_tokens"].astype(np.int32)
                text, rms = str(z["ref_text"]), float(z["ref_rms"])
        except (FileNotFoundError, WrongFamily):
            raise
        except Exception:
            raise ValueError(f"{path} is not an omnivoice voice prompt file") from None
        if tokens.ndim != 2 or tokens.shape[1] == 0:
            raise ValueError(f"{path}: voice prompt codes have shape {tokens.shape}")
        if tokens.min() < 0:
            raise ValueError(f"{path}: voice prompt codes hold negative ids")
        check_text(text, f"{path}: ref_text")
        if not (math.isfinite(rms) and rms > 0):
            raise ValueError(f"{path}: ref_rms must be a positive finite number, got {rms!r}"
                             + (" (a silent reference: the output would be silent)" if rms == 0 else ""))
        return cls(ref_audio_tokens=tokens, ref_text=text, ref_rms=rms)


class OmniVoice:
    """OmniVoice TTS: text (plus an optional voice description or reference) to 24 kHz speech.

    Implements :class:`omnivoice.protocol.SpeechModel`; ``voice=`` is the protocol's name of
    ``voice_clone_prompt`` wherever that is taken."""

    family: ClassVar[str] = FAMILY
    capabilities: ClassVar[Capabilities] = Capabilities(
        family=FAMILY, modes=("clone", "design", "auto"), instruct="attributes", languages=tuple(sorted(LANG_IDS)),
        streaming=True, duration_control=True, clone_needs_transcript=True)

    def __init__(self, lm: "_core.LM", audio_tokenizer: AudioTokenizer, text_tokenizer: TextTokenizer,
                 backend: "_core.Backend") -> None:
        self.lm = lm
        self.audio_tokenizer = audio_tokenizer
        self.text_tokenizer = text_tokenizer
        self.backend = backend
        self.pipeline = Pipeline(lm, audio_tokenizer, text_tokenizer, backend)
        self.sampling_rate: int = self.pipeline.sampling_rate
        self.frame_rate: float = self.pipeline.frame_rate

    @classmethod
    def from_pretrained(cls, model: Union[str, os.PathLike], codec: Union[str, os.PathLike, None] = None,
                        n_threads: Optional[int] = None, convert_type: str = "BF16",
                        device: Optional[str] = None) -> "OmniVoice":
        """Loads the model.

        Args:
            model: The LM GGUF (``omnivoice-base-*.gguf``; the codec GGUF is found beside it), a
                directory holding both GGUFs (ours or omnivoice.cpp's), a Hugging Face snapshot
                directory (converted once into ``~/.cache/omnivoice``), or a Hub id such as
                ``"k2-fsa/OmniVoice"`` or that of a repository of GGUFs.
            codec: The codec GGUF, when it is not beside the LM. An omnivoice.cpp codec file is
                converted once into the cache.
            n_threads: CPU threads, at most the usable cores (more is capped, with a warning).
                ``None`` (default) follows the machine's load: each MaskGIT step runs on the
                cores other processes left idle during the previous steps (see README, Threads).
            convert_type: LM weight type a snapshot is converted to, or downloaded from a Hub
                repository of GGUFs.
            device: Compute device of the LM and the codec: ``"cpu"``, a name from
                :meth:`omnivoice.Backend.devices` such as ``"CUDA0"``, or ``"rpc://HOST:PORT"`` (an
                ``omnivoice-rpc-server``). ``None``: the best ggml offers (a GPU when built with
                one, else the CPU). Raises ValueError for an unknown name, ``omnivoice.DeviceError``
                for an RPC server that cannot be reached.
        """
        n_threads = resolve_n_threads(n_threads)
        from ...registry import check_family

        check_family(model, FAMILY, "OmniVoice.from_pretrained")
        files = resolve_model(model, codec, convert_type=convert_type)
        backend = _core.Backend(n_threads or usable_cores(), device=device or "")
        lm = _core.LM(str(files.lm), backend)
        audio_tokenizer = AudioTokenizer(_core.Codec(str(files.codec), backend))
        model_ = cls(lm, audio_tokenizer, TextTokenizer.from_metadata(lm.metadata), backend)
        model_.n_threads = n_threads
        return model_

    @property
    def n_threads(self) -> int:
        """CPU threads of the next step (the load-aware count when :meth:`from_pretrained` or
        this property was given ``None``)."""
        return self.backend.n_threads

    @n_threads.setter
    def n_threads(self, value: Optional[int]) -> None:
        value = resolve_n_threads(value)
        self.pipeline.threads = LoadAwareThreads(usable_cores()) if value is None else None
        self.backend.n_threads = value or usable_cores()

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
        voice: Union[VoiceClonePrompt, list[VoiceClonePrompt], None] = None,
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
            voice: The protocol's name of ``voice_clone_prompt`` (give one of the two).
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
        config = OmniVoiceGenerationConfig.for_request(generation_config, kwargs)  # before any work
        voice_clone_prompt = _one_voice(voice, voice_clone_prompt)
        check = as_cancel_check(cancel)
        rng = np.random.default_rng(check_seed(seed))
        items = self.pipeline.prepare(text, language, ref_text, ref_audio, voice_clone_prompt, instruct,
                                      duration, speed, config, self.create_voice_clone_prompt)
        return self.pipeline.run(items, config, rng, progress, check)

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
        voice: Optional[VoiceClonePrompt] = None,
        **kwargs: Any,
    ) -> Iterator[AudioChunk]:
        """Generates speech for one text piece by piece, yielding each piece's audio once decoded.

        With ``split="sentence"`` (the default) the text is cut at sentence ends (see
        :mod:`omnivoice.streaming` and docs/streaming.md): sentences under 1.5 s of estimated
        speech are joined with the next, sentences over ``audio_chunk_duration`` are cut at clause
        marks, and the first piece is cut to at most 4 s so that the first audio comes early.
        ``text`` may then be an iterable of fragments (e.g. tokens from a language model) consumed
        as it goes: a piece is generated as soon as its sentence is complete. ``split="chunk"`` is
        the behaviour of this method before sentence streaming, and :meth:`generate`'s own: the
        whole text in one piece up to ``audio_chunk_threshold`` seconds, upstream's chunks of about
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
                seed, progress, cancel, voice, kwargs: As :meth:`generate`.
            duration: Total duration in seconds, spread over the pieces as a speed factor; needs
                ``text`` as a str.
            split: ``"sentence"`` or ``"chunk"``.

        Yields:
            :class:`AudioChunk` ``(audio, text, index)``, float32 at :attr:`sampling_rate`.

        Raises:
            Cancelled: ``cancel`` was set; the generator is finished.
        """
        config = OmniVoiceGenerationConfig.for_request(generation_config, kwargs)  # before any work
        voice_clone_prompt = _one_voice(voice, voice_clone_prompt)
        check = as_cancel_check(cancel)
        if split not in ("sentence", "chunk"):
            raise ValueError(f"split must be 'sentence' or 'chunk', got {split!r}")
        if not isinstance(text, str) and (not isinstance(text, Iterable) or isinstance(text, (bytes, bytearray))):
            raise TypeError(f"text must be a str or an iterable of str fragments, got {type(text).__name__}")
        voice = (language, ref_text, ref_audio, voice_clone_prompt, instruct)
        clone = self.create_voice_clone_prompt
        count: Optional[int] = None
        if isinstance(text, str):
            # The whole text is known: so are the pieces, and which one is last.
            (item,) = self.pipeline.prepare(text, *voice, duration, speed, config, clone)
            if split == "sentence":
                texts = list(iter_pieces(text, self.speech_seconds, config.audio_chunk_duration))
            else:
                texts = self.pipeline.chunk_texts(item, config)
            count, pieces = len(texts), iter(texts)
        elif split == "chunk":
            raise ValueError("split='chunk' needs text as a str (it chunks the whole text)")
        elif duration is not None:
            raise ValueError("duration needs text as a str: the length of an iterable text is not known")
        else:
            pieces = iter_pieces(text, self.speech_seconds, config.audio_chunk_duration)
            first = next(pieces, None)
            if first is None:
                raise ValueError("text is empty")
            (item,) = self.pipeline.prepare(first, *voice, None, speed, config, clone)
            pieces = itertools.chain([first], pieces)
        rng = np.random.default_rng(check_seed(seed))
        yield from self.pipeline.stream(item, pieces, count, config, rng, progress, check)

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
        voice: Optional[VoiceClonePrompt] = None,
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
                seed, progress, cancel, voice, kwargs: As :meth:`generate`.

        Yields:
            :class:`AudioChunk` per piece, float32 at :attr:`sampling_rate`.
        """
        config = OmniVoiceGenerationConfig.for_request(generation_config, kwargs)
        voice_clone_prompt = _one_voice(voice, voice_clone_prompt)
        check = as_cancel_check(cancel)
        pieces = iter(pieces)
        first = next(pieces, None)
        if first is None:
            return
        (item,) = self.pipeline.prepare(first.text if isinstance(first, TextPiece) else first, language, ref_text,
                                        ref_audio, voice_clone_prompt, instruct, None, speed, config,
                                        self.create_voice_clone_prompt)
        rng = np.random.default_rng(check_seed(seed))
        yield from self.pipeline.raw_pieces(item, itertools.chain([first], pieces), config, rng, progress, check)

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
        if ref_text is None:
            raise ValueError("ref_text is required with ref_audio: give the transcript of the "
                             "reference audio (no ASR model is bundled)")
        check_text(ref_text, "ref_text")
        wav = self._load_reference(ref_audio)
        if not np.any(wav):  # with or without preprocessing: nothing to clone, only silence to copy
            raise ValueError("ref_audio is silent (every sample is 0): give a recording of the voice to clone")
        wav, ref_rms = preprocess_reference(wav, self.sampling_rate, ref_text_given=True,
                                            preprocess=preprocess_prompt)
        wav = truncate_to_hop(wav, self.audio_tokenizer.hop_length)
        tokens = self.audio_tokenizer.encode(wav, self.sampling_rate)
        if preprocess_prompt:
            ref_text = add_punctuation(ref_text)
        return VoiceClonePrompt(ref_audio_tokens=tokens, ref_text=ref_text, ref_rms=ref_rms)

    # ------------------------------------------------------------------ protocol (omnivoice.protocol)

    @classmethod
    def check_request(cls, *, text: Optional[str] = None, language: Optional[str] = None,
                      instruct: Optional[str] = None, voice: Optional[VoiceClonePrompt] = None,
                      ref_audio: Any = None, ref_text: Optional[str] = None, duration: Optional[float] = None,
                      speed: Optional[float] = None, **options: Any) -> dict[str, Any]:
        """Checks one request before any work (see :meth:`omnivoice.protocol.SpeechModel.check_request`).

        Stricter than :meth:`generate` on ``language``: an unknown one is an error here, where
        generate warns and speaks language-agnostic as upstream does. ``instruct`` comes back
        in the form generate uses (Chinese items when ``text`` holds Chinese).
        """
        mode = cls.capabilities.check_mode(voice, ref_audio, instruct)
        if voice is not None and getattr(voice, "family", None) != FAMILY:
            raise WrongFamily("voice", getattr(voice, "family", type(voice).__name__), FAMILY)
        if ref_audio is not None and (ref_text is None or not str(ref_text).strip()):
            raise OptionError("ref_text", "ref_text (the transcript of ref_audio) is required with ref_audio: "
                                          "no ASR model is bundled")
        if ref_audio is None and ref_text is not None:
            raise OptionError("ref_text", "ref_text was given without ref_audio")
        OmniVoiceGenerationConfig.from_dict(options).validate()
        for name, value in (("duration", duration), ("speed", speed)):
            if value is not None and not check_finite(value, name) > 0:
                raise OptionError(name, f"{name} must be > 0, got {value!r}")
        if language is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                try:
                    language = resolve_language(language)
                except (UserWarning, ValueError):
                    raise OptionError("language", f"unknown language {language!r}: give a language name or code "
                                                  "(e.g. 'English' or 'en')") from None
        if mode == "design":
            try:
                instruct = resolve_instruct(instruct, use_zh=contains_chinese(text or ""))
            except ValueError as e:
                raise OptionError("instruct", str(e)) from None
        else:
            instruct = None
        return {"language": language, "instruct": instruct, "voice": voice, "ref_audio": ref_audio,
                "ref_text": ref_text, "duration": duration, "speed": speed, **options}

    def create_voice(self, ref_audio: AudioInput, ref_text: Optional[str] = None,
                     **options: Any) -> VoiceClonePrompt:
        """:meth:`create_voice_clone_prompt` under the protocol's name; of the generation
        ``options`` only ``preprocess_prompt`` shapes a voice."""
        return self.create_voice_clone_prompt(ref_audio, ref_text, options.get("preprocess_prompt", True))

    @classmethod
    def load_voice(cls, path: Union[str, os.PathLike]) -> VoiceClonePrompt:
        """:meth:`VoiceClonePrompt.load` (a voice of another family raises WrongFamily)."""
        return VoiceClonePrompt.load(path)

    def speech_seconds(self, text: str) -> float:
        """Estimated seconds of speech of ``text`` at the default rate (no reference)."""
        return speech_seconds(self.frame_rate)(text)

    def token_usage(self, text: str, seconds: float) -> tuple[int, int]:
        """Text tokens of ``text`` and codec frames of ``seconds`` of audio."""
        return len(self.text_tokenizer.encode(text)), round(seconds * self.frame_rate)

    def warm_up(self) -> None:
        """One two-step generation of "Hello." (about the LM's and codec's first-call setup)."""
        self.generate("Hello.", num_step=2, seed=0)

    def batch_key(self, options: dict[str, Any]) -> Optional[Hashable]:
        """Requests batch when they share the MaskGIT settings and whether they clone; a fixed
        seed never batches (its audio would depend on what it was batched with)."""
        if options.get("seed") is not None:
            return None
        cloning = options.get("voice") is not None or options.get("ref_audio") is not None
        return options.get("num_step"), options.get("guidance_scale"), cloning

    @classmethod
    def resolve_files(cls, model: Union[str, os.PathLike], codec: Union[str, os.PathLike, None] = None,
                      **_: Any) -> dict[str, str]:
        """The local GGUFs :meth:`from_pretrained` would load (a snapshot or Hub id converted or
        downloaded here, once), as its keyword arguments: what a Ray job hands its actors."""
        files = resolve_model(model, codec)
        return {"model": str(files.lm), "codec": str(files.codec)}

    # ------------------------------------------------------------------ preparation

    def _load_reference(self, ref_audio: AudioInput) -> np.ndarray:
        """Mono float32 at the model rate."""
        if isinstance(ref_audio, (str, os.PathLike)):
            return load_audio(ref_audio, self.sampling_rate)
        if not (isinstance(ref_audio, tuple) and len(ref_audio) == 2):
            raise ValueError("ref_audio must be a path or a (waveform, sample_rate) tuple")
        wave, sr = ref_audio
        return to_mono(np.asarray(wave), check_sample_rate(sr, "ref_audio sample rate"), self.sampling_rate)


def _one_voice(voice: Any, voice_clone_prompt: Any) -> Any:
    """The clone prompt given as ``voice`` (the protocol's name) or ``voice_clone_prompt``."""
    if voice is not None and voice_clone_prompt is not None:
        raise ValueError("give voice or voice_clone_prompt, not both (they are the same argument)")
    return voice_clone_prompt if voice is None else voice
