// The FP8 kernels of the CUDA backend (fp8.cu): the amax reduction, the bf16 → FP8 casts with
// tensorwise current scaling, the FP8 byte transpose (the contract is Fp8QuantizeArgs in kernels/ops.hpp; the CPU twin is
// kernels/cpu/fp8.cpp), and the bias add the FP8 GEMM needs where cuBLASLt has no BIAS epilogue.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace recipe::kernels::cuda {

// amax[0] = max |x| over n bf16 values (NaN ignored); zeroes amax first. Order-independent, so
// bitwise repeatable.
void fp8_amax_bf16(float* amax, const void* x, int64_t n, cudaStream_t s);

// From amax[0]: scale = fp8 max / amax (1 when amax is 0, not finite, or the quotient overflows),
// scale_inv[0] = 1/scale; out[r, c] (if non-null) and out_t[c, r] (if non-null) = the FP8 byte
// of inp[r, c]·scale (round to nearest even, saturating, NaN → NaN). One pass over inp, a tile at
// a time through shared memory, so both outputs are written coalesced: 64×64 tiles with 16-byte
// loads and 8-byte stores when rows and cols are multiples of 8 (the FP8 GEMM operands), else
// 32×32 tiles of single elements.
// amax_out (nullable): max-accumulates max |inp| in the same pass (delayed scaling's record).
void fp8_quantize_bf16(void* out, void* out_t, float* scale_inv, const void* inp, const float* amax, float* amax_out,
                       int64_t rows, int64_t cols, bool e5m2, cudaStream_t s);

// out [cols, rows] = inp [rows, cols]ᵀ, one byte per element (an FP8 matrix copied transposed; the
// contract is Backend::fp8_transpose in kernels/ops.hpp). Tiles through shared memory with 16-byte
// loads and stores where rows and cols are multiples of 16 and both pointers 16-byte aligned.
void fp8_transpose_bytes(void* out, const void* inp, int64_t rows, int64_t cols, cudaStream_t s);

// fp8_quantize_bf16 of dgate_up [rows, 2F] = swiglu_bwd(dout [rows, F], gate_up [rows, 2F]),
// computed in registers and rounded to bf16 as swiglu_bwd_bf16 stores it, never written: out
// [rows, 2F], out_t [2F, rows] (either nullable), the same tiles, bytes and amax_out as the cast
// of the materialised tensor (the contract is Fp8QuantizeSwigluBwdArgs in kernels/ops.hpp).
void fp8_quantize_swiglu_bwd_bf16(void* out, void* out_t, float* scale_inv, const void* dout, const void* gate_up,
                                  const float* amax, float* amax_out, int64_t rows, int64_t F, bool e5m2,
                                  cudaStream_t s);

// swiglu_fwd_bf16 (out [rows, F] = silu(gate)·up of gate_up [rows, 2F], bf16) and q [rows, F] =
// fp8_quantize_bf16 of that out (row layout), in one pass: the same bf16 values, bytes, scale_inv
// and amax_out as the two calls (the contract is Fp8SwigluFwdQuantizeArgs in kernels/ops.hpp).
void fp8_swiglu_fwd_quantize_bf16(void* out, void* q, float* scale_inv, const void* gate_up, const float* amax,
                                  float* amax_out, int64_t rows, int64_t F, bool e5m2, cudaStream_t s);

// Delayed scaling's roll of `tensors` histories [tensors, history_len] with their amax and
// scale-source cells (4 floats apart); the contract is Fp8AmaxHistoryArgs in kernels/ops.hpp.
void fp8_amax_history_f32(float* history, float* amax, float* scale_amax, int64_t tensors, int64_t history_len,
                          bool push, bool most_recent, cudaStream_t s);

// out[r, c] += bias[c] over a bf16 [rows, cols] matrix.
void add_bias_bf16(void* out, const void* bias, int64_t rows, int64_t cols, cudaStream_t s);

}  // namespace recipe::kernels::cuda
