#pragma once
// Layers shared by the codec's encoder and decoder (Conv1d, ConvTranspose1d, Snake1d, Linear) and
// the LM (Linear). Activations are [C, T] in ggml order, channels innermost (PyTorch's (T, C); a
// (1, C, T) module input is transposed once at the model's edge). A Conv1d with F32 weights and OC
// a multiple of 4 is one ov_conv_1d_direct (others: ov_unfold_1d + mul_mat); a ConvTranspose1d is
// the same direct op as a pointwise conv to K*OC channels, then ov_fold_1d overlap-adds. A packed
// Linear is ov_linear on the file's weights. No transposes.
// Each layer struct holds its weights, looked up by exact checkpoint name with strict shapes, and
// builds its graph. Weights that need a load-time transform come from DerivedWeights.
#include <cstdint>
#include <string>
#include <vector>

#include "backend.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "gguf_file.h"

namespace ov {

// Tensors computed once at load time from file weights and kept in a backend buffer of their own:
// conv weights rearranged for the ops above, and Snake's 1 / (alpha + 1e-9).
// Register them while loading, then call materialize() once.
class DerivedWeights {
public:
    explicit DerivedWeights(size_t max_tensors);
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

    // Allocates the buffer on `backend` and computes every registered tensor.
    void materialize(const Backend & backend);

private:
    // A 3-axis weight permuted (dst axis i = src axis perm[i], innermost first), the
    // concatenation of `parts` when there are any, or else Snake's reciprocal.
    struct Job {
        ggml_tensor * src;
        ggml_tensor * dst;
        std::vector<int> perm;
        std::vector<ggml_tensor *> parts;
    };
    ggml_tensor * add(ggml_tensor * src, ggml_type type, int64_t ne0, int64_t ne1, std::vector<int> perm);

    ggml_context * ctx_ = nullptr;
    ggml_backend_buffer_t buffer_ = nullptr;
    std::vector<Job> jobs_;
};

// Graph-building options shared by every layer of one model.
struct GraphOptions {
    bool fused_snake = true;  // ov_snake's CPU custom op, else the composed form
};

// nn.Conv1d(in, out, kernel_size, stride, padding, dilation, bias)
struct Conv1d {
    ggml_tensor * weight = nullptr;  // [OC, K*IC] when direct, else [K*IC, OC] (the file's when K = 1)
    ggml_tensor * bias = nullptr;    // [OC], or null
    bool direct = false;             // ov_conv_1d_direct, else unfold + mul_mat
    int64_t out_ch = 0;
    int kernel = 1;
    int stride = 1;
    int padding = 0;
    int dilation = 1;

    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t in_ch,
              int64_t out_ch, int kernel, int stride, int padding, int dilation, bool has_bias = true);
    // x: [IC, T] -> [OC, T_out] (+ residual [OC, T_out] if given),
    // T_out = (T + 2*padding - dilation*(K-1) - 1) / stride + 1
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x, ggml_tensor * residual = nullptr) const;
};

// nn.ConvTranspose1d(in, out, kernel_size, stride, padding, output_padding, bias)
struct ConvTranspose1d {
    ggml_tensor * weight = nullptr;  // [K*OC, IC] when direct, else [IC, K*OC]
    ggml_tensor * bias = nullptr;    // [OC], or null
    bool direct = false;
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

// DacResidualUnit(dimension, dilation), shared by DAC's encoder and decoder:
// x + conv2(snake2(conv1(snake1(x)))) with conv1 k7 dilated, conv2 k1. Padding 3 * dilation keeps
// the length, so DAC's crop of the skip path before the add never applies.
struct DacResidualUnit {
    Snake1d snake1;
    Conv1d conv1;
    Snake1d snake2;
    Conv1d conv2;

    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t channels, int dilation);
    // x: [C, T] -> [C, T]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const;
};

// nn.Linear(in, out, bias)
struct Linear {
    ggml_tensor * weight = nullptr;  // [IN, OUT] (the file's)
    ggml_tensor * bias = nullptr;    // [OUT], or null
    bool packed = false;             // our ov_linear CPU op, else mul_mat

    // F32 or F16 weights, always mul_mat.
    void load(GGUFFile & file, const std::string & prefix, int64_t in_features, int64_t out_features,
              bool has_bias = true);
    // Weights of any of `types`; those ov_linear reads run packed when `allow_packed` (a CPU
    // backend): it beats ggml's mul_mat on every type (bench/linear.py).
    void load(GGUFFile & file, const std::string & prefix, int64_t in_features, int64_t out_features,
              bool has_bias, const std::vector<ggml_type> & types, bool allow_packed);
    // x: [IN, N] -> [OUT, N]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x) const;
};

}  // namespace ov
