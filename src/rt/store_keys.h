// What each process of a runtime publishes in the job's store, under gyre-rt/<what>/<rank>: where
// the others reach it, where its shared-memory files are, and what it offers actors that declare
// their needs. The values are text.
//
//   address/<rank>      host:port of its Server (a runtime of several processes only)
//   shm/<rank>          "<its SharedObjects::hostKey()>/<its shared-memory prefix>"
//   host/<rank>         its host name (ActorOptions::host)
//   cpus/<rank>         milli-cpus it offers
//   memory/<rank>       bytes of memory it offers
//   used-cpus/<rank>    milli-cpus reserved there (added to by every process that places an actor)
//   used-memory/<rank>  bytes reserved there
#pragma once

#include <string>

namespace gyre::rt::detail {

inline std::string storeKey(const char* what, int rank) {
  return std::string("gyre-rt/") + what + "/" + std::to_string(rank);
}
inline std::string addressKey(int rank) {
  return storeKey("address", rank);
}
inline std::string sharedKey(int rank) {
  return storeKey("shm", rank);
}
inline std::string hostNameKey(int rank) {
  return storeKey("host", rank);
}

}  // namespace gyre::rt::detail
