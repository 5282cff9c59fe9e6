// Debug mode (GYRE_DEBUG_COLLECTIVES=1): before each collective every rank sends a fixed-size
// signature of the call (sequence number, op, dtype, count, reduction, root, algorithm) to every
// other rank. Because the signature has the same size whatever the call, the exchange itself
// cannot go out of step; a mismatch becomes InvalidArgument on every rank, naming the ranks and
// both calls, instead of a hang or garbage.
#pragma once

#include <cstdint>

#include "collectives/op_desc.h"
#include "common/clock.h"
#include "transport/mesh.h"

namespace gyre::collectives {

void checkFingerprint(transport::Mesh& mesh, Deadline deadline, std::uint64_t sequence, const OpDesc& desc);

}  // namespace gyre::collectives
