#include "support/exact_values.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "common/reduce.h"

namespace gyre::test {
namespace {

// Written here rather than taken from reduce.h so the tests do not check the kernels' own
// conversions against themselves. Values are exactly representable, so nothing rounds.
std::uint16_t halfBits(double v) {
  if (v == 0) return std::signbit(v) ? 0x8000 : 0;
  const std::uint16_t sign = v < 0 ? 0x8000 : 0;
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);  // |v| = m·2^e, m in [0.5, 1)
  return static_cast<std::uint16_t>(sign | ((e + 14) << 10) | static_cast<int>((2 * m - 1) * 1024));
}

double halfValue(std::uint16_t h) {
  const double sign = (h & 0x8000) ? -1 : 1;
  const int e = (h >> 10) & 31;
  const int f = h & 1023;
  if (e == 31) return f ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(f, -24);
  return sign * std::ldexp(1 + f / 1024.0, e - 15);
}

template <typename T>
void put(void* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
template <typename T>
T get(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

double exactInput(DataType dtype, ReduceOp op, int rank, std::size_t i) {
  const auto r = static_cast<std::size_t>(rank);
  if (op == ReduceOp::kProduct) {
    double v = (rank < 6 && (i + r) % 3 == 0) ? 2 : 1;
    if (dtype != DataType::kUInt8 && (i * 7 + r) % 5 == 0) v = -v;
    return v;
  }
  double v = static_cast<double>((i * 7 + r * 13) % 19) - 9;  // [-9, 9]
  if (dtype == DataType::kUInt8) v += 9;
  return v;
}

double exactReference(DataType dtype, ReduceOp op, int size, std::size_t i) {
  double acc = exactInput(dtype, op, 0, i);
  for (int r = 1; r < size; ++r) {
    const double x = exactInput(dtype, op, r, i);
    acc = reduce::referenceCombine(op, acc, x);
  }
  if (op != ReduceOp::kAverage) return acc;
  switch (dtype) {
    case DataType::kFloat64:
      return acc / size;
    case DataType::kFloat32:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return static_cast<float>(acc) / static_cast<float>(size);
    default:
      return static_cast<double>(static_cast<long long>(acc) / size);  // truncates toward zero
  }
}

void encode(DataType dtype, double value, void* p) {
  switch (dtype) {
    case DataType::kFloat32:
      return put(p, static_cast<float>(value));
    case DataType::kFloat64:
      return put(p, value);
    case DataType::kFloat16:
      return put(p, halfBits(value));
    case DataType::kBFloat16:
      return put(p,
                 static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(value)) >> 16));
    case DataType::kInt8:
      return put(p, static_cast<std::int8_t>(value));
    case DataType::kUInt8:
      return put(p, static_cast<std::uint8_t>(value));
    case DataType::kInt32:
      return put(p, static_cast<std::int32_t>(value));
    case DataType::kInt64:
      return put(p, static_cast<std::int64_t>(value));
    case DataType::kInt16:
      return put(p, static_cast<std::int16_t>(value));
  }
  throw std::logic_error("bad dtype");
}

double decode(DataType dtype, const void* p) {
  switch (dtype) {
    case DataType::kFloat32:
      return get<float>(p);
    case DataType::kFloat64:
      return get<double>(p);
    case DataType::kFloat16:
      return halfValue(get<std::uint16_t>(p));
    case DataType::kBFloat16:
      return std::bit_cast<float>(static_cast<std::uint32_t>(get<std::uint16_t>(p)) << 16);
    case DataType::kInt8:
      return get<std::int8_t>(p);
    case DataType::kUInt8:
      return get<std::uint8_t>(p);
    case DataType::kInt32:
      return get<std::int32_t>(p);
    case DataType::kInt64:
      return static_cast<double>(get<std::int64_t>(p));
    case DataType::kInt16:
      return get<std::int16_t>(p);
  }
  throw std::logic_error("bad dtype");
}

bool matches(DataType dtype, ReduceOp op, double got, double want) {
  if (op == ReduceOp::kAverage && (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16)) {
    const int bits = dtype == DataType::kFloat16 ? 11 : 8;
    return std::fabs(got - want) <= std::ldexp(std::fabs(want), -bits) + 1e-30;
  }
  return got == want;
}

void fillExact(DataType dtype, ReduceOp op, int rank, void* data, std::size_t count, std::size_t first) {
  const std::size_t es = dtypeSize(dtype);
  auto* p = static_cast<std::byte*>(data);
  for (std::size_t i = 0; i < count; ++i) encode(dtype, exactInput(dtype, op, rank, first + i), p + i * es);
}

std::size_t firstMismatch(DataType dtype, ReduceOp op, int size, const void* data, std::size_t count,
                          std::size_t first, std::string& what) {
  const std::size_t es = dtypeSize(dtype);
  const auto* p = static_cast<const std::byte*>(data);
  for (std::size_t i = 0; i < count; ++i) {
    const double got = decode(dtype, p + i * es);
    const double want = exactReference(dtype, op, size, first + i);
    if (!matches(dtype, op, got, want)) {
      std::ostringstream out;
      out << "element " << first + i << ": got " << got << ", want " << want;
      what = out.str();
      return i;
    }
  }
  return count;
}

}  // namespace gyre::test
