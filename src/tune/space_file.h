// The search space as a TOML file (`gyre tune --space FILE`), one key per parameter, in any of
// three forms:
//
//   lr = "loguniform:1e-4:1e-1"      # the command line's own form (space.h)
//   batch = [32, 64, 128]            # a list: a choice among its values
//   momentum = { grid = [0.5, 0.9] } # a table of one key: the distribution and its arguments
//   dropout = { uniform = [0, 0.5] } #   (quniform takes [LOW, HIGH, Q])
//
// Every error names the file and line: "space.toml:3: parameter lr (loguniform): LOW must be
// above 0 for a log scale; got 0". TOML is read with toml++ (Debian's libtomlplusplus-dev), which
// keeps each value's line.
#pragma once

#include <string>

#include "tune/space.h"

namespace gyre::tune {

// Reads `path` into a Space. Throws InvalidArgument for a file that cannot be read, is not
// TOML, or holds a malformed parameter.
Space loadSpaceFile(const std::string& path);
// The same for TOML text already read; `name` stands for the file in messages.
Space parseSpaceText(const std::string& text, const std::string& name);

}  // namespace gyre::tune
