#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <utility>

#include "common/check.h"
#include "gyre/types.h"

namespace gyre {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Looks `name` up in a table of {alias, value}; throws InvalidArgument listing the choices.
template <typename T, std::size_t N>
T parseFrom(std::string_view what, std::string_view name, const std::array<std::pair<const char*, T>, N>& table) {
  const std::string key = lower(name);
  for (const auto& [alias, value] : table)
    if (key == alias) return value;
  std::string choices;
  for (const auto& [alias, value] : table) choices += (choices.empty() ? "" : ", ") + std::string(alias);
  GYRE_THROW(InvalidArgument, "unknown ", what, " '", name, "'; expected one of: ", choices);
}

}  // namespace

std::size_t dtypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kInt8: return 1;
    case DataType::kUInt8: return 1;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kInt16: return 2;
  }
  GYRE_THROW(InvalidArgument, "invalid DataType ", static_cast<int>(dtype));
}

std::string_view toString(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kInt8: return "int8";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kInt16: return "int16";
  }
  return "invalid";
}

std::string_view toString(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAverage: return "average";
    case ReduceOp::kProduct: return "product";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
  }
  return "invalid";
}

std::string_view toString(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kAuto: return "auto";
    case AllreduceAlgorithm::kNaive: return "naive";
    case AllreduceAlgorithm::kRing: return "ring";
    case AllreduceAlgorithm::kHalvingDoubling: return "halving-doubling";
    case AllreduceAlgorithm::kTree: return "tree";
    case AllreduceAlgorithm::kHierarchical:
      return "hierarchical";
  }
  return "invalid";
}

std::string_view toString(BroadcastAlgorithm algorithm) {
  switch (algorithm) {
    case BroadcastAlgorithm::kAuto: return "auto";
    case BroadcastAlgorithm::kChain: return "chain";
    case BroadcastAlgorithm::kTree: return "tree";
  }
  return "invalid";
}

std::string_view toString(Transport transport) {
  switch (transport) {
    case Transport::kAuto: return "auto";
    case Transport::kTcp: return "tcp";
    case Transport::kShm: return "shm";
    case Transport::kMpi: return "mpi";
  }
  return "invalid";
}

DataType parseDataType(std::string_view name) {
  static constexpr std::array<std::pair<const char*, DataType>, 17> kTable{{
      {"float32", DataType::kFloat32}, {"f32", DataType::kFloat32}, {"float", DataType::kFloat32},
      {"float64", DataType::kFloat64}, {"f64", DataType::kFloat64}, {"double", DataType::kFloat64},
      {"float16", DataType::kFloat16}, {"f16", DataType::kFloat16}, {"half", DataType::kFloat16},
      {"bfloat16", DataType::kBFloat16}, {"bf16", DataType::kBFloat16}, {"int8", DataType::kInt8},
      {"uint8", DataType::kUInt8}, {"int32", DataType::kInt32}, {"int64", DataType::kInt64},
      {"int", DataType::kInt32}, {"int16", DataType::kInt16},
  }};
  return parseFrom("dtype", name, kTable);
}

ReduceOp parseReduceOp(std::string_view name) {
  static constexpr std::array<std::pair<const char*, ReduceOp>, 7> kTable{{
      {"sum", ReduceOp::kSum}, {"average", ReduceOp::kAverage}, {"avg", ReduceOp::kAverage},
      {"product", ReduceOp::kProduct}, {"prod", ReduceOp::kProduct}, {"min", ReduceOp::kMin},
      {"max", ReduceOp::kMax},
  }};
  return parseFrom("reduce op", name, kTable);
}

AllreduceAlgorithm parseAllreduceAlgorithm(std::string_view name) {
  static constexpr std::array<std::pair<const char*, AllreduceAlgorithm>, 10> kTable{{
      {"auto", AllreduceAlgorithm::kAuto},
      {"naive", AllreduceAlgorithm::kNaive},
      {"driver", AllreduceAlgorithm::kNaive},
      {"ring", AllreduceAlgorithm::kRing},
      {"halving-doubling", AllreduceAlgorithm::kHalvingDoubling},
      {"hd", AllreduceAlgorithm::kHalvingDoubling},
      {"rhd", AllreduceAlgorithm::kHalvingDoubling},
      {"tree", AllreduceAlgorithm::kTree},
      {"hierarchical", AllreduceAlgorithm::kHierarchical},
      {"hier", AllreduceAlgorithm::kHierarchical},
  }};
  return parseFrom("allreduce algorithm", name, kTable);
}

BroadcastAlgorithm parseBroadcastAlgorithm(std::string_view name) {
  static constexpr std::array<std::pair<const char*, BroadcastAlgorithm>, 3> kTable{{
      {"auto", BroadcastAlgorithm::kAuto}, {"chain", BroadcastAlgorithm::kChain}, {"tree", BroadcastAlgorithm::kTree},
  }};
  return parseFrom("broadcast algorithm", name, kTable);
}

Transport parseTransport(std::string_view name) {
  static constexpr std::array<std::pair<const char*, Transport>, 4> kTable{{
      {"auto", Transport::kAuto}, {"tcp", Transport::kTcp}, {"shm", Transport::kShm}, {"mpi", Transport::kMpi},
  }};
  return parseFrom("transport", name, kTable);
}

}  // namespace gyre
