"""Hugging Face OmniVoice checkpoint -> GGUF converter (``omnivoice-convert``)."""
