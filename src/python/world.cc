#include "python/world.h"

#include <pybind11/pybind11.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "common/config.h"
#include "gyre/elastic.h"
#include "python/coordination.h"

namespace gyre::python {
namespace {

struct ProcessSet {
  std::vector<int> ranks;
  std::shared_ptr<Communicator> comm;  // null on a rank outside the set
  std::shared_ptr<Coordinator> coordinator;  // made at its first call
};

struct State {
  std::mutex mutex;
  std::shared_ptr<Communicator> world;
  LaunchInfo launch;
  std::map<int, ProcessSet> sets;
  int nextId = 1;
  std::unique_ptr<elastic::Rendezvous> rendezvous;  // in an elastic job
};

State& state() {
  static auto* s = new State;  // never destroyed: communicators outlive interpreter teardown order
  return *s;
}

[[noreturn]] void notInitialized(const char* call) {
  throw pybind11::value_error(std::string("gyre.") + call +
                              ": gyre has not been initialised; call gyre.init() first");
}

// Makes `world` the world: process set 0 is all of it, the others are gone.
void adopt(State& s, std::shared_ptr<Communicator> world) {
  s.sets.clear();
  s.world = std::move(world);
  ProcessSet everyone;
  for (int r = 0; r < s.world->size(); ++r) everyone.ranks.push_back(r);
  everyone.comm = s.world;
  s.sets[0] = std::move(everyone);
}

}  // namespace

void World::init() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.world) return;
  LaunchInfo launch = detectLaunch(config::processEnvironment());
  // Under `gyre run --elastic`, the first membership that admits this worker, through a
  // rendezvous kept for the next ones (gyre::init() would join with one of its own).
  std::shared_ptr<Communicator> world;
  if (std::optional<elastic::Options> options = elastic::Options::fromEnvironment()) {
    auto rendezvous = std::make_unique<elastic::Rendezvous>(std::move(*options));
    world = rendezvous->join();
    s.rendezvous = std::move(rendezvous);
  } else {
    world = gyre::init();
  }
  s.launch = std::move(launch);
  adopt(s, std::move(world));
}

void World::shutdown() {
  State& s = state();
  std::map<int, ProcessSet> gone;  // destroyed after the lock: a coordinator finishes its calls
  {
    std::lock_guard lock(s.mutex);
    gone.swap(s.sets);
    s.world.reset();  // ids keep counting up: a ProcessSet kept from before names no new set
    s.rendezvous.reset();
  }
}

bool World::initialized() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.world != nullptr;
}

std::shared_ptr<Communicator> World::world(const char* call) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.world) notInitialized(call);
  return s.world;
}

const LaunchInfo& World::launch(const char* call) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.world) notInitialized(call);
  return s.launch;
}

int World::addProcessSet(const std::vector<int>& ranks) {
  auto world = World::world("add_process_set");
  if (ranks.empty()) throw pybind11::value_error("gyre.add_process_set: ranks is empty");
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world->size())
      throw pybind11::value_error("gyre.add_process_set: rank " + std::to_string(ranks[i]) +
                                  " is outside the world of " + std::to_string(world->size()));
    if (i > 0 && ranks[i] <= ranks[i - 1])
      throw pybind11::value_error("gyre.add_process_set: ranks must be distinct and in increasing order");
  }
  const bool member = std::binary_search(ranks.begin(), ranks.end(), world->rank());
  ProcessSet set{ranks, world->split(member ? 0 : -1, world->rank()), nullptr};  // collective
  State& s = state();
  std::lock_guard lock(s.mutex);
  const int id = s.nextId++;
  s.sets[id] = std::move(set);
  return id;
}

void World::removeProcessSet(int id) {
  if (id == 0) throw pybind11::value_error("gyre.remove_process_set: the global process set stays");
  State& s = state();
  ProcessSet gone;  // destroyed after the lock: its coordinator finishes its calls
  {
    std::lock_guard lock(s.mutex);
    auto it = s.sets.find(id);
    if (it == s.sets.end())
      throw pybind11::value_error("gyre.remove_process_set: no process set " + std::to_string(id));
    gone = std::move(it->second);
    s.sets.erase(it);
  }
}

namespace {

// The set `processSet` of this rank, or ValueError naming `call`; `s.mutex` held.
ProcessSet& memberSet(State& s, int processSet, const char* call) {
  if (!s.world) notInitialized(call);
  auto it = s.sets.find(processSet);
  if (it == s.sets.end())
    throw pybind11::value_error(std::string("gyre.") + call + ": no process set " +
                                std::to_string(processSet));
  if (!it->second.comm)
    throw pybind11::value_error(std::string("gyre.") + call + ": this rank (" +
                                std::to_string(s.world->rank()) + ") is not in process set " +
                                std::to_string(processSet));
  return it->second;
}

}  // namespace

std::shared_ptr<Communicator> World::communicator(int processSet, const char* call) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return memberSet(s, processSet, call).comm;
}

std::shared_ptr<Coordinator> World::coordinator(int processSet, const char* call) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  ProcessSet& set = memberSet(s, processSet, call);
  if (!set.coordinator) set.coordinator = std::make_shared<Coordinator>(set.comm);
  return set.coordinator;
}

std::vector<int> World::processSetRanks(int id) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.sets.find(id);
  if (it == s.sets.end()) throw pybind11::value_error("gyre: no process set " + std::to_string(id));
  return it->second.ranks;
}

bool World::elastic() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.rendezvous != nullptr;
}

bool World::membershipChanged() {
  auto world = World::world("elastic");
  elastic::Rendezvous* rendezvous = nullptr;
  {
    State& s = state();
    std::lock_guard lock(s.mutex);
    rendezvous = s.rendezvous.get();
  }
  return rendezvous != nullptr && rendezvous->membershipChanged(*world);  // collective
}

void World::elasticReset(const std::string& why) {
  State& s = state();
  std::unique_lock lock(s.mutex);
  if (!s.world) notInitialized("elastic.run");
  if (!s.rendezvous)
    throw pybind11::value_error("gyre.elastic: not in an elastic job (start it with gyre run --elastic)");
  elastic::Rendezvous* rendezvous = s.rendezvous.get();
  std::map<int, ProcessSet> gone;
  gone.swap(s.sets);
  s.world.reset();  // the old membership's communicator closes once no call holds it
  lock.unlock();
  gone.clear();  // the old coordinators finish their calls (they fail fast on a broken world)
  if (!why.empty()) rendezvous->left(why);
  std::shared_ptr<Communicator> world = rendezvous->join();  // waits for the next membership
  lock.lock();
  adopt(s, std::move(world));
}

std::int64_t World::membership() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.rendezvous ? s.rendezvous->epoch() : 0;
}

}  // namespace gyre::python
