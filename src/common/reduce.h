// Element-wise reduction kernels, vectorised (an AVX2/F16C kernel table chosen once at run time,
// a portable one otherwise). float16 and bfloat16 are computed in float32 and rounded back once
// per element (round to nearest even).
//
// Floating min/max return NaN if either operand is NaN and order -0 below +0; both are
// commutative bit for bit, so every rank gets identical bits whatever order an algorithm
// combines in. Integer sum and product wrap modulo 2^bits. Overflow to float16 gives +-Inf.
// Stateless and thread-safe; bad arguments (partial overlap, null buffers, divisor 0) throw
// InvalidArgument.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gyre/types.h"

namespace gyre::reduce {

// dst[i] = a[i] (op) b[i] for i < count. dst may alias a or b (not partially overlap).
// kAverage computes the sum; the division by the number of ranks is divide()'s job, once.
void apply(DataType dtype, ReduceOp op, void* dst, const void* a, const void* b, std::size_t count);

// dst[i] /= divisor, 1 <= divisor <= INT64_MAX. Floating types divide in their accumulation
// precision (float32 for the 16-bit types); integer types truncate toward zero.
void divide(DataType dtype, void* dst, std::size_t count, std::size_t divisor);

// The scalar meaning of `op` on two ordinary values (kAverage adds): the reference that checks
// (tests, `gyre bench --check`) fold over ranks. NaN and signed zeros follow the kernels' rules
// above, not this function.
inline double referenceCombine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return a + b;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kMin: return b < a ? b : a;
    case ReduceOp::kMax: return a < b ? b : a;
  }
  return a;
}

float halfToFloat(std::uint16_t h);
std::uint16_t floatToHalf(float f);
float bfloat16ToFloat(std::uint16_t b);
std::uint16_t floatToBfloat16(float f);

// For tests and benchmarks: whether the AVX2 kernels are in use, and a process-wide switch to
// the portable ones.
bool usingAvx2();
void forcePortableForTesting(bool portable);

}  // namespace gyre::reduce
