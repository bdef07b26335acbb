#pragma once
// Each component registers its Python surface from its own py_*.cpp with a file-scope
//   static const ov::Binding reg(&bind_something);
// and module.cpp runs them all, so adding a component never edits module.cpp.
#include <pybind11/pybind11.h>

#include <vector>

#include "gguf_file.h"

namespace ov {

using BindFn = void (*)(pybind11::module_ &);

struct Binding {
    explicit Binding(BindFn fn);
};

// All registered binders, in registration order.
const std::vector<BindFn> & bindings();

// All metadata of a loaded GGUF as a Python dict (arrays become lists).
pybind11::dict metadata_dict(const GGUFFile & file);

}  // namespace ov
