// The actors this process created that it must remember: those with restarts (what rebuilding
// one takes, and where it lives now) and those that reserved cpus or memory (given back when
// killed). An actor whose process is lost is rebuilt, with restarts left, on a live process at its
// next call; which actors were killed is kept so that killing one twice does nothing.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "common/mutex.h"
#include "gyre/rt/runtime.h"
#include "rt/local.h"
#include "rt/peers.h"
#include "rt/placement.h"

namespace gyre::rt::detail {

class ActorTable {
 public:
  // What rebuilding an actor takes, and where it lives now.
  struct Entry {
    std::string className;
    std::string name;
    Bytes args;
    int rank = 0;
    int restartsLeft = 0;
    int restarts = 0;  // times rebuilt
    double cpus = 0;   // what it declared (ActorOptions), reserved again where it is rebuilt
    std::int64_t memoryBytes = 0;
    int maxConcurrency = 1;
  };
  // Where a killed actor lived, and what it reserved there.
  struct Killed {
    int rank = 0;
    double cpus = 0;
    std::int64_t memoryBytes = 0;
  };

  // All are the runtime's, and outlive this.
  ActorTable(const RuntimeOptions& options, LocalNode& node, Peers& peers, Placement& placement)
      : o_(options), node_(node), peers_(peers), placement_(placement) {}
  ActorTable(const ActorTable&) = delete;
  ActorTable& operator=(const ActorTable&) = delete;

  // Builds actor `id` in process e.rank; remembers it when `keep` (to rebuild it, or to release
  // what it reserved when it is killed).
  void create(std::uint64_t id, Entry e, bool keep) GYRE_EXCLUDES(mu_);
  // Where actor `ref` lives for its next call: its process, or, when that is lost and restarts
  // are left, a new live one it is rebuilt on first.
  int rankOf(const ActorRef& ref) GYRE_EXCLUDES(mu_);
  // Forgets actor `ref` (it is never rebuilt): where it lives and what it reserved (none when it
  // was not remembered); nullopt when it was killed before.
  std::optional<Killed> kill(const ActorRef& ref) GYRE_EXCLUDES(mu_);

 private:
  // Builds the actor here, or sends its creation to its process.
  void sendCreate(std::uint64_t id, const Entry& e);

  const RuntimeOptions& o_;
  LocalNode& node_;
  Peers& peers_;
  Placement& placement_;
  Mutex mu_;
  std::map<std::uint64_t, Entry> actors_ GYRE_GUARDED_BY(mu_);  // by id
  std::set<std::uint64_t> killed_ GYRE_GUARDED_BY(mu_);         // ids of actors killed from here
};

}  // namespace gyre::rt::detail
