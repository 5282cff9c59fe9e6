// The TCP store's wire format. After the auth handshake (context kStoreAuthContext), the client
// sends request frames and the server answers each with one response frame, in order.
//
// Frame:    u32 magic "GST1" | u32 body length (<= kMaxFrameBodyBytes) | body
// Request:  u8 command | u32 key count | keys (u32 length + bytes, each <= kMaxKeyBytes) |
//           value (u32 length + bytes) | expected (u32 length + bytes) | i64 number
// Response: u8 status | u8 flag | i64 number | value (u32 length + bytes) | message (u32 + bytes)
// Integers are little-endian. Every length is checked against its limit, and against the bytes
// present, before anything is allocated for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/store_table.h"

namespace gyre::rendezvous {

constexpr std::string_view kStoreAuthContext = "store";
constexpr std::uint32_t kFrameMagic = 0x31545347;  // "GST1" on the wire
constexpr std::size_t kFrameHeaderBytes = 8;
constexpr std::size_t kMaxMessageBytes = 64 * 1024;
// The largest legal body: a compare-and-set of two maximal values, or a wait on the most keys.
constexpr std::size_t kMaxFrameBodyBytes = 2 * kMaxValueBytes + kMaxKeysPerCall * (kMaxKeyBytes + 4) + 64;

enum class Command : std::uint8_t {
  kSet = 1,         // keys[0] = value
  kGet = 2,         // value of keys[0]; waits up to `number` ms
  kAdd = 3,         // keys[0] += number; answers the new value in `number`
  kCompareSet = 4,  // keys[0]: expected -> value; answers the stored value
  kDelete = 5,      // answers whether keys[0] existed in `flag`
  kCheck = 6,       // answers whether every key exists in `flag`
  kWait = 7,        // waits up to `number` ms for every key
};
std::string_view toString(Command command);

struct Request {
  Command command = Command::kSet;
  std::vector<std::string> keys;
  Bytes value;
  Bytes expected;
  std::int64_t number = 0;

  std::string debugString() const;
};

enum class Status : std::uint8_t {
  kOk = 0,
  kTimeout = 1,          // get/wait: the keys did not appear in time; `message` says which
  kInvalidArgument = 2,  // e.g. add() on a value that is not a counter; `message` says why
};

struct Response {
  Status status = Status::kOk;
  bool flag = false;
  std::int64_t number = 0;
  Bytes value;
  std::string message;

  std::string debugString() const;
};

// Whole frames, header included.
std::vector<std::uint8_t> encodeFrame(const Request& request);
std::vector<std::uint8_t> encodeFrame(const Response& response);

// Checks a frame header (kFrameHeaderBytes) and returns the body length. Throws ProtocolError
// on a bad magic or a body longer than kMaxFrameBodyBytes.
std::size_t parseFrameHeader(const std::uint8_t* header);

// Decode a frame body. Throw ProtocolError on anything malformed: unknown command or status,
// a wrong key count for the command, a length over its limit, truncated or trailing bytes.
Request decodeRequest(std::span<const std::uint8_t> body);
Response decodeResponse(std::span<const std::uint8_t> body);

// Printable, bounded rendering of a key or value for logs ("abc\x00..." plus the length).
std::string printable(std::span<const std::uint8_t> bytes, std::size_t maxShown = 32);

}  // namespace gyre::rendezvous
