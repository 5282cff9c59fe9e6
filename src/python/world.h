// The Python module's process-wide state: the world communicator gyre.init() created, what the
// launcher said about this process, and the process sets (sub-communicators) added since. Under
// `gyre run --elastic` the world is a membership's communicator, and gyre.torch.elastic replaces
// it when the membership changes (elasticReset).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gyre/communicator.h"
#include "gyre/init.h"

namespace gyre::python {

class Coordinator;

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
  // The coordinator of process set `id`'s calls (coordination.h), made with its communicator;
  // errors as communicator().
  static std::shared_ptr<Coordinator> coordinator(int processSet, const char* call);
  // The world ranks of set `id`.
  static std::vector<int> processSetRanks(int id);

  // Elastic jobs (`gyre run --elastic`): whether gyre.init() joined a membership.
  static bool elastic();
  // Collective over the world: true on every rank when the launcher published a newer
  // membership.
  static bool membershipChanged();
  // Leaves the current membership (`why` tells the launcher why, when not empty) and joins the
  // next one, which becomes the world; the process sets are dropped (they named the old world's
  // ranks). ValueError outside an elastic job.
  static void elasticReset(const std::string& why);
  // The number of the membership being trained in (1, 2, ...); 0 outside an elastic job.
  static std::int64_t membership();
};

}  // namespace gyre::python
