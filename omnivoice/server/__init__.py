"""``omnivoice-server``: OpenAI-compatible HTTP speech, saved voices, Wyoming and a web page.

Needs the ``server`` extra (``pip install 'omnivoice-ggml[server]'``). See docs/server.md.
"""

from __future__ import annotations

from .app import SpeechRequest, create_app
from .settings import ServerSettings

__all__ = ["ServerSettings", "SpeechRequest", "create_app"]
