#include "nn/layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "activation.h"
#include "direct_conv.h"
#include "dwconv.h"
#include "gelu_erf.h"
#include "ggml-alloc.h"
#include "linear.h"
#include "norm.h"
#include "runtime/errors.h"
#include "snake.h"
#include "unfold.h"

namespace ov {

// Snake1d's epsilon in 1 / (alpha + eps), as in DAC.
constexpr float kSnakeEps = 1e-9f;
// Bytes of a CPU cache line: the alignment that spares vector loads of weights a line split.
constexpr uintptr_t kCacheLine = 64;

// Destination element (i0, i1, i2) of an n[0] x n[1] x n[2] array <- source element
// i0*step[0] + i1*step[1] + i2*step[2], elements of ES bytes. Square tiles keep both sides in
// cache when one is strided (a transpose): element-wise, the LM's F32 projections took seconds.
template <size_t ES>
static void permute_copy(const char * in, char * out, const int64_t n[3], const int64_t step[3]) {
    constexpr int64_t kTile = 32;
    for (int64_t i2 = 0; i2 < n[2]; ++i2) {
        for (int64_t b1 = 0; b1 < n[1]; b1 += kTile) {
            for (int64_t b0 = 0; b0 < n[0]; b0 += kTile) {
                for (int64_t i1 = b1; i1 < std::min(b1 + kTile, n[1]); ++i1) {
                    for (int64_t i0 = b0; i0 < std::min(b0 + kTile, n[0]); ++i0) {
                        std::memcpy(out + ((i2 * n[1] + i1) * n[0] + i0) * ES,
                                    in + (i0 * step[0] + i1 * step[1] + i2 * step[2]) * ES, ES);
                    }
                }
            }
        }
    }
}

DerivedWeights::DerivedWeights(size_t max_tensors, bool stock_ops) : stock_ops_(stock_ops) {
    ggml_init_params params = {max_tensors * ggml_tensor_overhead(), nullptr, /*no_alloc =*/true};
    ctx_ = ggml_init(params);
    if (!ctx_) throw std::runtime_error("ggml_init failed for the derived weights");
}

DerivedWeights::~DerivedWeights() {
    release_device_memory(ggml_backend_buffer_free, buffer_);
    if (ctx_) ggml_free(ctx_);
}

ggml_tensor * DerivedWeights::add(ggml_tensor * src, ggml_type type, int64_t ne0, int64_t ne1, std::vector<int> perm) {
    ggml_tensor * dst = ggml_new_tensor_2d(ctx_, type, ne0, ne1);
    ggml_format_name(dst, "%s~", ggml_get_name(src));
    jobs_.push_back({src, dst, std::move(perm)});
    return dst;
}

ggml_tensor * DerivedWeights::conv_weight(ggml_tensor * w, bool direct) {
    // src axes: 0 = k, 1 = ic, 2 = oc
    const int64_t k = w->ne[0], ic = w->ne[1], oc = w->ne[2];
    return direct ? add(w, w->type, oc, k * ic, {2, 1, 0}) : add(w, w->type, k * ic, oc, {1, 0, 2});
}

ggml_tensor * DerivedWeights::conv_transpose_weight(ggml_tensor * w, bool direct) {
    // src axes: 0 = k, 1 = oc, 2 = ic
    const int64_t k = w->ne[0], oc = w->ne[1], ic = w->ne[2];
    return direct ? add(w, w->type, k * oc, ic, {1, 0, 2}) : add(w, w->type, ic, k * oc, {2, 1, 0});
}

ggml_tensor * DerivedWeights::snake_inv_alpha(ggml_tensor * alpha) {
    return add(alpha, GGML_TYPE_F32, ggml_nelements(alpha), 1, {});
}

ggml_tensor * DerivedWeights::concat(const std::vector<ggml_tensor *> & parts) {
    int64_t n = 0;
    for (ggml_tensor * t : parts) {
        if (t->type != parts[0]->type) {
            throw ModelFormatError(std::string("tensors ") + ggml_get_name(parts[0]) + " (" +
                                   ggml_type_name(parts[0]->type) + ") and " + ggml_get_name(t) + " (" +
                                   ggml_type_name(t->type) + ") must share a type to be joined");
        }
        n += ggml_nelements(t);
    }
    ggml_tensor * dst = add(parts[0], parts[0]->type, n, 1, {});
    // Parts already laid end to end in one buffer (a GGUF stores a layer's tensors in order)
    // alias it, no copy, if they start on a cache line: the LM's BF16 step ran ~4% slower on
    // weights at gguf's default 32-byte alignment than on an aligned copy.
    bool adjacent = parts[0]->buffer != nullptr && (uintptr_t) parts[0]->data % kCacheLine == 0;
    for (size_t i = 1; i < parts.size(); ++i) {
        adjacent = adjacent && parts[i]->buffer == parts[0]->buffer &&
                   (const char *) parts[i]->data == (const char *) parts[i - 1]->data + ggml_nbytes(parts[i - 1]);
    }
    if (adjacent) {
        jobs_.pop_back();
        if (ggml_backend_tensor_alloc(parts[0]->buffer, dst, parts[0]->data) != GGML_STATUS_SUCCESS) {
            throw std::runtime_error(std::string("cannot alias the joined tensor ") + ggml_get_name(dst));
        }
        return dst;
    }
    jobs_.back().parts = parts;
    return dst;
}

ggml_tensor * DerivedWeights::computed(ggml_tensor * src, int64_t ne0, int64_t ne1,
                                       std::function<void(const float *, float *)> fill) {
    if (src->type != GGML_TYPE_F32) {
        throw ModelFormatError(std::string("tensor ") + ggml_get_name(src) + " must be F32, got " +
                               ggml_type_name(src->type));
    }
    ggml_tensor * dst = add(src, GGML_TYPE_F32, ne0, ne1, {});
    jobs_.back().fill = std::move(fill);
    return dst;
}

void DerivedWeights::materialize(const Backend & backend) {
    if (jobs_.empty()) return;
    buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend.get());
    if (!buffer_) throw std::runtime_error("cannot allocate backend memory for the derived weights");
    ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    // Host buffers (a CPU backend's, the mmapped file) are read and written in place: the LM's
    // joined projections are about 1 GB.
    const bool dst_host = ggml_backend_buffer_is_host(buffer_);
    std::vector<char> in_copy, out_copy;
    for (const Job & job : jobs_) {
        const char * in = (const char *) job.src->data;
        if (!ggml_backend_buffer_is_host(job.src->buffer)) {
            in_copy.resize(ggml_nbytes(job.src));
            backend.download(job.src, in_copy.data(), in_copy.size());
            in = in_copy.data();
        }
        char * out = (char *) job.dst->data;
        if (!dst_host) {
            out_copy.resize(ggml_nbytes(job.dst));
            out = out_copy.data();
        }
        if (job.fill) {
            job.fill((const float *) in, (float *) out);
        } else if (!job.parts.empty()) {
            size_t offset = 0;
            for (ggml_tensor * t : job.parts) {
                backend.download(t, out + offset, ggml_nbytes(t));
                offset += ggml_nbytes(t);
            }
        } else if (job.perm.empty()) {
            const float * a = (const float *) in;
            float * inv = (float *) out;
            for (int64_t c = 0; c < ggml_nelements(job.src); ++c) inv[c] = 1.0f / (a[c] + kSnakeEps);
        } else {
            const size_t es = ggml_type_size(job.src->type);
            const int64_t src_stride[3] = {1, job.src->ne[0], job.src->ne[0] * job.src->ne[1]};
            const int64_t n[3] = {job.src->ne[job.perm[0]], job.src->ne[job.perm[1]], job.src->ne[job.perm[2]]};
            const int64_t step[3] = {src_stride[job.perm[0]], src_stride[job.perm[1]], src_stride[job.perm[2]]};
            GGML_ASSERT(es == 4 || es == 2);  // F32 or F16
            (es == 4 ? permute_copy<4> : permute_copy<2>)(in, out, n, step);
        }
        if (!dst_host) backend.upload(job.dst, out, ggml_nbytes(job.dst));
    }
}

// The direct op runs F32 weights whose output channels fill whole vectors.
static bool use_direct(const ggml_tensor * w, int64_t out_ch) {
    return w->type == GGML_TYPE_F32 && out_ch % OV_DIRECT_CONV_LANES == 0;
}

int64_t conv1d_out_len(int64_t n, int kernel, int stride, int padding, int dilation) {
    const int64_t span = n + 2 * padding - (int64_t) dilation * (kernel - 1) - 1;
    return span < 0 ? 0 : span / stride + 1;
}

void Conv1d::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t in_ch,
                  int64_t out_ch_, int kernel_, int stride_, int padding_, int dilation_, bool has_bias) {
    ggml_tensor * w =
        file.tensor(join_name(prefix, "weight"), {kernel_, in_ch, out_ch_}, {GGML_TYPE_F32, GGML_TYPE_F16});
    stock = derived.stock_ops();
    direct = !stock && use_direct(w, out_ch_);
    // With one tap the file layout already is the mul_mat one; im2col's columns match it always.
    weight = (kernel_ == 1 && !direct) || stock ? w : derived.conv_weight(w, direct);
    bias = has_bias ? file.tensor(join_name(prefix, "bias"), {out_ch_}, {GGML_TYPE_F32}) : nullptr;
    out_ch = out_ch_;
    kernel = kernel_;
    stride = stride_;
    padding = padding_;
    dilation = dilation_;
}

ggml_tensor * Conv1d::forward(ggml_context * ctx, ggml_tensor * x, ggml_tensor * residual) const {
    if (direct) return ov_conv_1d_direct(ctx, x, weight, bias, residual, kernel, stride, padding, dilation);
    const bool pointwise = kernel == 1 && stride == 1 && padding == 0;
    // cols: [K*IC, T_out]; im2col reads time innermost ([T, IC]) and writes row ic*K + k.
    ggml_tensor * cols = pointwise ? x
                         : stock   ? ggml_im2col(ctx, weight, ggml_cont(ctx, ggml_transpose(ctx, x)), stride, 0,
                                                 padding, 0, dilation, 0, false, GGML_TYPE_F32)
                                   : ov_unfold_1d(ctx, x, kernel, stride, padding, dilation);
    // y: [OC, T_out]
    ggml_tensor * y = ggml_mul_mat(ctx, ggml_reshape_2d(ctx, weight, cols->ne[0], out_ch), cols);
    if (bias) y = ggml_add(ctx, y, bias);
    if (residual) y = ggml_add(ctx, y, residual);
    return y;
}

void ConvTranspose1d::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t in_ch,
                           int64_t out_ch_, int kernel_, int stride_, int padding_, int output_padding_,
                           bool has_bias) {
    ggml_tensor * w =
        file.tensor(join_name(prefix, "weight"), {kernel_, out_ch_, in_ch}, {GGML_TYPE_F32, GGML_TYPE_F16});
    stock = derived.stock_ops();
    direct = !stock && use_direct(w, kernel_ * out_ch_);
    weight = stock ? w : derived.conv_transpose_weight(w, direct);
    bias = has_bias ? file.tensor(join_name(prefix, "bias"), {out_ch_}, {GGML_TYPE_F32}) : nullptr;
    out_ch = out_ch_;
    kernel = kernel_;
    stride = stride_;
    padding = padding_;
    output_padding = output_padding_;
}

ggml_tensor * ConvTranspose1d::forward(ggml_context * ctx, ggml_tensor * x) const {
    const int64_t t_out = (x->ne[1] - 1) * stride + kernel - 2 * padding + output_padding;
    if (stock) {
        // full: [(T-1)*stride + K, OC], time innermost; padding cropped from the front, the end
        // kept up to output_padding (<= padding) steps past the symmetric crop.
        ggml_tensor * full = ggml_conv_transpose_1d(ctx, weight, ggml_cont(ctx, ggml_transpose(ctx, x)), stride, 0, 1);
        ggml_tensor * y = ggml_view_2d(ctx, full, t_out, out_ch, full->nb[1], padding * full->nb[0]);
        y = ggml_cont(ctx, ggml_transpose(ctx, y));  // [OC, T_out]
        return bias ? ggml_add(ctx, y, bias) : y;
    }
    // cols: [K*OC, T], input frame t's contribution to K output steps of every channel
    ggml_tensor * cols = direct ? ov_conv_1d_direct(ctx, x, weight, nullptr, nullptr, 1, 1, 0, 1)
                                : ggml_mul_mat(ctx, weight, x);
    // y: [OC, T_out], the overlap-add cropped by padding (output_padding adds steps at the end)
    return ov_fold_1d(ctx, cols, bias, (int) out_ch, stride, padding, t_out);
}

void Snake1d::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t channels) {
    alpha = file.tensor(join_name(prefix, "alpha"), {1, channels}, {GGML_TYPE_F32});
    inv_alpha = derived.snake_inv_alpha(alpha);
}

ggml_tensor * Snake1d::forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const {
    return ov_snake(ctx, x, alpha, inv_alpha, opt.fused_snake && !opt.stock_ops);
}

void Linear::load(GGUFFile & file, const std::string & prefix, int64_t in_features, int64_t out_features,
                  bool has_bias) {
    weight = file.tensor(join_name(prefix, "weight"), {in_features, out_features}, {GGML_TYPE_F32, GGML_TYPE_F16});
    bias = has_bias ? file.tensor(join_name(prefix, "bias"), {out_features}, {GGML_TYPE_F32}) : nullptr;
}

void Linear::load(GGUFFile & file, const std::string & prefix, int64_t in_features, int64_t out_features,
                  bool has_bias, const std::vector<ggml_type> & types, bool allow_packed) {
    weight = file.tensor(join_name(prefix, "weight"), {in_features, out_features}, types);
    packed = allow_packed && ov_linear_preferred(weight->type);
    bias = has_bias ? file.tensor(join_name(prefix, "bias"), {out_features}, {GGML_TYPE_F32}) : nullptr;
}

ggml_tensor * Linear::forward(ggml_context * ctx, ggml_tensor * x) const {
    // One input column is a matrix-vector product, where ggml's mul_mat is the faster: Sopro's
    // one-token decode step (full size, F32, 2 threads) took 25 ms with ov_linear, 13 ms without.
    const bool use_packed = packed && ggml_nrows(x) > 1;
    ggml_tensor * y = use_packed ? ov_linear(ctx, x, {weight}) : ggml_mul_mat(ctx, weight, x);
    if (bias) y = ggml_add(ctx, y, bias);
    return y;
}

void LayerNorm::load(GGUFFile & file, const std::string & prefix, int64_t n, float eps_) {
    weight = file.tensor(join_name(prefix, "weight"), {n}, {GGML_TYPE_F32});
    bias = file.tensor(join_name(prefix, "bias"), {n}, {GGML_TYPE_F32});
    eps = eps_;
}

ggml_tensor * LayerNorm::forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt,
                                 ggml_tensor * residual, ggml_tensor * x_bias) const {
    if (!opt.stock_ops) return ov_layer_norm(ctx, x, weight, bias, eps, residual, x_bias);
    if (x_bias) x = ggml_add(ctx, x, x_bias);
    if (residual) x = ggml_add(ctx, x, residual);
    return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, eps), weight), bias);
}

void GroupedConv1d::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t in_ch_,
                         int64_t out_ch_, int groups_, int kernel_, int pad_left_, int pad_right_, int dilation_,
                         bool has_bias) {
    if (groups_ < 1 || in_ch_ % groups_ != 0 || out_ch_ % groups_ != 0) {
        throw ModelFormatError(prefix + ": " + std::to_string(groups_) + " groups do not divide " +
                               std::to_string(in_ch_) + " -> " + std::to_string(out_ch_) + " channels");
    }
    ggml_tensor * w = file.tensor(join_name(prefix, "weight"), {kernel_, in_ch_ / groups_, out_ch_},
                                  {GGML_TYPE_F32, GGML_TYPE_F16});
    const bool f32 = !derived.stock_ops() && w->type == GGML_TYPE_F32;
    kind = f32 && groups_ == in_ch_ && groups_ == out_ch_                  ? Kind::depthwise
           : f32 && (out_ch_ / groups_) % OV_DIRECT_CONV_LANES == 0 ? Kind::direct
                                                                           : Kind::im2col;
    // Both of our ops take [OC, K*IC/groups]; for depthwise that is [C, K].
    weight = kind == Kind::im2col ? w : derived.conv_weight(w, true);
    bias = has_bias ? file.tensor(join_name(prefix, "bias"), {out_ch_}, {GGML_TYPE_F32}) : nullptr;
    in_ch = in_ch_;
    out_ch = out_ch_;
    groups = groups_;
    kernel = kernel_;
    pad_left = pad_left_;
    pad_right = pad_right_;
    dilation = dilation_;
}

ggml_tensor * GroupedConv1d::forward(ggml_context * ctx, ggml_tensor * x) const {
    const int64_t t_out = x->ne[1] + pad_left + pad_right - (int64_t) dilation * (kernel - 1);
    if (kind == Kind::depthwise) return ov_conv_1d_dw(ctx, x, weight, bias, pad_left, pad_right, dilation);
    if (kind == Kind::direct) {
        // The op pads both ends by the larger side; the steps the other side adds are cropped.
        const int pad = std::max(pad_left, pad_right);
        ggml_tensor * y = ov_conv_1d_direct(ctx, x, weight, bias, nullptr, kernel, 1, pad, dilation, groups);
        return pad_left == pad_right ? y : ggml_view_2d(ctx, y, out_ch, t_out, y->nb[1], (pad - pad_left) * y->nb[1]);
    }
    // xt: [T + pads, IC/groups, groups], time innermost as im2col reads it; cols: [K*IC/groups,
    // T_out, groups], row ic*K + k, which is the file's weight order.
    ggml_tensor * xt = ggml_pad_ext(ctx, ggml_cont(ctx, ggml_transpose(ctx, x)), pad_left, pad_right, 0, 0, 0, 0, 0, 0);
    xt = ggml_reshape_3d(ctx, xt, xt->ne[0], in_ch / groups, groups);
    ggml_tensor * cols = ggml_im2col(ctx, weight, xt, 1, 0, 0, 0, dilation, 0, false, GGML_TYPE_F32);
    ggml_tensor * w = ggml_reshape_3d(ctx, weight, kernel * (in_ch / groups), out_ch / groups, groups);
    ggml_tensor * y = ggml_mul_mat(ctx, w, cols);  // [OC/groups, T_out, groups]
    y = ggml_reshape_2d(ctx, ggml_cont(ctx, ggml_permute(ctx, y, 0, 2, 1, 3)), out_ch, t_out);
    return bias ? ggml_add(ctx, y, bias) : y;
}

ggml_tensor * group_norm_one(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias,
                             float eps) {
    ggml_tensor * flat = ggml_norm(ctx, ggml_reshape_1d(ctx, ggml_cont(ctx, x), ggml_nelements(x)), eps);
    ggml_tensor * y = ggml_reshape_2d(ctx, flat, x->ne[0], x->ne[1]);
    return ggml_add(ctx, ggml_mul(ctx, y, weight), bias);
}

ggml_tensor * gelu_tanh(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) {
    if (!opt.stock_ops) return ov_gelu_tanh(ctx, x);
    // x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
    ggml_tensor * inner = ggml_add(ctx, x, ggml_scale(ctx, ggml_mul(ctx, ggml_sqr(ctx, x), x), 0.044715f));
    ggml_tensor * t = ggml_tanh(ctx, ggml_scale(ctx, inner, 0.79788456080286536f));
    return ggml_mul(ctx, ggml_scale(ctx, x, 0.5f), ggml_scale_bias(ctx, t, 1.0f, 1.0f));
}

ggml_tensor * mish(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) {
    if (!opt.stock_ops) return ov_mish(ctx, x);
    return ggml_mul(ctx, x, ggml_tanh(ctx, ggml_softplus(ctx, x)));
}

std::vector<float> istft_basis(const float * window, int n_fft) {
    const int n_bins = n_fft / 2 + 1;
    std::vector<float> basis((size_t) n_fft * 2 * n_bins);
    const double two_pi = 2.0 * 3.14159265358979323846;
    for (int n = 0; n < n_fft; ++n) {
        float * row = basis.data() + (size_t) n * 2 * n_bins;
        for (int k = 0; k < n_bins; ++k) {
            // Bins 1..n_fft/2-1 stand for their conjugate mirror too; k*n reduced mod n_fft keeps
            // the angle exact.
            const bool edge = k == 0 || 2 * k == n_fft;
            const double scale = (edge ? 1.0 : 2.0) * window[n] / n_fft;
            const double angle = two_pi * (double) (((int64_t) k * n) % n_fft) / n_fft;
            row[k] = (float) (scale * std::cos(angle));
            row[n_bins + k] = edge ? 0.0f : (float) (-scale * std::sin(angle));
        }
    }
    return basis;
}

void Istft::load(GGUFFile & file, DerivedWeights & derived, const std::string & window_name, int n_fft_, int hop_) {
    if (n_fft_ < 2 || n_fft_ % 2 != 0 || hop_ < 1 || hop_ > n_fft_) {
        throw ModelFormatError("ISTFT needs an even n_fft >= 2 and 1 <= hop <= n_fft, got n_fft " +
                               std::to_string(n_fft_) + ", hop " + std::to_string(hop_));
    }
    ggml_tensor * window = file.tensor(window_name, {n_fft_}, {GGML_TYPE_F32});
    const int n_bins = n_fft_ / 2 + 1;
    basis = derived.computed(window, 2 * n_bins, n_fft_, [n_fft_](const float * w, float * dst) {
        const std::vector<float> b = istft_basis(w, n_fft_);
        std::copy(b.begin(), b.end(), dst);
    });
    window_sq = derived.computed(window, n_fft_, 1, [n_fft_](const float * w, float * dst) {
        for (int n = 0; n < n_fft_; ++n) dst[n] = w[n] * w[n];
    });
    n_fft = n_fft_;
    hop = hop_;
}

ggml_tensor * Istft::forward(ggml_context * ctx, ggml_tensor * spec, const GraphOptions & opt) const {
    return istft(ctx, spec, basis, window_sq, hop, opt);
}

ggml_tensor * istft(ggml_context * ctx, ggml_tensor * spec, ggml_tensor * basis, ggml_tensor * window_sq, int hop,
                    const GraphOptions & opt) {
    const int64_t n_fft = basis->ne[1], n_frames = spec->ne[1];
    const int64_t n_out = (n_frames - 1) * hop;
    // frames: [n_fft, T], each windowed; env_cols: the squared window once per frame
    ggml_tensor * frames = ggml_mul_mat(ctx, basis, spec);
    ggml_tensor * env_cols = ggml_repeat(ctx, ggml_reshape_2d(ctx, window_sq, n_fft, 1), frames);
    const auto overlap_add = [&](ggml_tensor * cols) {
        ggml_tensor * y = opt.stock_ops ? ggml_col2im_1d(ctx, cols, hop, 1, (int) (n_fft / 2))
                                        : ov_fold_1d(ctx, cols, nullptr, 1, hop, (int) (n_fft / 2), n_out);
        return ggml_reshape_1d(ctx, y, n_out);
    };
    // torch.istft refuses an envelope under 1e-11 anywhere in the crop; a Hann window at a hop of
    // n_fft/4 (the vocoder's) overlap-adds to 1.5 everywhere there.
    return ggml_div(ctx, overlap_add(frames), overlap_add(env_cols));
}

ggml_tensor * gelu_erf(ggml_context * ctx, ggml_tensor * x, ggml_tensor * bias, const GraphOptions & opt) {
    if (!opt.stock_ops) return ov_gelu_erf(ctx, x, bias);
    return ggml_gelu_erf(ctx, bias ? ggml_add(ctx, x, bias) : x);
}

ggml_tensor * channel_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias, float eps,
                           const GraphOptions & opt) {
    if (!opt.stock_ops) return ov_channel_norm(ctx, x, weight, bias, eps);
    // ggml_norm works along ne0: normalise [T, C], then back to [C, T].
    ggml_tensor * t = ggml_norm(ctx, ggml_cont(ctx, ggml_transpose(ctx, x)), eps);
    return ggml_add(ctx, ggml_mul(ctx, ggml_cont(ctx, ggml_transpose(ctx, t)), weight), bias);
}

ggml_tensor * attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float scale,
                        const GraphOptions & opt) {
    if (!opt.stock_ops) {
        ggml_tensor * kqv = ggml_flash_attn_ext(ctx, q, k, v, nullptr, scale, 0.0f, 0.0f);
        ggml_flash_attn_ext_set_prec(kqv, GGML_PREC_F32);
        return kqv;
    }
    ggml_tensor * kq = ggml_mul_mat(ctx, k, q);                     // [len_k, len_q, n_head]
    kq = ggml_soft_max_ext(ctx, kq, nullptr, scale, 0.0f);
    ggml_tensor * vt = ggml_cont(ctx, ggml_transpose(ctx, v));      // [len_k, hd, n_head_kv]
    ggml_tensor * kqv = ggml_mul_mat(ctx, vt, kq);                  // [hd, len_q, n_head]
    return ggml_cont(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3));      // [hd, n_head, len_q]
}

ggml_tensor * packed_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                               const std::vector<int64_t> & segments, float scale, const GraphOptions & opt) {
    // Tokens [start, start + len) of x, heads moved outermost: [hd, len, heads].
    const auto segment = [&](ggml_tensor * x, int64_t start, int64_t len) {
        return ggml_permute(ctx, ggml_view_3d(ctx, x, x->ne[0], x->ne[1], len, x->nb[1], x->nb[2], start * x->nb[2]),
                            0, 2, 1, 3);
    };
    ggml_tensor * out = nullptr;
    int64_t start = 0;
    for (size_t is = 0; is < segments.size(); ++is) {
        const int64_t len = segments[is];
        ggml_tensor * kqv = attention(ctx, segment(q, start, len), segment(k, start, len), segment(v, start, len),
                                      scale, opt);
        ggml_format_name(kqv, "attn.seg%zu", is);  // [hd, n_head, len]
        out = out ? ggml_concat(ctx, out, kqv, 2) : kqv;
        start += len;
    }
    return out;
}

}  // namespace ov
