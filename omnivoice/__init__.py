"""omnivoice: OmniVoice zero-shot multilingual text-to-speech on ggml."""

from __future__ import annotations

from . import _libs  # noqa: F401  (must run before _core is imported)
from ._core import Backend, ModelFormatError
from .audio_tokenizer import AudioTokenizer, load_codes, save_codes
from .model import OmniVoice, OmniVoiceGenerationConfig, VoiceClonePrompt
from .pipeline import AudioChunk

__version__ = "0.1.0"

__all__ = [
    "AudioChunk",
    "AudioTokenizer",
    "Backend",
    "ModelFormatError",
    "OmniVoice",
    "OmniVoiceGenerationConfig",
    "VoiceClonePrompt",
    "__version__",
    "load_codes",
    "save_codes",
]
