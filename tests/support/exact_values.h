// Inputs whose reduction is exact in every dtype and every order, for testing reduction
// algorithms bit for bit against a serial reference: small integers for sum, average, min and
// max (|sum| <= 72 over 8 ranks, so int8 and bfloat16 hold it), and ±1 or ±2 for product (at
// most six factors of 2). uint8 inputs are non-negative.
#pragma once

#include <cstddef>
#include <string>

#include "gyre/types.h"

namespace gyre::test {

// Rank `rank`'s element i.
double exactInput(DataType dtype, ReduceOp op, int rank, std::size_t i);
// The reduction of exactInput over ranks 0..size-1 at element i (average: divided by size as
// the kernels do it: truncating for integers, in float32 or float64 for floating types).
double exactReference(DataType dtype, ReduceOp op, int size, std::size_t i);

// One element of `dtype` at p: written from a value it represents exactly, read as a double.
void encode(DataType dtype, double value, void* p);
double decode(DataType dtype, const void* p);

// Whether a result element equals the reference: exactly, except a float16/bfloat16 average,
// whose float32 quotient is rounded to 16 bits (within half a unit in the last place).
bool matches(DataType dtype, ReduceOp op, double got, double want);

// Fills `count` elements of rank `rank`'s input.
void fillExact(DataType dtype, ReduceOp op, int rank, void* data, std::size_t count, std::size_t first = 0);
// Index of the first element of data (elements first.. of the reduction) that differs from the
// reference, or count when none does; `what` then describes the difference.
std::size_t firstMismatch(DataType dtype, ReduceOp op, int size, const void* data, std::size_t count,
                          std::size_t first, std::string& what);

}  // namespace gyre::test
