// The always-on check that every rank makes the same collective call (docs/errors.md). The
// first message a collective sends to each peer is preceded by a 64-byte CallGuard (the call's
// type, dtype, reduction, root and count), and the first message it receives from each peer must
// carry the same bytes: the transport compares them as soon as they arrive, before anything is
// reduced (transport::Op::expect), and a mismatch becomes InvalidArgument on every rank (the
// detecting rank tells the others over the control connections). The cost is one 64-byte
// message per peer the call talks to, in the same batch of ops: no extra round trip.
// GYRE_DEBUG_COLLECTIVES adds the full per-call fingerprint exchange (engine/fingerprint.h).
#pragma once

#include <cstdint>
#include <string>

#include "collectives/op_desc.h"

namespace gyre::collectives {

struct CallGuard {
  std::uint8_t magic = 0xC9;
  std::uint8_t type = 0;
  std::uint8_t dtype = 0;
  std::uint8_t op = 0;     // reductions only
  std::int32_t root = 0;   // rooted calls only
  std::uint64_t count = 0; // elements; allgatherv: a hash of the counts; alltoallv: 0 (they differ)
  // To a cache line: the data behind the guard keeps the alignment it would have without it.
  // The kernel copies a TCP stream through page fragments filled one send after another, and a
  // 16-byte guard shifted every later copy off its cache line (naive allreduce of 64 KiB on 4
  // ranks: 35% more time in the kernel's copies, measured with perf).
  std::uint8_t padding[48] = {};
};
static_assert(sizeof(CallGuard) == 64);

CallGuard guardOf(const OpDesc& d);

// "allreduce(count=10, float32, sum)", or what the bytes were when they are not a guard.
std::string describe(const CallGuard& g);

}  // namespace gyre::collectives
