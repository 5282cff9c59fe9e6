// Where a bench finds the programs it runs besides the gyre tool: beside the tool, where the
// build puts them (gyre_train_worker, gyre_mpi_bench, gyre_ddp_train.py), or where a flag says
// (--worker, --mpi-bench).
#pragma once

#include <string>

namespace gyre::app {

// The directory of this gyre tool ("/path/to/build/bin").
std::string toolDirectory();

// `name` in toolDirectory() ("/path/to/build/bin/gyre_train_worker"), whether or not it exists.
std::string besideTool(const std::string& name);

// The executable file `path` names, as `flag` gave it (a bare name is one in the working
// directory, not on PATH). Throws InvalidArgument: "FLAG PATH is not an executable file".
std::string givenProgram(const std::string& flag, const std::string& path);

}  // namespace gyre::app
