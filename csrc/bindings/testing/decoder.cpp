// _core.testing hook for the shared causal decoder (csrc/nn/causal_decoder.h) on any weights: hparams
// and tensor names from dicts, run over given embeddings in chunks, so its tests cover the variants
// no model here uses yet (LayerNorm, GELU FFN, biases, GQA, no RoPE) against numpy.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "bindings/registry.h"
#include "ggml-alloc.h"
#include "nn/causal_decoder.h"
#include "runtime/errors.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace ov {

static CausalDecoderHParams hparams_from(const py::dict & d) {
    CausalDecoderHParams hp;
    const auto get = [&](const char * k) { return d[k]; };
    hp.n_layer = get("n_layer").cast<int64_t>();
    hp.n_embd = get("n_embd").cast<int64_t>();
    hp.n_head = get("n_head").cast<int64_t>();
    hp.n_head_kv = get("n_head_kv").cast<int64_t>();
    hp.head_dim = get("head_dim").cast<int64_t>();
    hp.n_ff = get("n_ff").cast<int64_t>();
    hp.norm = get("norm").cast<std::string>() == "layer" ? CausalDecoderHParams::Norm::layer : CausalDecoderHParams::Norm::rms;
    hp.norm_eps = get("norm_eps").cast<float>();
    hp.qk_norm = get("qk_norm").cast<bool>();
    hp.rope = get("rope").cast<std::string>() == "neox" ? CausalDecoderHParams::Rope::neox : CausalDecoderHParams::Rope::none;
    hp.rope_base = get("rope_base").cast<float>();
    hp.ffn = get("ffn").cast<std::string>() == "gelu_erf" ? CausalDecoderHParams::Ffn::gelu_erf : CausalDecoderHParams::Ffn::swiglu;
    hp.bias_q = get("bias_q").cast<bool>();
    hp.bias_k = get("bias_k").cast<bool>();
    hp.bias_v = get("bias_v").cast<bool>();
    hp.bias_o = get("bias_o").cast<bool>();
    hp.bias_ffn = get("bias_ffn").cast<bool>();
    hp.final_norm = get("final_norm").cast<bool>();
    hp.cross_attention = get("cross_attention").cast<bool>();
    hp.n_embd_cross = get("n_embd_cross").cast<int64_t>();
    return hp;
}

// x: [n, n_embd] row-major; calls of `chunks` tokens each at consecutive positions, one cache.
static py::array_t<float> run_decoder(const std::string & path, const std::string & arch, const BackendPtr & backend,
                                      const py::dict & hparams, const std::map<std::string, std::string> & names,
                                      py::array_t<float, py::array::c_style | py::array::forcecast> x,
                                      const std::vector<int64_t> & chunks, int64_t n_ctx,
                                      std::optional<py::array_t<float, py::array::c_style | py::array::forcecast>> enc) {
    GGUFFile file(path, arch, *backend);
    CausalDecoderNames nm;
    const auto name = [&](const char * k) { return names.count(k) ? names.at(k) : std::string(); };
    nm.layers = name("layers");
    nm.attn_norm = name("attn_norm");
    nm.q = name("q");
    nm.k = name("k");
    nm.v = name("v");
    nm.o = name("o");
    nm.q_norm = name("q_norm");
    nm.k_norm = name("k_norm");
    nm.ffn_norm = name("ffn_norm");
    nm.ffn_gate = name("ffn_gate");
    nm.ffn_up = name("ffn_up");
    nm.ffn_down = name("ffn_down");
    nm.cross_norm = name("cross_norm");
    nm.cross_q = name("cross_q");
    nm.cross_k = name("cross_k");
    nm.cross_v = name("cross_v");
    nm.cross_o = name("cross_o");
    nm.final_norm = name("final_norm");
    const CausalDecoderHParams hp = hparams_from(hparams);
    CausalDecoder dec;
    dec.load(file, nm, hp, {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0}, backend->is_cpu() && !backend->stock_ops());
    file.check_all_consumed();
    if (x.ndim() != 2 || x.shape(1) != hp.n_embd) throw InvalidInput("x must be [n, n_embd]");
    KVCache cache(hp, n_ctx, *backend);
    GraphOptions opt;
    opt.stock_ops = backend->stock_ops();
    const size_t n_nodes = 64 + 64 * (size_t) hp.n_layer;
    const ggml_init_params params = {ggml_tensor_overhead() * n_nodes + ggml_graph_overhead_custom(n_nodes, false),
                                     nullptr, true};
    // Runs a graph built by `build` (which returns its output, or null) after uploading `in`.
    const auto run = [&](const auto & build, ggml_tensor *& in, const void * in_data, void * out_data, auto && before) {
        std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(params), ggml_free);
        ggml_cgraph * gf = ggml_new_graph_custom(ctx.get(), n_nodes, false);
        ggml_tensor * out = build(ctx.get(), gf);
        if (out) {
            ggml_set_output(out);
            ggml_build_forward_expand(gf, out);
        }
        std::unique_ptr<ggml_gallocr, decltype(&ggml_gallocr_free)> alloc(
            ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend->get())), ggml_gallocr_free);
        if (!ggml_gallocr_alloc_graph(alloc.get(), gf)) throw std::runtime_error("cannot allocate the decoder graph");
        ggml_backend_tensor_set(in, in_data, 0, ggml_nbytes(in));
        before();
        backend->compute(gf);
        if (out) ggml_backend_tensor_get(out, out_data, 0, ggml_nbytes(out));
    };
    std::unique_ptr<CrossCache> cross;
    if (enc) {
        if (enc->ndim() != 2 || enc->shape(1) != hp.n_embd_cross) throw InvalidInput("enc must be [n_cross, n_embd_cross]");
        cross = std::make_unique<CrossCache>(hp, enc->shape(0), *backend);
        ggml_tensor * in = nullptr;
        run([&](ggml_context * ctx, ggml_cgraph * gf) -> ggml_tensor * {
                in = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hp.n_embd_cross, enc->shape(0));
                ggml_set_input(in);
                dec.cross_kv(ctx, gf, in, *cross);
                return nullptr;
            }, in, enc->data(), nullptr, [] {});
    }
    py::array_t<float> out({x.shape(0), x.shape(1)});
    int64_t start = 0;
    for (int64_t n : chunks) {
        if (n <= 0 || start + n > x.shape(0)) throw InvalidInput("chunks must be positive and cover at most x's rows");
        ggml_tensor * in = nullptr;
        DecoderBatch b;
        run([&](ggml_context * ctx, ggml_cgraph *) {
                in = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hp.n_embd, n);
                ggml_set_input(in);
                b = dec.batch(ctx, n, CausalDecoder::bucket(start + n));
                return dec.forward(ctx, in, cache, b, opt, cross.get());
            }, in, x.data(start, 0), out.mutable_data(start, 0), [&] { b.set(start); });
        start += n;
    }
    return out;
}

static void bind_decoder(py::module_ & m) {
    m.def("run_decoder", &run_decoder, "path"_a, "arch"_a, "backend"_a, "hparams"_a, "names"_a, "x"_a, "chunks"_a,
          "n_ctx"_a, "enc"_a = py::none(),
          "Load a CausalDecoder from `path` (hparams and names from dicts, every tensor consumed) and run it\n"
          "over x [n, n_embd] in calls of `chunks` tokens at consecutive positions on one KV cache of n_ctx;\n"
          "returns the hidden states [n, n_embd]. With cross-attention, enc [n_cross, n_embd_cross] fills\n"
          "the cross cache once first.");
}

static const Binding reg(&bind_decoder, Binding::testing);

}  // namespace ov
