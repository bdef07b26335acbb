"""What shared code (CLI, streaming, ``--batch``, ``--srt``, Ray, the server) needs from a model.

Every family's model class implements :class:`SpeechModel`; shared code names no family. What a
family can do is said up front in its :class:`Capabilities`, and a request for a mode it lacks is
refused before any work by :class:`UnsupportedMode`, naming the family and what it can do.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any, Hashable, Iterable, Iterator, Literal, Optional, Protocol, Union, runtime_checkable

import numpy as np

from .streaming import AudioChunk

__all__ = [
    "Capabilities",
    "Mode",
    "OptionError",
    "SpeechModel",
    "UnsupportedMode",
    "Voice",
    "WrongFamily",
    "request_mode",
    "voice_file_family",
]

Mode = Literal["clone", "design", "auto"]
MODES: tuple[Mode, ...] = ("clone", "design", "auto")
# What ``instruct`` means: items from a fixed list of attributes ("female, low pitch"), any
# description in words, or nothing (a family without design takes no instruct).
Instruct = Literal["attributes", "free-form"]

# The key a voice file names its family by; files written before it existed are OmniVoice's.
VOICE_FAMILY_KEY = "family"
DEFAULT_VOICE_FAMILY = "omnivoice"


class OptionError(ValueError):
    """A request option refused before any work; ``argument`` names it as the API spells it."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(message)
        self.argument = argument


class UnsupportedMode(OptionError):
    """A voice mode the loaded family does not have (never mapped silently to another)."""

    def __init__(self, capabilities: "Capabilities", mode: str, argument: str) -> None:
        super().__init__(argument, f"{capabilities.family} has no {mode} mode (asked for by {argument}): "
                                   f"it does {capabilities.describe()}")
        self.family, self.mode = capabilities.family, mode


class WrongFamily(ValueError):
    """A voice made by one family given to a model of another."""

    def __init__(self, what: str, voice_family: str, family: str) -> None:
        super().__init__(f"{what} is a voice of the {voice_family} family; this model is {family}: "
                         f"make the voice with a {family} model")
        self.voice_family, self.family = voice_family, family


@dataclass(frozen=True)
class Capabilities:
    """What a family can do, known without running it.

    Attributes:
        family: The family's name (``"omnivoice"``), as voice files and errors name it.
        modes: The voice modes it has, among ``clone`` (from a reference), ``design`` (from
            ``instruct``) and ``auto`` (neither: a voice of its own choosing).
        instruct: What ``instruct`` means: ``"attributes"`` (items of a fixed list),
            ``"free-form"`` (a description in words), or None (no design mode).
        languages: Language codes it speaks, or None when it takes any (or needs none).
        streaming: Whether ``generate_stream`` yields audio before the whole text is done.
        duration_control: Whether ``duration`` sets the output's length.
        clone_needs_transcript: Whether cloning needs the reference's transcript (``ref_text``).
    """

    family: str
    modes: tuple[Mode, ...]
    instruct: Optional[Instruct]
    languages: Optional[tuple[str, ...]]
    streaming: bool
    duration_control: bool
    clone_needs_transcript: bool

    def __post_init__(self) -> None:
        if not self.modes or any(m not in MODES for m in self.modes):
            raise ValueError(f"modes must be some of {MODES}, got {self.modes!r}")
        if (self.instruct is None) == ("design" in self.modes):
            raise ValueError("instruct is None exactly when there is no design mode")

    def describe(self) -> str:
        """The modes in words, for error messages: ``"clone, design and auto"``."""
        names = list(self.modes)
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"

    def check_mode(self, voice: Any = None, ref_audio: Any = None, instruct: Optional[str] = None) -> Mode:
        """The mode of a request (see :func:`request_mode`); :class:`UnsupportedMode` when the
        family lacks it."""
        mode, argument = request_mode(voice, ref_audio, instruct)
        if mode not in self.modes:
            raise UnsupportedMode(self, mode, argument)
        if instruct is not None and str(instruct).strip() and self.instruct is None:
            raise UnsupportedMode(self, "design", "instruct")  # with a voice, never dropped silently
        return mode

    def as_json(self) -> dict[str, Any]:
        """The fields as JSON types (tuples as lists), as the server's ``/v1/models`` shows them."""
        out = asdict(self)
        out["modes"] = list(self.modes)
        out["languages"] = None if self.languages is None else list(self.languages)
        return out


def request_mode(voice: Any = None, ref_audio: Any = None, instruct: Optional[str] = None) -> tuple[Mode, str]:
    """The mode a request asks for, and the argument that asks: a voice or reference clones,
    ``instruct`` designs, neither is auto (a voice wins over ``instruct``, as upstream's does)."""
    if voice is not None:
        return "clone", "voice"
    if ref_audio is not None:
        return "clone", "ref_audio"
    if instruct is not None and str(instruct).strip():
        return "design", "instruct"
    return "auto", "voice"


def voice_file_family(path: Union[str, os.PathLike]) -> str:
    """The family a saved voice file (``.npz``) belongs to; files without the field are OmniVoice's.

    Raises:
        FileNotFoundError: No such file.
        ValueError: Not a voice file.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            return str(z[VOICE_FAMILY_KEY]) if VOICE_FAMILY_KEY in z.files else DEFAULT_VOICE_FAMILY
    except FileNotFoundError:
        raise
    except Exception:
        raise ValueError(f"{path} is not a voice file") from None


@runtime_checkable
class Voice(Protocol):
    """A reusable voice (an encoded reference): made by :meth:`SpeechModel.create_voice`."""

    family: str

    def save(self, path: Union[str, os.PathLike]) -> None: ...


@runtime_checkable
class SpeechModel(Protocol):
    """A loaded model of any family, as shared code sees it.

    Generation options other than those named here (``num_step``, ...) are the family's own and
    pass through ``**options``; :meth:`check_request` refuses the ones it does not know.
    """

    family: str
    sampling_rate: int
    capabilities: Capabilities

    def check_request(self, *, text: Optional[str] = None, language: Optional[str] = None,
                      instruct: Optional[str] = None, voice: Optional[Voice] = None, ref_audio: Any = None,
                      ref_text: Optional[str] = None, duration: Optional[float] = None,
                      speed: Optional[float] = None, **options: Any) -> dict[str, Any]:
        """Checks a request without running anything and returns its options normalised (the
        language as a code, ``instruct`` in the family's form); needs no weights, so families make
        it a classmethod and a job can check its options before loading (Ray).

        Raises:
            UnsupportedMode: A mode the family lacks.
            OptionError: A bad value; ``argument`` names it (unknown languages included).
            TypeError: An option the family does not have.
        """
        ...

    def create_voice(self, ref_audio: Any, ref_text: Optional[str] = None, **options: Any) -> Voice:
        """Encodes a reference (path or ``(waveform, rate)``) into a reusable voice; ``options``
        are the request's generation options, of which the family uses those that shape a voice."""
        ...

    @classmethod
    def load_voice(cls, path: Union[str, os.PathLike]) -> Voice:
        """Reads a voice saved by ``Voice.save``; a voice of another family raises :class:`WrongFamily`."""
        ...

    def generate(self, text: Union[str, list[str]], *, language: Any = None, instruct: Any = None,
                 voice: Any = None, duration: Any = None, speed: Any = None, seed: Optional[int] = None,
                 progress: Any = None, cancel: Any = None, **options: Any) -> list[np.ndarray]:
        """One float32 array at :attr:`sampling_rate` per text (per-item values as lists)."""
        ...

    def generate_stream(self, text: Union[str, Iterable[str]], *, language: Optional[str] = None,
                        instruct: Optional[str] = None, voice: Optional[Voice] = None,
                        seed: Optional[int] = None, cancel: Any = None, **options: Any) -> Iterator[AudioChunk]:
        """The speech of one text piece by piece, as :class:`~omnivoice.AudioChunk` items."""
        ...

    def generate_pieces(self, pieces: Iterable[Any], *, language: Optional[str] = None,
                        instruct: Optional[str] = None, voice: Optional[Voice] = None,
                        seed: Optional[int] = None, cancel: Any = None, **options: Any) -> Iterator[AudioChunk]:
        """Given pieces (str, or :class:`~omnivoice.TextPiece` with its own duration) in one voice,
        each generated whole, raw audio only (``--srt`` places it on a timeline)."""
        ...

    def speech_seconds(self, text: str) -> float:
        """Estimated seconds of speech of ``text`` at the default rate, for the sentence splitter."""
        ...

    def token_usage(self, text: str, seconds: float) -> tuple[int, int]:
        """Tokens in and out of a request (text tokens, audio frames), for usage reports."""
        ...

    def warm_up(self) -> None:
        """One short generation, so that a server's first request does not pay first-call setup."""
        ...

    def batch_key(self, options: dict[str, Any]) -> Optional[Hashable]:
        """Requests with equal keys may be generated in one batch; None: never batched."""
        ...

    @classmethod
    def resolve_files(cls, model: Union[str, os.PathLike], **kwargs: Any) -> dict[str, str]:
        """The local files ``from_pretrained`` would load (downloaded or converted here, once), as
        keyword arguments of :func:`omnivoice.load`: what a Ray job hands its actors."""
        ...
