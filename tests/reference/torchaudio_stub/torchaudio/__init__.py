"""Minimal stand-in for ``torchaudio``, just enough for the reference run.

The upstream omnivoice package and transformers' Higgs Audio v2 tokenizer only
call ``torchaudio.functional.resample``; no torchaudio wheel matches the torch
build in the reference venv, so this package provides that one function.
"""

from torchaudio import functional

__all__ = ["functional"]
__version__ = "2.11.1+resample-only"
