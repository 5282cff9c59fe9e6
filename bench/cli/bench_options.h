// Options of `gyre bench collectives`, shared by the parent (which starts the ranks and prints)
// and the workers (which run the collectives), and the rules both derive from them: the sizes
// swept, iterations per size, element counts per size and the algorithms to time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gyre/types.h"

namespace gyre::app {

enum class BenchOp { kAllreduce, kBroadcast, kReduce, kAllgather, kReduceScatter, kAlltoall, kBarrier };

struct BenchOptions {
  int np = 2;
  std::string op = "allreduce";
  std::string algo = "auto";
  std::string dtype = "float32";
  std::string redop = "sum";
  std::string transport = "auto";
  std::uint64_t minBytes = 4096;
  std::uint64_t maxBytes = 64ull << 20;
  int stepFactor = 4;
  int iters = 0;  // 0: 50 up to 1 MiB, 10 up to 16 MiB, 4 above (like the anchor)
  int warmup = 2;
  bool inplace = true;
  bool check = false;
  bool json = false;
  std::string baseline;  // "" or "mpi"
  std::string mpiBench;  // path of gyre_mpi_bench; empty: next to the gyre binary
  std::string mpirun = "mpirun";
  int timeoutS = 900;   // the whole run, baseline included
  int opTimeoutS = 60;  // one collective (CommunicatorOptions::timeout)

  // Hidden worker mode: set by the parent on the command line of the ranks it starts.
  int workerRank = -1;
  int workerSize = 0;
  std::string workerStore;
  int workerResultFd = -1;

  bool isWorker() const { return workerRank >= 0; }
};

// Environment variable that carries the job secret from the parent to its ranks (not argv,
// which other users can read in /proc).
inline constexpr const char* kSecretEnv = "GYRE_BENCH_SECRET";

// The command line of rank `rank` of the `np` ranks the parent starts: the gyre tool's own
// arguments `args` (without argv[0]) and the hidden worker flags, which name the parent's store
// and, on rank 0, the pipe it sends its rows to.
std::vector<std::string> rankArguments(const std::vector<std::string>& args, int rank, int np,
                                       const std::string& storeAddress, int resultFd);

// Throws InvalidArgument with the accepted names.
BenchOp parseBenchOp(const std::string& name);
const char* toString(BenchOp op);
std::vector<std::string> benchOpNames();

// Checks everything that does not need a rank: ranges, names, op/algorithm pairs.
// Throws InvalidArgument.
void validate(const BenchOptions& o);

// The algorithms to time, as names: `all` expands to every algorithm of the op (auto first);
// ops with a single algorithm report its name.
std::vector<std::string> algorithmsToRun(BenchOp op, const std::string& algo);

// Requested message sizes: min, min*step, ... <= max. Barrier has one size, 0.
std::vector<std::uint64_t> sweepSizes(const BenchOptions& o, BenchOp op);

// Timed iterations for a requested size.
int itersFor(const BenchOptions& o, std::uint64_t requestedBytes);

// Total elements for a requested size: bytes / element size, rounded down to a multiple of np
// for the ops that split the buffer in np blocks (allgather, reduce-scatter, alltoall), and at
// least one element per block. gyre_mpi_bench applies the same rule.
std::uint64_t elementsFor(BenchOp op, std::uint64_t requestedBytes, std::size_t elemSize, int np);

// busbw = algbw * factor, as nccl-tests define it (DESIGN.md "Benchmarks and their units").
double busBandwidthFactor(BenchOp op, int np);

}  // namespace gyre::app
