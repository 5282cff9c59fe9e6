// Runs one validated OpDesc on a Context: picks the algorithm (the cost model for `auto`),
// handles world size 1 and in-place layouts, and frames point-to-point messages.
#pragma once

#include "collectives/context.h"
#include "collectives/op_desc.h"

namespace gyre::collectives {

void execute(Context& c, const OpDesc& desc);

}  // namespace gyre::collectives
