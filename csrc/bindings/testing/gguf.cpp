// _core.testing GGUF hooks: GGUFFile's loading and strict checks without a model (read_gguf; and
// check_gguf, the same tensor lookups a weight struct makes, driven by a table), for the loader
// tests.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>

#include "bindings/registry.h"
#include "runtime/gguf_file.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace ov {

static void check_gguf(const std::string & path, const std::string & arch, const BackendPtr & backend,
                       const std::map<std::string, std::vector<int64_t>> & tensors) {
    GGUFFile file(path, arch, *backend);
    for (const auto & [name, ne] : tensors) file.tensor(name, ne, {});
    file.check_all_consumed();
}

static py::tuple read_gguf(const std::string & path, const std::string & arch, const BackendPtr & backend) {
    GGUFFile file(path, arch, *backend);
    py::dict tensors;
    for (size_t i = 0; i < file.n_tensors(); ++i) {
        const char * name = gguf_get_tensor_name(file.meta(), (int64_t) i);
        tensors[py::str(name)] = py::str(ggml_type_name(gguf_get_tensor_type(file.meta(), (int64_t) i)));
    }
    return py::make_tuple(metadata_dict(file), tensors);
}

static void bind_gguf(py::module_ & m) {
    m.def("read_gguf", &read_gguf, "path"_a, "arch"_a, "backend"_a,
          "Load a GGUF of the given arch; returns (metadata dict, {tensor name: type name}).");
    m.def("check_gguf", &check_gguf, "path"_a, "arch"_a, "backend"_a, "tensors"_a,
          "Load a GGUF of the given arch and require exactly `tensors` ({name: ggml shape, innermost\n"
          "first}); raises ModelFormatError naming the first missing, misshaped or unexpected tensor.");
}

static const Binding reg(&bind_gguf, Binding::testing);

}  // namespace ov
