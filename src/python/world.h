// The Python module's process-wide state: the world communicator gyre.init() created, what the
// launcher said about this process, and the process sets (sub-communicators) added since.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "gyre/communicator.h"
#include "gyre/init.h"

namespace gyre::python {

class World {
 public:
  // gyre.init(): the world communicator from the environment (gyre::init). A second call while
  // initialised does nothing, as Horovod's.
  static void init();
  // gyre.shutdown(): drops every communicator; gyre.init() may be called again.
  static void shutdown();
  static bool initialized();

  // The world, or ValueError naming `call` before gyre.init().
  static std::shared_ptr<Communicator> world(const char* call);
  static const LaunchInfo& launch(const char* call);

  // Collective over the world: a process set of `ranks` (sorted, distinct world ranks). Returns
  // its id (ids count up from 1; 0 is the world). Non-members get the id too, and no
  // communicator.
  static int addProcessSet(const std::vector<int>& ranks);
  // Forgets a process set (its communicator closes once no call uses it). Not collective.
  static void removeProcessSet(int id);
  // The communicator of process set `id` (0: the world); ValueError naming `call` for an unknown
  // id or a set this rank is not in.
  static std::shared_ptr<Communicator> communicator(int processSet, const char* call);
  // The world ranks of set `id`.
  static std::vector<int> processSetRanks(int id);
};

}  // namespace gyre::python
