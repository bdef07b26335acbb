#include "runtime/backend.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "ggml-cpu.h"

namespace ov {

// OMNIVOICE_STOCK_OPS set to anything but "" or "0".
static bool stock_ops_from_env() {
    const char * v = std::getenv("OMNIVOICE_STOCK_OPS");
    return v && *v && std::strcmp(v, "0") != 0;
}

Backend::Backend(int n_threads, bool cpu_only, bool force_stock_ops) {
    backend_ = cpu_only ? nullptr : ggml_backend_init_best();
    if (!backend_) {
        backend_ = ggml_backend_cpu_init();
    }
    if (!backend_) {
        throw std::runtime_error("ggml: no compute backend could be initialised");
    }
    stock_ops_ = !is_cpu() || force_stock_ops || stock_ops_from_env();
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
    if (stock_ops_) {
        // A custom op is a CPU callback: on a device backend it cannot run, and on a forced CPU
        // one it would make the stock-op tests prove nothing.
        for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) {
            const ggml_tensor * node = ggml_graph_node(graph, i);
            const ggml_op op = node->op;
            if (op == GGML_OP_CUSTOM || op == GGML_OP_MAP_CUSTOM1 || op == GGML_OP_MAP_CUSTOM2 ||
                op == GGML_OP_MAP_CUSTOM3) {
                throw std::logic_error(std::string("stock-op graph holds the custom op ") + ggml_get_name(node));
            }
        }
    }
    std::lock_guard<std::mutex> lock(compute_mutex_);
    const ggml_status st = ggml_backend_graph_compute(backend_, graph);
    if (st != GGML_STATUS_SUCCESS) {
        throw std::runtime_error("ggml: graph compute failed with status " + std::to_string((int) st));
    }
}

}  // namespace ov
