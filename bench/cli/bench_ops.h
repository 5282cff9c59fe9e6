// Runs one benchmarked collective on one rank: owns the buffers, issues the call with the chosen
// algorithm, and checks a result against the value every rank can compute by itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "bench_options.h"
#include "gyre/communicator.h"

namespace gyre::app {

class OpRunner {
 public:
  // Buffers are sized for maxBytes (plus one element per block for the rounding of elementsFor).
  OpRunner(Communicator& comm, BenchOp op, DataType dtype, ReduceOp redop, bool inplace,
           std::uint64_t maxBytes);

  // Sets the message size; returns the total element count used (see elementsFor).
  std::uint64_t setSize(std::uint64_t requestedBytes);
  // An algorithm name from algorithmsToRun.
  void setAlgorithm(const std::string& name);

  // One collective call.
  void run();
  // Fills the inputs with 1 (as the anchor does) for the timed calls.
  void fillForTiming();
  // Fills a rank- and index-dependent pattern, runs once and compares with the expected result.
  // Returns the number of wrong elements on this rank; prints the first one to stderr.
  std::uint64_t check();

 private:
  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  using Buffer = std::unique_ptr<std::byte, FreeDeleter>;

  // Input and output pointers for the current size and placement.
  std::byte* input() const;
  std::byte* output() const;
  std::uint64_t perRank() const { return count_ / static_cast<std::uint64_t>(comm_.size()); }
  void fill(std::byte* base, std::uint64_t n, double value) const;

  Communicator& comm_;
  BenchOp op_;
  DataType dtype_;
  ReduceOp redop_;
  bool inplace_;
  std::size_t elem_;
  std::uint64_t capacity_;
  Buffer a_;
  Buffer b_;
  std::uint64_t count_ = 0;
  AllreduceAlgorithm allreduceAlgo_ = AllreduceAlgorithm::kAuto;
  BroadcastAlgorithm broadcastAlgo_ = BroadcastAlgorithm::kAuto;
};

}  // namespace gyre::app
