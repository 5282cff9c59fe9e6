#include "rt/shared_prefixes.h"

#include "rt/shared_objects.h"
#include "rt/store_keys.h"

namespace gyre::rt::detail {

void SharedPrefixes::publish(const std::string& prefix) {
  o_.store->setString(sharedKey(o_.rank), SharedObjects::hostKey() + "/" + prefix);
}

SharedPrefixes::Prefix SharedPrefixes::of(int rank) {
  MutexLock lock(mu_);
  auto it = prefixes_.find(rank);
  if (it == prefixes_.end()) {
    const std::string value =
        o_.store->getString(sharedKey(rank), o_.connectTimeout);  // "<host key>/<prefix>"
    const std::size_t slash = value.find('/');
    Prefix p;
    if (slash != std::string::npos) {
      p.prefix = value.substr(slash + 1);
      p.host = value.substr(0, slash);
      p.here = p.host == SharedObjects::hostKey();
    }
    it = prefixes_.emplace(rank, p).first;
  }
  return it->second;
}

}  // namespace gyre::rt::detail
