#include "gyre/store.h"

namespace gyre {

void Store::setString(const std::string& key, const std::string& value) {
  set(key, Bytes(value.begin(), value.end()));
}

std::string Store::getString(const std::string& key, Duration timeout) {
  const Bytes value = get(key, timeout);
  return std::string(value.begin(), value.end());
}

}  // namespace gyre
