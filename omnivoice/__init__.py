"""omnivoice: OmniVoice zero-shot multilingual text-to-speech on ggml."""

from __future__ import annotations

from . import _libs  # noqa: F401  (must run before _core is imported)
from ._core import Backend, ModelFormatError

__version__ = "0.1.0"

__all__ = ["Backend", "ModelFormatError", "__version__"]
