#pragma once

namespace gyre {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace gyre
