// Element-wise reduction kernels, vectorised (AVX2/F16C clones chosen at run time, portable
// fallback otherwise). float16 and bfloat16 are computed in float32 and rounded once per call
// (round to nearest even).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gyre/types.h"

namespace gyre::reduce {

// dst[i] = a[i] (op) b[i] for i < count. dst may alias a or b (not partially overlap).
// kAverage computes the sum; the division by the number of ranks is divide()'s job, once.
void apply(DataType dtype, ReduceOp op, void* dst, const void* a, const void* b, std::size_t count);

// dst[i] /= divisor. Floating types divide in their accumulation precision (float32 for the
// 16-bit types); integer types truncate toward zero.
void divide(DataType dtype, void* dst, std::size_t count, std::size_t divisor);

float halfToFloat(std::uint16_t h);
std::uint16_t floatToHalf(float f);
float bfloat16ToFloat(std::uint16_t b);
std::uint16_t floatToBfloat16(float f);

}  // namespace gyre::reduce
