#pragma once
// The layer library every model builds from: Conv1d, ConvTranspose1d, Snake1d, Linear, LayerNorm,
// and DerivedWeights for weights rearranged at load time. Activations are [C, T] in ggml order,
// channels innermost (PyTorch's (T, C); a (1, C, T) module input is transposed once at the model's
// edge). A Conv1d with F32 weights and OC a multiple of 4 is one ov_conv_1d_direct (others:
// ov_unfold_1d + mul_mat); a ConvTranspose1d is the same direct op as a pointwise conv to K*OC
// channels, then ov_fold_1d overlap-adds. A packed Linear is ov_linear on the file's weights. No
// transposes.
// Stock-op path (a backend's stock_ops(): any non-CPU backend, or forced): file weights as they
// are, Conv1d = transpose + ggml_im2col + mul_mat, ConvTranspose1d = transpose +
// ggml_conv_transpose_1d + crop, LayerNorm = ggml_norm + mul + add, Snake composed of mul/sin/sqr.
// Each layer struct holds its weights, looked up by exact checkpoint name with strict shapes, and
// builds its graph.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "runtime/backend.h"
#include "runtime/gguf_file.h"

namespace ov {

// Tensors computed once at load time from file weights and kept in a backend buffer of their own:
// conv weights rearranged for the ops above, and Snake's 1 / (alpha + 1e-9).
// Register them while loading, then call materialize() once.
class DerivedWeights {
public:
    // stock_ops: the layers loading through it take the stock-op path (see the top of this file).
    DerivedWeights(size_t max_tensors, bool stock_ops);
    ~DerivedWeights();
    DerivedWeights(const DerivedWeights &) = delete;
    DerivedWeights & operator=(const DerivedWeights &) = delete;

    // Conv1d weight (OC, IC, K) = ggml [K, IC, OC] -> [K*IC, OC] (mul_mat on ov_unfold_1d's
    // columns) or, direct, [OC, K*IC]; index k*IC + ic either way. Keeps the source type.
    ggml_tensor * conv_weight(ggml_tensor * weight, bool direct);
    // ConvTranspose1d weight (IC, OC, K) = ggml [K, OC, IC] -> [IC, K*OC] (mul_mat) or, direct,
    // [K*OC, IC]; index k*OC + oc, the order ov_fold_1d reads. Keeps the source type.
    ggml_tensor * conv_transpose_weight(ggml_tensor * weight, bool direct);
    // Snake alpha (1, C, 1) -> [C] F32 holding 1 / (alpha + 1e-9).
    ggml_tensor * snake_inv_alpha(ggml_tensor * alpha);
    // Tensors of one type laid end to end -> 1-D, all their elements (e.g. one Q/K/V projection
    // from three Linears: reshape the weights' concatenation to [in, 3 * out]).
    ggml_tensor * concat(const std::vector<ggml_tensor *> & parts);
    // An F32 [ne0, ne1] table computed on the host from an F32 source's values by `fill(src, dst)`
    // (e.g. the ISTFT's inverse-DFT basis from its window).
    ggml_tensor * computed(ggml_tensor * src, int64_t ne0, int64_t ne1,
                           std::function<void(const float * src, float * dst)> fill);

    bool stock_ops() const { return stock_ops_; }

    // Allocates the buffer on `backend` and computes every registered tensor.
    void materialize(const Backend & backend);

private:
    // A 3-axis weight permuted (dst axis i = src axis perm[i], innermost first), the
    // concatenation of `parts` when there are any, `fill`'s table when set, or else Snake's
    // reciprocal.
    struct Job {
        ggml_tensor * src;
        ggml_tensor * dst;
        std::vector<int> perm;
        std::vector<ggml_tensor *> parts;
        std::function<void(const float *, float *)> fill;
    };
    ggml_tensor * add(ggml_tensor * src, ggml_type type, int64_t ne0, int64_t ne1, std::vector<int> perm);

    ggml_context * ctx_ = nullptr;
    ggml_backend_buffer_t buffer_ = nullptr;
    bool stock_ops_ = false;
    std::vector<Job> jobs_;
};

// Graph-building options shared by every layer of one model.
struct GraphOptions {
    bool fused_snake = true;  // ov_snake's CPU custom op, else the composed form
    bool stock_ops = false;   // stock ggml ops only (composed Snake whatever fused_snake says)
};

// Conv1d's output length for n input steps, 0 when the padded input is shorter than the dilated
// kernel: (n + 2*padding - dilation*(kernel-1) - 1) / stride + 1.
int64_t conv1d_out_len(int64_t n, int kernel, int stride, int padding, int dilation);

// nn.Conv1d(in, out, kernel_size, stride, padding, dilation, bias)
struct Conv1d {
    // [OC, K*IC] when direct, [K*IC, OC] for unfold (the file's when K = 1), the file's [K, IC, OC]
    // when stock
    ggml_tensor * weight = nullptr;
    ggml_tensor * bias = nullptr;    // [OC], or null
    bool direct = false;             // ov_conv_1d_direct, else unfold + mul_mat
    bool stock = false;              // im2col + mul_mat
    int64_t out_ch = 0;
    int kernel = 1;
    int stride = 1;
    int padding = 0;
    int dilation = 1;

    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t in_ch,
              int64_t out_ch, int kernel, int stride, int padding, int dilation, bool has_bias = true);
    // x: [IC, T] -> [OC, out_len(T)] (+ residual [OC, out_len(T)] if given)
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x, ggml_tensor * residual = nullptr) const;
    int64_t out_len(int64_t n) const { return conv1d_out_len(n, kernel, stride, padding, dilation); }
};

// nn.ConvTranspose1d(in, out, kernel_size, stride, padding, output_padding, bias)
struct ConvTranspose1d {
    ggml_tensor * weight = nullptr;  // [K*OC, IC] when direct, [IC, K*OC], or the file's [K, OC, IC] when stock
    ggml_tensor * bias = nullptr;    // [OC], or null
    bool direct = false;
    bool stock = false;              // ggml_conv_transpose_1d
    int64_t out_ch = 0;
    int kernel = 1;
    int stride = 1;
    int padding = 0;
    int output_padding = 0;

    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t in_ch,
              int64_t out_ch, int kernel, int stride, int padding, int output_padding, bool has_bias = true);
    // x: [IC, T] -> [OC, (T-1)*stride + K - 2*padding + output_padding]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x) const;
};

// DAC's Snake1d: x + sin(alpha * x)^2 / (alpha + 1e-9), alpha per channel.
struct Snake1d {
    ggml_tensor * alpha = nullptr;      // [1, C] (checkpoint (1, C, 1))
    ggml_tensor * inv_alpha = nullptr;  // [C], from DerivedWeights::snake_inv_alpha

    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t channels);
    // x: [C, T] -> [C, T]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const;
};

// nn.Linear(in, out, bias)
struct Linear {
    ggml_tensor * weight = nullptr;  // [IN, OUT] (the file's)
    ggml_tensor * bias = nullptr;    // [OUT], or null
    bool packed = false;             // our ov_linear CPU op on inputs of 2+ columns, else mul_mat

    // F32 or F16 weights, always mul_mat.
    void load(GGUFFile & file, const std::string & prefix, int64_t in_features, int64_t out_features,
              bool has_bias = true);
    // Weights of any of `types`; those ov_linear_preferred picks run packed when `allow_packed`
    // (a CPU backend): 1.2-1.6x ggml's mul_mat on Zen 3 AVX2 for F32, BF16, Q8_0, about 1.6x for
    // Q4_K/Q6_K (bench/linear.py, bench/lm.py).
    void load(GGUFFile & file, const std::string & prefix, int64_t in_features, int64_t out_features,
              bool has_bias, const std::vector<ggml_type> & types, bool allow_packed);
    // x: [IN, N] -> [OUT, N]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x) const;
};

// nn.LayerNorm(n) with affine weights
struct LayerNorm {
    ggml_tensor * weight = nullptr;  // [n]
    ggml_tensor * bias = nullptr;    // [n]
    float eps = 0.0f;

    void load(GGUFFile & file, const std::string & prefix, int64_t n, float eps);
    // x: [n, T] -> [n, T]. With residual [n, T] and x_bias [n], normalises (x + x_bias) + residual:
    // a bias-free Linear output joined to its skip path, as the post-LN layers do.
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt,
                          ggml_tensor * residual = nullptr, ggml_tensor * x_bias = nullptr) const;
};

// nn.Conv1d(in, out, kernel_size, groups=groups, dilation, bias) with padding (pad_left,
// pad_right), stride 1: depthwise (groups = in = out) is ov_conv_1d_dw; groups whose output
// channels fill whole vectors (Sopro's DiT: 16 of 32) are ov_conv_1d_direct with groups; others
// and the stock path are ggml_pad_ext + im2col + one mul_mat batched over the groups.
struct GroupedConv1d {
    // [C, K] when depthwise, [OC, K*IC/groups] when direct, else the file's [K, IC/groups, OC]
    ggml_tensor * weight = nullptr;
    ggml_tensor * bias = nullptr;  // [OC], or null
    enum class Kind { depthwise, direct, im2col } kind = Kind::im2col;
    int64_t in_ch = 0, out_ch = 0;
    int groups = 1, kernel = 1, pad_left = 0, pad_right = 0, dilation = 1;

    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t in_ch, int64_t out_ch,
              int groups, int kernel, int pad_left, int pad_right, int dilation, bool has_bias = true);
    // x: [IC, T] -> [OC, T + pad_left + pad_right - dilation*(K-1)]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x) const;
};

// nn.GroupNorm(1, C): all of x normalised together (ggml_norm over the flattened tensor, sums in
// double), then weight and bias per channel ([C] each). Stock ops only, for every backend.
// x: [C, T] -> [C, T]
ggml_tensor * group_norm_one(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias,
                             float eps);

// nn.GELU(approximate="tanh"): ov_gelu_tanh, or composed of ggml_tanh and arithmetic when stock
// (never ggml_gelu, an fp16 table on the CPU).
ggml_tensor * gelu_tanh(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt);

// nn.Mish: ov_mish, or x * tanh(ggml_softplus(x)) when stock.
ggml_tensor * mish(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt);

// torch.istft(spec, n_fft, hop, window=window, center=True) of a one-sided spectrum: an
// inverse-DFT matmul (window and 1/n_fft folded into the basis), overlap-add at `hop` with
// n_fft/2 cropped from each end (ov_fold_1d, or ggml_col2im_1d when stock), divided by the
// overlap-added squared window.
struct Istft {
    ggml_tensor * basis = nullptr;      // [2*(n_fft/2+1), n_fft], from istft_basis
    ggml_tensor * window_sq = nullptr;  // [n_fft], the window squared
    int n_fft = 0, hop = 0;

    // window: the checkpoint's F32 [n_fft] (e.g. a periodic Hann).
    void load(GGUFFile & file, DerivedWeights & derived, const std::string & window_name, int n_fft, int hop);
    // spec: [2*(n_fft/2+1), T], real parts of bins 0..n_fft/2 then imaginary parts -> [(T-1)*hop]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * spec, const GraphOptions & opt) const;
};

// The inverse real DFT of n_fft points times `window`, as mul_mat's [2F, n_fft] (F = n_fft/2+1),
// row-major n_fft rows of 2F: frame[n] = sum_j basis[n][j] * spec[j]. The imaginary parts of bins
// 0 and n_fft/2 get zero weight, as irfft ignores them. Computed in double.
std::vector<float> istft_basis(const float * window, int n_fft);

// The ISTFT graph on given tensors (Istft::forward; the testing hooks give it host-made tables).
// spec: [2F, T], basis: [2F, n_fft], window_sq: [n_fft] -> [(T-1)*hop]
ggml_tensor * istft(ggml_context * ctx, ggml_tensor * spec, ggml_tensor * basis, ggml_tensor * window_sq, int hop,
                    const GraphOptions & opt);

// GELU (erf form) of x + bias (bias: [C] or null): ov_gelu_erf, or ggml_gelu_erf when stock.
// x: [C, T] -> [C, T]
ggml_tensor * gelu_erf(ggml_context * ctx, ggml_tensor * x, ggml_tensor * bias, const GraphOptions & opt);

// nn.GroupNorm(C, C): each channel normalised over time, then weight and bias ([C] each).
// x: [C, T] -> [C, T]
ggml_tensor * channel_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias, float eps,
                           const GraphOptions & opt);

// softmax(q k^T * scale) v without a mask, K and V in F32: ggml_flash_attn_ext, or when stock
// mul_mat + soft_max_ext + mul_mat (every backend has those at any precision). Query heads share
// KV heads by broadcast (GQA): head h reads KV head h / (n_head / n_head_kv).
// q: [hd, len, n_head], k/v: [hd, len, n_head_kv] (views allowed) -> [hd, n_head, len]
ggml_tensor * attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float scale,
                        const GraphOptions & opt);

// attention() of each of the packed segments (token counts, in order) with itself only, the
// results concatenated: upstream's block-diagonal mask without computing the masked blocks.
// q: [hd, n_head, n_tokens], k/v: [hd, n_head_kv, n_tokens] (views allowed) -> [hd, n_head, n_tokens]
ggml_tensor * packed_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                               const std::vector<int64_t> & segments, float scale, const GraphOptions & opt);

}  // namespace ov
