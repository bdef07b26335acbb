#pragma once
// The compute backend shared by every model of one process-level handle: one ggml device, taken
// by name (the CPU, a GPU when libggml was built with one, a remote device behind an RPC server)
// or the best one ggml offers.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "runtime/errors.h"

namespace ov {

class Backend {
public:
    // device "" takes the best device ggml offers (a GPU when built with one, else the CPU);
    // "cpu", a ggml device name ("CUDA0", any case) or "rpc://HOST:PORT" takes that one. An
    // unknown name throws InvalidInput naming the available devices; an RPC server that is down,
    // silent or speaks another protocol throws DeviceError within kRpcProbeSeconds.
    // force_stock_ops makes a CPU backend take the stock-op graphs too; so does the environment
    // variable OMNIVOICE_STOCK_OPS=1.
    explicit Backend(int n_threads, const std::string & device = "", bool force_stock_ops = false);
    ~Backend();
    Backend(const Backend &) = delete;
    Backend & operator=(const Backend &) = delete;

    // Names `device` accepts now: "CPU", the GPUs ggml found, and rpc://HOST:PORT of every RPC
    // server this process has connected to (any other reachable server is accepted as well).
    static std::vector<std::string> devices();
    static bool has_rpc();  // whether this build links ggml's RPC backend

    ggml_backend_t get() const { return backend_; }
    bool is_cpu() const;
    // Whether models build their graphs from stock ggml ops only (no CPU custom op, no CPU-only
    // weight layout): always off the CPU, on the CPU only when forced (to test that path here).
    bool stock_ops() const { return stock_ops_; }
    const char * name() const;
    // The device as `device` names it: "CPU", "CUDA0", "rpc://127.0.0.1:50052".
    const std::string & device() const { return device_; }

    void set_n_threads(int n_threads);
    int n_threads() const { return n_threads_; }

    // Runs a graph whose tensors were allocated on this backend; throws on failure. One graph at
    // a time: models sharing a backend (the LM and the codec) may be called from several threads,
    // and the CPU backend keeps one work buffer.
    void compute(ggml_cgraph * graph);

    // Copies between host memory and a whole tensor on this backend, timed into stats().
    void upload(ggml_tensor * t, const void * data, size_t size) const;
    void download(const ggml_tensor * t, void * data, size_t size) const;

    // Since the backend was made or reset_stats(): bytes copied each way and the seconds spent
    // copying and computing (compute waits for the device, so that copies do not include it).
    struct Stats {
        uint64_t upload_bytes, download_bytes, computes;
        double upload_s, download_s, compute_s;
    };
    Stats stats() const;
    void reset_stats();

    static constexpr int kRpcProbeSeconds = 5;

private:
    ggml_backend_t backend_ = nullptr;
    ggml_backend_buffer_t keepalive_ = nullptr;  // on an RPC device: holds its connection open
    std::string device_;
    int n_threads_ = 0;
    bool stock_ops_ = false;
    std::mutex compute_mutex_;
    // nanoseconds and bytes, added from any thread
    mutable std::atomic<uint64_t> up_bytes_{0}, down_bytes_{0}, up_ns_{0}, down_ns_{0}, compute_ns_{0}, computes_{0};
};

using BackendPtr = std::shared_ptr<Backend>;

// Serves the CPU backend with n_threads on HOST:PORT (an IPv4 address) over ggml's RPC protocol,
// one client at a time, until ggml's server stops (it cannot listen there, or accept failed):
// then throws DeviceError. cache_dir, when not empty, keeps large tensors the clients sent, so
// that a client loading the same weights again sends their hashes only.
void serve_rpc(const std::string & host, int port, int n_threads, const std::string & cache_dir);

// Makes ggml-rpc's "Remote RPC server crashed" abort (it aborts the client on any failed call:
// a server that died, closed the connection or answered garbage) a DeviceError thrown from the
// failing call instead. Every other ggml abort still aborts. Installed once by the module.
void install_rpc_abort_guard();

// Runs free_fn(p) from a destructor: on a lost RPC device the free call throws DeviceError, and
// the memory went with the server, so that error is dropped rather than terminating the process.
template <typename T>
void release_device_memory(void (*free_fn)(T *), T * p) noexcept {
    if (!p) return;
    try {
        free_fn(p);
    } catch (const DeviceError &) {
    }
}

}  // namespace ov
