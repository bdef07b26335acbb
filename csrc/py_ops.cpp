// Our custom ggml ops exposed one at a time, for tests against numpy.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "bindings.h"
#include "errors.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "gelu_erf.h"
#include "norm.h"
#include "rvq_nearest.h"
#include "snake.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

using F32Array = py::array_t<float, py::array::c_style | py::array::forcecast>;

// Builds one op with `build` on float32 inputs (numpy (T, C) = ggml [C, T], or 1-D), runs it on
// a CPU backend with n_threads and returns its output as numpy (T, C) (F32), or (T,) (I32).
py::array run_op(const std::vector<F32Array> & inputs,
                const std::function<ggml_tensor *(ggml_context *, const std::vector<ggml_tensor *> &)> & build,
                int n_threads) {
    ggml_init_params params = {16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, /*no_alloc =*/true};
    std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(params), ggml_free);
    std::vector<ggml_tensor *> ts;
    for (const F32Array & a : inputs) {
        ts.push_back(a.ndim() == 1 ? ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, a.shape(0))
                                   : ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, a.shape(1), a.shape(0)));
    }
    ggml_tensor * y = build(ctx.get(), ts);
    ggml_cgraph * graph = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(graph, y);

    std::unique_ptr<ggml_backend, decltype(&ggml_backend_free)> cpu(ggml_backend_cpu_init(), ggml_backend_free);
    ggml_backend_cpu_set_n_threads(cpu.get(), n_threads);
    std::unique_ptr<ggml_backend_buffer, decltype(&ggml_backend_buffer_free)> buf(
        ggml_backend_alloc_ctx_tensors(ctx.get(), cpu.get()), ggml_backend_buffer_free);
    for (size_t i = 0; i < ts.size(); ++i) ggml_backend_tensor_set(ts[i], inputs[i].data(), 0, ggml_nbytes(ts[i]));
    {
        py::gil_scoped_release release;
        if (ggml_backend_graph_compute(cpu.get(), graph) != GGML_STATUS_SUCCESS) {
            throw std::runtime_error(std::string(ggml_op_desc(y)) + ": graph compute failed");
        }
    }
    py::array out = y->type == GGML_TYPE_I32 ? py::array(py::array_t<int32_t>(y->ne[0]))
                                             : py::array(F32Array({y->ne[1], y->ne[0]}));
    ggml_backend_tensor_get(y, out.mutable_data(), 0, ggml_nbytes(y));
    return out;
}

// Throws unless x is (T, C) with T, C >= 1 and every vector in `per_channel` is (C,).
void check_tc(const char * op, const F32Array & x, std::initializer_list<const F32Array *> per_channel) {
    bool ok = x.ndim() == 2 && x.size() > 0;
    for (const F32Array * v : per_channel) ok = ok && v->ndim() == 1 && v->shape(0) == x.shape(1);
    if (!ok) throw ov::InvalidInput(std::string(op) + ": x must be (T, C) with T, C >= 1 and each vector (C,)");
}

// Snake on x (numpy (T, C) = ggml [C, T]) with per-channel alpha, fused or composed.
py::array snake(const F32Array & x, const F32Array & alpha, bool fused, int n_threads) {
    check_tc("snake", x, {&alpha});
    F32Array inv(alpha.shape(0));
    for (py::ssize_t c = 0; c < alpha.shape(0); ++c) inv.mutable_data()[c] = 1.0f / (alpha.data()[c] + 1e-9f);
    return run_op({x, alpha, inv},
                  [fused](ggml_context * ctx, const std::vector<ggml_tensor *> & t) {
                      return ov_snake(ctx, t[0], t[1], t[2], fused);
                  },
                  n_threads);
}

// Exact GELU of x (+ bias per channel).
py::array gelu_erf(const F32Array & x, const std::optional<F32Array> & bias, int n_threads) {
    if (bias) check_tc("gelu_erf", x, {&*bias});
    else check_tc("gelu_erf", x, {});
    std::vector<F32Array> inputs = {x};
    if (bias) inputs.push_back(*bias);
    return run_op(inputs,
                  [](ggml_context * ctx, const std::vector<ggml_tensor *> & t) {
                      return ov_gelu_erf(ctx, t[0], t.size() > 1 ? t[1] : nullptr);
                  },
                  n_threads);
}

// LayerNorm over channels (per_step) or GroupNorm with a group per channel (over time).
py::array norm(const F32Array & x, const F32Array & weight, const F32Array & bias, float eps, bool over_time,
              int n_threads) {
    check_tc("norm", x, {&weight, &bias});
    return run_op({x, weight, bias},
                  [eps, over_time](ggml_context * ctx, const std::vector<ggml_tensor *> & t) {
                      return over_time ? ov_channel_norm(ctx, t[0], t[1], t[2], eps)
                                       : ov_layer_norm(ctx, t[0], t[1], t[2], eps);
                  },
                  n_threads);
}

// Nearest codebook entry per frame of h (T, dim) in embed (n_entries, dim).
py::array rvq_nearest(const F32Array & h, const F32Array & embed, int n_threads) {
    if (h.ndim() != 2 || embed.ndim() != 2 || h.size() == 0 || embed.size() == 0 || h.shape(1) != embed.shape(1)) {
        throw ov::InvalidInput("rvq_nearest: h must be (T, dim) and embed (n_entries, dim), non-empty");
    }
    return run_op({h, embed},
                  [](ggml_context * ctx, const std::vector<ggml_tensor *> & t) {
                      return ov_rvq_nearest(ctx, t[0], t[1]);
                  },
                  n_threads);
}

void bind_ops(py::module_ & m) {
    m.def("op_snake", &snake, "x"_a, "alpha"_a, "fused"_a = true, "n_threads"_a = 2,
          "Snake y = x + sin(alpha*x)^2 / (alpha + 1e-9) on x (T, C), alpha (C,), as the codec runs it "
          "(for tests).");
    m.def("op_gelu_erf", &gelu_erf, "x"_a, "bias"_a = py::none(), "n_threads"_a = 2,
          "GELU(x + bias) with erf on x (T, C), bias (C,) or None, as HuBERT runs it (for tests).");
    m.def("op_norm", &norm, "x"_a, "weight"_a, "bias"_a, "eps"_a, "over_time"_a, "n_threads"_a = 2,
          "Affine normalisation of x (T, C): over C per step (LayerNorm) or, with over_time, over T per "
          "channel (GroupNorm with a group per channel), as HuBERT runs them (for tests).");
    m.def("op_rvq_nearest", &rvq_nearest, "h"_a, "embed"_a, "n_threads"_a = 2,
          "Index of the nearest embed row (n_entries, dim) for each row of h (T, dim), by the reference's "
          "distance formula, first index on ties (for tests).");
}

const ov::Binding reg(&bind_ops);

}  // namespace
