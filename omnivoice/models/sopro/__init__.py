"""Sopro V2 Turbo (samuel-vitorino, Apache-2.0): 120M-parameter zero-shot voice cloning with a causal
semantic LM, a rectified-flow acoustic head and a Vocos vocoder, built for streaming on a CPU."""
