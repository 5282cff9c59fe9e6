// Control messages on the per-pair control connection, which also tells when a peer dies: its
// connection closing without a goodbye means the process is gone.
//
// Frame: u32 type | u32 length | payload (length <= kMaxControlPayload, checked before reading).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gyre::transport {

enum class ControlType : std::uint32_t {
  kGoodbye = 1,  // the sender closed its communicator normally
  kAbort = 2,    // payload: i32 lost rank, then the reason text
  kMismatch = 3, // payload: i32 the reporting rank, then what differed (collectives/call_guard.h)
};

inline constexpr std::uint32_t kMaxControlPayload = 4096;

struct ControlMessage {
  ControlType type;
  int lostRank = -1;
  std::string reason;

  std::vector<std::uint8_t> encode() const;
  std::string debugString() const;
};

// Accumulates bytes read from a control connection and yields whole messages.
class ControlReader {
 public:
  // Reads what is available without blocking. Returns false on EOF/reset.
  // Throws ProtocolError on a malformed frame.
  bool readAvailable(int fd);
  // Pops the next complete message, if any.
  bool next(ControlMessage& out);

 private:
  std::vector<std::uint8_t> buffer_;
};

}  // namespace gyre::transport
