// The run directory. Its files are written with common/files.h, so that a reader never sees
// half of one.
#pragma once

#include <string>

namespace gyre::train {

// Creates `dir` and its parents. Throws gyre::Error naming it when it cannot.
void createRunDirectory(const std::string& dir);

}  // namespace gyre::train
