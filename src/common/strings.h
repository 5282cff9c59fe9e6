// Text helpers every layer uses: one way to cut a list ("1,2,4", "a:b:c") into its parts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gyre {

// `text` cut at every `separator`, empty parts kept: "a,,b" -> {"a", "", "b"}, "" -> {""}.
std::vector<std::string> split(std::string_view text, char separator);

}  // namespace gyre
