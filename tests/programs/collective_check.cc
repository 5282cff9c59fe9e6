// gyre_collective_check: one rank of a job started by any launcher (mpirun, `gyre run`, ...).
// It calls gyre::init(), runs every collective, point-to-point messages, and collectives on
// split() communicators, on deterministic inputs derived from the rank; checks each result
// against a serial reference it computes itself; and prints
//
//   rank R of N: <FNV-1a 64 hash of every result, in order>
//
// and, on rank 0 when every rank passed, a final "OK". The exit code is 0 when every rank
// passed, 1 when a result differed anywhere (the differences go to stderr), 2 on an error.
//
// The hash lets a test compare the same job over different transports and launchers bit for
// bit: allreduce and broadcast name their algorithm explicitly (`auto` may choose differently
// on different transports, and float sums depend on the order of the additions).
//
// Built a second time as gyre_collective_check_user_mpi (GYRE_CHECK_USER_MPI): the program then
// initializes MPI itself, at MPI_THREAD_SERIALIZED, before gyre::init(), and finalizes it after
// its communicators are gone, as an MPI program that also uses gyre would.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gyre/gyre.h"

#ifdef GYRE_CHECK_USER_MPI
#include <mpi.h>
#endif

namespace {

using gyre::AllreduceAlgorithm;
using gyre::BroadcastAlgorithm;
using gyre::DataType;
using gyre::ReduceOp;

constexpr std::size_t kSizes[] = {0, 1, 1023, 262147};
constexpr std::size_t kBlockSizes[] = {0, 1, 1023, 65537};

// float16 bits of v, which must be zero or a normal float16 exactly (the inputs below are).
std::uint16_t toHalf(float v) {
  std::uint32_t x = 0;
  std::memcpy(&x, &v, sizeof(x));
  if ((x & 0x7fffffffu) == 0) return static_cast<std::uint16_t>(x >> 16);
  const int exponent = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  return static_cast<std::uint16_t>(((x >> 16) & 0x8000u) | (static_cast<std::uint32_t>(exponent) << 10) |
                                    ((x & 0x7fffffu) >> 13));
}

float fromHalf(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t x = sign;
  if (exponent == 31) {
    x |= 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    x |= ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {  // subnormal: never an input here, but a result may be
    float f = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -f : f;
  }
  float f = 0;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

// Rank r's element i, as the double it represents exactly in `dtype`. float32 values are not
// integers; float16 values are quarters in [-32, 32], so every partial sum over a few ranks is
// exact; int32 values cover the whole range, so sums wrap.
double input(DataType dtype, int r, std::size_t i) {
  switch (dtype) {
    case DataType::kFloat32:
      return static_cast<float>((r + 1) * 0.7310f + static_cast<float>(i % 977) * 0.0137f -
                                3.3f * static_cast<float>(i % 7));
    case DataType::kFloat16:
      return static_cast<double>(static_cast<int>((r * 37 + i * 11) % 257) - 128) / 4.0;
    default:
      return static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(r + 1) * 1000003u *
                                                               static_cast<std::uint32_t>(i + 1) +
                                                           static_cast<std::uint32_t>(i * i)));
  }
}

std::size_t elementSize(DataType dtype) {
  return dtype == DataType::kFloat16 ? 2 : 4;
}

void store(DataType dtype, double v, void* p) {
  if (dtype == DataType::kFloat32) {
    const float f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
  } else if (dtype == DataType::kFloat16) {
    const std::uint16_t h = toHalf(static_cast<float>(v));
    std::memcpy(p, &h, 2);
  } else {
    const auto x = static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::int64_t>(v)));
    std::memcpy(p, &x, 4);
  }
}

double load(DataType dtype, const void* p) {
  if (dtype == DataType::kFloat32) {
    float f = 0;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (dtype == DataType::kFloat16) {
    std::uint16_t h = 0;
    std::memcpy(&h, p, 2);
    return fromHalf(h);
  }
  std::int32_t x = 0;
  std::memcpy(&x, p, 4);
  return x;
}

std::vector<std::uint8_t> fill(DataType dtype, int r, std::size_t count, std::size_t offset = 0) {
  std::vector<std::uint8_t> out(count * elementSize(dtype));
  for (std::size_t i = 0; i < count; ++i)
    store(dtype, input(dtype, r, offset + i), &out[i * elementSize(dtype)]);
  return out;
}

// The reduction over ranks 0..n-1 of element i, and how far a correct result may be from it:
// float32 sums depend on the order of the additions; everything else here is exact.
struct Expected {
  double value;
  double tolerance;
};

Expected reference(DataType dtype, ReduceOp op, int n, std::size_t i) {
  double value = input(dtype, 0, i), magnitude = std::fabs(value);
  std::uint32_t wrapped = static_cast<std::uint32_t>(static_cast<std::int64_t>(value));
  for (int r = 1; r < n; ++r) {
    const double x = input(dtype, r, i);
    magnitude += std::fabs(x);
    value = op == ReduceOp::kMax ? std::max(value, x) : value + x;
    wrapped += static_cast<std::uint32_t>(static_cast<std::int64_t>(x));
  }
  if (dtype == DataType::kInt32 && op == ReduceOp::kSum) value = static_cast<std::int32_t>(wrapped);
  const bool inexact = dtype == DataType::kFloat32 && op == ReduceOp::kSum;
  return {value, inexact ? 1e-5 * magnitude + 1e-6 : 0.0};
}

// Hashes every result and counts the mismatches, naming the first few on stderr.
class Checker {
 public:
  Checker(int rank, int size) : rank_(rank), size_(size) {}

  void result(const std::string& what, const void* data, std::size_t bytes) {
    mix(what.data(), what.size());
    mix(data, bytes);
  }

  void expect(const std::string& what, std::size_t i, double got, Expected want) {
    if (std::fabs(got - want.value) <= want.tolerance) return;
    if (++failures_ <= 20)
      std::fprintf(stderr, "rank %d of %d: %s: element %zu is %.9g, expected %.9g\n", rank_, size_,
                   what.c_str(), i, got, want.value);
  }

  void expectEqual(const std::string& what, const std::vector<std::uint8_t>& got,
                   const std::vector<std::uint8_t>& want, DataType dtype) {
    const std::size_t es = elementSize(dtype);
    for (std::size_t i = 0; i < want.size() / es; ++i)
      if (std::memcmp(&got[i * es], &want[i * es], es) != 0) {
        expect(what, i, load(dtype, &got[i * es]), {load(dtype, &want[i * es]), 0.0});
        return;
      }
  }

  std::uint64_t hash() const { return hash_; }
  int failures() const { return failures_; }

 private:
  void mix(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    for (std::size_t i = 0; i < bytes; ++i) hash_ = (hash_ ^ p[i]) * 0x100000001b3ull;
  }

  int rank_;
  int size_;
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
  int failures_ = 0;
};

std::string name(const char* op, std::string_view detail, DataType dtype, std::size_t count) {
  return std::string(op) + " " + std::string(detail) + " " + std::string(gyre::toString(dtype)) +
         " n=" + std::to_string(count);
}

void checkAllreduce(gyre::Communicator& comm, Checker& check) {
  const int n = comm.size();
  for (auto algorithm : {AllreduceAlgorithm::kNaive, AllreduceAlgorithm::kRing,
                         AllreduceAlgorithm::kHalvingDoubling, AllreduceAlgorithm::kTree})
    for (auto dtype : {DataType::kFloat32, DataType::kFloat16, DataType::kInt32})
      for (auto op : {ReduceOp::kSum, ReduceOp::kMax})
        for (std::size_t count : kSizes) {
          const std::string what = name(
              "allreduce", std::string(gyre::toString(algorithm)) + " " + std::string(gyre::toString(op)),
              dtype, count);
          const auto in = fill(dtype, comm.rank(), count);
          std::vector<std::uint8_t> out(in.size());
          comm.allreduce(in.data(), out.data(), count, {dtype, op, algorithm});
          for (std::size_t i = 0; i < count; ++i)
            check.expect(what, i, load(dtype, &out[i * elementSize(dtype)]), reference(dtype, op, n, i));
          check.result(what, out.data(), out.size());
        }
  // In place, once per algorithm.
  for (auto algorithm : {AllreduceAlgorithm::kNaive, AllreduceAlgorithm::kRing,
                         AllreduceAlgorithm::kHalvingDoubling, AllreduceAlgorithm::kTree}) {
    const std::size_t count = 1023;
    auto buffer = fill(DataType::kInt32, comm.rank(), count);
    comm.allreduce(buffer.data(), buffer.data(), count, {DataType::kInt32, ReduceOp::kSum, algorithm});
    const std::string what = name("allreduce in-place", gyre::toString(algorithm), DataType::kInt32, count);
    for (std::size_t i = 0; i < count; ++i)
      check.expect(what, i, load(DataType::kInt32, &buffer[i * 4]),
                   reference(DataType::kInt32, ReduceOp::kSum, n, i));
    check.result(what, buffer.data(), buffer.size());
  }
}

void checkBroadcast(gyre::Communicator& comm, Checker& check) {
  for (auto algorithm : {BroadcastAlgorithm::kChain, BroadcastAlgorithm::kTree})
    for (int root : {0, comm.size() - 1})
      for (std::size_t count : kSizes) {
        const std::string what =
            name("broadcast", std::string(gyre::toString(algorithm)) + " root=" + std::to_string(root),
                 DataType::kFloat32, count);
        const auto want = fill(DataType::kFloat32, root, count);
        auto buffer = comm.rank() == root ? want : fill(DataType::kFloat32, comm.rank() + 100, count);
        comm.broadcast(buffer.data(), count, {DataType::kFloat32, root, algorithm});
        check.expectEqual(what, buffer, want, DataType::kFloat32);
        check.result(what, buffer.data(), buffer.size());
      }
}

void checkAllgather(gyre::Communicator& comm, Checker& check) {
  for (std::size_t count : kBlockSizes) {
    const std::string what = name("allgather", "ring", DataType::kInt32, count);
    const auto in = fill(DataType::kInt32, comm.rank(), count);
    std::vector<std::uint8_t> out(in.size() * comm.size()), want;
    comm.allgather(in.data(), out.data(), count, {DataType::kInt32});
    for (int r = 0; r < comm.size(); ++r) {
      const auto block = fill(DataType::kInt32, r, count);
      want.insert(want.end(), block.begin(), block.end());
    }
    check.expectEqual(what, out, want, DataType::kInt32);
    check.result(what, out.data(), out.size());
  }
}

void checkReduceScatter(gyre::Communicator& comm, Checker& check) {
  const int n = comm.size();
  for (auto [dtype, op] :
       {std::pair{DataType::kInt32, ReduceOp::kSum}, std::pair{DataType::kFloat32, ReduceOp::kMax},
        std::pair{DataType::kFloat32, ReduceOp::kSum}})
    for (std::size_t count : kBlockSizes) {
      const std::string what = name("reduce-scatter", gyre::toString(op), dtype, count);
      const auto in = fill(dtype, comm.rank(), count * n);
      std::vector<std::uint8_t> out(count * elementSize(dtype));
      comm.reduceScatter(in.data(), out.data(), count, {dtype, op});
      for (std::size_t i = 0; i < count; ++i)
        check.expect(what, i, load(dtype, &out[i * elementSize(dtype)]),
                     reference(dtype, op, n, comm.rank() * count + i));
      check.result(what, out.data(), out.size());
    }
}

void checkAlltoall(gyre::Communicator& comm, Checker& check) {
  const int n = comm.size();
  for (std::size_t count : kBlockSizes) {
    const std::string what = name("alltoall", "pairwise", DataType::kInt32, count);
    // Block d of rank s holds the elements of "rank" s * n + d.
    std::vector<std::uint8_t> in, want;
    for (int d = 0; d < n; ++d) {
      const auto block = fill(DataType::kInt32, comm.rank() * n + d, count);
      in.insert(in.end(), block.begin(), block.end());
    }
    for (int s = 0; s < n; ++s) {
      const auto block = fill(DataType::kInt32, s * n + comm.rank(), count);
      want.insert(want.end(), block.begin(), block.end());
    }
    std::vector<std::uint8_t> out(want.size());
    comm.alltoall(in.data(), out.data(), count, {DataType::kInt32});
    check.expectEqual(what, out, want, DataType::kInt32);
    check.result(what, out.data(), out.size());
  }
}

// A message around the ring: rank 0 sends first, every other rank receives first.
void checkPointToPoint(gyre::Communicator& comm, Checker& check) {
  const int n = comm.size();
  if (n == 1) return;
  const int next = (comm.rank() + 1) % n, prev = (comm.rank() + n - 1) % n;
  for (std::size_t count : kSizes) {
    const std::string what = name("send/recv", "ring", DataType::kFloat32, count);
    const auto mine = fill(DataType::kFloat32, comm.rank(), count);
    const auto want = fill(DataType::kFloat32, prev, count);
    std::vector<std::uint8_t> got(want.size());
    const int tag = static_cast<int>(count % 1000);
    if (comm.rank() == 0) comm.send(mine.data(), count, next, {DataType::kFloat32, tag});
    comm.recv(got.data(), count, prev, {DataType::kFloat32, tag});
    if (comm.rank() != 0) comm.send(mine.data(), count, next, {DataType::kFloat32, tag});
    check.expectEqual(what, got, want, DataType::kFloat32);
    check.result(what, got.data(), got.size());
  }
}

// Even and odd ranks form two communicators, ordered by descending world rank. Then both
// communicators run an allreduce at the same time (each on its own worker thread).
void checkSplit(gyre::Communicator& comm, Checker& check) {
  auto half = comm.split(comm.rank() % 2, -comm.rank());
  std::vector<int> members;
  for (int r = comm.size() - 1; r >= 0; --r)
    if (r % 2 == comm.rank() % 2) members.push_back(r);
  const int position =
      static_cast<int>(std::find(members.begin(), members.end(), comm.rank()) - members.begin());
  const std::string what = "split rank";
  if (half->size() != static_cast<int>(members.size()) || half->rank() != position)
    check.expect(what, 0, half->rank(), {static_cast<double>(position), 0.0});
  const std::size_t count = 262147;
  const auto in = fill(DataType::kInt32, half->rank(), count);
  std::vector<std::uint8_t> out(in.size());
  half->allreduce(in.data(), out.data(), count,
                  {DataType::kInt32, ReduceOp::kSum, AllreduceAlgorithm::kRing});
  const std::string sum = name("split allreduce", "ring sum", DataType::kInt32, count);
  for (std::size_t i = 0; i < count; ++i)
    check.expect(sum, i, load(DataType::kInt32, &out[i * 4]),
                 reference(DataType::kInt32, ReduceOp::kSum, half->size(), i));
  check.result(sum, out.data(), out.size());

  const std::size_t both = 65537;
  const auto worldIn = fill(DataType::kFloat32, comm.rank(), both);
  std::vector<std::uint8_t> worldOut(worldIn.size()), halfOut(in.size());
  const AllreduceAlgorithm tree = AllreduceAlgorithm::kTree;
  auto onWorld =
      comm.allreduceAsync(worldIn.data(), worldOut.data(), both, {DataType::kFloat32, ReduceOp::kSum, tree});
  auto onHalf =
      half->allreduceAsync(in.data(), halfOut.data(), count, {DataType::kInt32, ReduceOp::kSum, tree});
  onWorld->wait();
  onHalf->wait();
  const std::string worldWhat = name("concurrent allreduce", "tree sum", DataType::kFloat32, both);
  for (std::size_t i = 0; i < both; ++i)
    check.expect(worldWhat, i, load(DataType::kFloat32, &worldOut[i * 4]),
                 reference(DataType::kFloat32, ReduceOp::kSum, comm.size(), i));
  check.result(worldWhat, worldOut.data(), worldOut.size());
  check.expectEqual(name("concurrent split allreduce", "tree sum", DataType::kInt32, count), halfOut, out,
                    DataType::kInt32);
  half->barrier();
}

int run() {
  int rank = -1;
  try {
    auto world = gyre::init();
    rank = world->rank();
    Checker check(world->rank(), world->size());
    checkAllreduce(*world, check);
    checkBroadcast(*world, check);
    checkAllgather(*world, check);
    checkReduceScatter(*world, check);
    checkAlltoall(*world, check);
    checkPointToPoint(*world, check);
    for (int i = 0; i < 3; ++i) world->barrier();
    checkSplit(*world, check);

    std::printf("rank %d of %d: %016" PRIx64 "\n", world->rank(), world->size(), check.hash());
    std::fflush(stdout);
    std::int32_t failures = check.failures();
    world->allreduce(&failures, &failures, 1, {DataType::kInt32, ReduceOp::kSum, AllreduceAlgorithm::kRing});
    if (failures != 0) {
      std::fprintf(stderr, "rank %d: %d results differ from the serial reference\n", world->rank(), failures);
      return 1;
    }
    if (world->rank() == 0) std::printf("OK\n");
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    return 2;
  }
}

}  // namespace

int main() {
#ifdef GYRE_CHECK_USER_MPI
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  const int code = run();
  MPI_Finalize();
  return code;
#else
  return run();
#endif
}
