// Python surface of the language model: _core.LM (weights + hparams) and _core.LMSession (one
// fixed packing of segments, run once per MaskGIT step).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "bindings/registry.h"
#include "models/omnivoice/lm/qwen3.h"
#include "runtime/errors.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace ov {

static const char * const kForwardDoc = R"doc(Run the LM on one packed step.

Args:
    input_ids: integer array [num_audio_codebook, n_tokens] (int32 preferred), the segments
        concatenated along the last axis in session order. At text positions only row 0 is
        read (a text token id < vocab_size); at audio positions every row holds an audio id
        in [0, audio_vocab_size), audio_mask_id meaning "masked".
    audio_mask: bool array [n_tokens], True at audio positions.

Returns:
    float32 array [n_target, num_audio_codebook, audio_vocab_size]: for each segment in
    session order, the logits of its target window rows [target_start, target_start +
    target_len), concatenated; row r, codebook k is audio_heads output slice k of that token.

Raises:
    ValueError: wrong dtype or shape, or an id out of range for its position.
)doc";

// Copies any integer array into int32, refusing values int32 cannot hold.
static py::array_t<int32_t, py::array::c_style> as_int32(const py::array & a, const char * what) {
    const char kind = a.dtype().kind();
    if (kind != 'i' && kind != 'u') {
        throw InvalidInput(std::string(what) + " must be an integer array, got dtype " +
                           std::string(py::str(a.dtype())));
    }
    if (a.dtype().is(py::dtype::of<int32_t>())) {
        return py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(a);
    }
    auto wide = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    py::array_t<int32_t, py::array::c_style> out(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
    const int64_t * src = wide.data();
    int32_t * dst = out.mutable_data();
    for (py::ssize_t i = 0; i < wide.size(); ++i) {
        if (src[i] < std::numeric_limits<int32_t>::min() || src[i] > std::numeric_limits<int32_t>::max()) {
            throw InvalidInput(std::string(what) + " holds " + std::to_string(src[i]) + ", outside int32");
        }
        dst[i] = (int32_t) src[i];
    }
    return out;
}

static const char * const kScoreDoc = R"doc(Run the LM on one packed step and score every cell in the graph.

Needs a session opened with a guidance_scale. Arguments as forward's.

Returns:
    (scores, tokens): float32 and int32 arrays [n_cond_target, num_audio_codebook], the target
    rows of the items' cond segments in order (row r, codebook k). For each cell the max and the
    argmax over classes of log_softmax(c + g * (c - u)), c and u the log-softmaxed cond and uncond
    logits of that cell (log_softmax(c) when g = 0), with audio_mask_id excluded: the confidence
    and greedy token of upstream's _predict_tokens_with_scoring. Only these come back (about 16 KB
    at 250 frames, against 16 MB of logits).

Raises:
    ValueError: as forward, or when the session has no scoring.
)doc";

// Checks a step's inputs against the session; returns them as C-contiguous int32 and bool arrays.
static std::pair<py::array_t<int32_t, py::array::c_style>, py::array_t<bool, py::array::c_style>> step_inputs(
    const Qwen3Session & s, const py::array & input_ids, const py::array & audio_mask) {
    const Qwen3HParams & hp = s.model().hparams();
    const int64_t n = s.n_tokens();
    if (input_ids.ndim() != 2 || input_ids.shape(0) != hp.n_codebook || input_ids.shape(1) != n) {
        throw InvalidInput("input_ids must have shape [" + std::to_string(hp.n_codebook) + ", " + std::to_string(n) +
                           "], got " + std::string(py::str(py::cast(std::vector<py::ssize_t>(
                                           input_ids.shape(), input_ids.shape() + input_ids.ndim())))));
    }
    if (!audio_mask.dtype().is(py::dtype::of<bool>())) {
        throw InvalidInput("audio_mask must be a bool array, got dtype " + std::string(py::str(audio_mask.dtype())));
    }
    if (audio_mask.ndim() != 1 || audio_mask.shape(0) != n) {
        throw InvalidInput("audio_mask must have shape [" + std::to_string(n) + "]");
    }
    return {as_int32(input_ids, "input_ids"),
            py::array_t<bool, py::array::c_style | py::array::forcecast>::ensure(audio_mask)};
}

static py::array_t<float> session_forward(Qwen3Session & s, const py::array & input_ids, const py::array & audio_mask) {
    const Qwen3HParams & hp = s.model().hparams();
    auto [ids, mask] = step_inputs(s, input_ids, audio_mask);
    py::array_t<float> logits({(py::ssize_t) s.n_target(), (py::ssize_t) hp.n_codebook, (py::ssize_t) hp.audio_vocab});
    {
        py::gil_scoped_release release;
        s.forward(ids.data(), mask.data(), logits.mutable_data());
    }
    return logits;
}

static py::tuple session_score(Qwen3Session & s, const py::array & input_ids, const py::array & audio_mask) {
    if (!s.scores_cells()) throw InvalidInput("this session was opened without a guidance_scale: it has no scoring");
    auto [ids, mask] = step_inputs(s, input_ids, audio_mask);
    const py::ssize_t n_cb = s.model().hparams().n_codebook;
    py::array_t<float> scores({(py::ssize_t) s.n_cells() / n_cb, n_cb});
    py::array_t<int32_t> best({(py::ssize_t) s.n_cells() / n_cb, n_cb});
    {
        py::gil_scoped_release release;
        s.score(ids.data(), mask.data(), scores.mutable_data(), best.mutable_data());
    }
    return py::make_tuple(scores, best);
}

static void bind_lm(py::module_ & m) {
    py::class_<Qwen3Model, std::shared_ptr<Qwen3Model>>(
        m, "LM", "OmniVoice's language model (Qwen3 body, audio embeddings and heads) from an omnivoice-lm GGUF.")
        .def(py::init([](const std::string & path, const BackendPtr & backend) {
                 py::gil_scoped_release release;
                 return std::make_shared<Qwen3Model>(path, backend);
             }),
             "path"_a, "backend"_a,
             "Load `path` (arch omnivoice-lm) onto `backend`; ModelFormatError if any tensor or key is off.")
        .def_property_readonly("path", [](const Qwen3Model & lm) { return lm.file().path(); })
        .def_property_readonly("metadata", [](const Qwen3Model & lm) { return metadata_dict(lm.file()); },
                               "All GGUF metadata as a dict.")
        .def_property_readonly("n_layer", [](const Qwen3Model & lm) { return lm.hparams().n_layer; })
        .def_property_readonly("hidden_size", [](const Qwen3Model & lm) { return lm.hparams().n_embd; })
        .def_property_readonly("intermediate_size", [](const Qwen3Model & lm) { return lm.hparams().n_ff; })
        .def_property_readonly("n_head", [](const Qwen3Model & lm) { return lm.hparams().n_head; })
        .def_property_readonly("n_head_kv", [](const Qwen3Model & lm) { return lm.hparams().n_head_kv; })
        .def_property_readonly("head_dim", [](const Qwen3Model & lm) { return lm.hparams().n_embd_head; })
        .def_property_readonly("vocab_size", [](const Qwen3Model & lm) { return lm.hparams().n_vocab; })
        .def_property_readonly("context_length", [](const Qwen3Model & lm) { return lm.hparams().n_ctx_train; })
        .def_property_readonly("num_audio_codebook", [](const Qwen3Model & lm) { return lm.hparams().n_codebook; })
        .def_property_readonly("audio_vocab_size", [](const Qwen3Model & lm) { return lm.hparams().audio_vocab; })
        .def_property_readonly("audio_mask_id", [](const Qwen3Model & lm) { return lm.hparams().audio_mask_id; })
        .def_property_readonly("audio_codebook_weights",
                               [](const Qwen3Model & lm) { return lm.hparams().audio_codebook_weights; })
        .def(
            "session",
            [](const std::shared_ptr<Qwen3Model> & lm, const std::vector<std::tuple<int64_t, int64_t, int64_t>> & s,
               std::optional<float> guidance_scale) {
                std::vector<PackedSegment> packed;
                for (const auto & [length, target_start, target_len] : s) {
                    packed.push_back({length, target_start, target_len});
                }
                py::gil_scoped_release release;
                return std::make_shared<Qwen3Session>(lm, std::move(packed), guidance_scale);
            },
            "segments"_a, "guidance_scale"_a = py::none(),
            "Build the graph for one packing. `segments` is a list of (length, target_start, target_len): "
            "each segment attends only within itself and its positions start at 0. With `guidance_scale` "
            "the graph also scores cells (see LMSession.score): non-zero needs (cond, uncond) segment pairs "
            "of equal target length, one per item; 0 makes every segment an item's cond segment.");

    py::class_<Qwen3Session, std::shared_ptr<Qwen3Session>>(
        m, "LMSession", "A fixed packing of segments with its graph allocated once.")
        .def_property_readonly("n_tokens", &Qwen3Session::n_tokens)
        .def_property_readonly("n_target", &Qwen3Session::n_target)
        .def_property_readonly("segments",
                               [](const Qwen3Session & s) {
                                   py::list out;
                                   for (const PackedSegment & p : s.segments()) {
                                       out.append(py::make_tuple(p.length, p.target_start, p.target_len));
                                   }
                                   return out;
                               })
        .def_property_readonly("scores_cells", &Qwen3Session::scores_cells,
                               "Whether the session was opened with a guidance_scale (score() works).")
        .def("forward", &session_forward, "input_ids"_a, "audio_mask"_a, kForwardDoc)
        .def("score", &session_score, "input_ids"_a, "audio_mask"_a, kScoreDoc);
}

static const Binding reg(&bind_lm);

}  // namespace ov
