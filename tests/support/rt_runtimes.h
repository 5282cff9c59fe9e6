// The processes of a gyre::rt runtime as Runtimes of one test process: each with its own worker
// threads and port on loopback, meeting in `store`, so that a call between them crosses TCP as
// between processes. Header-only: only the tests that link gyre_rt include it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gyre/rt.h"
#include "gyre/store.h"

namespace gyre::test {

inline std::vector<std::unique_ptr<rt::Runtime>> loopbackRuntimes(int size, int threads,
                                                                  std::shared_ptr<Store> store,
                                                                  const std::string& secret = "job-secret",
                                                                  bool placeOnRankZero = true) {
  std::vector<std::unique_ptr<rt::Runtime>> out;
  for (int r = 0; r < size; ++r) {
    rt::RuntimeOptions o;
    o.threads = threads;
    o.rank = r;
    o.size = size;
    o.store = store;
    o.secret = secret;
    o.connectTimeout = std::chrono::milliseconds(5000);
    o.placeHere = r != 0 || placeOnRankZero;
    out.push_back(std::make_unique<rt::Runtime>(o));
  }
  return out;
}

}  // namespace gyre::test
