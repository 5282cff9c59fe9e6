// The parameter server's wire format. After the auth handshake (context kPsAuthContext), a
// client (a worker, or a primary server replicating to its backup) sends request messages; the
// server answers each with one response carrying the request's id, not necessarily in request
// order (a bsp push is answered when the step's update applied).
//
// Message: a fixed 48-byte header, then `payloadBytes` of payload.
//   0  u32 magic "GPS1"     4 u8 type      5 u8 status     6 u16 zero
//   8  u32 id              12 u32 slice   16 i64 a        24 i64 b
//  32 f32 lr               36 u32 worker  40 u64 payloadBytes
// Integers little-endian. What a, b, worker and the payload mean depends on the type:
//   kHello      worker = worker id, or kServerPeer for a primary connecting to its backup
//   kDeclare    payload = encodeDeclaration(); answered ok or error
//   kInit       slice; payload = the slice's floats
//   kPush       slice, worker, a = seq (per worker and slice: 0, 1, ...), b = base version (the
//               version of the pull the gradient came from), lr; payload = the slice's floats
//               -> a = the version the update produced, b = its staleness
//   kPull       slice, worker, a = minimum version -> a = version, payload = the slice's floats
//   kClock      worker, a = clock (steps the worker completed) -> when the ssp bound allows it;
//               a = the slowest worker's clock
//   kReplicate  slice, a = version, lr, worker = contributor count; payload = the slice's
//               floats (the gradient the optimizer consumed), then per contributor u32 worker,
//               u32 zero, i64 seq
//   kReplicateInit  slice; payload = the slice's floats
//   kStats      -> payload = encodeServerStats()
// A response has type (request type | kResponseBit) and status kOk, or kError/kTimeout with a
// message as payload (the request failed; the connection stays usable).
// Every length is checked against the declared table before anything is allocated or read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gyre/ps.h"

namespace gyre::ps {

constexpr std::string_view kPsAuthContext = "ps";
constexpr std::uint32_t kMagic = 0x31535047;  // "GPS1" on the wire
constexpr std::size_t kHeaderBytes = 48;
constexpr std::uint32_t kServerPeer = 0xffffffffu;
constexpr std::uint8_t kResponseBit = 0x80;
// Room for kMaxKeys keys with shapes of up to 16 dimensions.
constexpr std::size_t kMaxDeclarationBytes = 12 << 20;
constexpr std::uint32_t kMaxShapeDims = 16;
constexpr std::size_t kMaxMessageTextBytes = 64 << 10;
constexpr std::size_t kMaxKeys = 1 << 16;
constexpr std::size_t kMaxServers = 1024;
constexpr std::size_t kMaxWorkers = 1 << 16;
constexpr std::size_t kContributorBytes = 16;

enum class Type : std::uint8_t {
  kHello = 1,
  kDeclare = 2,
  kInit = 3,
  kPush = 4,
  kPull = 5,
  kClock = 6,
  kReplicate = 7,
  kReplicateInit = 8,
  kStats = 9,
};
std::string_view toString(Type type);

enum class Status : std::uint8_t { kOk = 0, kError = 1, kTimeout = 2 };

struct Header {
  Type type = Type::kHello;
  bool response = false;
  Status status = Status::kOk;
  std::uint32_t id = 0;
  std::uint32_t slice = 0;
  std::int64_t a = 0;
  std::int64_t b = 0;
  float lr = 0;
  std::uint32_t worker = 0;
  std::uint64_t payloadBytes = 0;

  std::string debugString() const;
};

void encodeHeader(const Header& header, std::uint8_t* out);  // kHeaderBytes
// Throws ProtocolError on a bad magic, an unknown type or status, or non-zero padding.
Header decodeHeader(const std::uint8_t* in);

// One contributor of a replicated update.
struct Contributor {
  std::uint32_t worker = 0;
  std::int64_t seq = 0;
};
void encodeContributors(std::span<const Contributor> contributors, std::uint8_t* out);
std::vector<Contributor> decodeContributors(std::span<const std::uint8_t> bytes);

// What a worker declares: the table, and the job's shape.
struct Declaration {
  TableSpec spec;
  std::uint32_t numWorkers = 0;
  std::vector<std::string> servers;  // "host:port" of every server
  bool operator==(const Declaration&) const = default;
};
std::vector<std::uint8_t> encodeDeclaration(const Declaration& declaration);
// Throws ProtocolError on anything malformed or over its limit.
Declaration decodeDeclaration(std::span<const std::uint8_t> bytes);

std::vector<std::uint8_t> encodeServerStats(const ServerStats& stats);
ServerStats decodeServerStats(std::span<const std::uint8_t> bytes);

}  // namespace gyre::ps
