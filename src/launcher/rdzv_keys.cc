#include "launcher/rdzv_keys.h"

#include <sstream>

#include "common/clock.h"
#include "gyre/errors.h"

namespace gyre::launcher {

Bytes asBytes(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

std::string asText(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

int idOf(const std::string& key) {
  const std::string tail = key.substr(key.rfind('/') + 1);
  if (tail.empty() || tail.find_first_not_of("0123456789") != std::string::npos || tail.size() > 9) return -1;
  return std::stoi(tail);
}

std::string formatEnd(const WorkerEnd& e) {
  return std::to_string(e.ok ? 1 : 0) + " " + std::to_string(e.exitCode) + " " + (e.bySignal ? "1" : "0") +
         " " + e.what;
}

WorkerEnd parseEnd(const std::string& s) {
  std::istringstream in(s);
  int ok = 0, signal = 0;
  WorkerEnd e;
  in >> ok >> e.exitCode >> signal;
  std::getline(in >> std::ws, e.what);
  e.ok = ok != 0;
  e.bySignal = signal != 0;
  return e;
}

LeaseKeeper::LeaseKeeper(const std::vector<std::string>& endpoints, std::int64_t lease)
    : etcd_(endpoints, kRenewEvery * 2), lease_(lease), thread_([this] { run(); }) {}

LeaseKeeper::~LeaseKeeper() {
  {
    MutexLock lock(mutex_);
    done_ = true;
  }
  wake_.notifyAll();
  thread_.join();
}

void LeaseKeeper::run() {
  Clock::time_point renewed = Clock::now();
  while (!expired_.load()) {
    {
      MutexLock lock(mutex_);
      if (!done_) wake_.waitFor(mutex_, kRenewEvery);
      if (done_) return;
    }
    try {
      if (etcd_.keepAlive(lease_))
        renewed = Clock::now();
      else
        expired_ = true;
    } catch (const Error&) {
      // No member answered this time; the next second tries again.
    }
    if (Clock::now() - renewed >= kLeaseTtl) expired_ = true;
  }
}

}  // namespace gyre::launcher
