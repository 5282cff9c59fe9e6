#include "rt/placement.h"

#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/socket.h"
#include "gyre/errors.h"
#include "rt/store_keys.h"

namespace gyre::rt::detail {

void Placement::offer(int threads) {
  // Milli-cpus and bytes.
  const double cpus = o_.cpus > 0 ? o_.cpus : threads;
  const std::int64_t memory = o_.memoryBytes > 0 ? o_.memoryBytes
                                                 : static_cast<std::int64_t>(::sysconf(_SC_PHYS_PAGES)) *
                                                       static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
  o_.store->setString(storeKey("cpus", o_.rank), std::to_string(std::llround(cpus * 1000)));
  o_.store->setString(storeKey("memory", o_.rank), std::to_string(memory));
  o_.store->setString(storeKey("placeable", o_.rank), o_.placeHere ? "1" : "0");
  o_.store->setString(hostNameKey(o_.rank), net::hostName());
}

bool Placement::placeable(int rank) {
  if (rank == o_.rank) return o_.placeHere;
  std::atomic<int>& known = placeable_[static_cast<std::size_t>(rank)];
  int v = known.load(std::memory_order_relaxed);
  if (v == 0) {
    v = o_.store->getString(storeKey("placeable", rank), o_.connectTimeout) == "0" ? 2 : 1;
    known.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

int Placement::spread() {
  for (int tries = 0; tries < o_.size; ++tries) {
    const int r = static_cast<int>(next_.fetch_add(1) % static_cast<std::uint64_t>(o_.size));
    if ((r == o_.rank || !peers_.lost(r)) && placeable(r)) return r;
  }
  return o_.rank;
}

void Placement::release(int rank, double cpus, std::int64_t memoryBytes) {
  if (cpus > 0) o_.store->add(storeKey("used-cpus", rank), -std::llround(cpus * 1000));
  if (memoryBytes > 0) o_.store->add(storeKey("used-memory", rank), -memoryBytes);
}

int Placement::placeActor(const ActorOptions& a) {
  if (a.rank >= o_.size)
    throw InvalidArgument("gyre::rt: ActorOptions::rank " + std::to_string(a.rank) +
                          " is not a process of the " + std::to_string(o_.size));
  if (a.cpus < 0 || a.memoryBytes < 0)
    throw InvalidArgument("gyre::rt: ActorOptions::cpus and ::memoryBytes must not be negative");
  // The processes that may hold it, in the order they are tried.
  std::vector<int> candidates;
  std::string seen;
  if (a.rank >= 0) {
    candidates = {a.rank};
  } else if (!a.host.empty()) {
    for (int r = 0; r < o_.size; ++r) {
      const std::string host = o_.store->getString(hostNameKey(r), o_.connectTimeout);
      const std::string address =
          r == o_.rank || o_.size == 1
              ? o_.host
              : net::splitHostPort(o_.store->getString(addressKey(r), o_.connectTimeout)).first;
      if (host == a.host || address == a.host) candidates.push_back(r);
      seen += (seen.empty() ? "" : ", ") + host;
    }
    if (candidates.empty())
      throw InvalidArgument("gyre::rt: no process of the runtime is on host " + a.host + " (they are on " +
                            seen + ")");
  } else {  // the next live process in turn, then the ones after it
    const int first = spread();
    for (int i = 0; i < o_.size; ++i)
      if (const int r = (first + i) % o_.size; r == first || placeable(r)) candidates.push_back(r);
  }
  if (a.cpus == 0 && a.memoryBytes == 0) return candidates.front();
  const std::int64_t milli = std::llround(a.cpus * 1000);
  std::string offers;
  for (int r : candidates) {
    if (r != o_.rank && peers_.lost(r)) continue;
    const std::int64_t cpus = std::stoll(o_.store->getString(storeKey("cpus", r), o_.connectTimeout));
    const std::int64_t memory = std::stoll(o_.store->getString(storeKey("memory", r), o_.connectTimeout));
    offers += (offers.empty() ? "" : ", ") + std::string("process ") + std::to_string(r) + ": " +
              std::to_string(static_cast<double>(cpus) / 1000) + " cpus, " + std::to_string(memory) +
              " bytes";
    if (milli > cpus || a.memoryBytes > memory) continue;
    // Reserve both, atomically in the store (another process may place at the same time).
    if (o_.store->add(storeKey("used-cpus", r), milli) > cpus) {
      release(r, a.cpus, 0);
      continue;
    }
    if (o_.store->add(storeKey("used-memory", r), a.memoryBytes) > memory) {
      release(r, a.cpus, a.memoryBytes);
      continue;
    }
    return r;
  }
  throw InvalidArgument("gyre::rt: no process can hold an actor of " + std::to_string(a.cpus) + " cpus and " +
                        std::to_string(a.memoryBytes) +
                        " bytes of memory now (offered, before reservations: " + offers + ")");
}

}  // namespace gyre::rt::detail
