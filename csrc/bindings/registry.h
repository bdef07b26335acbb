#pragma once
// Each component registers its Python surface from its own bindings/*.cpp with a file-scope
//   static const ov::Binding reg(&bind_something);
// and module.cpp runs them all, so adding a component never edits module.cpp. Binders given
// Binding::testing fill the `_core.testing` submodule: op, capture and GGUF hooks only tests use.
#include <pybind11/pybind11.h>

#include <vector>

#include "runtime/gguf_file.h"

namespace ov {

using BindFn = void (*)(pybind11::module_ &);

struct Binding {
    enum Target { core, testing };
    explicit Binding(BindFn fn, Target target = core);
};

// All registered binders of `target`, in registration order.
const std::vector<BindFn> & bindings(Binding::Target target);

// All metadata of a loaded GGUF as a Python dict (arrays become lists).
pybind11::dict metadata_dict(const GGUFFile & file);

}  // namespace ov
