#pragma once
// The compute backend shared by every model of one process-level handle: the best device ggml
// offers (a GPU when libggml was built with one) plus the CPU backend that runs our custom ops.
#include <memory>
#include <mutex>

#include "ggml-backend.h"

namespace ov {

class Backend {
public:
    // cpu_only skips the device search. force_stock_ops makes a CPU backend take the stock-op
    // graphs too; so does the environment variable OMNIVOICE_STOCK_OPS=1.
    explicit Backend(int n_threads, bool cpu_only = false, bool force_stock_ops = false);
    ~Backend();
    Backend(const Backend &) = delete;
    Backend & operator=(const Backend &) = delete;

    ggml_backend_t get() const { return backend_; }
    bool is_cpu() const;
    // Whether models build their graphs from stock ggml ops only (no CPU custom op, no CPU-only
    // weight layout): always off the CPU, on the CPU only when forced (to test that path here).
    bool stock_ops() const { return stock_ops_; }
    const char * name() const;

    void set_n_threads(int n_threads);
    int n_threads() const { return n_threads_; }

    // Runs a graph whose tensors were allocated on this backend; throws on failure. One graph at
    // a time: models sharing a backend (the LM and the codec) may be called from several threads,
    // and the CPU backend keeps one work buffer.
    void compute(ggml_cgraph * graph);

private:
    ggml_backend_t backend_ = nullptr;
    int n_threads_ = 0;
    bool stock_ops_ = false;
    std::mutex compute_mutex_;
};

using BackendPtr = std::shared_ptr<Backend>;

}  // namespace ov
