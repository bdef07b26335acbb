"""Type stub of ``omnivoice._core``, the pybind11 module built from csrc/bindings/.

The production surface (Backend, ModelFormatError, Codec, LM, LMSession, quantize) is bound in
csrc/bindings/{module,codec,lm,quantize}.cpp; ``testing`` (csrc/bindings/testing/) holds the op,
capture and GGUF hooks only the test suite uses.
"""

from typing import Any, Optional

import numpy as np
import numpy.typing as npt

class ModelFormatError(ValueError):
    """A GGUF file that cannot be used: truncated, wrong arch, missing or misshaped tensor."""

class ModelFileNotFoundError(FileNotFoundError, ModelFormatError):
    """A model file that does not exist."""

class DeviceError(RuntimeError):
    """A compute device that cannot be reached or stopped answering (an RPC server)."""

class Backend:
    """A ggml compute device: the CPU, a GPU or an RPC server."""

    def __init__(self, n_threads: int = 0, device: str = "", stock_ops: bool = False) -> None: ...
    @staticmethod
    def devices() -> list[str]: ...
    has_rpc: bool
    n_threads: int
    @property
    def name(self) -> str: ...
    @property
    def device(self) -> str: ...
    def stats(self) -> dict[str, float]: ...
    def reset_stats(self) -> None: ...
    @property
    def is_cpu(self) -> bool: ...
    @property
    def stock_ops(self) -> bool: ...

def serve_rpc(host: str, port: int, n_threads: int, cache_dir: str = "") -> None: ...

class Codec:
    """The Higgs Audio v2 audio tokenizer, loaded from an omnivoice-tokenizer GGUF."""

    def __init__(self, path: str, backend: Backend) -> None: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    @property
    def sample_rate(self) -> int: ...
    @property
    def semantic_sample_rate(self) -> int: ...
    @property
    def hop_length(self) -> int: ...
    @property
    def frame_rate(self) -> int: ...
    @property
    def n_codebooks(self) -> int: ...
    @property
    def codebook_size(self) -> int: ...
    @property
    def has_encoder(self) -> bool: ...
    fused_snake: bool
    @property
    def stock_ops(self) -> bool: ...
    decode_window: int
    @property
    def decode_context(self) -> int: ...
    @property
    def compute_buffer_size(self) -> int: ...
    def decode(self, codes: npt.ArrayLike) -> npt.NDArray[np.float32]: ...
    def encode(self, wave: npt.ArrayLike, wave16: npt.ArrayLike) -> npt.NDArray[np.int32]: ...

class LMSession:
    """A fixed packing of segments with its graph allocated once."""

    @property
    def n_tokens(self) -> int: ...
    @property
    def n_target(self) -> int: ...
    @property
    def segments(self) -> list[tuple[int, int, int]]: ...
    @property
    def scores_cells(self) -> bool: ...
    def forward(self, input_ids: npt.ArrayLike, audio_mask: npt.ArrayLike) -> npt.NDArray[np.float32]: ...
    def score(
        self, input_ids: npt.ArrayLike, audio_mask: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int32]]: ...

class LM:
    """OmniVoice's language model (Qwen3 body, audio embeddings and heads) from an omnivoice-lm GGUF."""

    def __init__(self, path: str, backend: Backend) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    @property
    def n_layer(self) -> int: ...
    @property
    def hidden_size(self) -> int: ...
    @property
    def intermediate_size(self) -> int: ...
    @property
    def n_head(self) -> int: ...
    @property
    def n_head_kv(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def context_length(self) -> int: ...
    @property
    def num_audio_codebook(self) -> int: ...
    @property
    def audio_vocab_size(self) -> int: ...
    @property
    def audio_mask_id(self) -> int: ...
    @property
    def audio_codebook_weights(self) -> list[float]: ...
    def session(
        self, segments: list[tuple[int, int, int]], guidance_scale: Optional[float] = None
    ) -> LMSession: ...

class SoproLMSession:
    """One KV cache of the Sopro LM, reused across requests (prefill resets it)."""

    @property
    def n_ctx(self) -> int: ...
    @property
    def length(self) -> int: ...
    def prefill(
        self, text: npt.ArrayLike, style: npt.ArrayLike, prompt: npt.ArrayLike
    ) -> npt.NDArray[np.float32]: ...
    def step(self, tokens: npt.ArrayLike) -> npt.NDArray[np.float32]: ...
    def prefix(
        self, text: npt.ArrayLike, style: npt.ArrayLike, prompt: npt.ArrayLike
    ) -> npt.NDArray[np.float32]: ...

class SoproLM:
    """Sopro's semantic LM (embeddings, style prefix, causal body, token head) from a sopro-tts GGUF."""

    def __init__(self, path: str, backend: Backend) -> None: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    @property
    def n_layer(self) -> int: ...
    @property
    def hidden_size(self) -> int: ...
    @property
    def n_head(self) -> int: ...
    @property
    def intermediate_size(self) -> int: ...
    @property
    def text_vocab_size(self) -> int: ...
    @property
    def semantic_vocab_size(self) -> int: ...
    @property
    def style_prefix_tokens(self) -> int: ...
    @property
    def bos_id(self) -> int: ...
    @property
    def eos_id(self) -> int: ...
    @property
    def n_logits(self) -> int: ...
    def session(self, n_ctx: int) -> SoproLMSession: ...

# ggml_quantize_chunk on the rows of float32 x [rows, n_per_row] to ggml type `type` ("q4_K"):
# uint8 [rows, row bytes] (csrc/bindings/quantize.cpp; the converter's K-quants).
def quantize(x: npt.ArrayLike, type: str) -> npt.NDArray[np.uint8]: ...

# The `_core.testing` submodule (a module at run time; a class here, as a stub file cannot
# declare a submodule of an extension module).
class testing:
    @staticmethod
    def read_gguf(path: str, arch: str, backend: Backend) -> tuple[dict[str, Any], dict[str, str]]: ...
    @staticmethod
    def check_gguf(path: str, arch: str, backend: Backend, tensors: dict[str, list[int]]) -> None: ...
    @staticmethod
    def run_decoder(
        path: str,
        arch: str,
        backend: Backend,
        hparams: dict[str, Any],
        names: dict[str, str],
        x: npt.ArrayLike,
        chunks: list[int],
        n_ctx: int,
        enc: Optional[npt.ArrayLike] = None,
    ) -> npt.NDArray[np.float32]: ...
    @staticmethod
    def decode_capture(codec: Codec, codes: npt.ArrayLike, names: list[str]) -> dict[str, np.ndarray]: ...
    @staticmethod
    def encode_capture(
        codec: Codec, wave: npt.ArrayLike, wave16: npt.ArrayLike, names: list[str]
    ) -> dict[str, np.ndarray]: ...
    @staticmethod
    def op_snake(x: npt.ArrayLike, alpha: npt.ArrayLike, fused: bool = True, n_threads: int = 2) -> np.ndarray: ...
    @staticmethod
    def op_conv1d(
        x: npt.ArrayLike,
        weight: npt.ArrayLike,
        bias: Optional[npt.ArrayLike] = None,
        residual: Optional[npt.ArrayLike] = None,
        stride: int = 1,
        padding: int = 0,
        dilation: int = 1,
        n_threads: int = 2,
    ) -> np.ndarray: ...
    @staticmethod
    def op_grouped_conv1d(
        x: npt.ArrayLike,
        weight: npt.ArrayLike,
        bias: Optional[npt.ArrayLike] = None,
        groups: int = 1,
        pad_left: int = 0,
        pad_right: int = 0,
        dilation: int = 1,
        impl: str = "own",
        n_threads: int = 2,
    ) -> np.ndarray: ...
    @staticmethod
    def op_gelu_tanh(x: npt.ArrayLike, stock: bool = False, n_threads: int = 2) -> np.ndarray: ...
    @staticmethod
    def op_mish(x: npt.ArrayLike, stock: bool = False, n_threads: int = 2) -> np.ndarray: ...
    @staticmethod
    def op_group_norm_one(
        x: npt.ArrayLike, weight: npt.ArrayLike, bias: npt.ArrayLike, eps: float, n_threads: int = 2
    ) -> np.ndarray: ...
    @staticmethod
    def op_istft(
        real: npt.ArrayLike, imag: npt.ArrayLike, window: npt.ArrayLike, hop: int, stock: bool = False,
        n_threads: int = 2,
    ) -> np.ndarray: ...
    @staticmethod
    def op_gelu_erf(x: npt.ArrayLike, bias: Optional[npt.ArrayLike] = None, n_threads: int = 2) -> np.ndarray: ...
    @staticmethod
    def op_norm(
        x: npt.ArrayLike,
        weight: npt.ArrayLike,
        bias: npt.ArrayLike,
        eps: float,
        over_time: bool,
        residual: Optional[npt.ArrayLike] = None,
        x_bias: Optional[npt.ArrayLike] = None,
        n_threads: int = 2,
    ) -> np.ndarray: ...
    @staticmethod
    def op_rvq_encode(
        x: npt.ArrayLike,
        w_in: npt.ArrayLike,
        b_in: npt.ArrayLike,
        embed: npt.ArrayLike,
        w_out: npt.ArrayLike,
        b_out: npt.ArrayLike,
        n_threads: int = 2,
    ) -> np.ndarray: ...
    @staticmethod
    def op_linear(
        x: npt.ArrayLike, weights: list[npt.ArrayLike], wtypes: list[str], n_threads: int = 2, mul_mat: bool = False
    ) -> np.ndarray: ...
    @staticmethod
    def linear_seconds(
        x: npt.ArrayLike,
        weights: list[npt.ArrayLike],
        wtypes: list[str],
        n_threads: int = 2,
        mul_mat: bool = False,
        repeats: int = 5,
    ) -> list[float]: ...
    @staticmethod
    def fma_peak_gflops(n_threads: int = 2, seconds: float = 0.05, bf16: bool = False) -> float: ...
    @staticmethod
    def cpu_flags() -> list[str]: ...
    @staticmethod
    def linear_kernel(wtype: str) -> str: ...
    @staticmethod
    def bf16_dot() -> bool: ...
    @staticmethod
    def set_bf16_dot(allow: bool) -> bool: ...
    @staticmethod
    def op_attention(
        q: npt.ArrayLike,
        k: npt.ArrayLike,
        v: npt.ArrayLike,
        segments: list[int],
        scale: float,
        impl: str = "own",
        n_threads: int = 2,
    ) -> np.ndarray: ...
    @staticmethod
    def attention_seconds(
        q: npt.ArrayLike,
        k: npt.ArrayLike,
        v: npt.ArrayLike,
        segments: list[int],
        scale: float,
        impl: str = "own",
        n_threads: int = 2,
        repeats: int = 5,
    ) -> list[float]: ...
    @staticmethod
    def op_round_trip(w: npt.ArrayLike, wtype: str) -> np.ndarray: ...
    @staticmethod
    def simd() -> str: ...
    @staticmethod
    def set_simd_cap(name: str) -> str: ...
