// --replica-processes: each replica of the model lives in a process of its own, as a gyre::rt
// actor (ServeReplica) that loads the model there. The server (rank 0 of the runtime) keeps its
// batcher; a replica's forward pass is a call to its actor. When a replica's process dies, the
// batch in flight there is sent once more: a new actor in the live process with the fewest
// replicas (the server's own when none is left) loads the model, and the batch runs there, so no
// accepted request fails for it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "serve/batcher.h"

namespace gyre::rt {
class Runtime;
}

namespace gyre::serve {

class ProcessReplicas {
 public:
  // `rt`: this process's runtime, rank 0; ranks 1.. host the replicas. `model` and `name` as
  // loadServedModel takes them, in every process. Throws gyre::Error when the runtime has no
  // process but this one.
  ProcessReplicas(rt::Runtime& rt, std::string model, std::string name);
  ~ProcessReplicas();

  // A new replica in the live process with the fewest: its forward pass, a call to its actor.
  // The actor is killed when the last copy of the returned function goes (a replica the
  // autoscaler removed, or the server stopping).
  Batcher::Forward make();

  // Each replica process's id, by rank 1.. (-1 for one lost), for the server's first lines.
  std::vector<int> processIds();

  struct Shared;  // the runtime and where the replicas are, shared with the replicas themselves

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace gyre::serve
