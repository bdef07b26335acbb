#include "conv.h"

#include <cstring>

#include "errors.h"
#include "ggml-alloc.h"
#include "snake.h"

namespace ov {

// Snake1d's epsilon in 1 / (alpha + eps), as in DAC.
constexpr float kSnakeEps = 1e-9f;

DerivedWeights::DerivedWeights(size_t max_tensors) {
    ggml_init_params params = {max_tensors * ggml_tensor_overhead(), nullptr, /*no_alloc =*/true};
    ctx_ = ggml_init(params);
    if (!ctx_) throw std::runtime_error("ggml_init failed for the derived weights");
}

DerivedWeights::~DerivedWeights() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    if (ctx_) ggml_free(ctx_);
}

ggml_tensor * DerivedWeights::add(Kind kind, ggml_tensor * src, ggml_type type, int64_t ne0, int64_t ne1) {
    ggml_tensor * dst = ggml_new_tensor_2d(ctx_, type, ne0, ne1);
    ggml_format_name(dst, "%s~", ggml_get_name(src));
    jobs_.push_back({kind, src, dst});
    return dst;
}

ggml_tensor * DerivedWeights::conv_transpose_cols(ggml_tensor * weight) {
    const int64_t k = weight->ne[0], oc = weight->ne[1], ic = weight->ne[2];
    return add(Kind::ConvTransposeCols, weight, weight->type, ic, k * oc);
}

ggml_tensor * DerivedWeights::snake_inv_alpha(ggml_tensor * alpha) {
    return add(Kind::SnakeInvAlpha, alpha, GGML_TYPE_F32, 1, ggml_nelements(alpha));
}

void DerivedWeights::materialize(const Backend & backend) {
    if (jobs_.empty()) return;
    buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend.get());
    if (!buffer_) throw std::runtime_error("cannot allocate backend memory for the derived weights");
    ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);

    std::vector<char> src, dst;
    for (const Job & job : jobs_) {
        src.resize(ggml_nbytes(job.src));
        dst.resize(ggml_nbytes(job.dst));
        ggml_backend_tensor_get(job.src, src.data(), 0, src.size());
        switch (job.kind) {
            case Kind::ConvTransposeCols: {
                // src element (ic, oc, k) sits at (ic*OC + oc)*K + k; dst at (oc*K + k)*IC + ic.
                const int64_t k_n = job.src->ne[0], oc_n = job.src->ne[1], ic_n = job.src->ne[2];
                const size_t es = ggml_type_size(job.src->type);
                for (int64_t ic = 0; ic < ic_n; ++ic) {
                    for (int64_t oc = 0; oc < oc_n; ++oc) {
                        for (int64_t k = 0; k < k_n; ++k) {
                            std::memcpy(dst.data() + ((oc * k_n + k) * ic_n + ic) * es,
                                        src.data() + ((ic * oc_n + oc) * k_n + k) * es, es);
                        }
                    }
                }
                break;
            }
            case Kind::SnakeInvAlpha: {
                const float * a = (const float *) src.data();
                float * inv = (float *) dst.data();
                for (int64_t c = 0; c < ggml_nelements(job.src); ++c) inv[c] = 1.0f / (a[c] + kSnakeEps);
                break;
            }
        }
        ggml_backend_tensor_set(job.dst, dst.data(), 0, dst.size());
    }
}

void Conv1d::load(GGUFFile & file, const std::string & prefix, int64_t in_ch, int64_t out_ch, int64_t kernel,
                  int stride_, int padding_, int dilation_, bool has_bias) {
    weight = file.tensor(prefix + ".weight", {kernel, in_ch, out_ch}, {GGML_TYPE_F32, GGML_TYPE_F16});
    bias = has_bias ? file.tensor(prefix + ".bias", {out_ch}, {GGML_TYPE_F32}) : nullptr;
    stride = stride_;
    padding = padding_;
    dilation = dilation_;
}

ggml_tensor * Conv1d::forward(ggml_context * ctx, ggml_tensor * x) const {
    const int64_t k = weight->ne[0], in_ch = weight->ne[1], out_ch = weight->ne[2];
    // cols: [K*IC, T_out], k fastest within each input channel (the order of weight's rows)
    ggml_tensor * cols = ggml_im2col(ctx, weight, x, stride, 0, padding, 0, dilation, 0, false, weight->type);
    // y: [T_out, OC]
    ggml_tensor * y = ggml_mul_mat(ctx, ggml_reshape_2d(ctx, cols, k * in_ch, cols->ne[1]),
                                   ggml_reshape_2d(ctx, weight, k * in_ch, out_ch));
    if (bias) y = ggml_add(ctx, y, ggml_reshape_2d(ctx, bias, 1, out_ch));
    return y;
}

void ConvTranspose1d::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t in_ch,
                           int64_t out_ch_, int64_t kernel, int stride_, int padding_, int output_padding_,
                           bool has_bias) {
    if (output_padding_ > padding_) {
        // The overlap-add below only crops; growing past the full output is not implemented.
        throw ModelFormatError(prefix + ": output_padding > padding is not supported");
    }
    ggml_tensor * weight = file.tensor(prefix + ".weight", {kernel, out_ch_, in_ch}, {GGML_TYPE_F32, GGML_TYPE_F16});
    cols = derived.conv_transpose_cols(weight);
    bias = has_bias ? file.tensor(prefix + ".bias", {out_ch_}, {GGML_TYPE_F32}) : nullptr;
    out_ch = out_ch_;
    stride = stride_;
    padding = padding_;
    output_padding = output_padding_;
}

ggml_tensor * ConvTranspose1d::forward(ggml_context * ctx, ggml_tensor * x) const {
    // xt: [IC, T]; col: [K*OC, T], every input frame's contribution to K output samples per channel
    ggml_tensor * xt = ggml_cont(ctx, ggml_transpose(ctx, x));
    ggml_tensor * col = ggml_mul_mat(ctx, cols, xt);
    // PyTorch crops `padding` samples left and `padding - output_padding` right of the full
    // overlap-add; col2im_1d crops symmetrically, so crop less and drop the extra left samples.
    ggml_tensor * y = ggml_col2im_1d(ctx, col, stride, (int) out_ch, padding - output_padding);
    if (output_padding > 0) {
        y = ggml_view_2d(ctx, y, y->ne[0] - output_padding, y->ne[1], y->nb[1], output_padding * y->nb[0]);
    }
    // y: [T*stride (for K = 2*stride), OC]
    if (bias) y = ggml_add(ctx, y, ggml_reshape_2d(ctx, bias, 1, out_ch));
    return y;
}

void Snake1d::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t channels) {
    alpha = file.tensor(prefix + ".alpha", {1, channels}, {GGML_TYPE_F32});
    inv_alpha = derived.snake_inv_alpha(alpha);
}

ggml_tensor * Snake1d::forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const {
    return ov_snake(ctx, x, alpha, inv_alpha, opt.fused_snake);
}

// DAC's residual units always use kernel 7.
constexpr int kResidualKernel = 7;

void DacResidualUnit::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t channels,
                           int dilation) {
    snake1.load(file, derived, prefix + ".snake1", channels);
    conv1.load(file, prefix + ".conv1", channels, channels, kResidualKernel, 1, (kResidualKernel - 1) / 2 * dilation,
               dilation);
    snake2.load(file, derived, prefix + ".snake2", channels);
    conv2.load(file, prefix + ".conv2", channels, channels, 1, 1, 0, 1);
}

ggml_tensor * DacResidualUnit::forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const {
    ggml_tensor * y = conv1.forward(ctx, snake1.forward(ctx, x, opt));
    y = conv2.forward(ctx, snake2.forward(ctx, y, opt));
    return ggml_add(ctx, x, y);
}

void Linear::load(GGUFFile & file, const std::string & prefix, int64_t in_features, int64_t out_features,
                  bool has_bias) {
    weight = file.tensor(prefix + ".weight", {in_features, out_features}, {GGML_TYPE_F32, GGML_TYPE_F16});
    bias = has_bias ? file.tensor(prefix + ".bias", {out_features}, {GGML_TYPE_F32}) : nullptr;
}

ggml_tensor * Linear::forward(ggml_context * ctx, ggml_tensor * x) const {
    ggml_tensor * y = ggml_mul_mat(ctx, weight, x);
    if (bias) y = ggml_add(ctx, y, bias);
    return y;
}

}  // namespace ov
