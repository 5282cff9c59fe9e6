#include "collectives/tally.h"

#include <map>
#include <mutex>
#include <utility>

namespace gyre::collectives {
namespace {

struct Table {
  std::mutex mutex;
  std::map<std::pair<std::string, std::string>, Tally> entries;
};

Table& table() {
  static Table* t = new Table();  // never destroyed: communicator threads may outlive static destruction
  return *t;
}

}  // namespace

void addTally(const char* op, std::string_view algorithm, std::uint64_t bytes, double seconds) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  Tally& e = t.entries[{op, std::string(algorithm)}];
  if (e.calls == 0) {
    e.op = op;
    e.algorithm = std::string(algorithm);
  }
  ++e.calls;
  e.bytes += bytes;
  e.seconds += seconds;
}

std::vector<Tally> tallies() {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  std::vector<Tally> out;
  for (const auto& [key, e] : t.entries) out.push_back(e);
  return out;
}

}  // namespace gyre::collectives
