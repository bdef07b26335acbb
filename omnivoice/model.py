"""The OmniVoice text-to-speech model: upstream's ``OmniVoice`` API on the ggml core.

``OmniVoice.from_pretrained(...)`` loads the LM and codec GGUFs; ``generate(...)`` takes the same
arguments as upstream's and returns a list of float32 numpy arrays at 24 kHz, one per text.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, fields
from typing import Any, Iterator, Optional, Union

import numpy as np

from . import _core
from .arguments import check_finite, check_sample_rate, check_seed, check_text
from .audio import load_audio, to_mono, truncate_to_hop
from .audio_tokenizer import AudioTokenizer
from .chunking import add_punctuation
from .maskgit import MaskGITConfig
from .model_files import resolve_model
from .pipeline import AudioChunk, Pipeline, Progress
from .postprocess import preprocess_reference
from .threads import LoadAwareThreads, resolve_n_threads, usable_cores
from .tokenizer import TextTokenizer

AudioInput = Union[str, os.PathLike, tuple[np.ndarray, int]]


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
        if not check_finite(self.audio_chunk_duration, "audio_chunk_duration") > 0:
            raise ValueError(f"audio_chunk_duration must be > 0, got {self.audio_chunk_duration!r}")
        check_finite(self.audio_chunk_threshold, "audio_chunk_threshold")


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
        """Reads a prompt written by :meth:`save`.

        Raises:
            FileNotFoundError: No such file.
            ValueError: Not a voice file, or values no reference could give: codes that are not
                ``[n_codebooks, T]`` ids >= 0, an empty or invalid ``ref_text``, a ``ref_rms`` that
                is not a positive finite number (0 is a silent reference: silent output).
        """
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
        if tokens.min() < 0:
            raise ValueError(f"{path}: voice prompt codes hold negative ids")
        check_text(text, f"{path}: ref_text")
        if not (math.isfinite(rms) and rms > 0):
            raise ValueError(f"{path}: ref_rms must be a positive finite number, got {rms!r}"
                             + (" (a silent reference: the output would be silent)" if rms == 0 else ""))
        return cls(ref_audio_tokens=tokens, ref_text=text, ref_rms=rms)


class OmniVoice:
    """OmniVoice TTS: text (plus an optional voice description or reference) to 24 kHz speech."""

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
                        n_threads: Optional[int] = None, convert_type: str = "BF16") -> "OmniVoice":
        """Loads the model.

        Args:
            model: The LM GGUF (``omnivoice-base-*.gguf``; the codec GGUF is found beside it), a
                directory holding both GGUFs, a Hugging Face snapshot directory (converted once
                into ``~/.cache/omnivoice``), or a Hub id such as ``"k2-fsa/OmniVoice"``.
            codec: The codec GGUF, when it is not beside the LM.
            n_threads: CPU threads, at most the usable cores (more is capped, with a warning).
                ``None`` (default) follows the machine's load: each MaskGIT step runs on the
                cores other processes left idle during the previous steps (see README, Threads).
            convert_type: LM weight type used when a snapshot must be converted.
        """
        n_threads = resolve_n_threads(n_threads)
        files = resolve_model(model, codec, convert_type=convert_type)
        backend = _core.Backend(n_threads or usable_cores())
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
            **kwargs: Fields of :class:`OmniVoiceGenerationConfig` (``num_step``,
                ``guidance_scale``, ``t_shift``, ``layer_penalty_factor``,
                ``position_temperature``, ``class_temperature``, ``denoise``,
                ``preprocess_prompt``, ``postprocess_output``, ``audio_chunk_duration``,
                ``audio_chunk_threshold``).

        Returns:
            One float32 array at :attr:`sampling_rate` per text.
        """
        config = generation_config or OmniVoiceGenerationConfig.from_dict(kwargs)
        config.validate()  # before any work
        rng = np.random.default_rng(check_seed(seed))
        items = self.pipeline.prepare(text, language, ref_text, ref_audio, voice_clone_prompt, instruct,
                                      duration, speed, config, self.create_voice_clone_prompt)
        return self.pipeline.run(items, config, rng, progress)

    def generate_stream(
        self,
        text: str,
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
        **kwargs: Any,
    ) -> Iterator[AudioChunk]:
        """Generates speech for one text, yielding audio as each text chunk is decoded.

        Text above ``audio_chunk_threshold`` seconds is split into chunks of about
        ``audio_chunk_duration`` seconds, exactly as :meth:`generate` does, and each chunk is
        yielded once decoded (lower ``audio_chunk_threshold`` for an earlier first chunk). The
        tokens are identical to :meth:`generate`'s for the same seed. The audio differs only in
        post-processing, which streaming must apply piecewise: the cross-fade tail of each chunk
        is held back until the next chunk arrives (exact); silence removal runs per chunk rather
        than over the whole signal; without a reference, the peak normalisation to 0.5 uses the
        first chunk's peak for every chunk (not the global peak); the fade-in and leading pad go
        on the first chunk and the fade-out and trailing pad on the last. With
        ``postprocess_output=False`` and a reference (or a single chunk), the concatenated chunks
        equal :meth:`generate`'s output.
        """
        config = generation_config or OmniVoiceGenerationConfig.from_dict(kwargs)
        config.validate()  # before any work
        rng = np.random.default_rng(check_seed(seed))
        (item,) = self.pipeline.prepare(text, language, ref_text, ref_audio, voice_clone_prompt, instruct,
                                        duration, speed, config, self.create_voice_clone_prompt)
        yield from self.pipeline.stream(item, config, rng, progress)

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
        wav, ref_rms = preprocess_reference(wav, self.sampling_rate, ref_text_given=True,
                                            preprocess=preprocess_prompt)
        wav = truncate_to_hop(wav, self.audio_tokenizer.hop_length)
        if wav.size == 0:
            raise ValueError(f"reference audio is shorter than one codec frame "
                             f"({self.audio_tokenizer.hop_length} samples)")
        if ref_rms == 0:
            warnings.warn("ref_audio is silent: audio cloned from it will be silent too", stacklevel=2)
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
        return to_mono(np.asarray(wave), check_sample_rate(sr, "ref_audio sample rate"), self.sampling_rate)

