// Runs a test body on many ranks: as threads of this process, or as forked processes.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <thread>
#include <utility>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gyre/gyre.h"

namespace gyre::test {

// A thread whose exceptions become test failures instead of std::terminate; joins on scope exit.
template <typename F>
std::jthread spawn(F fn) {
  return std::jthread([fn = std::move(fn)]() mutable {
    try {
      fn();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "thread threw: " << e.what();
    }
  });
}

// Runs fn(rank) for rank in [0, size) on `size` threads and joins them. gtest assertions inside
// fn are reported as usual; an exception escaping fn is reported as a failure naming the rank.
void runThreads(int size, const std::function<void(int rank)>& fn);

// Rank `rank` of a communicator of `size` over `store` (the default transport, a test secret): a
// hang fails the test as a TimeoutError after 60 s.
std::shared_ptr<Communicator> makeComm(std::shared_ptr<Store> store, int rank, int size);

// Forks `size` children running fn(rank). A child exits 0 when fn returns without a gtest
// failure, 1 otherwise (its messages go to stderr). The parent fails the test for every child
// that did not exit 0 and kills all children still alive after `timeout`.
// Call it before the test process starts threads of its own.
// Ranks listed in `killedRanks` are expected to die by SIGKILL (fault-injection tests).
void runProcesses(int size, const std::function<void(int rank)>& fn,
                  std::chrono::seconds timeout = std::chrono::seconds(180), std::vector<int> killedRanks = {});

// A fresh, empty temporary directory, removed (recursively) by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace gyre::test
