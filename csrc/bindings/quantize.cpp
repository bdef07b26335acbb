// ggml's row quantisation for the converter (omnivoice.convert), which needs it for the K-quants:
// gguf-py quantises only Q8_0 and the 32-wide legacy types.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cctype>
#include <stdexcept>
#include <string>

#include "bindings/registry.h"
#include "ggml.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace ov {

// ggml's type called `name`, in any case ("Q4_K" or ggml's own "q4_K").
static ggml_type type_by_name(const std::string & name) {
    const auto lower = [](std::string s) {
        for (char & c : s) c = (char) std::tolower((unsigned char) c);
        return s;
    };
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const char * tn = ggml_type_name((ggml_type) t);
        if (tn && lower(name) == lower(tn) && ggml_blck_size((ggml_type) t) > 0) return (ggml_type) t;
    }
    throw std::invalid_argument("unknown ggml type '" + name + "'");
}

// Rows of x (numpy [rows, n_per_row] float32) quantised to `type`: uint8 [rows, row bytes].
static py::array_t<uint8_t> quantize(const py::array_t<float, py::array::c_style | py::array::forcecast> & x,
                                     const std::string & type_name) {
    const ggml_type type = type_by_name(type_name);
    if (!ggml_is_quantized(type) || ggml_quantize_requires_imatrix(type)) {
        throw std::invalid_argument("type " + type_name + " is not a quantised type that needs no importance matrix");
    }
    if (x.ndim() != 2) throw std::invalid_argument("x must be 2-D [rows, n_per_row]");
    const int64_t rows = x.shape(0), n_per_row = x.shape(1);
    if (n_per_row % ggml_blck_size(type) != 0) {
        throw std::invalid_argument(type_name + " needs rows of a multiple of " + std::to_string(ggml_blck_size(type)) +
                                    " values, got " + std::to_string(n_per_row));
    }
    const size_t row_bytes = ggml_row_size(type, n_per_row);
    py::array_t<uint8_t> out({rows, (int64_t) row_bytes});
    const float * src = x.data();
    uint8_t * dst = out.mutable_data();
    {
        py::gil_scoped_release release;
        ggml_quantize_chunk(type, src, dst, 0, rows, n_per_row, nullptr);
    }
    return out;
}

static void bind_quantize(py::module_ & m) {
    m.def("quantize", &quantize, "x"_a, "type"_a,
          "Quantise the rows of x (float32 [rows, n_per_row]) to ggml type `type` (e.g. 'q4_K') with\n"
          "ggml_quantize_chunk; returns uint8 [rows, row bytes]. Raises ValueError for a type that is\n"
          "not quantised, needs an importance matrix, or does not divide the row length.");
}

static const Binding reg(&bind_quantize);

}  // namespace ov
