"""omnivoice: text-to-speech model families on ggml (OmniVoice's zero-shot multilingual TTS first).

``omnivoice.load(path_or_id)`` returns the model of whichever family the file is (see
:mod:`omnivoice.registry`); every family implements :class:`omnivoice.protocol.SpeechModel`."""

from __future__ import annotations

from importlib.metadata import version

from . import _libs  # noqa: F401  (must run before _core is imported)
from ._core import Backend, DeviceError, ModelFormatError
from .models.omnivoice import (AudioTokenizer, OmniVoice, OmniVoiceGenerationConfig, VoiceClonePrompt, load_codes,
                               save_codes)
from .protocol import Capabilities, OptionError, SpeechModel, UnsupportedMode, WrongFamily
from .registry import load
from .streaming import AudioChunk, Cancelled, TextPiece

__version__ = version("omnivoice-ggml")  # the distribution's, set once in pyproject.toml

__all__ = [
    "AudioChunk",
    "AudioTokenizer",
    "Backend",
    "Cancelled",
    "Capabilities",
    "DeviceError",
    "ModelFormatError",
    "OmniVoice",
    "OmniVoiceGenerationConfig",
    "OptionError",
    "SpeechModel",
    "TextPiece",
    "UnsupportedMode",
    "VoiceClonePrompt",
    "WrongFamily",
    "__version__",
    "load",
    "load_codes",
    "save_codes",
]
