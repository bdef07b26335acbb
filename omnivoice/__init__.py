"""omnivoice: OmniVoice zero-shot multilingual text-to-speech on ggml."""

from __future__ import annotations

from importlib.metadata import version

from . import _libs  # noqa: F401  (must run before _core is imported)
from ._core import Backend, ModelFormatError
from .models.omnivoice import (AudioTokenizer, OmniVoice, OmniVoiceGenerationConfig, VoiceClonePrompt, load_codes,
                               save_codes)
from .streaming import AudioChunk, Cancelled, TextPiece

__version__ = version("omnivoice-ggml")  # the distribution's, set once in pyproject.toml

__all__ = [
    "AudioChunk",
    "AudioTokenizer",
    "Backend",
    "Cancelled",
    "ModelFormatError",
    "OmniVoice",
    "OmniVoiceGenerationConfig",
    "TextPiece",
    "VoiceClonePrompt",
    "__version__",
    "load_codes",
    "save_codes",
]
