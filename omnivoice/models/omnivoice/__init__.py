"""OmniVoice (k2-fsa): a bidirectional Qwen3 LM with MaskGIT over 8 codebooks and the Higgs Audio v2
codec; auto voice, attribute voice design and cloning in 646 languages."""

from __future__ import annotations

from .audio_tokenizer import AudioTokenizer, load_codes, save_codes
from .model import OmniVoice, OmniVoiceGenerationConfig, VoiceClonePrompt

__all__ = ["AudioTokenizer", "OmniVoice", "OmniVoiceGenerationConfig", "VoiceClonePrompt", "load_codes", "save_codes"]
