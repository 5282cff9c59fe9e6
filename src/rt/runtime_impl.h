// A runtime of one or several processes: this process's LocalNode runs calls from here and, through
// its Server, from the others; Peers carries this one's calls to the others. Runtime's methods
// (runtime.cc, objects.cc, actors.cc) are what Impl's parts do together:
//
//   peers.h            links to the other processes, dispatch, and retry when one is lost
//   placement.h        where tasks and actors go, and the cpus and memory reserved there
//   actors.h           the actors created here: restarts, and what they reserved
//   shared_prefixes.h  where each process's shared-memory objects are
//   store_keys.h       what each process publishes in the job's store
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "gyre/rt/runtime.h"
#include "rt/actors.h"
#include "rt/deadlines.h"
#include "rt/links.h"
#include "rt/local.h"
#include "rt/peers.h"
#include "rt/placement.h"
#include "rt/shared_objects.h"
#include "rt/shared_prefixes.h"

namespace gyre::rt {

namespace detail {
// Sets `promise` from an answer.
Done fulfil(std::shared_ptr<Promise> promise);
}  // namespace detail

class Runtime::Impl {
 public:
  // Publishes this process's offer, shared-memory prefix and (with others) address in the store.
  Impl(const RuntimeOptions& o, Runtime* self);
  // Stops serving the others, runs what the node has queued, then closes the links.
  ~Impl();

  // An object's number: this process's rank in the high 32 bits, then its count here.
  std::uint64_t nextObjectId() {
    return (static_cast<std::uint64_t>(o_.rank) << 32) | (objectCount_.fetch_add(1) + 1);
  }

  RuntimeOptions o_;
  std::atomic<std::uint32_t> actorCount_{0};
  std::atomic<std::uint32_t> objectCount_{0};
  detail::SharedObjects shared_;
  detail::SharedPrefixes sharedPrefixes_{o_};
  detail::Deadlines deadlines_;
  detail::LocalNode node_;  // stopped by ~Impl before the links close: its last calls may use them
  detail::Peers peers_{o_, node_};
  detail::Placement placement_{o_, peers_};
  detail::ActorTable actors_{o_, node_, peers_, placement_};
  std::unique_ptr<detail::Server> server_;
};

}  // namespace gyre::rt
