// _core.testing op hooks: our custom ggml ops run one at a time, for tests against numpy.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <pybind11/pybind11.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "activation.h"
#include "attention.h"
#include "bindings/registry.h"
#include "custom_op.h"
#include "direct_conv.h"
#include "gelu_erf.h"
#include "isa.h"
#include "linear.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "nn/layers.h"
#include "norm.h"
#include "runtime/errors.h"
#include "rvq_encode.h"
#include "snake.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

using F32Array = py::array_t<float, py::array::c_style | py::array::forcecast>;
using ContextPtr = std::unique_ptr<ggml_context, decltype(&ggml_free)>;

ContextPtr new_context(size_t n_tensors = 16) {
    ggml_init_params params = {n_tensors * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, /*no_alloc =*/true};
    return ContextPtr(ggml_init(params), ggml_free);
}

// Computes `out` on a CPU backend of n_threads after uploading `inputs`; returns it as numpy
// (ggml's shape reversed): float32, or int32 for an I32 result. With `seconds`, computes it
// `repeats` times more and appends each compute's wall time (benchmarks).
py::array run(ggml_context * ctx, ggml_tensor * out, int n_threads,
             const std::vector<std::pair<ggml_tensor *, const void *>> & inputs, std::vector<double> * seconds = nullptr,
             int repeats = 0) {
    ggml_cgraph * graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, out);
    std::unique_ptr<ggml_backend, decltype(&ggml_backend_free)> cpu(ggml_backend_cpu_init(), ggml_backend_free);
    ggml_backend_cpu_set_n_threads(cpu.get(), n_threads);
    std::unique_ptr<ggml_backend_buffer, decltype(&ggml_backend_buffer_free)> buf(
        ggml_backend_alloc_ctx_tensors(ctx, cpu.get()), ggml_backend_buffer_free);
    for (const auto & [t, data] : inputs) ggml_backend_tensor_set(t, data, 0, ggml_nbytes(t));
    {
        py::gil_scoped_release release;
        for (int i = 0; i <= (seconds ? repeats : 0); ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            if (ggml_backend_graph_compute(cpu.get(), graph) != GGML_STATUS_SUCCESS) {
                throw std::runtime_error("graph compute failed");
            }
            const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
            if (seconds && i > 0) seconds->push_back(dt.count());
        }
    }
    py::array result = out->type == GGML_TYPE_I32 ? py::array(py::array_t<int32_t>({out->ne[1], out->ne[0]}))
                                                  : py::array(F32Array({out->ne[1], out->ne[0]}));
    ggml_backend_tensor_get(out, result.mutable_data(), 0, ggml_nbytes(out));
    return result;
}

// Snake on x (numpy (T, C) = ggml [C, T]) with per-channel alpha, fused or composed.
py::array snake(const F32Array & x, const F32Array & alpha, bool fused, int n_threads) {
    if (x.ndim() != 2 || alpha.ndim() != 1 || alpha.shape(0) != x.shape(1) || x.size() == 0) {
        throw ov::InvalidInput("snake: x must be (T, C) with T, C >= 1 and alpha (C,)");
    }
    const int64_t n_ch = x.shape(1), n_t = x.shape(0);
    ContextPtr ctx = new_context();
    ggml_tensor * xt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, n_ch, n_t);
    ggml_tensor * at = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n_ch);
    ggml_tensor * it = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n_ch);
    std::vector<float> inv(n_ch);
    for (int64_t c = 0; c < n_ch; ++c) inv[c] = 1.0f / (alpha.data()[c] + 1e-9f);
    ggml_tensor * y = ov_snake(ctx.get(), xt, at, it, fused);
    return run(ctx.get(), y, n_threads, {{xt, x.data()}, {at, alpha.data()}, {it, inv.data()}});
}

// ov_conv_1d_direct on x (T, IC) with weight (K*IC, OC) (row k*IC + ic), optional bias (OC,) and
// residual (T_out, OC).
py::array conv1d(const F32Array & x, const F32Array & weight, std::optional<F32Array> bias,
                std::optional<F32Array> residual, int stride, int padding, int dilation, int n_threads) {
    if (x.ndim() != 2 || weight.ndim() != 2 || x.size() == 0 || weight.shape(0) % x.shape(1) != 0 ||
        weight.shape(1) % OV_DIRECT_CONV_LANES != 0 || stride < 1 || dilation < 1 || padding < 0) {
        throw ov::InvalidInput("conv1d: need x (T, IC), weight (K*IC, OC) with OC a multiple of 4");
    }
    const int64_t n_t = x.shape(0), ic = x.shape(1), oc = weight.shape(1), kernel = weight.shape(0) / ic;
    const int64_t t_out = ov::conv1d_out_len(n_t, (int) kernel, stride, padding, dilation);
    if (t_out < 1) throw ov::InvalidInput("conv1d: input shorter than the kernel");
    if (bias && (bias->ndim() != 1 || bias->shape(0) != oc)) throw ov::InvalidInput("conv1d: bias must be (OC,)");
    if (residual && (residual->ndim() != 2 || residual->shape(0) != t_out || residual->shape(1) != oc)) {
        throw ov::InvalidInput("conv1d: residual must be (T_out, OC)");
    }
    ContextPtr ctx = new_context();
    ggml_tensor * xt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, ic, n_t);
    ggml_tensor * wt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, oc, kernel * ic);
    std::vector<std::pair<ggml_tensor *, const void *>> inputs = {{xt, x.data()}, {wt, weight.data()}};
    ggml_tensor * bt = nullptr;
    ggml_tensor * rt = nullptr;
    if (bias) {
        bt = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, oc);
        inputs.push_back({bt, bias->data()});
    }
    if (residual) {
        rt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, oc, t_out);
        inputs.push_back({rt, residual->data()});
    }
    ggml_tensor * y = ov_conv_1d_direct(ctx.get(), xt, wt, bt, rt, (int) kernel, stride, padding, dilation);
    return run(ctx.get(), y, n_threads, inputs);
}

// GroupedConv1d (depthwise, grouped or dense) on x (T, IC) with PyTorch's weight (OC, IC/groups,
// K) and optional bias (OC,), padded (pad_left, pad_right): impl "own" (our op for the shape, as
// the loader picks it) or "stock" (pad + im2col + batched mul_mat).
py::array grouped_conv1d(const F32Array & x, const F32Array & weight, std::optional<F32Array> bias, int groups,
                         int pad_left, int pad_right, int dilation, const std::string & impl, int n_threads) {
    if (x.ndim() != 2 || weight.ndim() != 3 || x.size() == 0 || weight.size() == 0 || groups < 1 ||
        x.shape(1) % groups != 0 || weight.shape(0) % groups != 0 || weight.shape(1) * groups != x.shape(1) ||
        pad_left < 0 || pad_right < 0 || dilation < 1) {
        throw ov::InvalidInput("grouped_conv1d: need x (T, IC), weight (OC, IC/groups, K), groups dividing IC and "
                               "OC, pads >= 0, dilation >= 1");
    }
    if (impl != "own" && impl != "stock") throw ov::InvalidInput("grouped_conv1d: impl must be 'own' or 'stock'");
    const int64_t n_t = x.shape(0), ic = x.shape(1), oc = weight.shape(0), icg = weight.shape(1), k = weight.shape(2);
    if (n_t + pad_left + pad_right - dilation * (k - 1) < 1) {
        throw ov::InvalidInput("grouped_conv1d: input shorter than the kernel");
    }
    if (bias && (bias->ndim() != 1 || bias->shape(0) != oc)) throw ov::InvalidInput("grouped_conv1d: bias must be (OC,)");
    ov::GroupedConv1d conv;
    conv.in_ch = ic;
    conv.out_ch = oc;
    conv.groups = groups;
    conv.kernel = (int) k;
    conv.pad_left = pad_left;
    conv.pad_right = pad_right;
    conv.dilation = dilation;
    using Kind = ov::GroupedConv1d::Kind;
    conv.kind = impl == "stock"                                      ? Kind::im2col
                : groups == ic && groups == oc                       ? Kind::depthwise
                : (oc / groups) % OV_DIRECT_CONV_LANES == 0          ? Kind::direct
                                                                     : Kind::im2col;
    // Our ops' layout [OC, K*IC/groups] (numpy (K*IC/groups, OC)), or the file's as it is.
    std::vector<float> rearranged;
    const float * w = weight.data();
    if (conv.kind != Kind::im2col) {
        rearranged.resize(weight.size());
        for (int64_t o = 0; o < oc; ++o) {
            for (int64_t i = 0; i < icg; ++i) {
                for (int64_t j = 0; j < k; ++j) rearranged[(j * icg + i) * oc + o] = w[(o * icg + i) * k + j];
            }
        }
        w = rearranged.data();
    }
    ContextPtr ctx = new_context(32);
    ggml_tensor * xt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, ic, n_t);
    conv.weight = conv.kind == Kind::im2col ? ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, k, icg, oc)
                                            : ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, oc, k * icg);
    std::vector<std::pair<ggml_tensor *, const void *>> inputs = {{xt, x.data()}, {conv.weight, w}};
    if (bias) {
        conv.bias = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, oc);
        inputs.push_back({conv.bias, bias->data()});
    }
    return run(ctx.get(), ggml_cont(ctx.get(), conv.forward(ctx.get(), xt)), n_threads, inputs);
}

// Throws unless x is (T, C) with T, C >= 1 and every vector in `per_channel` is (C,).
void check_tc(const char * op, const F32Array & x, std::initializer_list<const F32Array *> per_channel) {
    bool ok = x.ndim() == 2 && x.size() > 0;
    for (const F32Array * v : per_channel) ok = ok && v->ndim() == 1 && v->shape(0) == x.shape(1);
    if (!ok) throw ov::InvalidInput(std::string(op) + ": x must be (T, C) with T, C >= 1 and each vector (C,)");
}

// Exact GELU of x (T, C), plus bias (C,) first when given.
py::array gelu_erf(const F32Array & x, std::optional<F32Array> bias, int n_threads) {
    if (bias) check_tc("gelu_erf", x, {&*bias});
    else check_tc("gelu_erf", x, {});
    ContextPtr ctx = new_context();
    ggml_tensor * xt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, x.shape(1), x.shape(0));
    std::vector<std::pair<ggml_tensor *, const void *>> inputs = {{xt, x.data()}};
    ggml_tensor * bt = nullptr;
    if (bias) {
        bt = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, x.shape(1));
        inputs.push_back({bt, bias->data()});
    }
    return run(ctx.get(), ov_gelu_erf(ctx.get(), xt, bt), n_threads, inputs);
}

// Affine normalisation of x (T, C) over C per step (LayerNorm, of (x + x_bias) + residual when
// given) or over T per channel (GroupNorm with a group per channel).
py::array norm(const F32Array & x, const F32Array & weight, const F32Array & bias, float eps, bool over_time,
               std::optional<F32Array> residual, std::optional<F32Array> x_bias, int n_threads) {
    check_tc("norm", x, {&weight, &bias});
    if (x_bias) check_tc("norm", x, {&*x_bias});
    if (residual && (residual->ndim() != 2 || residual->shape(0) != x.shape(0) || residual->shape(1) != x.shape(1))) {
        throw ov::InvalidInput("norm: residual must have x's shape");
    }
    if (over_time && (residual || x_bias)) throw ov::InvalidInput("norm: residual and x_bias are LayerNorm's");
    ContextPtr ctx = new_context();
    ggml_tensor * xt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, x.shape(1), x.shape(0));
    ggml_tensor * wt = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, x.shape(1));
    ggml_tensor * bt = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, x.shape(1));
    std::vector<std::pair<ggml_tensor *, const void *>> inputs = {{xt, x.data()}, {wt, weight.data()},
                                                                   {bt, bias.data()}};
    ggml_tensor * rt = nullptr;
    ggml_tensor * xbt = nullptr;
    if (residual) {
        rt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, x.shape(1), x.shape(0));
        inputs.push_back({rt, residual->data()});
    }
    if (x_bias) {
        xbt = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, x.shape(1));
        inputs.push_back({xbt, x_bias->data()});
    }
    ggml_tensor * y = over_time ? ov_channel_norm(ctx.get(), xt, wt, bt, eps)
                                : ov_layer_norm(ctx.get(), xt, wt, bt, eps, rt, xbt);
    return run(ctx.get(), y, n_threads, inputs);
}

// tanh-GELU or Mish of x (T, C), our op or the stock composition.
py::array activation(const F32Array & x, const std::string & kind, bool stock, int n_threads) {
    check_tc(kind.c_str(), x, {});
    ContextPtr ctx = new_context();
    ggml_tensor * xt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, x.shape(1), x.shape(0));
    ov::GraphOptions opt;
    opt.stock_ops = stock;
    ggml_tensor * y = kind == "gelu_tanh" ? ov::gelu_tanh(ctx.get(), xt, opt) : ov::mish(ctx.get(), xt, opt);
    return run(ctx.get(), y, n_threads, {{xt, x.data()}});
}

// GroupNorm(1, C) of x (T, C) with weight and bias (C,).
py::array group_norm_one(const F32Array & x, const F32Array & weight, const F32Array & bias, float eps,
                         int n_threads) {
    check_tc("group_norm_one", x, {&weight, &bias});
    ContextPtr ctx = new_context();
    ggml_tensor * xt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, x.shape(1), x.shape(0));
    ggml_tensor * wt = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, x.shape(1));
    ggml_tensor * bt = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, x.shape(1));
    return run(ctx.get(), ov::group_norm_one(ctx.get(), xt, wt, bt, eps), n_threads,
               {{xt, x.data()}, {wt, weight.data()}, {bt, bias.data()}});
}

// torch.istft (centred) of the one-sided spectrum real + i imag, each (T, n_fft/2+1), with
// window (n_fft,) at hop -> ((T-1)*hop,).
py::array istft(const F32Array & real, const F32Array & imag, const F32Array & window, int hop, bool stock,
                int n_threads) {
    const int64_t n_fft = window.ndim() == 1 ? window.shape(0) : 0;
    if (real.ndim() != 2 || imag.ndim() != 2 || real.shape(0) < 2 || real.shape(1) != n_fft / 2 + 1 ||
        imag.shape(0) != real.shape(0) || imag.shape(1) != real.shape(1) || n_fft < 2 || n_fft % 2 != 0 ||
        hop < 1 || hop > n_fft) {
        throw ov::InvalidInput("istft: need real and imag (T >= 2, n_fft/2+1), window (n_fft,) with n_fft even, "
                               "1 <= hop <= n_fft");
    }
    const int64_t n_frames = real.shape(0), n_bins = real.shape(1);
    std::vector<float> spec(n_frames * 2 * n_bins), window_sq(n_fft);
    for (int64_t t = 0; t < n_frames; ++t) {
        std::memcpy(&spec[t * 2 * n_bins], real.data() + t * n_bins, n_bins * sizeof(float));
        std::memcpy(&spec[t * 2 * n_bins + n_bins], imag.data() + t * n_bins, n_bins * sizeof(float));
    }
    for (int64_t n = 0; n < n_fft; ++n) window_sq[n] = window.data()[n] * window.data()[n];
    const std::vector<float> basis = ov::istft_basis(window.data(), (int) n_fft);
    ContextPtr ctx = new_context(32);
    ggml_tensor * st = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 2 * n_bins, n_frames);
    ggml_tensor * bt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 2 * n_bins, n_fft);
    ggml_tensor * wt = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n_fft);
    ov::GraphOptions opt;
    opt.stock_ops = stock;
    ggml_tensor * y = ov::istft(ctx.get(), st, bt, wt, hop, opt);
    py::array out = run(ctx.get(), y, n_threads, {{st, spec.data()}, {bt, basis.data()}, {wt, window_sq.data()}});
    return out.attr("reshape")(-1);
}

// Residual VQ encode of x (T, hidden) with n_q codebooks: w_in (n_q, dim, hidden), b_in (n_q, dim),
// embed (n_q, size, dim), w_out (n_q, hidden, dim), b_out (n_q, hidden) -> codes (n_q, T).
py::array rvq_encode(const F32Array & x, const F32Array & w_in, const F32Array & b_in, const F32Array & embed,
                     const F32Array & w_out, const F32Array & b_out, int n_threads) {
    const bool ok = x.ndim() == 2 && x.size() > 0 && w_in.ndim() == 3 && b_in.ndim() == 2 && embed.ndim() == 3 &&
                    w_out.ndim() == 3 && b_out.ndim() == 2 && w_in.shape(2) == x.shape(1) &&
                    b_in.shape(1) == w_in.shape(1) && embed.shape(2) == w_in.shape(1) &&
                    w_out.shape(1) == x.shape(1) && w_out.shape(2) == w_in.shape(1) && b_out.shape(1) == x.shape(1) &&
                    b_in.shape(0) == w_in.shape(0) && embed.shape(0) == w_in.shape(0) &&
                    w_out.shape(0) == w_in.shape(0) && b_out.shape(0) == w_in.shape(0) && embed.shape(1) > 0;
    if (!ok) {
        throw ov::InvalidInput("rvq_encode: need x (T, hidden), w_in (n_q, dim, hidden), b_in (n_q, dim), embed "
                               "(n_q, size, dim), w_out (n_q, hidden, dim), b_out (n_q, hidden)");
    }
    ContextPtr ctx = new_context();
    ggml_tensor * xt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, x.shape(1), x.shape(0));
    std::vector<std::pair<ggml_tensor *, const void *>> inputs = {{xt, x.data()}};
    std::vector<ggml_tensor *> flat;
    for (const F32Array * a : {&w_in, &b_in, &embed, &w_out, &b_out}) {
        flat.push_back(ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, a->size()));
        inputs.push_back({flat.back(), a->data()});
    }
    ggml_tensor * y = ov_rvq_encode(ctx.get(), xt, flat[0], flat[1], flat[2], flat[3], flat[4], (int) w_in.shape(0));
    return run(ctx.get(), y, n_threads, inputs);
}

// A weight type by name ("F32", "F16", "BF16", "Q8_0", "Q4_K", "Q5_K", "Q6_K"), as the packed linear
// reads them.
ggml_type weight_type(const std::string & name) {
    if (name == "F32") return GGML_TYPE_F32;
    if (name == "F16") return GGML_TYPE_F16;
    if (name == "BF16") return GGML_TYPE_BF16;
    if (name == "Q8_0") return GGML_TYPE_Q8_0;
    if (name == "Q4_K") return GGML_TYPE_Q4_K;
    if (name == "Q5_K") return GGML_TYPE_Q5_K;
    if (name == "Q6_K") return GGML_TYPE_Q6_K;
    throw ov::InvalidInput("wtype must be one of F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K, got '" + name + "'");
}

// w (OUT, IN) stored as `type` by ggml's own conversion or quantizer: the bytes of ggml [IN, OUT].
std::vector<uint8_t> to_type(const F32Array & w, ggml_type type) {
    if (w.ndim() != 2 || w.size() == 0 || w.shape(1) % ggml_blck_size(type) != 0) {
        throw ov::InvalidInput(std::string("weight must be (OUT, IN) with IN a multiple of ") +
                               std::to_string(ggml_blck_size(type)) + " for " + ggml_type_name(type));
    }
    std::vector<uint8_t> bytes(ggml_row_size(type, w.shape(1)) * w.shape(0));
    ggml_quantize_chunk(type, w.data(), bytes.data(), 0, w.shape(0), w.shape(1), nullptr);
    return bytes;
}

// w (OUT, IN) after a round trip through `wtype` (what the op multiplies by), via ggml's to_float.
py::array round_trip(const F32Array & w, const std::string & wtype) {
    const ggml_type type = weight_type(wtype);
    const std::vector<uint8_t> bytes = to_type(w, type);
    F32Array out({w.shape(0), w.shape(1)});
    // ggml has no to_float for F32, which is stored as is.
    if (type == GGML_TYPE_F32) std::memcpy(out.mutable_data(), bytes.data(), bytes.size());
    else ggml_get_type_traits(type)->to_float(bytes.data(), out.mutable_data(), w.size());
    return out;
}

// ov_linear (or ggml's mul_mat, one weight) on x (N, IN) and weights (OUT_i, IN), each stored as
// its wtypes[i] -> (N, sum OUT_i); with `seconds`, timed as run() does.
py::array linear(const F32Array & x, const std::vector<F32Array> & weights, const std::vector<std::string> & wtypes,
                 int n_threads, bool mul_mat, std::vector<double> * seconds = nullptr, int repeats = 0) {
    if (x.ndim() != 2 || x.size() == 0) throw ov::InvalidInput("linear: x must be (N, IN) with N, IN >= 1");
    if (weights.empty() || weights.size() >= GGML_MAX_SRC || wtypes.size() != weights.size()) {
        throw ov::InvalidInput("linear: need 1 to 9 weights and one wtype per weight");
    }
    std::vector<std::vector<uint8_t>> stored;
    for (size_t i = 0; i < weights.size(); ++i) {
        if (weights[i].ndim() != 2 || weights[i].shape(1) != x.shape(1)) {
            throw ov::InvalidInput("linear: each weight must be (OUT, IN) with x's IN");
        }
        stored.push_back(to_type(weights[i], weight_type(wtypes[i])));
    }
    ContextPtr ctx = new_context();
    ggml_tensor * xt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, x.shape(1), x.shape(0));
    std::vector<std::pair<ggml_tensor *, const void *>> inputs = {{xt, x.data()}};
    std::vector<ggml_tensor *> wts;
    for (size_t i = 0; i < weights.size(); ++i) {
        wts.push_back(ggml_new_tensor_2d(ctx.get(), weight_type(wtypes[i]), x.shape(1), weights[i].shape(0)));
        inputs.push_back({wts.back(), stored[i].data()});
    }
    if (mul_mat && wts.size() != 1) throw ov::InvalidInput("linear: ggml's mul_mat takes one weight");
    ggml_tensor * y = mul_mat ? ggml_mul_mat(ctx.get(), wts[0], xt) : ov_linear(ctx.get(), xt, wts);
    return run(ctx.get(), y, n_threads, inputs, seconds, repeats);
}

// Seconds of `repeats` computes of linear() after one warm-up (bench/linear.py).
std::vector<double> linear_seconds(const F32Array & x, const std::vector<F32Array> & weights,
                                   const std::vector<std::string> & wtypes, int n_threads, bool mul_mat, int repeats) {
    std::vector<double> seconds;
    linear(x, weights, wtypes, n_threads, mul_mat, &seconds, repeats);
    return seconds;
}

#if OV_X86
// 12 independent chains of 8-wide FMAs on registers only (12 covers Zen 3's 2 FMA pipes x 4
// cycles of latency with room): the CPU's F32 FMA peak per thread on AVX2.
__attribute__((target("arch=x86-64-v3"))) void fma_chains_avx2(int64_t iterations) {
    // The compiler keeps vector arrays in memory across an asm barrier: written out instead.
    __asm__ volatile(
        "vxorps %%ymm0, %%ymm0, %%ymm0\n\tvxorps %%ymm1, %%ymm1, %%ymm1\n\tvxorps %%ymm2, %%ymm2, %%ymm2\n\t"
        "vxorps %%ymm3, %%ymm3, %%ymm3\n\tvxorps %%ymm4, %%ymm4, %%ymm4\n\tvxorps %%ymm5, %%ymm5, %%ymm5\n\t"
        "vxorps %%ymm6, %%ymm6, %%ymm6\n\tvxorps %%ymm7, %%ymm7, %%ymm7\n\tvxorps %%ymm8, %%ymm8, %%ymm8\n\t"
        "vxorps %%ymm9, %%ymm9, %%ymm9\n\tvxorps %%ymm10, %%ymm10, %%ymm10\n\tvxorps %%ymm11, %%ymm11, %%ymm11\n\t"
        "vxorps %%ymm12, %%ymm12, %%ymm12\n\tvxorps %%ymm13, %%ymm13, %%ymm13\n"
        "1:\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm0\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm1\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm2\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm3\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm4\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm5\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm6\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm7\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm8\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm9\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm10\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm11\n\t"
        "dec %0\n\tjnz 1b\n\tvzeroupper"
        : "+r"(iterations)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
          "xmm13", "cc");
}

// 16 independent chains of a 16-wide op on zmm registers only: `op` is vfmadd231ps (the F32 FMA
// peak, 32 flops each) or vdpbf16ps (the bf16 dot-product peak: 16 lanes x 2 products and 2 sums,
// 64 flops each). 16 chains cover 2 pipes x 6 cycles of vdpbf16ps latency (Zen 4/5) with room.
#define OV_ZMM_OP(op, n) op " %%zmm30, %%zmm31, %%zmm" #n "\n\t"
#define OV_ZMM_CHAINS(op)                                                                                    \
    OV_ZMM_OP(op, 0) OV_ZMM_OP(op, 1) OV_ZMM_OP(op, 2) OV_ZMM_OP(op, 3) OV_ZMM_OP(op, 4) OV_ZMM_OP(op, 5)   \
    OV_ZMM_OP(op, 6) OV_ZMM_OP(op, 7) OV_ZMM_OP(op, 8) OV_ZMM_OP(op, 9) OV_ZMM_OP(op, 10) OV_ZMM_OP(op, 11) \
    OV_ZMM_OP(op, 12) OV_ZMM_OP(op, 13) OV_ZMM_OP(op, 14) OV_ZMM_OP(op, 15)
#define OV_ZMM_LOOP(op)                                                                                 \
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\n\tvpxord %%zmm31, %%zmm31, %%zmm31\n"          \
                     "1:\n\t" OV_ZMM_CHAINS(op) "dec %0\n\tjnz 1b\n\tvzeroupper"                        \
                     : "+r"(iterations)                                                                 \
                     :                                                                                  \
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",   \
                       "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm30", "xmm31", "cc")

__attribute__((target("arch=x86-64-v4"))) void fma_chains_avx512(int64_t iterations) { OV_ZMM_LOOP("vfmadd231ps"); }

__attribute__((target("arch=x86-64-v4,avx512bf16"))) void dpbf16_chains(int64_t iterations) {
    OV_ZMM_LOOP("vdpbf16ps");
}
#undef OV_ZMM_LOOP
#undef OV_ZMM_CHAINS
#undef OV_ZMM_OP
#endif

// GFLOP/s of register-only chains on n_threads threads at once for about `seconds`
// (bench/linear.py's peak yardsticks, measured between its rounds so both see the same load):
// F32 FMAs on the widest vectors the CPU has (AVX-512 or AVX2), or with `bf16` vdpbf16ps.
double fma_peak_gflops(int n_threads, double seconds, bool bf16) {
#if OV_X86
    if (n_threads < 1) throw ov::InvalidInput("fma_peak_gflops: n_threads must be >= 1");
    void (*chains)(int64_t) = nullptr;
    int64_t flops_per_iteration = 0, cycles_per_iteration = 0;  // at 2 ops per cycle
    const bool avx512 = __builtin_cpu_supports("avx512f");
    if (bf16) {
        if (!avx512 || !__builtin_cpu_supports("avx512bf16")) {
            throw ov::InvalidInput("fma_peak_gflops: bf16=True needs a CPU with AVX512-BF16");
        }
        chains = dpbf16_chains, flops_per_iteration = 16 * 64, cycles_per_iteration = 8;
    } else if (avx512) {
        chains = fma_chains_avx512, flops_per_iteration = 16 * 32, cycles_per_iteration = 8;
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        chains = fma_chains_avx2, flops_per_iteration = 12 * 16, cycles_per_iteration = 6;
    } else {
        throw ov::InvalidInput("fma_peak_gflops: this CPU has no AVX2 FMA");
    }
    const int64_t iterations = (int64_t) (seconds * 3e9 / cycles_per_iteration) + 1;  // at 3 GHz
    std::vector<std::thread> threads;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n_threads; ++i) threads.emplace_back(chains, iterations);
    for (std::thread & t : threads) t.join();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return (double) n_threads * iterations * flops_per_iteration / wall / 1e9;
#else
    throw ov::InvalidInput("fma_peak_gflops: x86-64 only");
#endif
}

// The x86 features our kernels and ggml's pick builds by, that this CPU has (for benches' reports).
std::vector<std::string> cpu_flags() {
    std::vector<std::string> flags;
#if OV_X86
#define OV_FLAG(name) \
    if (__builtin_cpu_supports(name)) flags.push_back(name)
    OV_FLAG("avx2");
    OV_FLAG("fma");
    OV_FLAG("f16c");
    OV_FLAG("avx512f");
    OV_FLAG("avx512bw");
    OV_FLAG("avx512vl");
    OV_FLAG("avx512vnni");
    OV_FLAG("avx512bf16");
#undef OV_FLAG
#endif
    return flags;
}

// Attention of packed segments on q (N, n_head, hd), k and v (N, n_head_kv, hd), uploaded as one
// stacked q|k|v row per token and viewed as the LM does (strided heads and tokens):
// impl "own" (ov_attention), "flash" (flash_attn_ext per segment) or "stock" (mul_mat + soft_max
// per segment) -> (N, n_head, hd); with `seconds`, timed as run() does.
py::array packed_attention(const F32Array & q, const F32Array & k, const F32Array & v,
                           const std::vector<int64_t> & segments, float scale, const std::string & impl, int n_threads,
                           std::vector<double> * seconds = nullptr, int repeats = 0) {
    if (q.ndim() != 3 || k.ndim() != 3 || v.ndim() != 3 || k.shape(0) != q.shape(0) || v.shape(0) != q.shape(0) ||
        k.shape(1) != v.shape(1) || k.shape(2) != q.shape(2) || v.shape(2) != q.shape(2) || q.size() == 0 ||
        k.size() == 0 || q.shape(1) % k.shape(1) != 0) {
        throw ov::InvalidInput("attention: need q (N, n_head, hd), k and v (N, n_head_kv, hd), n_head a multiple of "
                               "n_head_kv");
    }
    if (impl != "own" && impl != "flash" && impl != "stock") {
        throw ov::InvalidInput("attention: impl must be 'own', 'flash' or 'stock', got '" + impl + "'");
    }
    const int64_t n = q.shape(0), n_head = q.shape(1), n_kv = k.shape(1), hd = q.shape(2);
    int64_t total = 0;
    for (int64_t len : segments) {
        if (len < 1) throw ov::InvalidInput("attention: segments must be >= 1 tokens each");
        total += len;
    }
    if (total != n) throw ov::InvalidInput("attention: segments must sum to N");
    const int64_t row = (n_head + 2 * n_kv) * hd;
    std::vector<float> stacked(row * n);
    for (int64_t t = 0; t < n; ++t) {
        std::memcpy(&stacked[t * row], q.data() + t * n_head * hd, n_head * hd * sizeof(float));
        std::memcpy(&stacked[t * row + n_head * hd], k.data() + t * n_kv * hd, n_kv * hd * sizeof(float));
        std::memcpy(&stacked[t * row + (n_head + n_kv) * hd], v.data() + t * n_kv * hd, n_kv * hd * sizeof(float));
    }
    ContextPtr ctx = new_context(8 + 16 * segments.size());  // the stock path: 15 tensors per segment
    ggml_tensor * qkv = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, row, n);
    const auto heads = [&](int64_t count, int64_t first) {
        return ggml_view_3d(ctx.get(), qkv, hd, count, n, hd * sizeof(float), qkv->nb[1], first * hd * sizeof(float));
    };
    OvAttentionParams params;
    params.scale = scale;
    params.segments = segments;
    ggml_tensor * out = nullptr;
    if (impl == "own") {
        out = ov_attention(ctx.get(), heads(n_head, 0), heads(n_kv, n_head), heads(n_kv, n_head + n_kv), &params);
    } else {
        ov::GraphOptions opt;
        opt.stock_ops = impl == "stock";
        out = ov::packed_attention(ctx.get(), heads(n_head, 0), heads(n_kv, n_head), heads(n_kv, n_head + n_kv),
                                   segments, scale, opt);
    }
    py::array flat = run(ctx.get(), ggml_reshape_2d(ctx.get(), out, n_head * hd, n), n_threads, {{qkv, stacked.data()}},
                         seconds, repeats);
    return flat.attr("reshape")(n, n_head, hd);
}

OvIsa isa_by_name(const std::string & name) {
    for (OvIsa isa : {OvIsa::base, OvIsa::avx2, OvIsa::avx512}) {
        if (name == ov_isa_name(isa)) return isa;
    }
    throw ov::InvalidInput("simd must be 'base', 'avx2' or 'avx512', got '" + name + "'");
}

void bind_ops(py::module_ & m) {
    m.def("op_snake", &snake, "x"_a, "alpha"_a, "fused"_a = true, "n_threads"_a = 2,
          "Snake y = x + sin(alpha*x)^2 / (alpha + 1e-9) on x (T, C), alpha (C,), as the codec runs it "
          "(for tests).");
    m.def("op_conv1d", &conv1d, "x"_a, "weight"_a, "bias"_a = py::none(), "residual"_a = py::none(),
          "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "n_threads"_a = 2,
          "The direct Conv1d op on x (T, IC) with weight (K*IC, OC), row k*IC + ic (for tests).");
    m.def("op_gelu_erf", &gelu_erf, "x"_a, "bias"_a = py::none(), "n_threads"_a = 2,
          "GELU(x + bias) with erf on x (T, C), bias (C,) or None, as HuBERT runs it (for tests).");
    m.def("op_norm", &norm, "x"_a, "weight"_a, "bias"_a, "eps"_a, "over_time"_a, "residual"_a = py::none(),
          "x_bias"_a = py::none(), "n_threads"_a = 2,
          "Affine normalisation of x (T, C): over C per step (LayerNorm, of (x + x_bias) + residual when "
          "given) or, with over_time, over T per channel (GroupNorm with a group per channel), as HuBERT runs "
          "them (for tests).");
    m.def("op_grouped_conv1d", &grouped_conv1d, "x"_a, "weight"_a, "bias"_a = py::none(), "groups"_a = 1,
          "pad_left"_a = 0, "pad_right"_a = 0, "dilation"_a = 1, "impl"_a = "own", "n_threads"_a = 2,
          "nn.Conv1d with groups on x (T, IC), weight (OC, IC/groups, K), padded (pad_left, pad_right), stride 1 "
          "-> (T_out, OC): impl 'own' (depthwise op, direct op with groups, or im2col as the loader picks) or "
          "'stock' (pad + im2col + batched mul_mat) (for tests).");
    m.def(
        "op_gelu_tanh", [](const F32Array & x, bool stock, int n_threads) { return activation(x, "gelu_tanh", stock, n_threads); },
        "x"_a, "stock"_a = false, "n_threads"_a = 2,
        "GELU, tanh form, of x (T, C): our op or, with stock, composed of ggml_tanh (for tests).");
    m.def(
        "op_mish", [](const F32Array & x, bool stock, int n_threads) { return activation(x, "mish", stock, n_threads); },
        "x"_a, "stock"_a = false, "n_threads"_a = 2,
        "Mish x * tanh(softplus(x)) of x (T, C): our op or, with stock, composed of ggml_softplus (for tests).");
    m.def("op_group_norm_one", &group_norm_one, "x"_a, "weight"_a, "bias"_a, "eps"_a, "n_threads"_a = 2,
          "GroupNorm(1, C) of x (T, C) with weight and bias (C,) (for tests).");
    m.def("op_istft", &istft, "real"_a, "imag"_a, "window"_a, "hop"_a, "stock"_a = false, "n_threads"_a = 2,
          "torch.istft(center=True) of real + i imag (T, n_fft/2+1) with window (n_fft,) at hop -> ((T-1)*hop,): "
          "inverse-DFT matmul + ov_fold_1d or, with stock, ggml_col2im_1d (for tests).");
    m.def("op_rvq_encode", &rvq_encode, "x"_a, "w_in"_a, "b_in"_a, "embed"_a, "w_out"_a, "b_out"_a, "n_threads"_a = 2,
          "Residual VQ encode of x (T, hidden) through n_q codebooks (project_in (n_q, dim, hidden) + (n_q, dim), "
          "embed (n_q, size, dim), project_out (n_q, hidden, dim) + (n_q, hidden)) -> codes (n_q, T), as the "
          "codec runs it (for tests).");
    m.def(
        "op_linear",
        [](const F32Array & x, const std::vector<F32Array> & weights, const std::vector<std::string> & wtypes,
           int n_threads, bool mul_mat) { return linear(x, weights, wtypes, n_threads, mul_mat); },
        "x"_a, "weights"_a, "wtypes"_a, "n_threads"_a = 2, "mul_mat"_a = false,
        "The packed linear op on x (N, IN) and weights (OUT_i, IN) stored as wtypes[i] (F32, F16, BF16, Q8_0, "
        "Q4_K, Q5_K, Q6_K) -> (N, sum OUT_i); with mul_mat, ggml's own op on the one weight instead (for tests).");
    m.def("linear_seconds", &linear_seconds, "x"_a, "weights"_a, "wtypes"_a, "n_threads"_a = 2, "mul_mat"_a = false,
          "repeats"_a = 5, "Wall seconds of each of `repeats` computes of op_linear's graph (for benchmarks).");
    m.def("fma_peak_gflops", &fma_peak_gflops, "n_threads"_a = 2, "seconds"_a = 0.05, "bf16"_a = false,
          "GFLOP/s of register-only FMA chains on the CPU's widest vectors (AVX-512 or AVX2) on n_threads "
          "threads for about `seconds`, or with bf16 of vdpbf16ps chains (AVX512-BF16 only): the peak "
          "yardsticks of the benches.");
    m.def("cpu_flags", &cpu_flags, "The x86 features our kernels and ggml's choose builds by that this CPU has.");
    m.def("linear_kernel", [](const std::string & wtype) { return std::string(ov_linear_kernel(weight_type(wtype))); },
          "wtype"_a,
          "What runs an LM projection of weights `wtype` now: 'ggml mul_mat' or 'ov_linear <build>' "
          "(avx512bf16: BF16 on vdpbf16ps).");
    m.def("bf16_dot", &ov_bf16_dot, "Whether ov_linear runs BF16 weights on vdpbf16ps now (AVX512-BF16 CPUs).");
    m.def("set_bf16_dot", &ov_set_bf16_dot, "allow"_a,
          "Allows or forbids ov_linear's vdpbf16ps build for BF16 weights (where forbidden, or on a CPU without "
          "AVX512-BF16, BF16 is unpacked to F32, and models send it to ggml's mul_mat where the CPU has "
          "AVX512-BF16); returns the previous setting. OMNIVOICE_BF16_DOT=0 forbids it at start-up.");
    m.def("op_round_trip", &round_trip, "w"_a, "wtype"_a,
          "w (OUT, IN) converted to wtype by ggml and back to float32: the weights op_linear multiplies by.");
    m.def(
        "op_attention",
        [](const F32Array & q, const F32Array & k, const F32Array & v, const std::vector<int64_t> & segments,
           float scale, const std::string & impl, int n_threads) {
            return packed_attention(q, k, v, segments, scale, impl, n_threads);
        },
        "q"_a, "k"_a, "v"_a, "segments"_a, "scale"_a, "impl"_a = "own", "n_threads"_a = 2,
        "softmax(scale q k^T) v of each packed segment (token counts summing to N) with itself, on q (N, n_head, "
        "hd), k and v (N, n_head_kv, hd) -> (N, n_head, hd): impl 'own' (our op), 'flash' (ggml's flash_attn_ext) "
        "or 'stock' (mul_mat + soft_max) per segment (for tests).");
    m.def(
        "attention_seconds",
        [](const F32Array & q, const F32Array & k, const F32Array & v, const std::vector<int64_t> & segments,
           float scale, const std::string & impl, int n_threads, int repeats) {
            std::vector<double> seconds;
            packed_attention(q, k, v, segments, scale, impl, n_threads, &seconds, repeats);
            return seconds;
        },
        "q"_a, "k"_a, "v"_a, "segments"_a, "scale"_a, "impl"_a = "own", "n_threads"_a = 2, "repeats"_a = 5,
        "Wall seconds of each of `repeats` computes of op_attention's graph (for benchmarks).");
    m.def("simd", []() { return std::string(ov_isa_name(ov_isa())); },
          "The instruction-set build our CPU kernels run now: 'avx512', 'avx2' or 'base'.");
    m.def("set_simd_cap", [](const std::string & name) { return std::string(ov_isa_name(ov_set_isa_cap(isa_by_name(name)))); },
          "name"_a,
          "Caps our CPU kernels' build at 'base', 'avx2' or 'avx512' (no cap) and returns the previous cap; "
          "OMNIVOICE_SIMD sets it at start-up. For tests and comparisons.");
}

const ov::Binding reg(&bind_ops, ov::Binding::testing);

}  // namespace
