"""``python -m omnivoice`` runs ``omnivoice-tts``."""

import sys

from .cli import main

sys.exit(main())
