// Element types, reduction operations and algorithm choices shared by every collective.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gyre {

enum class DataType : std::uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,   // IEEE 754 binary16; reduced with float32 arithmetic.
  kBFloat16,  // bfloat16; reduced with float32 arithmetic.
  kInt8,
  kUInt8,
  kInt32,
  kInt64,
  kInt16,  // after the others: the values above are on the wire and in saved files
};

// Average divides the sum by the number of ranks once, at the end. For integer types the
// division truncates toward zero.
enum class ReduceOp : std::uint8_t { kSum, kAverage, kProduct, kMin, kMax };

enum class AllreduceAlgorithm : std::uint8_t {
  kAuto,             // chosen per call from the measured cost model (docs/algorithms.md)
  kNaive,            // reduce to rank 0, broadcast back ("driver")
  kRing,             // ring reduce-scatter + ring allgather, pipelined
  kHalvingDoubling,  // Rabenseifner recursive halving/doubling; any world size
  kTree,             // binary tree reduce + broadcast, pipelined
  kHierarchical,     // reduce inside each host, allreduce across hosts, spread inside each host
};

enum class BroadcastAlgorithm : std::uint8_t {
  kAuto,
  kChain,  // pipelined chain from the root
  kTree,   // binary tree from the root, pipelined
};

// Which byte mover connects a pair of ranks. kAuto uses shared memory between ranks on one
// host and TCP otherwise. kMpi moves the data with MPI point-to-point messages; it is used only
// when asked for, needs a build with MPI (GYRE_WITH_MPI) and one MPI process per rank, all
// started by one mpirun (docs/transports.md).
enum class Transport : std::uint8_t { kAuto, kTcp, kShm, kMpi };

// Milliseconds; zero means "the communicator's default time-out".
using Timeout = std::chrono::milliseconds;

std::size_t dtypeSize(DataType dtype);
std::string_view toString(DataType dtype);
std::string_view toString(ReduceOp op);
std::string_view toString(AllreduceAlgorithm algorithm);
std::string_view toString(BroadcastAlgorithm algorithm);
std::string_view toString(Transport transport);

// Parse the names printed by toString (case-insensitive, a few aliases such as "f32", "rhd",
// "hd"); throw InvalidArgument listing the accepted names otherwise.
DataType parseDataType(std::string_view name);
ReduceOp parseReduceOp(std::string_view name);
AllreduceAlgorithm parseAllreduceAlgorithm(std::string_view name);
BroadcastAlgorithm parseBroadcastAlgorithm(std::string_view name);
Transport parseTransport(std::string_view name);

// One message of a batched exchange (Communicator::exchange): `count` elements of the options'
// dtype to or from `peer`, in `buffer` (read for a send, written for a receive).
struct P2PMessage {
  int peer = -1;
  void* buffer = nullptr;
  std::size_t count = 0;
};

// Gradient fusion's default bucket cap: DistributedOptimizerOptions::bucketCapBytes and gyre
// train's --bucket-cap-mb (25 MiB, as PyTorch DDP's).
inline constexpr std::size_t kDefaultBucketCapBytes = std::size_t{25} << 20;

}  // namespace gyre
