#include "conv.h"

#include <cstring>

#include "errors.h"
#include "ggml-alloc.h"
#include "snake.h"
#include "unfold.h"

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

ggml_tensor * DerivedWeights::conv_unfold_weight(ggml_tensor * weight) {
    return add(Kind::ConvUnfold, weight, weight->type, weight->ne[0] * weight->ne[1], weight->ne[2]);
}

ggml_tensor * DerivedWeights::conv_transpose_weight(ggml_tensor * weight) {
    return add(Kind::ConvTranspose, weight, weight->type, weight->ne[2], weight->ne[0] * weight->ne[1]);
}

ggml_tensor * DerivedWeights::snake_inv_alpha(ggml_tensor * alpha) {
    return add(Kind::SnakeInvAlpha, alpha, GGML_TYPE_F32, ggml_nelements(alpha), 1);
}

void DerivedWeights::transform(Kind kind, const ggml_tensor * src, const char * in, char * out) {
    const int64_t n0 = src->ne[0], n1 = src->ne[1], n2 = src->ne[2];
    const size_t es = ggml_type_size(src->type);
    switch (kind) {
        case Kind::ConvUnfold:
            // (oc, ic, k) at (oc*IC + ic)*K + k -> (oc, k, ic) at (oc*K + k)*IC + ic
            for (int64_t oc = 0; oc < n2; ++oc)
                for (int64_t ic = 0; ic < n1; ++ic)
                    for (int64_t k = 0; k < n0; ++k)
                        std::memcpy(out + ((oc * n0 + k) * n1 + ic) * es, in + ((oc * n1 + ic) * n0 + k) * es, es);
            break;
        case Kind::ConvTranspose:
            // (ic, oc, k) at (ic*OC + oc)*K + k -> (k, oc, ic) at (k*OC + oc)*IC + ic
            for (int64_t ic = 0; ic < n2; ++ic)
                for (int64_t oc = 0; oc < n1; ++oc)
                    for (int64_t k = 0; k < n0; ++k)
                        std::memcpy(out + ((k * n1 + oc) * n2 + ic) * es, in + ((ic * n1 + oc) * n0 + k) * es, es);
            break;
        case Kind::SnakeInvAlpha:
            for (int64_t c = 0; c < ggml_nelements(src); ++c) {
                ((float *) out)[c] = 1.0f / (((const float *) in)[c] + kSnakeEps);
            }
            break;
    }
}

void DerivedWeights::materialize(const Backend & backend) {
    if (jobs_.empty()) return;
    buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend.get());
    if (!buffer_) throw std::runtime_error("cannot allocate backend memory for the derived weights");
    ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    std::vector<char> in, out;
    for (const Job & job : jobs_) {
        in.resize(ggml_nbytes(job.src));
        out.resize(ggml_nbytes(job.dst));
        ggml_backend_tensor_get(job.src, in.data(), 0, in.size());
        transform(job.kind, job.src, in.data(), out.data());
        ggml_backend_tensor_set(job.dst, out.data(), 0, out.size());
    }
}

void Conv1d::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t in_ch,
                  int64_t out_ch_, int kernel_, int stride_, int padding_, int dilation_, bool has_bias) {
    ggml_tensor * w = file.tensor(prefix + ".weight", {kernel_, in_ch, out_ch_}, {GGML_TYPE_F32, GGML_TYPE_F16});
    // With one tap the file layout already is the unfolded one.
    weight = kernel_ == 1 ? w : derived.conv_unfold_weight(w);
    bias = has_bias ? file.tensor(prefix + ".bias", {out_ch_}, {GGML_TYPE_F32}) : nullptr;
    out_ch = out_ch_;
    kernel = kernel_;
    stride = stride_;
    padding = padding_;
    dilation = dilation_;
}

ggml_tensor * Conv1d::forward(ggml_context * ctx, ggml_tensor * x) const {
    const bool pointwise = kernel == 1 && stride == 1 && padding == 0;
    // cols: [K*IC, T_out]
    ggml_tensor * cols = pointwise ? x : ov_unfold_1d(ctx, x, kernel, stride, padding, dilation);
    // y: [OC, T_out]
    ggml_tensor * y = ggml_mul_mat(ctx, ggml_reshape_2d(ctx, weight, cols->ne[0], out_ch), cols);
    if (bias) y = ggml_add(ctx, y, bias);
    return y;
}

void ConvTranspose1d::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t in_ch,
                           int64_t out_ch_, int kernel_, int stride_, int padding_, int output_padding_,
                           bool has_bias) {
    ggml_tensor * w = file.tensor(prefix + ".weight", {kernel_, out_ch_, in_ch}, {GGML_TYPE_F32, GGML_TYPE_F16});
    weight = derived.conv_transpose_weight(w);
    bias = has_bias ? file.tensor(prefix + ".bias", {out_ch_}, {GGML_TYPE_F32}) : nullptr;
    out_ch = out_ch_;
    kernel = kernel_;
    stride = stride_;
    padding = padding_;
    output_padding = output_padding_;
}

ggml_tensor * ConvTranspose1d::forward(ggml_context * ctx, ggml_tensor * x) const {
    // cols: [K*OC, T], input frame t's contribution to K output steps of every channel
    ggml_tensor * cols = ggml_mul_mat(ctx, weight, x);
    // y: [OC, T_out], the overlap-add cropped by padding (output_padding adds steps at the end)
    const int64_t t_out = (x->ne[1] - 1) * stride + kernel - 2 * padding + output_padding;
    return ov_fold_1d(ctx, cols, bias, (int) out_ch, stride, padding, t_out);
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
    conv1.load(file, derived, prefix + ".conv1", channels, channels, kResidualKernel, 1,
               (kResidualKernel - 1) / 2 * dilation, dilation);
    snake2.load(file, derived, prefix + ".snake2", channels);
    conv2.load(file, derived, prefix + ".conv2", channels, channels, 1, 1, 0, 1);
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
