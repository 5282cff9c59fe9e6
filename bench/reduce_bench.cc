// Throughput of the reduction kernels (common/reduce.h) against memcpy and a plain loop.
//
//   gyre_reduce_bench [--benchmark_filter=...] [--benchmark_repetitions=N]
//
// Units: bytes_per_second counts every byte the kernel moves through memory: a sum reads a and
// b and writes dst (3 x buffer size per call, also when dst == a), memcpy reads and writes (2 x).
// The library prints it in binary units (G/s = 2^30 bytes/s). items_per_second counts elements
// (decimal units); times the element size it is the rate of one buffer, the usual "GB/s" of a
// copy. "bytes" is the size of one buffer.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include "common/reduce.h"

namespace {

using gyre::DataType;
using gyre::ReduceOp;

constexpr std::size_t kAlign = 64;

struct AlignedDelete {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{kAlign}); }
};
using Buffer = std::unique_ptr<std::byte[], AlignedDelete>;

// Filled with small finite values (no NaN, Inf or subnormals in any dtype), so that repeated
// in-place sums never reach a slow path.
Buffer makeBuffer(std::size_t bytes, std::uint8_t fill) {
  Buffer buf(new (std::align_val_t{kAlign}) std::byte[bytes]);
  std::memset(buf.get(), fill, bytes);
  return buf;
}

// Byte 0x00 is 0 and 0x3c is a small normal number in every dtype (float16 0x3c3c = 1.06,
// bfloat16 0x3c3c = 0.0115, float32 0x3c3c3c3c = 0.0115).
constexpr std::uint8_t kA = 0x3c, kB = 0x00;

void setCounters(benchmark::State& state, std::size_t bytes, std::size_t moved_per_call, std::size_t count) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * moved_per_call));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * count));
  state.counters["bytes"] = static_cast<double>(bytes);
}

// Args: buffer bytes. inplace: dst == a, the collectives' usual case.
void reduceSum(benchmark::State& state, DataType dtype, bool inplace, bool portable) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const std::size_t count = bytes / gyre::dtypeSize(dtype);
  Buffer a = makeBuffer(bytes, kA), b = makeBuffer(bytes, kB), d = makeBuffer(bytes, 0);
  std::byte* dst = inplace ? a.get() : d.get();
  gyre::reduce::forcePortableForTesting(portable);
  if (!portable && !gyre::reduce::usingAvx2()) state.SetLabel("no AVX2 on this CPU: portable kernels");
  for (auto _ : state) {
    gyre::reduce::apply(dtype, ReduceOp::kSum, dst, a.get(), b.get(), count);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  gyre::reduce::forcePortableForTesting(false);
  setCounters(state, bytes, 3 * bytes, count);
}

void memcpyBaseline(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Buffer src = makeBuffer(bytes, kA), dst = makeBuffer(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  setCounters(state, bytes, 2 * bytes, bytes);
}

// `a[i] += b[i]` as the compiler builds it for baseline x86-64 (SSE2): what a kernel without
// dispatch gets.
void plainLoopBaseline(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const std::size_t count = bytes / sizeof(float);
  Buffer a = makeBuffer(bytes, kA), b = makeBuffer(bytes, kB);
  auto* x = reinterpret_cast<float*>(a.get());
  const auto* y = reinterpret_cast<const float*>(b.get());
  for (auto _ : state) {
    for (std::size_t i = 0; i < count; ++i) x[i] += y[i];
    benchmark::DoNotOptimize(x);
    benchmark::ClobberMemory();
  }
  setCounters(state, bytes, 3 * bytes, count);
}

// Rates use the thread's CPU time (the library's default), which a busy shared machine disturbs
// less than wall time does.
void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(1 << 20)->Arg(64 << 20);
}

BENCHMARK(memcpyBaseline)->Apply(sizes);
BENCHMARK(plainLoopBaseline)->Apply(sizes);
BENCHMARK_CAPTURE(reduceSum, f32, DataType::kFloat32, false, false)->Apply(sizes);
BENCHMARK_CAPTURE(reduceSum, f32_inplace, DataType::kFloat32, true, false)->Apply(sizes);
BENCHMARK_CAPTURE(reduceSum, f64, DataType::kFloat64, false, false)->Apply(sizes);
BENCHMARK_CAPTURE(reduceSum, f16, DataType::kFloat16, false, false)->Apply(sizes);
BENCHMARK_CAPTURE(reduceSum, f16_inplace, DataType::kFloat16, true, false)->Apply(sizes);
BENCHMARK_CAPTURE(reduceSum, bf16, DataType::kBFloat16, false, false)->Apply(sizes);
BENCHMARK_CAPTURE(reduceSum, bf16_inplace, DataType::kBFloat16, true, false)->Apply(sizes);
// The portable kernels, for the speed-up the run-time dispatch buys.
BENCHMARK_CAPTURE(reduceSum, f32_portable, DataType::kFloat32, false, true)->Apply(sizes);
BENCHMARK_CAPTURE(reduceSum, f16_portable, DataType::kFloat16, false, true)->Apply(sizes);
BENCHMARK_CAPTURE(reduceSum, bf16_portable, DataType::kBFloat16, false, true)->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();
