// Checks of what the user typed. They throw InvalidArgument with the message alone: a file:line
// (as GYRE_ARG_CHECK adds for library invariants) means nothing to someone at the command line.
#pragma once

#include <sstream>

#include "gyre/errors.h"

namespace gyre::app {

template <typename... Parts>
[[noreturn]] void usageError(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  throw InvalidArgument(out.str());
}

template <typename... Parts>
void requireArg(bool ok, const Parts&... parts) {
  if (!ok) usageError(parts...);
}

}  // namespace gyre::app
