// Where each process of a runtime keeps its shared-memory objects (shared_objects.h): the prefix
// of its files and its host, published in the job's store (store_keys.h) and read from there
// once per process. A reader maps an owner's files when they are on its host, and fetches a copy
// for its host when they are not.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <map>
#include <string>

#include "common/mutex.h"
#include "gyre/rt/runtime.h"

namespace gyre::rt::detail {

class SharedPrefixes {
 public:
  // The prefix of a process's shared-memory files, and whether it runs on this host.
  struct Prefix {
    std::string prefix;
    std::string host;  // its SharedObjects::hostKey()
    bool here = false;
  };

  // `options` (rank, store, connectTimeout) are the runtime's, and outlive this.
  explicit SharedPrefixes(const RuntimeOptions& options) : o_(options) {}
  SharedPrefixes(const SharedPrefixes&) = delete;
  SharedPrefixes& operator=(const SharedPrefixes&) = delete;

  // Publishes this process's prefix (SharedObjects::prefix()), with this host's key.
  void publish(const std::string& prefix);
  // Process `rank`'s, read from the store the first time (waiting up to connectTimeout for it to
  // be published). An empty prefix when what it published is malformed.
  Prefix of(int rank) GYRE_EXCLUDES(mu_);

 private:
  const RuntimeOptions& o_;
  Mutex mu_;
  std::map<int, Prefix> prefixes_ GYRE_GUARDED_BY(mu_);
};

}  // namespace gyre::rt::detail
