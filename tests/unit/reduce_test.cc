#include "common/reduce.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gyre/errors.h"

namespace gyre::reduce {
namespace {

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                               DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                               DataType::kInt32,    DataType::kInt64, DataType::kInt16};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kProduct, ReduceOp::kMin,
                             ReduceOp::kMax};
// Empty, one element, and lengths that leave every kind of vector tail.
constexpr std::size_t kCounts[] = {0, 1, 7, 31, 1023, 4097};

// ---- How the reference sees each dtype: storage S, computed in C. ----

template <typename T>
struct Plain {
  using S = T;
  using C = T;
  static C up(S x) { return x; }
  static S down(C x) { return x; }
};
struct Half {
  using S = std::uint16_t;
  using C = float;
  static C up(S x) { return halfToFloat(x); }
  static S down(C x) { return floatToHalf(x); }
};
struct BHalf {
  using S = std::uint16_t;
  using C = float;
  static C up(S x) { return bfloat16ToFloat(x); }
  static S down(C x) { return floatToBfloat16(x); }
};

template <typename F>
decltype(auto) withType(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kFloat32:
      return f(Plain<float>{});
    case DataType::kFloat64:
      return f(Plain<double>{});
    case DataType::kFloat16:
      return f(Half{});
    case DataType::kBFloat16:
      return f(BHalf{});
    case DataType::kInt8:
      return f(Plain<std::int8_t>{});
    case DataType::kUInt8:
      return f(Plain<std::uint8_t>{});
    case DataType::kInt32:
      return f(Plain<std::int32_t>{});
    case DataType::kInt64:
      return f(Plain<std::int64_t>{});
    case DataType::kInt16:
      return f(Plain<std::int16_t>{});
  }
  throw std::logic_error("bad dtype");
}

// The documented semantics, written independently of the kernels: integers wrap; floating
// min/max return NaN if either operand is NaN and order -0 below +0.
template <typename T>
T refOp(ReduceOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {  // narrower than int: unsigned int, not promoted to int
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case ReduceOp::kProduct:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case ReduceOp::kMin:
        return std::min(a, b);
      case ReduceOp::kMax:
        return std::max(a, b);
    }
  } else {
    const bool nan = std::isnan(a) || std::isnan(b);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        return a + b;
      case ReduceOp::kProduct:
        return a * b;
      case ReduceOp::kMin:
        if (nan) return std::numeric_limits<T>::quiet_NaN();
        if (a == b) return std::signbit(a) ? a : b;
        return a < b ? a : b;
      case ReduceOp::kMax:
        if (nan) return std::numeric_limits<T>::quiet_NaN();
        if (a == b) return std::signbit(a) ? b : a;
        return a > b ? a : b;
    }
  }
  throw std::logic_error("bad op");
}

// Bit-exact, except that any NaN matches any NaN.
template <typename Conv>
bool same(typename Conv::S got, typename Conv::S want) {
  if constexpr (std::is_floating_point_v<typename Conv::C>) {
    if (std::isnan(Conv::up(want))) return std::isnan(Conv::up(got));
  }
  return std::memcmp(&got, &want, sizeof got) == 0;
}

template <typename S>
std::string show(S x) {
  std::ostringstream out;
  if constexpr (std::is_integral_v<S>) {
    out << +x;
    if constexpr (sizeof(S) == 2) out << " (0x" << std::hex << x << ")";
  } else {
    out.precision(std::numeric_limits<S>::max_digits10);
    using U = std::conditional_t<sizeof(S) == 4, std::uint32_t, std::uint64_t>;
    out << x << " (0x" << std::hex << std::bit_cast<U>(x) << ")";
  }
  return out.str();
}

// Deterministic inputs: mt19937_64's sequence is fixed by the standard; the mapping is ours.
class Inputs {
 public:
  explicit Inputs(std::uint64_t seed) : gen_(seed) {}

  template <typename Conv>
  typename Conv::S next() {
    using S = typename Conv::S;
    const std::uint64_t r = gen_();
    if constexpr (std::is_same_v<Conv, Half> || std::is_same_v<Conv, BHalf> || std::is_integral_v<S>) {
      return static_cast<S>(r);  // every bit pattern: NaN, Inf, subnormals, wrap-around
    } else {
      static constexpr S kSpecial[] = {0.0,
                                       -0.0,
                                       1.0,
                                       -1.0,
                                       std::numeric_limits<S>::infinity(),
                                       -std::numeric_limits<S>::infinity(),
                                       std::numeric_limits<S>::quiet_NaN(),
                                       -std::numeric_limits<S>::quiet_NaN(),
                                       std::numeric_limits<S>::denorm_min(),
                                       -std::numeric_limits<S>::denorm_min(),
                                       std::numeric_limits<S>::max(),
                                       std::numeric_limits<S>::lowest()};
      if (r % 8 == 0) return kSpecial[(r >> 3) % std::size(kSpecial)];
      // sign * [1, 2) * 2^[-24, 24)
      const S mantissa = static_cast<S>(1.0 + static_cast<double>(r >> 12 & 0xfffff) / 0x1p20);
      const int exponent = static_cast<int>((r >> 40) % 48) - 24;
      return static_cast<S>((r >> 63 ? -1 : 1) * std::ldexp(mantissa, exponent));
    }
  }

 private:
  std::mt19937_64 gen_;
};

enum class Layout { kSeparate, kDstIsA, kDstIsB };
const char* name(Layout l) {
  return l == Layout::kSeparate ? "separate" : l == Layout::kDstIsA ? "dst==a" : "dst==b";
}

// Runs the kernel selected by the parameter: true = portable, false = best the CPU has.
class ReduceTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { forcePortableForTesting(GetParam()); }
  void TearDown() override { forcePortableForTesting(false); }
};

template <typename Conv>
void checkApply(DataType dtype, ReduceOp op, std::size_t count, Layout layout, std::size_t offset) {
  using S = typename Conv::S;
  Inputs inputs(count * 131 + static_cast<std::size_t>(op) * 7 + static_cast<std::size_t>(dtype));
  std::vector<S> abuf(count + 1), bbuf(count + 1), dbuf(count + 1);
  for (auto& x : abuf) x = inputs.next<Conv>();
  for (auto& x : bbuf) x = inputs.next<Conv>();
  for (auto& x : dbuf) x = inputs.next<Conv>();
  std::vector<S> want(count);
  for (std::size_t i = 0; i < count; ++i)
    want[i] = Conv::down(refOp(op, Conv::up(abuf[offset + i]), Conv::up(bbuf[offset + i])));
  const std::vector<S> abefore = abuf, bbefore = bbuf, dbefore = dbuf;
  S* a = abuf.data() + offset;
  S* b = bbuf.data() + offset;
  S* d = layout == Layout::kDstIsA ? a : layout == Layout::kDstIsB ? b : dbuf.data() + offset;
  apply(dtype, op, d, a, b, count);
  for (std::size_t i = 0; i < count; ++i) {
    if (!same<Conv>(d[i], want[i])) {
      ADD_FAILURE() << toString(dtype) << " " << toString(op) << " count " << count << " " << name(layout)
                    << " offset " << offset << ": element " << i << " of " << show(abefore[offset + i])
                    << " and " << show(bbefore[offset + i]) << " gave " << show(d[i]) << ", expected "
                    << show(want[i]);
      return;
    }
  }
  // Nothing outside [dst, dst + count) was written.
  const std::vector<S>& dvec = layout == Layout::kDstIsA ? abuf : layout == Layout::kDstIsB ? bbuf : dbuf;
  const std::vector<S>& dvecBefore = layout == Layout::kDstIsA   ? abefore
                                     : layout == Layout::kDstIsB ? bbefore
                                                                 : dbefore;
  for (std::size_t i = 0; i < dvec.size(); ++i) {
    if (i >= offset && i < offset + count) continue;
    ASSERT_EQ(std::memcmp(&dvec[i], &dvecBefore[i], sizeof(S)), 0) << "wrote outside dst at " << i;
  }
}

TEST_P(ReduceTest, EveryTypeOpCountLayoutAndOffsetMatchesReference) {
  for (DataType dtype : kTypes)
    for (ReduceOp op : kOps)
      for (std::size_t count : kCounts)
        for (Layout layout : {Layout::kSeparate, Layout::kDstIsA, Layout::kDstIsB})
          for (std::size_t offset : {0, 1})
            withType(dtype, [&]<typename Conv>(Conv) { checkApply<Conv>(dtype, op, count, layout, offset); });
}

TEST_P(ReduceTest, FloatMinMaxPropagateNanAndOrderSignedZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float a[] = {nan, 1.0f, -0.0f, 0.0f, 2.0f, -3.0f, nan, 5.0f};
  const float b[] = {1.0f, nan, 0.0f, -0.0f, 2.0f, 4.0f, nan, -5.0f};
  float mn[8], mx[8];
  apply(DataType::kFloat32, ReduceOp::kMin, mn, a, b, 8);
  apply(DataType::kFloat32, ReduceOp::kMax, mx, a, b, 8);
  for (int i : {0, 1, 6}) EXPECT_TRUE(std::isnan(mn[i]) && std::isnan(mx[i])) << i;
  for (int i : {2, 3}) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(mn[i]), 0x80000000u) << "min(-0, +0) is -0 in both orders, " << i;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(mx[i]), 0x00000000u) << "max(-0, +0) is +0 in both orders, " << i;
  }
  EXPECT_EQ(mn[4], 2.0f);
  EXPECT_EQ(mn[5], -3.0f);
  EXPECT_EQ(mx[5], 4.0f);
  EXPECT_EQ(mn[7], -5.0f);
  EXPECT_EQ(mx[7], 5.0f);
}

// Sums whose exact float32 value sits halfway between two 16-bit values round to the even one.
TEST_P(ReduceTest, SixteenBitResultsRoundToNearestEvenAndOverflowToInf) {
  struct Case {
    std::uint16_t a, b, want;
  };
  // float16: 1 + 2^-11 -> 1; (1 + 2^-10) + 2^-11 -> 1 + 2^-9; 2^-24 + 2^-24 = 2^-23 (subnormal);
  // 65504 + 16 = 65520 -> Inf; -65504 - 16 -> -Inf; 65504 + 15.97 -> 65504; Inf - Inf -> NaN.
  const std::vector<Case> half = {
      {0x3c00, 0x1000, 0x3c00}, {0x3c01, 0x1000, 0x3c02}, {0x0001, 0x0001, 0x0002}, {0x7bff, 0x4c00, 0x7c00},
      {0xfbff, 0xcc00, 0xfc00}, {0x7bff, 0x4bfc, 0x7bff}, {0x7c00, 0xfc00, 0x7e00}};
  // bfloat16: 1 + 2^-8 -> 1; (1 + 2^-7) + 2^-8 -> 1 + 2^-6; max + max and max + half an ulp (2^119)
  // -> Inf; max + a quarter ulp -> max.
  const std::vector<Case> bf16 = {{0x3f80, 0x3b80, 0x3f80}, {0x3f81, 0x3b80, 0x3f82},
                                  {0x7f7f, 0x7f7f, 0x7f80}, {0xff7f, 0xff7f, 0xff80},
                                  {0x7f7f, 0x7b00, 0x7f80}, {0x7f7f, 0x7a80, 0x7f7f}};
  for (auto [dtype, cases] : {std::pair{DataType::kFloat16, half}, std::pair{DataType::kBFloat16, bf16}}) {
    // Repeat the cases to fill unrolled and single vectors and a tail.
    const std::size_t n = 12 * cases.size();
    std::vector<std::uint16_t> a(n), b(n), d(n);
    for (std::size_t i = 0; i < n; ++i) a[i] = cases[i % cases.size()].a, b[i] = cases[i % cases.size()].b;
    apply(dtype, ReduceOp::kSum, d.data(), a.data(), b.data(), a.size());
    for (std::size_t i = 0; i < d.size(); ++i) {
      const Case& c = cases[i % cases.size()];
      if ((c.want & 0x7c00) == 0x7c00 && (c.want & 0x3ff) != 0 && dtype == DataType::kFloat16)
        EXPECT_TRUE(std::isnan(halfToFloat(d[i]))) << i;
      else
        EXPECT_EQ(d[i], c.want) << toString(dtype) << " 0x" << std::hex << c.a << " + 0x" << c.b;
    }
  }
}

// max(x, x) returns x's bits, so this runs every half through the kernel's own conversions.
TEST_P(ReduceTest, EveryHalfSurvivesTheKernelConversions) {
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    std::vector<std::uint16_t> all(65536), out(65536);
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
    for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
      apply(dtype, op, out.data(), all.data(), all.data(), all.size());
      for (std::uint32_t h = 0; h < 65536; ++h) {
        const bool nan = dtype == DataType::kFloat16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0
                                                     : (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
        const std::uint32_t quiet = dtype == DataType::kFloat16 ? 0x200 : 0x40;
        ASSERT_EQ(out[h], nan ? (h | quiet) : h)
            << toString(dtype) << " " << toString(op) << " 0x" << std::hex << h;
      }
    }
    // x * 0.5 is a tie for every subnormal result with an odd last bit.
    const std::vector<std::uint16_t> half(all.size(), dtype == DataType::kFloat16 ? 0x3800 : 0x3f00);
    apply(dtype, ReduceOp::kProduct, out.data(), all.data(), half.data(), all.size());
    for (std::uint32_t h = 0; h < 65536; ++h) {
      const auto x = static_cast<std::uint16_t>(h);
      const std::uint16_t want = dtype == DataType::kFloat16 ? floatToHalf(halfToFloat(x) * 0.5f)
                                                             : floatToBfloat16(bfloat16ToFloat(x) * 0.5f);
      const float in = dtype == DataType::kFloat16 ? halfToFloat(x) : bfloat16ToFloat(x);
      if (std::isnan(in)) continue;  // NaN payloads are checked above
      ASSERT_EQ(out[h], want) << toString(dtype) << " 0x" << std::hex << h << " * 0.5";
    }
  }
}

template <typename Conv>
void checkDivide(DataType dtype, std::size_t count, std::size_t divisor, std::size_t offset) {
  using S = typename Conv::S;
  Inputs inputs(count * 17 + divisor);
  std::vector<S> buf(count + 1);
  for (auto& x : buf) x = inputs.next<Conv>();
  std::vector<S> want(count);
  for (std::size_t i = 0; i < count; ++i) {
    const S x = buf[offset + i];
    if constexpr (std::is_floating_point_v<typename Conv::C>)
      want[i] = Conv::down(Conv::up(x) / static_cast<typename Conv::C>(divisor));
    else if constexpr (std::is_signed_v<S>)
      want[i] = static_cast<S>(static_cast<std::int64_t>(x) / static_cast<std::int64_t>(divisor));
    else
      want[i] = static_cast<S>(static_cast<std::uint64_t>(x) / divisor);
  }
  const std::vector<S> before = buf;
  divide(dtype, buf.data() + offset, count, divisor);
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_TRUE(same<Conv>(buf[offset + i], want[i]))
        << toString(dtype) << " count " << count << " offset " << offset << ": " << show(before[offset + i])
        << " / " << divisor << " gave " << show(buf[offset + i]) << ", expected " << show(want[i]);
  }
}

TEST_P(ReduceTest, DivideEveryTypeMatchesReference) {
  for (DataType dtype : kTypes)
    for (std::size_t count : kCounts)
      for (std::size_t divisor : {1, 2, 3, 7, 128, 200, 1000003})
        for (std::size_t offset : {0, 1})
          withType(dtype, [&]<typename Conv>(Conv) { checkDivide<Conv>(dtype, count, divisor, offset); });
}

TEST_P(ReduceTest, IntegerDivideTruncatesTowardZero) {
  std::int8_t i8[] = {-7, 7, -1, -128, 127, -6};
  divide(DataType::kInt8, i8, 6, 2);
  EXPECT_EQ(std::vector<int>(i8, i8 + 6), (std::vector<int>{-3, 3, 0, -64, 63, -3}));
  std::int8_t min8 = -128;
  divide(DataType::kInt8, &min8, 1, 128);
  EXPECT_EQ(min8, -1);
  std::int32_t i32[] = {-7,
                        7,
                        std::numeric_limits<std::int32_t>::min(),
                        std::numeric_limits<std::int32_t>::max(),
                        -2147483647,
                        5,
                        -5,
                        -9};
  divide(DataType::kInt32, i32, 8, 3);
  EXPECT_EQ(std::vector<std::int32_t>(i32, i32 + 8),
            (std::vector<std::int32_t>{-2, 2, -715827882, 715827882, -715827882, 1, -1, -3}));
  std::int64_t i64[] = {-7, std::numeric_limits<std::int64_t>::min(),
                        std::numeric_limits<std::int64_t>::max()};
  divide(DataType::kInt64, i64, 3, 2);
  EXPECT_EQ(i64[0], -3);
  EXPECT_EQ(i64[1], std::numeric_limits<std::int64_t>::min() / 2);
  EXPECT_EQ(i64[2], std::numeric_limits<std::int64_t>::max() / 2);
  std::uint8_t u8[] = {255, 7};
  divide(DataType::kUInt8, u8, 2, 2);
  EXPECT_EQ(u8[0], 127);
  EXPECT_EQ(u8[1], 3);
  // Every int8 by every divisor up to 300 (exercises the vector body and tail for each).
  for (std::size_t divisor = 1; divisor <= 300; ++divisor) {
    std::int8_t all[256];
    for (int v = 0; v < 256; ++v) all[v] = static_cast<std::int8_t>(v - 128);
    divide(DataType::kInt8, all, 256, divisor);
    for (int v = 0; v < 256; ++v)
      ASSERT_EQ(all[v], (v - 128) / static_cast<int>(divisor)) << (v - 128) << " / " << divisor;
  }
}

TEST_P(ReduceTest, RejectsBadArguments) {
  float buf[16] = {};
  EXPECT_THROW(divide(DataType::kFloat32, buf, 16, 0), InvalidArgument);
  EXPECT_THROW(apply(DataType::kFloat32, ReduceOp::kSum, buf + 1, buf, buf + 8, 8), InvalidArgument);
  EXPECT_THROW(apply(DataType::kFloat32, ReduceOp::kSum, buf, buf + 8, buf + 4, 8), InvalidArgument);
  EXPECT_THROW(apply(static_cast<DataType>(42), ReduceOp::kSum, buf, buf, buf, 1), InvalidArgument);
  EXPECT_THROW(apply(DataType::kFloat32, static_cast<ReduceOp>(42), buf, buf, buf, 1), InvalidArgument);
  EXPECT_THROW(apply(DataType::kFloat32, ReduceOp::kSum, nullptr, buf, buf, 1), InvalidArgument);
  EXPECT_NO_THROW(apply(DataType::kFloat32, ReduceOp::kSum, nullptr, nullptr, nullptr, 0));
  // a and b may overlap each other freely: both are only read.
  EXPECT_NO_THROW(apply(DataType::kFloat32, ReduceOp::kSum, buf + 9, buf, buf + 1, 7));
}

INSTANTIATE_TEST_SUITE_P(Kernels, ReduceTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return std::string(param.param ? "Portable" : "Native");
                         });

TEST(ReduceDispatch, UsesAvx2WhereTheCpuHasIt) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // CPUID leaf 1: ECX bit 29 is F16C
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  EXPECT_EQ(usingAvx2(), __builtin_cpu_supports("avx2") && f16c);
#else
  EXPECT_FALSE(usingAvx2());
#endif
  forcePortableForTesting(true);
  EXPECT_FALSE(usingAvx2());
  forcePortableForTesting(false);
}

// ---- Scalar conversions against references built from ldexp and exhaustive search. ----

double halfValue(std::uint32_t h) {  // magnitude bits of a finite half (or 0x7c00 as 65536)
  const int e = static_cast<int>(h >> 10), m = static_cast<int>(h & 0x3ff);
  return e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
}

double bf16Value(std::uint32_t b) {  // magnitude bits of a finite bfloat16 (or 0x7f80 as 2^128)
  const int e = static_cast<int>(b >> 7), m = static_cast<int>(b & 0x7f);
  return e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, e - 134);
}

// Nearest of the magnitudes `lo` and `lo + 1` under `value`, ties to even.
template <typename ValueFn>
std::uint32_t nearest(double v, std::uint32_t lo, ValueFn value) {
  const double below = v - value(lo), above = value(lo + 1) - v;
  if (below < above) return lo;
  if (above < below) return lo + 1;
  return (lo & 1) ? lo + 1 : lo;
}

std::uint16_t refHalf(float f) {
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double v = std::fabs(static_cast<double>(f));
  std::uint32_t lo = 0, hi = 0x7c00;  // largest lo with halfValue(lo) <= v, hi = 65536 as a bound
  if (v >= halfValue(0x7c00)) return sign | 0x7c00;
  while (hi - lo > 1) {
    const std::uint32_t mid = (lo + hi) / 2;
    (halfValue(mid) <= v ? lo : hi) = mid;
  }
  return static_cast<std::uint16_t>(sign | nearest(v, lo, halfValue));
}

std::uint16_t refBfloat16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000);
  const std::uint32_t lo = (x & 0x7fffffff) >> 16;  // truncation is the candidate below
  return static_cast<std::uint16_t>(sign | nearest(std::fabs(static_cast<double>(f)), lo, bf16Value));
}

TEST(ReduceConversion, EveryHalfRoundTripsExactly) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = halfToFloat(static_cast<std::uint16_t>(h));
    const std::uint32_t magnitude = h & 0x7fff;
    if (magnitude > 0x7c00) {  // NaN: stays NaN, sign and payload kept, made quiet
      ASSERT_EQ(std::bit_cast<std::uint32_t>(f), (h & 0x8000) << 16 | 0x7fc00000 | (h & 0x3ff) << 13)
          << std::hex << h;
      ASSERT_EQ(floatToHalf(f), h | 0x200) << std::hex << h;
      continue;
    }
    const double want = (magnitude == 0x7c00 ? INFINITY : halfValue(magnitude)) * ((h & 0x8000) ? -1 : 1);
    ASSERT_EQ(static_cast<double>(f), want) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
    ASSERT_EQ(floatToHalf(f), h) << std::hex << h;
  }
}

TEST(ReduceConversion, FloatToHalfTiesAndLimits) {
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);             // tie, to even
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);         // tie, to even (up)
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);  // just above the tie
  EXPECT_EQ(floatToHalf(-(1.0f + 0x1p-11f)), 0xbc00);
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);      // subnormal tie to zero
  EXPECT_EQ(floatToHalf(3 * 0x1p-25f), 0x0002);  // subnormal tie, to even
  EXPECT_EQ(floatToHalf(5 * 0x1p-25f), 0x0002);  // subnormal tie, to even (down)
  EXPECT_EQ(floatToHalf(0x1p-25f + 0x1p-40f), 0x0001);
  EXPECT_EQ(floatToHalf(1023.5f * 0x1p-24f), 0x0400);  // largest subnormal tie -> min normal
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);  // tie between max and 2^16: Inf
  EXPECT_EQ(floatToHalf(-65520.0f), 0xfc00);
  EXPECT_EQ(floatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(floatToHalf(INFINITY), 0x7c00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xfc00);
  const std::uint16_t nan = floatToHalf(std::bit_cast<float>(0x7f800001u));  // payload only in low bits
  EXPECT_TRUE((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0) << std::hex << nan;
  // Every midpoint between neighbouring finite halves (exact in float) goes to the even one.
  for (std::uint32_t h = 0; h < 0x7bff; ++h) {
    const float mid = static_cast<float>((halfValue(h) + halfValue(h + 1)) / 2);
    const std::uint32_t even = (h & 1) ? h + 1 : h;
    ASSERT_EQ(floatToHalf(mid), even) << std::hex << h;
    ASSERT_EQ(floatToHalf(-mid), even | 0x8000) << std::hex << h;
  }
}

TEST(ReduceConversion, FloatToHalfMatchesNearestSearch) {
  std::mt19937 gen(12345);
  for (int i = 0; i < 300000; ++i) {
    std::uint32_t x = gen();
    if (i % 2) x = (x & 0x807fffff) | ((100 + (x >> 23) % 45) << 23);  // exponents around half's range
    const float f = std::bit_cast<float>(x);
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToHalf(f), refHalf(f)) << std::hex << x;
  }
}

TEST(ReduceConversion, Bfloat16TiesLimitsAndNearestSearch) {
  EXPECT_EQ(floatToBfloat16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(floatToBfloat16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(floatToBfloat16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(floatToBfloat16(-(1.0f + 0x1p-8f)), 0xbf80);
  EXPECT_EQ(floatToBfloat16(std::bit_cast<float>(0x00008000u)), 0x0000);  // subnormal tie to zero
  EXPECT_EQ(floatToBfloat16(std::bit_cast<float>(0x00018000u)), 0x0002);
  EXPECT_EQ(floatToBfloat16(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(floatToBfloat16(std::bit_cast<float>(0x7f7f8000u)), 0x7f80);  // halfway past max: Inf
  EXPECT_EQ(floatToBfloat16(-INFINITY), 0xff80);
  EXPECT_EQ(floatToBfloat16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);  // NaN stays NaN, quiet
  EXPECT_EQ(floatToBfloat16(std::bit_cast<float>(0xffc12345u)), 0xffc1);
  for (std::uint32_t b = 0; b < 0x7f80; ++b) {  // every midpoint, to even (0x7f7f's goes to Inf)
    const float mid = static_cast<float>((bf16Value(b) + bf16Value(b + 1)) / 2);
    const std::uint32_t even = (b & 1) ? b + 1 : b;
    ASSERT_EQ(floatToBfloat16(mid), even) << std::hex << b;
    ASSERT_EQ(floatToBfloat16(-mid), even | 0x8000) << std::hex << b;
  }
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = bfloat16ToFloat(static_cast<std::uint16_t>(b));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(f), b << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(floatToBfloat16(f), b) << std::hex << b;
    }
  }
  std::mt19937 gen(54321);
  for (int i = 0; i < 300000; ++i) {
    const std::uint32_t x = gen();
    const float f = std::bit_cast<float>(x);
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToBfloat16(f), refBfloat16(f)) << std::hex << x;
  }
}

}  // namespace
}  // namespace gyre::reduce
