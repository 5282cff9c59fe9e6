#include "common/reduce.h"

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/check.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define GYRE_REDUCE_X86 1
#include <cpuid.h>
#include <immintrin.h>
// Functions marked GYRE_AVX2 are compiled for AVX2+F16C and only called after the CPU check.
#define GYRE_AVX2 __attribute__((target("avx2,f16c")))
#else
#define GYRE_REDUCE_X86 0
#endif

// "The iterations of the next loop are independent" to GCC's vectoriser; clang needs no hint.
#if defined(__clang__)
#define GYRE_IVDEP
#else
#define GYRE_IVDEP _Pragma("GCC ivdep")
#endif

namespace gyre::reduce {

namespace {

// c ? a : b as bit operations. The compiler keeps a ?: whose arms are floating-point operations
// as a branch (they might trap), and a loop with a branch does not vectorise.
constexpr std::uint32_t select(bool c, std::uint32_t a, std::uint32_t b) {
  return b ^ ((a ^ b) & (0u - static_cast<std::uint32_t>(c)));
}

// The conversions, for the kernels: the exported functions below cannot be inlined into them in
// a shared library (-fPIC makes them interposable), and a call per element stops vectorisation.
// Each computes every case and selects at the end, without branches, so that the portable loops
// vectorise. NaNs behave as F16C's: made quiet, upper payload kept.
inline float decodeHalf(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t magnitude = h & 0x7fff;
  const std::uint32_t normal = (magnitude << 13) + 0x38000000;  // rebias the exponent: 127 - 15
  const std::uint32_t special = (magnitude << 13) | 0x7f800000 | (magnitude > 0x7c00 ? 0x400000 : 0);
  // Zero or subnormal: magnitude * 2^-24 is exact in float32.
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(static_cast<float>(magnitude) * 0x1p-24f);
  return std::bit_cast<float>(
      sign | select(magnitude < 0x400, subnormal, select(magnitude >= 0x7c00, special, normal)));
}

inline std::uint16_t encodeHalf(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t ax = x & 0x7fffffff;
  const std::uint32_t nan = 0x7e00 | ((ax >> 13) & 0x3ff);
  // Normal half: rebias, and round the 13 dropped bits to nearest even.
  const std::uint32_t normal = (ax - 0x38000000 + 0xfff + ((ax >> 13) & 1)) >> 13;
  // Below 2^-14: adding 0.5 leaves the value's multiple of 2^-24 (the half subnormal step),
  // rounded to nearest even by the addition, in the low mantissa bits of 0.5.
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(std::bit_cast<float>(ax) + 0.5f) - 0x3f000000;
  const std::uint32_t finite = select(ax >= 0x38800000, normal, subnormal);
  const std::uint32_t magnitude = select(ax > 0x7f800000, nan, select(ax >= 0x477ff000, 0x7c00, finite));
  return static_cast<std::uint16_t>(((x >> 16) & 0x8000) | magnitude);
}

inline float decodeBfloat16(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t encodeBfloat16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t rounded = (x + 0x7fff + ((x >> 16) & 1)) >> 16;
  return static_cast<std::uint16_t>(select((x & 0x7fffffff) > 0x7f800000, (x >> 16) | 0x40, rounded));
}

}  // namespace

float halfToFloat(std::uint16_t h) {
  return decodeHalf(h);
}
std::uint16_t floatToHalf(float f) {
  return encodeHalf(f);
}
float bfloat16ToFloat(std::uint16_t b) {
  return decodeBfloat16(b);
}
std::uint16_t floatToBfloat16(float f) {
  return encodeBfloat16(f);
}

namespace {

// ---- Element types: how a stored element becomes the value the ops compute on. ----

#if GYRE_REDUCE_X86
// Element types whose vector is one register apply the op to it directly.
struct OneRegister {
  template <typename Op, typename V>
  GYRE_AVX2 static V apply(const Op& op, V a, V b) {
    return op.vec(a, b);
  }
};
#else
struct OneRegister {};
#endif

template <typename T>
struct Native {
  using Storage = T;
  using Compute = T;
  static T load(T x) { return x; }
  static T store(T x) { return x; }
};

struct Half : OneRegister {
  using Storage = std::uint16_t;
  using Compute = float;
  static float load(std::uint16_t x) { return decodeHalf(x); }
  static std::uint16_t store(float x) { return encodeHalf(x); }
#if GYRE_REDUCE_X86
  using Vec = __m256;
  static constexpr std::size_t kLanes = 8;
  GYRE_AVX2 static __m256 loadVec(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  GYRE_AVX2 static void storeVec(std::uint16_t* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#endif
};

struct BHalf {
  using Storage = std::uint16_t;
  using Compute = float;
  static float load(std::uint16_t x) { return decodeBfloat16(x); }
  static std::uint16_t store(float x) { return encodeBfloat16(x); }
#if GYRE_REDUCE_X86
  // 16 elements per vector: the even ones are the low halves of the 32-bit words shifted up, the
  // odd ones the high halves masked, so loading and storing cost no shuffles.
  struct Vec {
    __m256 even, odd;
  };
  static constexpr std::size_t kLanes = 16;
  GYRE_AVX2 static Vec loadVec(const std::uint16_t* p) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(x, 16)),
            _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(static_cast<int>(0xffff0000))))};
  }
  // The vector form of encodeBfloat16, leaving the result in the high half of each word.
  GYRE_AVX2 static __m256i round(__m256 v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_add_epi32(x, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
    const __m256i quiet = _mm256_or_si256(x, _mm256_set1_epi32(0x400000));
    return _mm256_blendv_epi8(rounded, quiet, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  }
  GYRE_AVX2 static void storeVec(std::uint16_t* p, Vec v) {
    const __m256i words = _mm256_blend_epi16(_mm256_srli_epi32(round(v.even), 16), round(v.odd), 0xaa);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), words);
  }
  template <typename Op>
  GYRE_AVX2 static Vec apply(const Op& op, Vec a, Vec b) {
    return {op.vec(a.even, b.even), op.vec(a.odd, b.odd)};
  }
#endif
};

struct F32 : Native<float>, OneRegister {
#if GYRE_REDUCE_X86
  using Vec = __m256;
  static constexpr std::size_t kLanes = 8;
  GYRE_AVX2 static __m256 loadVec(const float* p) {
    return _mm256_loadu_ps(p);
  }
  GYRE_AVX2 static void storeVec(float* p, __m256 v) {
    _mm256_storeu_ps(p, v);
  }
#endif
};

struct F64 : Native<double>, OneRegister {
#if GYRE_REDUCE_X86
  using Vec = __m256d;
  static constexpr std::size_t kLanes = 4;
  GYRE_AVX2 static __m256d loadVec(const double* p) {
    return _mm256_loadu_pd(p);
  }
  GYRE_AVX2 static void storeVec(double* p, __m256d v) {
    _mm256_storeu_pd(p, v);
  }
#endif
};

// ---- Operations: apply() on one value; vec() on a vector with bit-identical results. ----

template <typename T>
using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

// Integer sum and product wrap modulo 2^bits (computed unsigned: no undefined overflow; types
// narrower than int in unsigned int, which they would otherwise be promoted past to int).
template <typename T>
struct WrapOf {
  using type = T;
};
template <typename T>
requires std::is_integral_v<T>
struct WrapOf<T> {
  using type = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
};
template <typename T>
using Wrap = typename WrapOf<T>::type;

struct Sum {
  template <typename T>
  T apply(T a, T b) const {
    return static_cast<T>(static_cast<Wrap<T>>(a) + static_cast<Wrap<T>>(b));
  }
#if GYRE_REDUCE_X86
  GYRE_AVX2 __m256 vec(__m256 a, __m256 b) const {
    return _mm256_add_ps(a, b);
  }
  GYRE_AVX2 __m256d vec(__m256d a, __m256d b) const {
    return _mm256_add_pd(a, b);
  }
#endif
};

struct Product {
  template <typename T>
  T apply(T a, T b) const {
    return static_cast<T>(static_cast<Wrap<T>>(a) * static_cast<Wrap<T>>(b));
  }
#if GYRE_REDUCE_X86
  GYRE_AVX2 __m256 vec(__m256 a, __m256 b) const {
    return _mm256_mul_ps(a, b);
  }
  GYRE_AVX2 __m256d vec(__m256d a, __m256d b) const {
    return _mm256_mul_pd(a, b);
  }
#endif
};

// Floating min/max are symmetric in a and b: NaN if either is NaN, min(-0, +0) = -0 and
// max(-0, +0) = +0. When the operands compare neither less nor greater, min ORs their bits
// (equal values, -0 beats +0, NaN wins) and max ANDs them (+0 wins), ORing when unordered.
// The vector forms get the same bits from MINPS/MAXPS run both ways round.
struct Min {
  template <typename T>
  T apply(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      if (a < b) return a;
      if (b < a) return b;
      return std::bit_cast<T>(std::bit_cast<Bits<T>>(a) | std::bit_cast<Bits<T>>(b));
    }
  }
#if GYRE_REDUCE_X86
  GYRE_AVX2 __m256 vec(__m256 a, __m256 b) const {
    return _mm256_or_ps(_mm256_min_ps(a, b), _mm256_min_ps(b, a));
  }
  GYRE_AVX2 __m256d vec(__m256d a, __m256d b) const {
    return _mm256_or_pd(_mm256_min_pd(a, b), _mm256_min_pd(b, a));
  }
#endif
};

struct Max {
  template <typename T>
  T apply(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? b : a;
    } else {
      if (a > b) return a;
      if (b > a) return b;
      const Bits<T> x = std::bit_cast<Bits<T>>(a), y = std::bit_cast<Bits<T>>(b);
      return std::bit_cast<T>(a == b ? x & y : x | y);
    }
  }
#if GYRE_REDUCE_X86
  GYRE_AVX2 __m256 vec(__m256 a, __m256 b) const {
    const __m256 both = _mm256_and_ps(_mm256_max_ps(a, b), _mm256_max_ps(b, a));
    const __m256 unordered = _mm256_cmp_ps(a, b, _CMP_UNORD_Q);
    return _mm256_or_ps(both, _mm256_and_ps(unordered, _mm256_or_ps(a, b)));
  }
  GYRE_AVX2 __m256d vec(__m256d a, __m256d b) const {
    const __m256d both = _mm256_and_pd(_mm256_max_pd(a, b), _mm256_max_pd(b, a));
    const __m256d unordered = _mm256_cmp_pd(a, b, _CMP_UNORD_Q);
    return _mm256_or_pd(both, _mm256_and_pd(unordered, _mm256_or_pd(a, b)));
  }
#endif
};

// dst = a / divisor; the second operand is ignored. Floating types divide in their compute
// precision. Integers truncate toward zero: up to 32 bits through double, which is exact
// (|a| < 2^32, so a non-integral quotient is at least 1/divisor from an integer while double's
// error is below 2^-21/divisor); int64 natively.
struct DivideBy {
  std::size_t divisor;
  template <typename T>
  T apply(T a, T /*unused*/) const {
    if constexpr (std::is_floating_point_v<T>) {
      return a / static_cast<T>(divisor);
    } else if constexpr (sizeof(T) <= 4) {
      return static_cast<T>(static_cast<double>(a) / static_cast<double>(divisor));
    } else {
      return static_cast<T>(a / static_cast<T>(divisor));
    }
  }
#if GYRE_REDUCE_X86
  GYRE_AVX2 __m256 vec(__m256 a, __m256) const {
    return _mm256_div_ps(a, _mm256_set1_ps(static_cast<float>(divisor)));
  }
  GYRE_AVX2 __m256d vec(__m256d a, __m256d) const {
    return _mm256_div_pd(a, _mm256_set1_pd(static_cast<double>(divisor)));
  }
#endif
};

// ---- Loops. dst may equal a or b: every element is read before it is written, and no
// iteration reads what another writes, so `ivdep` (no loop-carried dependence) holds. ----

template <typename E, typename Op>
__attribute__((always_inline)) inline void scalarLoop(typename E::Storage* dst, const typename E::Storage* a,
                                                      const typename E::Storage* b, std::size_t n, Op op) {
  GYRE_IVDEP
  for (std::size_t i = 0; i < n; ++i) dst[i] = E::store(op.apply(E::load(a[i]), E::load(b[i])));
}

template <typename E, typename Op>
void portableKernel(void* dst, const void* a, const void* b, std::size_t n, Op op) {
  using S = typename E::Storage;
  scalarLoop<E>(static_cast<S*>(dst), static_cast<const S*>(a), static_cast<const S*>(b), n, op);
}

#if GYRE_REDUCE_X86
// Integer types: the compiler vectorises the scalar loop well once it may use AVX2.
template <typename E, typename Op>
GYRE_AVX2 void autoAvx2Kernel(void* dst, const void* a, const void* b, std::size_t n, Op op) {
  using S = typename E::Storage;
  scalarLoop<E>(static_cast<S*>(dst), static_cast<const S*>(a), static_cast<const S*>(b), n, op);
}

// Floating types: explicit vectors (the 16-bit types convert on load and store). The tail goes
// through one zero-padded vector so that every element gets the same bits wherever it sits.
template <typename E, typename Op>
GYRE_AVX2 void vectorAvx2Kernel(void* dst, const void* a, const void* b, std::size_t n, Op op) {
  using S = typename E::Storage;
  constexpr std::size_t kLanes = E::kLanes;
  auto* d = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  std::size_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    const auto r0 = E::apply(op, E::loadVec(x + i), E::loadVec(y + i));
    const auto r1 = E::apply(op, E::loadVec(x + i + kLanes), E::loadVec(y + i + kLanes));
    const auto r2 = E::apply(op, E::loadVec(x + i + 2 * kLanes), E::loadVec(y + i + 2 * kLanes));
    const auto r3 = E::apply(op, E::loadVec(x + i + 3 * kLanes), E::loadVec(y + i + 3 * kLanes));
    E::storeVec(d + i, r0);
    E::storeVec(d + i + kLanes, r1);
    E::storeVec(d + i + 2 * kLanes, r2);
    E::storeVec(d + i + 3 * kLanes, r3);
  }
  for (; i + kLanes <= n; i += kLanes) E::storeVec(d + i, E::apply(op, E::loadVec(x + i), E::loadVec(y + i)));
  if (i < n) {
    S ta[kLanes] = {}, tb[kLanes] = {}, td[kLanes];
    std::memcpy(ta, x + i, (n - i) * sizeof(S));
    std::memcpy(tb, y + i, (n - i) * sizeof(S));
    E::storeVec(td, E::apply(op, E::loadVec(ta), E::loadVec(tb)));
    std::memcpy(d + i, td, (n - i) * sizeof(S));
  }
}
#endif

// ---- Dispatch tables, one per instruction set, indexed by DataType and ReduceOp. ----

using BinaryFn = void (*)(void* dst, const void* a, const void* b, std::size_t n);
using DivideFn = void (*)(void* dst, std::size_t n, std::size_t divisor);

constexpr std::size_t kDataTypes = 9;
constexpr std::size_t kOps = 5;

struct Kernels {
  BinaryFn binary[kDataTypes][kOps];
  DivideFn divide[kDataTypes];
};

template <typename E, typename Op, bool kAvx2>
void binaryKernel(void* dst, const void* a, const void* b, std::size_t n) {
#if GYRE_REDUCE_X86
  if constexpr (kAvx2) {
    if constexpr (std::is_floating_point_v<typename E::Compute>)
      vectorAvx2Kernel<E>(dst, a, b, n, Op{});
    else
      autoAvx2Kernel<E>(dst, a, b, n, Op{});
    return;
  }
#endif
  portableKernel<E>(dst, a, b, n, Op{});
}

template <typename E, bool kAvx2>
void divideKernel(void* dst, std::size_t n, std::size_t divisor) {
#if GYRE_REDUCE_X86
  if constexpr (kAvx2) {
    if constexpr (std::is_floating_point_v<typename E::Compute>)
      vectorAvx2Kernel<E>(dst, dst, dst, n, DivideBy{divisor});
    else
      autoAvx2Kernel<E>(dst, dst, dst, n, DivideBy{divisor});
    return;
  }
#endif
  portableKernel<E>(dst, dst, dst, n, DivideBy{divisor});
}

// Order of ReduceOp: sum, average (the sum; divide() finishes it), product, min, max.
template <typename E, bool kAvx2>
constexpr void fill(Kernels& k, DataType dtype) {
  const auto t = static_cast<std::size_t>(dtype);
  k.binary[t][0] = binaryKernel<E, Sum, kAvx2>;
  k.binary[t][1] = binaryKernel<E, Sum, kAvx2>;
  k.binary[t][2] = binaryKernel<E, Product, kAvx2>;
  k.binary[t][3] = binaryKernel<E, Min, kAvx2>;
  k.binary[t][4] = binaryKernel<E, Max, kAvx2>;
  k.divide[t] = divideKernel<E, kAvx2>;
}

template <bool kAvx2>
constexpr Kernels makeKernels() {
  Kernels k{};
  fill<F32, kAvx2>(k, DataType::kFloat32);
  fill<F64, kAvx2>(k, DataType::kFloat64);
  fill<Half, kAvx2>(k, DataType::kFloat16);
  fill<BHalf, kAvx2>(k, DataType::kBFloat16);
  fill<Native<std::int8_t>, kAvx2>(k, DataType::kInt8);
  fill<Native<std::uint8_t>, kAvx2>(k, DataType::kUInt8);
  fill<Native<std::int32_t>, kAvx2>(k, DataType::kInt32);
  fill<Native<std::int64_t>, kAvx2>(k, DataType::kInt64);
  fill<Native<std::int16_t>, kAvx2>(k, DataType::kInt16);
  return k;
}

constexpr Kernels kPortable = makeKernels<false>();
#if GYRE_REDUCE_X86
constexpr Kernels kAvx2 = makeKernels<true>();
#endif

#if GYRE_REDUCE_X86
// CPUID leaf 1, ECX bit 29 for F16C (clang 14's __builtin_cpu_supports does not know "f16c").
bool cpuHasAvx2AndF16c() {
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  return __builtin_cpu_supports("avx2") && f16c;
}
#endif

// The only mutable state: set by forcePortableForTesting, read relaxed on every call.
std::atomic<bool> forcePortable{false};

const Kernels& kernels() {
#if GYRE_REDUCE_X86
  static const bool avx2 = cpuHasAvx2AndF16c();
  if (avx2 && !forcePortable.load(std::memory_order_relaxed)) return kAvx2;
#endif
  return kPortable;
}

// Exact aliasing is allowed; a partial overlap would read elements already written.
bool disjointOrSame(const void* x, const void* y, std::size_t bytes) {
  const auto p = reinterpret_cast<std::uintptr_t>(x), q = reinterpret_cast<std::uintptr_t>(y);
  return p == q || p + bytes <= q || q + bytes <= p;
}

std::size_t checkedBytes(DataType dtype, std::size_t count) {
  const std::size_t esize = dtypeSize(dtype);  // throws InvalidArgument for an invalid dtype
  GYRE_ARG_CHECK(count <= std::numeric_limits<std::size_t>::max() / esize, "count ", count, " elements of ",
                 toString(dtype), " overflows size_t");
  return count * esize;
}

}  // namespace

// Not in reduce.h yet: the tests and the benchmark declare them themselves.
bool usingAvx2() {
  return &kernels() != &kPortable;
}
void forcePortableForTesting(bool portable) {
  forcePortable.store(portable, std::memory_order_relaxed);
}

void apply(DataType dtype, ReduceOp op, void* dst, const void* a, const void* b, std::size_t count) {
  const std::size_t bytes = checkedBytes(dtype, count);
  const auto o = static_cast<std::size_t>(op);
  GYRE_ARG_CHECK(o < kOps, "invalid ReduceOp ", o);
  if (count == 0) return;
  GYRE_ARG_CHECK(dst != nullptr && a != nullptr && b != nullptr, "reduce::apply of ", count,
                 " elements got a null buffer");
  GYRE_ARG_CHECK(disjointOrSame(dst, a, bytes) && disjointOrSame(dst, b, bytes),
                 "reduce::apply: dst partially overlaps an operand (only dst == a or dst == b may alias)");
  kernels().binary[static_cast<std::size_t>(dtype)][o](dst, a, b, count);
}

void divide(DataType dtype, void* dst, std::size_t count, std::size_t divisor) {
  checkedBytes(dtype, count);
  GYRE_ARG_CHECK(divisor > 0, "reduce::divide by zero");
  GYRE_ARG_CHECK(divisor <= static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()), "divisor ",
                 divisor, " too large");
  if (count == 0) return;
  GYRE_ARG_CHECK(dst != nullptr, "reduce::divide of ", count, " elements got a null buffer");
  kernels().divide[static_cast<std::size_t>(dtype)](dst, count, divisor);
}

}  // namespace gyre::reduce
