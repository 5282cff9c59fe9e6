// torch.distributed's store seen as a gyre::Store: a process group of backend "gyre" meets its
// peers through the store torch hands it (TCPStore, FileStore, a PrefixStore over either), so
// it works under every launcher and init_method torch has.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>

#include "gyre/store.h"

namespace gyre::python {

// Every call goes to `store`; a wait that runs out of time is a gyre::TimeoutError naming the
// keys. Thread-safe as the c10d store is (TCPStore and FileStore are).
std::shared_ptr<Store> wrapC10dStore(c10::intrusive_ptr<c10d::Store> store);

}  // namespace gyre::python
