// A string as a JSON string literal, quotes included: " and \ escaped, control characters as
// \u00XX. For the few places that write JSON by hand without a JSON library (the timeline, the
// tune reports of gyre_core).
#pragma once

#include <string>
#include <string_view>

namespace gyre {

std::string jsonString(std::string_view text);

}  // namespace gyre
