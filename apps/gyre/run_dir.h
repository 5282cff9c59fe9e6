// The default directory of a command's run: runs/NAME-YYYYmmdd-HHMMSS, with -2, -3, ... when two
// runs start in the same second (gyre train, gyre tune).
#pragma once

#include <filesystem>
#include <string>

namespace gyre::app {

std::filesystem::path uniqueRunDir(const std::string& name);

}  // namespace gyre::app
