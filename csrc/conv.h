#pragma once
// Layers shared by the codec's encoder and decoder: Conv1d, ConvTranspose1d, Snake1d, Linear.
// Activations are [C, T] in ggml order, channels innermost (PyTorch's (T, C); a (1, C, T) module
// input is transposed once at the model's edge). Then a Linear or k1 conv is one mul_mat, a
// Conv1d is unfold + mul_mat and a ConvTranspose1d is mul_mat + fold, with no transposes.
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
// conv weights rearranged for ov_unfold_1d / ov_fold_1d, and Snake's 1 / (alpha + 1e-9).
// Register them while loading, then call materialize() once.
class DerivedWeights {
public:
    explicit DerivedWeights(size_t max_tensors);
    ~DerivedWeights();
    DerivedWeights(const DerivedWeights &) = delete;
    DerivedWeights & operator=(const DerivedWeights &) = delete;

    // Conv1d weight (OC, IC, K) = ggml [K, IC, OC] -> [K*IC, OC], row k*IC + ic: the order of
    // ov_unfold_1d's columns. Keeps the source type.
    ggml_tensor * conv_unfold_weight(ggml_tensor * weight);
    // ConvTranspose1d weight (IC, OC, K) = ggml [K, OC, IC] -> [IC, K*OC], row k*OC + oc: the
    // order ov_fold_1d reads its columns in. Keeps the source type.
    ggml_tensor * conv_transpose_weight(ggml_tensor * weight);
    // Snake alpha (1, C, 1) -> [C] F32 holding 1 / (alpha + 1e-9).
    ggml_tensor * snake_inv_alpha(ggml_tensor * alpha);

    // Allocates the buffer on `backend` and computes every registered tensor.
    void materialize(const Backend & backend);

private:
    enum class Kind { ConvUnfold, ConvTranspose, SnakeInvAlpha };
    struct Job {
        Kind kind;
        ggml_tensor * src;
        ggml_tensor * dst;
    };
    ggml_tensor * add(Kind kind, ggml_tensor * src, ggml_type type, int64_t ne0, int64_t ne1);
    static void transform(Kind kind, const ggml_tensor * src, const char * in, char * out);

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
    ggml_tensor * weight = nullptr;  // [K*IC, OC] (rearranged when K > 1; for K = 1 the file's [1, IC, OC])
    ggml_tensor * bias = nullptr;    // [OC], or null
    int64_t out_ch = 0;
    int kernel = 1;
    int stride = 1;
    int padding = 0;
    int dilation = 1;

    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t in_ch,
              int64_t out_ch, int kernel, int stride, int padding, int dilation, bool has_bias = true);
    // x: [IC, T] -> [OC, T_out], T_out = (T + 2*padding - dilation*(K-1) - 1) / stride + 1
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x) const;
};

// nn.ConvTranspose1d(in, out, kernel_size, stride, padding, output_padding, bias)
struct ConvTranspose1d {
    ggml_tensor * weight = nullptr;  // [IC, K*OC] from DerivedWeights::conv_transpose_weight
    ggml_tensor * bias = nullptr;    // [OC], or null
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
    ggml_tensor * weight = nullptr;  // [IN, OUT]
    ggml_tensor * bias = nullptr;    // [OUT], or null

    void load(GGUFFile & file, const std::string & prefix, int64_t in_features, int64_t out_features,
              bool has_bias = true);
    // x: [IN, N] -> [OUT, N]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x) const;
};

}  // namespace ov
