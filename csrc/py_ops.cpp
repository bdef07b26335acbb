// Our custom ggml ops exposed one at a time, for tests against numpy.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>

#include "bindings.h"
#include "errors.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "snake.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

using F32Array = py::array_t<float, py::array::c_style | py::array::forcecast>;

// Snake on x (numpy (T, C) = ggml [C, T]) with per-channel alpha, fused or composed.
F32Array snake(const F32Array & x, const F32Array & alpha, bool fused, int n_threads) {
    if (x.ndim() != 2 || alpha.ndim() != 1 || alpha.shape(0) != x.shape(1) || x.size() == 0) {
        throw ov::InvalidInput("snake: x must be (T, C) with T, C >= 1 and alpha (C,)");
    }
    const int64_t n_ch = x.shape(1), n_t = x.shape(0);
    ggml_init_params params = {16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, /*no_alloc =*/true};
    std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(params), ggml_free);
    ggml_tensor * xt = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, n_ch, n_t);
    ggml_tensor * at = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n_ch);
    ggml_tensor * it = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n_ch);
    ggml_tensor * y = ov_snake(ctx.get(), xt, at, it, fused);
    ggml_cgraph * graph = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(graph, y);

    std::unique_ptr<ggml_backend, decltype(&ggml_backend_free)> cpu(ggml_backend_cpu_init(), ggml_backend_free);
    ggml_backend_cpu_set_n_threads(cpu.get(), n_threads);
    std::unique_ptr<ggml_backend_buffer, decltype(&ggml_backend_buffer_free)> buf(
        ggml_backend_alloc_ctx_tensors(ctx.get(), cpu.get()), ggml_backend_buffer_free);
    std::vector<float> inv(n_ch);
    for (int64_t c = 0; c < n_ch; ++c) inv[c] = 1.0f / (alpha.data()[c] + 1e-9f);
    ggml_backend_tensor_set(xt, x.data(), 0, ggml_nbytes(xt));
    ggml_backend_tensor_set(at, alpha.data(), 0, ggml_nbytes(at));
    ggml_backend_tensor_set(it, inv.data(), 0, ggml_nbytes(it));
    {
        py::gil_scoped_release release;
        if (ggml_backend_graph_compute(cpu.get(), graph) != GGML_STATUS_SUCCESS) {
            throw std::runtime_error("snake: graph compute failed");
        }
    }
    F32Array out({n_t, n_ch});
    ggml_backend_tensor_get(y, out.mutable_data(), 0, ggml_nbytes(y));
    return out;
}

void bind_ops(py::module_ & m) {
    m.def("op_snake", &snake, "x"_a, "alpha"_a, "fused"_a = true, "n_threads"_a = 2,
          "Snake y = x + sin(alpha*x)^2 / (alpha + 1e-9) on x (T, C), alpha (C,), as the codec runs it "
          "(for tests).");
}

const ov::Binding reg(&bind_ops);

}  // namespace
