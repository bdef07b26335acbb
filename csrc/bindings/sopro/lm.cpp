// Python surface of Sopro's semantic LM: _core.SoproLM (the LM's weights of a sopro-tts GGUF) and
// _core.SoproLMSession (one KV cache: prefill, then steps).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bindings/registry.h"
#include "models/sopro/semantic_lm.h"
#include "runtime/errors.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace ov {

// A 1-D integer array (or sequence) as int32 ids; `what` names it in errors.
static std::vector<int32_t> ids_from_python(const py::object & obj, const char * what) {
    py::array a = py::array::ensure(obj);
    if (!a || (a.dtype().kind() != 'i' && a.dtype().kind() != 'u' && a.size() > 0)) {
        throw InvalidInput(std::string(what) + " must be a 1-D integer array");
    }
    if (a.ndim() != 1) throw InvalidInput(std::string(what) + " must be 1-D, got " + std::to_string(a.ndim()) + " dims");
    auto wide = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    std::vector<int32_t> out(wide.size());
    for (py::ssize_t i = 0; i < wide.size(); ++i) {
        const int64_t v = wide.data()[i];
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
            throw InvalidInput(std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(v) + " is outside int32");
        }
        out[i] = (int32_t) v;
    }
    return out;
}

static py::array_t<float> rows(std::vector<float> && data, py::ssize_t n_rows) {
    const py::ssize_t n_cols = n_rows ? (py::ssize_t) data.size() / n_rows : 0;
    py::array_t<float> out({n_rows, n_cols});
    std::copy(data.begin(), data.end(), out.mutable_data());
    return out;
}

static const char * const kPrefillDoc = R"doc(Reset the cache and run the prefix [style_prefix(style) | text | prompt | BOS].

Args:
    text: text token ids (1 to max_text_len, each < text_vocab_size), as TextTokenizer.encode gives them.
    style: the reference's first style_tokens semantic ids (may be empty).
    prompt: the prompt's semantic ids (may be empty).

Returns:
    float32 [n_logits]: token_head's logits after BOS (semantic ids, then BOS, EOS).

Raises:
    ValueError: an id out of range, or a prefix longer than the session's n_ctx.
)doc";

static const char * const kStepDoc = R"doc(Feed semantic ids at the next positions (teacher forcing when several).

Returns:
    float32 [len(tokens), n_logits]: the logits after each token.

Raises:
    ValueError: before prefill, an id outside [0, semantic_vocab_size), or past n_ctx.
)doc";

static void bind_sopro_lm(py::module_ & m) {
    py::class_<SemanticLM, std::shared_ptr<SemanticLM>>(
        m, "SoproLM", "Sopro's semantic LM (embeddings, style prefix, causal body, token head) from a sopro-tts GGUF.")
        .def(py::init([](const std::string & path, const BackendPtr & backend) {
                 py::gil_scoped_release release;
                 auto file = std::make_shared<GGUFFile>(path, "sopro-tts", *backend);
                 return std::make_shared<SemanticLM>(file, backend);
             }),
             "path"_a, "backend"_a,
             "Load the LM's tensors of `path` (arch sopro-tts) onto `backend`; ModelFormatError if any is off.")
        .def_property_readonly("metadata", [](const SemanticLM & lm) { return metadata_dict(lm.file()); })
        .def_property_readonly("n_layer", [](const SemanticLM & lm) { return lm.hparams().decoder.n_layer; })
        .def_property_readonly("hidden_size", [](const SemanticLM & lm) { return lm.hparams().decoder.n_embd; })
        .def_property_readonly("n_head", [](const SemanticLM & lm) { return lm.hparams().decoder.n_head; })
        .def_property_readonly("intermediate_size", [](const SemanticLM & lm) { return lm.hparams().decoder.n_ff; })
        .def_property_readonly("text_vocab_size", [](const SemanticLM & lm) { return lm.hparams().text_vocab; })
        .def_property_readonly("semantic_vocab_size", [](const SemanticLM & lm) { return lm.hparams().semantic_vocab; })
        .def_property_readonly("style_prefix_tokens", [](const SemanticLM & lm) { return lm.hparams().n_style; })
        .def_property_readonly("bos_id", [](const SemanticLM & lm) { return lm.hparams().bos(); })
        .def_property_readonly("eos_id", [](const SemanticLM & lm) { return lm.hparams().eos(); })
        .def_property_readonly("n_logits", [](const SemanticLM & lm) { return lm.hparams().n_logits(); })
        .def(
            "session",
            [](const std::shared_ptr<SemanticLM> & lm, int64_t n_ctx) {
                if (n_ctx <= 0) throw InvalidInput("n_ctx must be positive, got " + std::to_string(n_ctx));
                py::gil_scoped_release release;
                return std::make_shared<SemanticLMSession>(lm, n_ctx);
            },
            "n_ctx"_a,
            "A session whose KV cache holds n_ctx positions (prefix plus generated tokens; rounded up to 256).");

    py::class_<SemanticLMSession, std::shared_ptr<SemanticLMSession>>(
        m, "SoproLMSession", "One KV cache of the Sopro LM, reused across requests (prefill resets it).")
        .def_property_readonly("n_ctx", &SemanticLMSession::n_ctx)
        .def_property_readonly("length", &SemanticLMSession::length, "Positions in the cache.")
        .def(
            "prefill",
            [](SemanticLMSession & s, const py::object & text, const py::object & style, const py::object & prompt) {
                auto t = ids_from_python(text, "text"), st = ids_from_python(style, "style"),
                     p = ids_from_python(prompt, "prompt");
                std::vector<float> logits;
                {
                    py::gil_scoped_release release;
                    logits = s.prefill(t, st, p);
                }
                return py::array_t<float>((py::ssize_t) logits.size(), logits.data());
            },
            "text"_a, "style"_a, "prompt"_a, kPrefillDoc)
        .def(
            "step",
            [](SemanticLMSession & s, const py::object & tokens) {
                auto t = ids_from_python(tokens, "tokens");
                std::vector<float> logits;
                {
                    py::gil_scoped_release release;
                    logits = s.step(t);
                }
                return rows(std::move(logits), (py::ssize_t) t.size());
            },
            "tokens"_a, kStepDoc)
        .def(
            "prefix",
            [](SemanticLMSession & s, const py::object & text, const py::object & style, const py::object & prompt) {
                auto t = ids_from_python(text, "text"), st = ids_from_python(style, "style"),
                     p = ids_from_python(prompt, "prompt");
                const int64_t n = s.lm().hparams().n_style + (int64_t) (t.size() + p.size()) + 1;
                std::vector<float> emb;
                {
                    py::gil_scoped_release release;
                    emb = s.prefix(t, st, p);
                }
                return rows(std::move(emb), (py::ssize_t) n);
            },
            "text"_a, "style"_a, "prompt"_a,
            "The prefix embeddings [style_prefix_tokens + len(text) + len(prompt) + 1, hidden_size] (the cache is untouched).");
}

static const Binding reg(&bind_sopro_lm);

}  // namespace ov
