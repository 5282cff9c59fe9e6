// What a `gyre run --rdzv etcd://` job keeps in etcd, as its nodes read and write it: key values
// as bytes, worker ids as the last part of a key ("launch/exit/12"), a worker's end as one line,
// and each node's lease, kept alive from a thread of its own (rdzv_job.cc; docs/elastic.md).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "launcher/elastic_policy.h"  // WorkerEnd
#include "rendezvous/etcd_client.h"

namespace gyre::launcher {

using Bytes = std::vector<std::uint8_t>;

// A dead node's keys are gone this long after its last renewal. Renewals come every second from
// a thread of their own with a client of their own, so a slow etcd member (2 s at most before the
// next one is tried) or a slow round of the supervisor never lets a live node's lease expire.
inline constexpr std::chrono::seconds kLeaseTtl{10};
inline constexpr std::chrono::milliseconds kRenewEvery{1000};

// A value of etcd from text, and back.
Bytes asBytes(const std::string& s);
std::string asText(const Bytes& b);

// "launch/exit/12" -> 12 (the part after the last '/'); -1 when it is not a number.
int idOf(const std::string& key);

// A worker's end as the value of its exit key: "OK EXIT_CODE BY_SIGNAL WHAT", and back.
std::string formatEnd(const WorkerEnd& e);
WorkerEnd parseEnd(const std::string& s);

// Renews a lease until destroyed; expired() once etcd says it has expired or no renewal got
// through for a whole kLeaseTtl. Thread-safe.
class LeaseKeeper {
 public:
  LeaseKeeper(const std::vector<std::string>& endpoints, std::int64_t lease);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  bool expired() const { return expired_.load(); }

 private:
  void run();

  rendezvous::EtcdClient etcd_;
  std::int64_t lease_;
  Mutex mutex_;
  CondVar wake_;
  bool done_ GYRE_GUARDED_BY(mutex_) = false;
  std::atomic<bool> expired_{false};
  std::thread thread_;
};

}  // namespace gyre::launcher
