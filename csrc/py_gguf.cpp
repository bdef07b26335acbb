// Python access to GGUFFile's generic strict checks, without a model: the same tensor lookups a
// weight struct makes, driven by a table. Used to verify converted files and by the loader tests.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>

#include "bindings.h"
#include "gguf_file.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace ov {

static void check_gguf(const std::string & path, const std::string & arch, const BackendPtr & backend,
                       const std::map<std::string, std::vector<int64_t>> & tensors) {
    GGUFFile file(path, arch, *backend);
    for (const auto & [name, ne] : tensors) file.tensor(name, ne, {});
    file.check_all_consumed();
}

static void bind_gguf(py::module_ & m) {
    m.def("check_gguf", &check_gguf, "path"_a, "arch"_a, "backend"_a, "tensors"_a,
          "Load a GGUF of the given arch and require exactly `tensors` ({name: ggml shape, innermost\n"
          "first}); raises ModelFormatError naming the first missing, misshaped or unexpected tensor.");
}

static const Binding reg(&bind_gguf);

}  // namespace ov
