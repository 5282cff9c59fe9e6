#include "bench_options.h"

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace gyre::app {
namespace {

const std::pair<const char*, BenchOp> kOps[] = {
    {"allreduce", BenchOp::kAllreduce},
    {"broadcast", BenchOp::kBroadcast},
    {"reduce", BenchOp::kReduce},
    {"allgather", BenchOp::kAllgather},
    {"reducescatter", BenchOp::kReduceScatter},
    {"alltoall", BenchOp::kAlltoall},
    {"barrier", BenchOp::kBarrier},
};

// The one algorithm gyre has for the ops without a choice.
const char* fixedAlgorithm(BenchOp op) {
  switch (op) {
    case BenchOp::kReduce:
      return "tree";
    case BenchOp::kAllgather:
      return "ring";
    case BenchOp::kReduceScatter:
      return "ring";
    case BenchOp::kAlltoall:
      return "pairwise";
    case BenchOp::kBarrier:
      return "dissemination";
    default:
      return "auto";
  }
}

}  // namespace

std::vector<std::string> rankArguments(const std::vector<std::string>& args, int rank, int np,
                                       const std::string& storeAddress, int resultFd) {
  std::vector<std::string> argv = {"gyre"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--worker-rank", std::to_string(rank), "--worker-size", std::to_string(np),
                           "--worker-store", storeAddress, "--worker-result-fd", std::to_string(resultFd)});
  return argv;
}

BenchOp parseBenchOp(const std::string& name) {
  for (const auto& [n, op] : kOps)
    if (name == n) return op;
  std::string choices;
  for (const auto& [n, op] : kOps) choices += (choices.empty() ? "" : ", ") + std::string(n);
  GYRE_USAGE_ERROR("unknown op '", name, "'; expected one of: ", choices);
}

const char* toString(BenchOp op) {
  for (const auto& [n, o] : kOps)
    if (o == op) return n;
  return "invalid";
}

std::vector<std::string> benchOpNames() {
  std::vector<std::string> names;
  for (const auto& [n, op] : kOps) names.emplace_back(n);
  return names;
}

std::vector<std::string> algorithmsToRun(BenchOp op, const std::string& algo) {
  if (op == BenchOp::kAllreduce) {
    if (algo == "all") return {"auto", "naive", "ring", "halving-doubling", "tree", "hierarchical"};
    return {std::string(toString(parseAllreduceAlgorithm(algo)))};
  }
  if (op == BenchOp::kBroadcast) {
    if (algo == "all") return {"auto", "chain", "tree"};
    return {std::string(toString(parseBroadcastAlgorithm(algo)))};
  }
  const std::string fixed = fixedAlgorithm(op);
  GYRE_USAGE_CHECK(algo == "auto" || algo == "all" || algo == fixed, "--algo ", algo, " does not apply to ",
                   toString(op), ": it has one algorithm (", fixed, "); use auto");
  return {fixed};
}

void validate(const BenchOptions& o) {
  const BenchOp op = parseBenchOp(o.op);
  algorithmsToRun(op, o.algo);
  parseDataType(o.dtype);
  parseReduceOp(o.redop);
  parseTransport(o.transport);
  GYRE_USAGE_CHECK(o.np >= 1 && o.np <= 1024, "--np must be in [1, 1024], not ", o.np);
  GYRE_USAGE_CHECK(o.minBytes <= o.maxBytes, "--min-bytes (", o.minBytes, ") exceeds --max-bytes (",
                   o.maxBytes, ")");
  GYRE_USAGE_CHECK(o.minBytes >= 1 || op == BenchOp::kBarrier, "--min-bytes must be at least 1");
  GYRE_USAGE_CHECK(o.maxBytes <= (16ull << 30), "--max-bytes must be at most 16 GiB");
  GYRE_USAGE_CHECK(o.stepFactor >= 2, "--step-factor must be at least 2, not ", o.stepFactor);
  GYRE_USAGE_CHECK(o.iters >= 0 && o.warmup >= 0, "--iters and --warmup must not be negative");
  GYRE_USAGE_CHECK(o.timeoutS > 0 && o.opTimeoutS > 0, "time-outs must be positive");
  GYRE_USAGE_CHECK(o.baseline.empty() || o.baseline == "mpi" || o.baseline == "none",
                   "--baseline must be mpi or none, not ", o.baseline);
}

std::vector<std::uint64_t> sweepSizes(const BenchOptions& o, BenchOp op) {
  if (op == BenchOp::kBarrier) return {0};
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t b = o.minBytes; b <= o.maxBytes; b *= static_cast<std::uint64_t>(o.stepFactor)) {
    sizes.push_back(b);
  }
  return sizes;
}

int itersFor(const BenchOptions& o, std::uint64_t requestedBytes) {
  if (o.iters > 0) return o.iters;
  if (requestedBytes <= (1u << 20)) return 50;
  if (requestedBytes <= (16u << 20)) return 10;
  return 4;
}

std::uint64_t elementsFor(BenchOp op, std::uint64_t requestedBytes, std::size_t elemSize, int np) {
  std::uint64_t count = requestedBytes / elemSize;
  if (op == BenchOp::kAllgather || op == BenchOp::kReduceScatter || op == BenchOp::kAlltoall) {
    const auto n = static_cast<std::uint64_t>(np);
    count = std::max(count / n, std::uint64_t{1}) * n;
  }
  if (op == BenchOp::kBarrier) count = 0;
  return count;
}

double busBandwidthFactor(BenchOp op, int np) {
  const double n = np;
  switch (op) {
    case BenchOp::kAllreduce:
      return 2.0 * (n - 1) / n;
    case BenchOp::kAllgather:
    case BenchOp::kReduceScatter:
    case BenchOp::kAlltoall:
      return (n - 1) / n;
    case BenchOp::kBroadcast:
    case BenchOp::kReduce:
      return 1.0;
    case BenchOp::kBarrier:
      return 0.0;
  }
  return 0.0;
}

}  // namespace gyre::app
