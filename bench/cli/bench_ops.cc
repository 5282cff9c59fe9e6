#include "bench_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "common/reduce.h"

namespace gyre::app {
namespace {

// Written into outputs before a checked call, so that an output left untouched is noticed.
constexpr double kSentinel = 101;

double readValue(DataType t, const std::byte* base, std::uint64_t i) {
  const std::byte* p = base + i * dtypeSize(t);
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (t) {
    case DataType::kFloat32:
      return load(float{});
    case DataType::kFloat64:
      return load(double{});
    case DataType::kFloat16:
      return reduce::halfToFloat(load(std::uint16_t{}));
    case DataType::kBFloat16:
      return reduce::bfloat16ToFloat(load(std::uint16_t{}));
    case DataType::kInt8:
      return load(std::int8_t{});
    case DataType::kUInt8:
      return load(std::uint8_t{});
    case DataType::kInt32:
      return load(std::int32_t{});
    case DataType::kInt64:
      return static_cast<double>(load(std::int64_t{}));
    case DataType::kInt16:
      return load(std::int16_t{});
  }
  return 0;
}

void writeValue(DataType t, std::byte* base, std::uint64_t i, double v) {
  std::byte* p = base + i * dtypeSize(t);
  auto store = [p](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (t) {
    case DataType::kFloat32:
      return store(static_cast<float>(v));
    case DataType::kFloat64:
      return store(v);
    case DataType::kFloat16:
      return store(reduce::floatToHalf(static_cast<float>(v)));
    case DataType::kBFloat16:
      return store(reduce::floatToBfloat16(static_cast<float>(v)));
    case DataType::kInt8:
      return store(static_cast<std::int8_t>(v));
    case DataType::kUInt8:
      return store(static_cast<std::uint8_t>(v));
    case DataType::kInt32:
      return store(static_cast<std::int32_t>(v));
    case DataType::kInt64:
      return store(static_cast<std::int64_t>(v));
    case DataType::kInt16:
      return store(static_cast<std::int16_t>(v));
  }
}

bool isInteger(DataType t) {
  return t == DataType::kInt8 || t == DataType::kUInt8 || t == DataType::kInt16 || t == DataType::kInt32 ||
         t == DataType::kInt64;
}

bool closeEnough(DataType t, double got, double want) {
  if (isInteger(t)) return got == want;
  const double tol = t == DataType::kFloat64 ? 1e-12 : t == DataType::kFloat32 ? 1e-5 : 1e-2;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

// Inputs of reductions: small integers, so every sum and product is exact in every dtype.
double reductionInput(ReduceOp op, int rank, int size, std::uint64_t i) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return static_cast<double>((static_cast<std::uint64_t>(rank) + i) % 4);
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return static_cast<double>((static_cast<std::uint64_t>(rank) * 3 + i) % 5);
    case ReduceOp::kProduct:  // exactly one rank contributes 2 per element
      return (static_cast<std::uint64_t>(rank) + i) % static_cast<std::uint64_t>(size) == 0 ? 2.0 : 1.0;
  }
  return 0;
}

// Inputs of data movement (broadcast, allgather, alltoall).
double movedValue(int rank, std::uint64_t i) {
  return static_cast<double>((static_cast<std::uint64_t>(rank) * 7 + i) % 61);
}

double expectedReduction(DataType t, ReduceOp op, int size, std::uint64_t i) {
  double acc = reductionInput(op, 0, size, i);
  for (int r = 1; r < size; ++r) {
    const double x = reductionInput(op, r, size, i);
    acc = reduce::referenceCombine(op, acc, x);
  }
  if (op == ReduceOp::kAverage) acc = isInteger(t) ? std::trunc(acc / size) : acc / size;
  return acc;
}

}  // namespace

OpRunner::OpRunner(Communicator& comm, BenchOp op, DataType dtype, ReduceOp redop, bool inplace,
                   std::uint64_t maxBytes)
    : comm_(comm), op_(op), dtype_(dtype), redop_(redop), inplace_(inplace), elem_(dtypeSize(dtype)) {
  const auto n = static_cast<std::uint64_t>(comm.size());
  capacity_ = std::max<std::uint64_t>(maxBytes / elem_, n) + n;
  const std::uint64_t bytes = (capacity_ * elem_ + 63) / 64 * 64;
  a_.reset(static_cast<std::byte*>(std::aligned_alloc(64, bytes)));
  b_.reset(static_cast<std::byte*>(std::aligned_alloc(64, bytes)));
  if (!a_ || !b_) GYRE_THROW(SystemError, "cannot allocate two buffers of ", bytes, " bytes");
  std::memset(a_.get(), 0, bytes);
  std::memset(b_.get(), 0, bytes);
}

std::uint64_t OpRunner::setSize(std::uint64_t requestedBytes) {
  count_ = elementsFor(op_, requestedBytes, elem_, comm_.size());
  GYRE_ENFORCE_LE(count_, capacity_);
  return count_;
}

void OpRunner::setAlgorithm(const std::string& name) {
  if (op_ == BenchOp::kAllreduce) allreduceAlgo_ = parseAllreduceAlgorithm(name);
  if (op_ == BenchOp::kBroadcast) broadcastAlgo_ = parseBroadcastAlgorithm(name);
}

std::byte* OpRunner::input() const {
  const std::uint64_t mine = static_cast<std::uint64_t>(comm_.rank()) * perRank() * elem_;
  if (op_ == BenchOp::kAllgather && inplace_) return b_.get() + mine;
  return a_.get();
}

std::byte* OpRunner::output() const {
  const std::uint64_t mine = static_cast<std::uint64_t>(comm_.rank()) * perRank() * elem_;
  switch (op_) {
    case BenchOp::kAllreduce:
      return inplace_ ? a_.get() : b_.get();
    case BenchOp::kBroadcast:
      return a_.get();
    case BenchOp::kReduceScatter:
      return inplace_ ? a_.get() + mine : b_.get();
    default:
      return b_.get();
  }
}

void OpRunner::run() {
  switch (op_) {
    case BenchOp::kAllreduce: {
      AllreduceOptions o;
      o.dtype = dtype_, o.op = redop_, o.algorithm = allreduceAlgo_;
      return comm_.allreduce(input(), output(), count_, o);
    }
    case BenchOp::kBroadcast: {
      BroadcastOptions o;
      o.dtype = dtype_, o.root = 0, o.algorithm = broadcastAlgo_;
      return comm_.broadcast(a_.get(), count_, o);
    }
    case BenchOp::kReduce: {
      ReduceOptions o;
      o.dtype = dtype_, o.op = redop_, o.root = 0;
      return comm_.reduce(input(), output(), count_, o);
    }
    case BenchOp::kAllgather:
    case BenchOp::kReduceScatter:
    case BenchOp::kAlltoall: {
      CollectiveOptions o;
      o.dtype = dtype_, o.op = redop_;
      if (op_ == BenchOp::kAllgather) return comm_.allgather(input(), output(), perRank(), o);
      if (op_ == BenchOp::kReduceScatter) return comm_.reduceScatter(input(), output(), perRank(), o);
      return comm_.alltoall(input(), output(), perRank(), o);
    }
    case BenchOp::kBarrier:
      return comm_.barrier();
  }
}

void OpRunner::fill(std::byte* base, std::uint64_t n, double value) const {
  if (n == 0) return;
  writeValue(dtype_, base, 0, value);
  const std::uint64_t total = n * elem_;
  for (std::uint64_t done = elem_; done < total; done *= 2) {
    std::memcpy(base + done, base, std::min(done, total - done));
  }
}

void OpRunner::fillForTiming() {
  fill(a_.get(), count_, 1.0);
  fill(b_.get(), count_, 1.0);
}

std::uint64_t OpRunner::check() {
  const int rank = comm_.rank();
  const int size = comm_.size();
  const std::uint64_t per = perRank();
  // Fill the inputs and poison the outputs.
  fill(b_.get(), count_, kSentinel);
  switch (op_) {
    case BenchOp::kAllreduce:
    case BenchOp::kReduce:
    case BenchOp::kReduceScatter:
      for (std::uint64_t i = 0; i < count_; ++i)
        writeValue(dtype_, a_.get(), i, reductionInput(redop_, rank, size, i));
      break;
    case BenchOp::kBroadcast:
      for (std::uint64_t i = 0; i < count_; ++i)
        writeValue(dtype_, a_.get(), i, rank == 0 ? movedValue(0, i) : kSentinel);
      break;
    case BenchOp::kAllgather:
      for (std::uint64_t i = 0; i < per; ++i) writeValue(dtype_, input(), i, movedValue(rank, i));
      break;
    case BenchOp::kAlltoall:
      for (std::uint64_t i = 0; i < count_; ++i) writeValue(dtype_, a_.get(), i, movedValue(rank, i));
      break;
    case BenchOp::kBarrier:
      run();
      return 0;
  }
  run();
  if (op_ == BenchOp::kReduce && rank != 0) return 0;

  const std::uint64_t outCount = (op_ == BenchOp::kReduceScatter) ? per : count_;
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < outCount; ++i) {
    double want = 0;
    switch (op_) {
      case BenchOp::kAllreduce:
      case BenchOp::kReduce:
        want = expectedReduction(dtype_, redop_, size, i);
        break;
      case BenchOp::kReduceScatter:
        want = expectedReduction(dtype_, redop_, size, static_cast<std::uint64_t>(rank) * per + i);
        break;
      case BenchOp::kBroadcast:
        want = movedValue(0, i);
        break;
      case BenchOp::kAllgather:
        want = movedValue(static_cast<int>(i / per), i % per);
        break;
      case BenchOp::kAlltoall:
        want = movedValue(static_cast<int>(i / per), static_cast<std::uint64_t>(rank) * per + i % per);
        break;
      case BenchOp::kBarrier:
        break;
    }
    // Round the expected value through the dtype, as the library's result was.
    std::byte tmp[8];
    writeValue(dtype_, tmp, 0, want);
    want = readValue(dtype_, tmp, 0);
    const double got = readValue(dtype_, output(), i);
    if (!closeEnough(dtype_, got, want) && wrong++ == 0) {
      fmt::print(
          stderr,
          "gyre bench: check failed on rank {}: {} of {} elements ({}), element {}: got {}, expected {}\n",
          rank, toString(op_), count_, toString(dtype_), i, got, want);
    }
  }
  return wrong;
}

}  // namespace gyre::app
