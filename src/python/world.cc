#include "python/world.h"

#include <pybind11/pybind11.h>

#include <algorithm>
#include <map>
#include <string>

namespace gyre::python {
namespace {

struct ProcessSet {
  std::vector<int> ranks;
  std::shared_ptr<Communicator> comm;  // null on a rank outside the set
};

struct State {
  std::mutex mutex;
  std::shared_ptr<Communicator> world;
  LaunchInfo launch;
  std::map<int, ProcessSet> sets;
  int nextId = 1;
};

State& state() {
  static auto* s = new State;  // never destroyed: communicators outlive interpreter teardown order
  return *s;
}

[[noreturn]] void notInitialized(const char* call) {
  throw pybind11::value_error(std::string("gyre.") + call +
                              ": gyre has not been initialised; call gyre.init() first");
}

}  // namespace

void World::init() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.world) return;
  LaunchInfo launch = detectLaunch(processEnvironment());
  s.world = gyre::init();
  s.launch = std::move(launch);
  ProcessSet everyone;
  for (int r = 0; r < s.world->size(); ++r) everyone.ranks.push_back(r);
  everyone.comm = s.world;
  s.sets[0] = std::move(everyone);
}

void World::shutdown() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.sets.clear();
  s.world.reset();  // ids keep counting up: a ProcessSet kept from before names no new set
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
  ProcessSet set{ranks, world->split(member ? 0 : -1, world->rank())};  // collective
  State& s = state();
  std::lock_guard lock(s.mutex);
  const int id = s.nextId++;
  s.sets[id] = std::move(set);
  return id;
}

void World::removeProcessSet(int id) {
  if (id == 0) throw pybind11::value_error("gyre.remove_process_set: the global process set stays");
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.sets.erase(id) == 0)
    throw pybind11::value_error("gyre.remove_process_set: no process set " + std::to_string(id));
}

std::shared_ptr<Communicator> World::communicator(int processSet, const char* call) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.world) notInitialized(call);
  auto it = s.sets.find(processSet);
  if (it == s.sets.end())
    throw pybind11::value_error(std::string("gyre.") + call + ": no process set " +
                                std::to_string(processSet));
  if (!it->second.comm)
    throw pybind11::value_error(std::string("gyre.") + call + ": this rank (" +
                                std::to_string(s.world->rank()) + ") is not in process set " +
                                std::to_string(processSet));
  return it->second.comm;
}

std::vector<int> World::processSetRanks(int id) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.sets.find(id);
  if (it == s.sets.end()) throw pybind11::value_error("gyre: no process set " + std::to_string(id));
  return it->second.ranks;
}

}  // namespace gyre::python
