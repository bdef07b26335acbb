#include "runtime/backend.h"

#include <stdexcept>
#include <string>
#include <thread>

#include "ggml-cpu.h"

namespace ov {

Backend::Backend(int n_threads, bool cpu_only) {
    backend_ = cpu_only ? nullptr : ggml_backend_init_best();
    if (!backend_) {
        backend_ = ggml_backend_cpu_init();
    }
    if (!backend_) {
        throw std::runtime_error("ggml: no compute backend could be initialised");
    }
    set_n_threads(n_threads);
}

Backend::~Backend() {
    if (backend_) {
        ggml_backend_free(backend_);
    }
}

bool Backend::is_cpu() const { return ggml_backend_is_cpu(backend_); }

const char * Backend::name() const { return ggml_backend_name(backend_); }

void Backend::set_n_threads(int n_threads) {
    if (n_threads <= 0) {
        n_threads = (int) std::thread::hardware_concurrency();
        if (n_threads <= 0) n_threads = 1;
    }
    n_threads_ = n_threads;
    if (ggml_backend_is_cpu(backend_)) {
        ggml_backend_cpu_set_n_threads(backend_, n_threads);
    }
}

void Backend::compute(ggml_cgraph * graph) {
    std::lock_guard<std::mutex> lock(compute_mutex_);
    const ggml_status st = ggml_backend_graph_compute(backend_, graph);
    if (st != GGML_STATUS_SUCCESS) {
        throw std::runtime_error("ggml: graph compute failed with status " + std::to_string((int) st));
    }
}

}  // namespace ov
