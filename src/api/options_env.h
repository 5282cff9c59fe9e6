// The GYRE_* knobs that shape a communicator, applied to CommunicatorOptions: what init() does,
// for programs (the benchmark workers) that build their communicator themselves.
#pragma once

#include "common/config.h"
#include "gyre/communicator.h"

namespace gyre {

// Overrides each field whose knob is set in env: GYRE_TIMEOUT_MS, GYRE_TRANSPORT, GYRE_IFACE,
// GYRE_DEBUG_COLLECTIVES, GYRE_SPIN_US, GYRE_SHM_RING_BYTES, GYRE_COST_MODEL. Throws
// InvalidArgument naming a malformed knob. Pure: reads nothing but its arguments.
void applyKnobs(const config::Env& env, CommunicatorOptions& options);

}  // namespace gyre
