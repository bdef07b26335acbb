#pragma once
// y = W x for weights in the GGUF's own layout ([IN, OUT] in ggml order: one row of IN values per
// output), as two CPU custom ops. The first packs every token's x once into contiguous [IN][6]
// micro-panels of 6 tokens (14 with AVX-512), split over the threads. The second hands out units of
// 16 outputs (32 with AVX-512) over a block of tokens (packed x within 8 MB) to whichever thread
// asks next. Per chunk of 384 inputs (192 with AVX-512) a unit unpacks its weights once into an F32
// [chunk][16] block of 24 KB in L1 (F32 copied, BF16 shifted, F16 converted, Q8_0 scaled) while the
// next chunk's rows are prefetched, and runs every 6-token tile over it: 2 weight loads, 6
// broadcasts and 12 FMAs per input on 12 accumulator registers (BLIS's 6x16 AVX2 layout). The
// weights are never copied or transposed at load, and every type runs at the F32 FMA rate with its
// own memory traffic. Each output is summed by one unit in one order, so results do not depend on
// the thread count or on which thread ran what. Handing out units instead of fixed ranges (with
// ov_attention doing the same) took the BF16 auto-voice step's samples in ggml's barriers from
// 6-9% to under 1% (perf, 2 threads), logits bit-identical; beside a busy process, 2 threads went
// from 7.6 to 6.1-6.5 s per step, while a quiet machine's step stayed within noise (24 alternated
// runs: new/old 1.02, 0.92-1.18).
// On CPUs with AVX512-BF16, BF16 weights run on vdpbf16ps instead (ov_bf16_dot, isa.h): the pack
// op also writes x once in bf16 pairs ([IN/2][14] words per tile, rounded to nearest even as ggml
// rounds it for its own BF16 mul_mat), a unit moves each 384-input chunk of its 32 rows into a
// [192 pairs][32] panel of 24 KB (the rows' bf16 pairs as they are, only transposed), and a tile
// runs 2 weight loads, 14 broadcasts and 28 vdpbf16ps per pair of inputs on F32 accumulators:
// twice the F32 FMA rate per instruction, the same hand-out and thread-count independence.
// Zen 3, AVX2, LM shapes (bench/linear.py, N = 550, 2 threads, shared machine): medians 117-156
// GFLOP/s for F32, BF16, Q8_0 (one loaded round set: 91), 67-90% of the FMA peak measured in the
// same rounds (189 quiet), 1.2-1.9x ggml's mul_mat; 175-182 at best; 1 thread 86-91% of its peak
// at best. Before x was packed (token rows read 4 KB apart): about 110 GFLOP/s, 58%.
#include <vector>

#include "ggml.h"

// The weight types the op reads: F32, F16, BF16, Q8_0, and the K-quants Q4_K, Q5_K, Q6_K through
// ggml's own to_float (chunks of 256). A Q4_K_M LM step (auto shape, Zen 3, 2 threads): 3.8-4.8 s
// through this op against 6.1-7.4 s through ggml's mul_mat, about the BF16 step's time.
bool ov_linear_supports(ggml_type type);

// Whether a model should run `type` through ov_linear rather than ggml's mul_mat on this CPU: every
// supported type, except BF16 where the CPU has AVX512-BF16 but our vdpbf16ps build is switched off
// (ov_bf16_dot, isa.h): there ggml's vdpbf16ps GEMM beats any F32 FMA kernel (Zen 5, issue 11: 620
// against an F32 peak of 514 GFLOP/s).
bool ov_linear_preferred(ggml_type type);

// What runs `type` in a model on this CPU now: "ggml mul_mat", or "ov_linear " and the build
// ("base", "avx2", "avx512", "avx512bf16": BF16 on vdpbf16ps). For benches' reports.
const char * ov_linear_kernel(ggml_type type);

// x: [IN, N] F32 (rows may be strided); weights: 1 to 9 tensors [IN, OUT_i], each contiguous, of
// any type ov_linear_supports (they may differ). Returns [sum OUT_i, N]: the weights' outputs
// stacked in order, as one product with their concatenation (e.g. q|k|v) without building it.
ggml_tensor * ov_linear(ggml_context * ctx, ggml_tensor * x, const std::vector<ggml_tensor *> & weights);
