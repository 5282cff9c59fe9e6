#include <string>

#include "common/check.h"
#include "gyre/ps.h"

namespace gyre::ps {

Mode Mode::parse(const std::string& text) {
  Mode mode;
  if (text == "bsp") return mode;
  if (text == "asp") {
    mode.consistency = Consistency::kAsp;
    return mode;
  }
  if (text.rfind("ssp:", 0) == 0 && text.size() > 4 && text.size() <= 10 &&
      text.find_first_not_of("0123456789", 4) == std::string::npos) {
    mode.consistency = Consistency::kSsp;
    mode.staleness = std::stoi(text.substr(4));
    return mode;
  }
  GYRE_THROW(InvalidArgument, "unknown parameter-server mode '", text, "': use bsp, asp or ssp:S (S >= 0 steps)");
}

std::string Mode::toString() const {
  switch (consistency) {
    case Consistency::kBsp: return "bsp";
    case Consistency::kAsp: return "asp";
    case Consistency::kSsp: return "ssp:" + std::to_string(staleness);
  }
  return "?";
}

}  // namespace gyre::ps
