#include "ps/protocol.h"

#include <cstring>
#include <sstream>

#include "common/check.h"
#include "rendezvous/wire.h"

namespace gyre::ps {
namespace {

using rendezvous::ByteReader;
using rendezvous::ByteWriter;

void put64(std::uint8_t* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::uint64_t get64(const std::uint8_t* in) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return v;
}

std::uint32_t floatBits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float bitsFloat(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

bool knownType(std::uint8_t t) { return t >= 1 && t <= static_cast<std::uint8_t>(Type::kStats); }

void expectEnd(const ByteReader& reader, const char* what) {
  if (reader.remaining() != 0)
    GYRE_THROW(ProtocolError, what, " has ", reader.remaining(), " unexpected trailing bytes");
}

}  // namespace

std::string_view toString(Type type) {
  switch (type) {
    case Type::kHello: return "hello";
    case Type::kDeclare: return "declare";
    case Type::kInit: return "init";
    case Type::kPush: return "push";
    case Type::kPull: return "pull";
    case Type::kClock: return "clock";
    case Type::kReplicate: return "replicate";
    case Type::kReplicateInit: return "replicate-init";
    case Type::kStats: return "stats";
  }
  return "?";
}

std::string Header::debugString() const {
  std::ostringstream out;
  out << toString(type) << (response ? " response" : "") << "{id=" << id << " slice=" << slice << " a=" << a
      << " b=" << b << " worker=" << worker << " payload=" << payloadBytes;
  if (status != Status::kOk) out << " status=" << static_cast<int>(status);
  out << "}";
  return out.str();
}

void encodeHeader(const Header& h, std::uint8_t* out) {
  std::memset(out, 0, kHeaderBytes);
  rendezvous::putU32(out, kMagic);
  out[4] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(h.type) | (h.response ? kResponseBit : 0));
  out[5] = static_cast<std::uint8_t>(h.status);
  rendezvous::putU32(out + 8, h.id);
  rendezvous::putU32(out + 12, h.slice);
  put64(out + 16, static_cast<std::uint64_t>(h.a));
  put64(out + 24, static_cast<std::uint64_t>(h.b));
  rendezvous::putU32(out + 32, floatBits(h.lr));
  rendezvous::putU32(out + 36, h.worker);
  put64(out + 40, h.payloadBytes);
}

Header decodeHeader(const std::uint8_t* in) {
  const std::uint32_t magic = rendezvous::getU32(in);
  if (magic != kMagic) GYRE_THROW(ProtocolError, "not a parameter-server message (magic 0x", std::hex, magic, ")");
  Header h;
  const std::uint8_t type = in[4] & static_cast<std::uint8_t>(~kResponseBit);
  if (!knownType(type)) GYRE_THROW(ProtocolError, "unknown parameter-server message type ", int(type));
  h.type = static_cast<Type>(type);
  h.response = (in[4] & kResponseBit) != 0;
  if (in[5] > static_cast<std::uint8_t>(Status::kTimeout))
    GYRE_THROW(ProtocolError, "unknown parameter-server status ", int(in[5]));
  h.status = static_cast<Status>(in[5]);
  if (in[6] != 0 || in[7] != 0) GYRE_THROW(ProtocolError, "parameter-server header padding is not zero");
  h.id = rendezvous::getU32(in + 8);
  h.slice = rendezvous::getU32(in + 12);
  h.a = static_cast<std::int64_t>(get64(in + 16));
  h.b = static_cast<std::int64_t>(get64(in + 24));
  h.lr = bitsFloat(rendezvous::getU32(in + 32));
  h.worker = rendezvous::getU32(in + 36);
  h.payloadBytes = get64(in + 40);
  return h;
}

void encodeContributors(std::span<const Contributor> contributors, std::uint8_t* out) {
  for (const Contributor& c : contributors) {
    std::memset(out, 0, kContributorBytes);
    rendezvous::putU32(out, c.worker);
    put64(out + 8, static_cast<std::uint64_t>(c.seq));
    out += kContributorBytes;
  }
}

std::vector<Contributor> decodeContributors(std::span<const std::uint8_t> bytes) {
  if (bytes.size() % kContributorBytes != 0)
    GYRE_THROW(ProtocolError, "contributor list of ", bytes.size(), " bytes is not a multiple of ", kContributorBytes);
  std::vector<Contributor> out(bytes.size() / kContributorBytes);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint8_t* p = bytes.data() + i * kContributorBytes;
    out[i].worker = rendezvous::getU32(p);
    out[i].seq = static_cast<std::int64_t>(get64(p + 8));
    if (out[i].seq < 0) GYRE_THROW(ProtocolError, "negative sequence number in a contributor list");
  }
  return out;
}

std::vector<std::uint8_t> encodeDeclaration(const Declaration& d) {
  std::vector<std::uint8_t> out;
  ByteWriter w(out);
  w.u32(static_cast<std::uint32_t>(d.spec.sizes.size()));
  for (std::size_t size : d.spec.sizes) w.i64(static_cast<std::int64_t>(size));
  w.u8(static_cast<std::uint8_t>(d.spec.mode.consistency));
  w.u32(static_cast<std::uint32_t>(d.spec.mode.staleness));
  const OptimizerOptions& o = d.spec.optimizer;
  w.u8(static_cast<std::uint8_t>(o.kind));
  for (float f : {o.momentum, o.weightDecay, o.beta1, o.beta2, o.eps}) w.u32(floatBits(f));
  w.u8(d.spec.replicate ? 1 : 0);
  w.u32(d.numWorkers);
  w.u32(static_cast<std::uint32_t>(d.servers.size()));
  for (const std::string& s : d.servers) w.bytes(s);
  GYRE_ARG_CHECK(d.spec.shapes.empty() || d.spec.shapes.size() == d.spec.sizes.size(),
                 "a parameter-server table of ", d.spec.sizes.size(), " keys with ", d.spec.shapes.size(),
                 " shapes");
  w.u32(static_cast<std::uint32_t>(d.spec.shapes.size()));
  for (std::size_t k = 0; k < d.spec.shapes.size(); ++k) {
    const auto& shape = d.spec.shapes[k];
    std::int64_t product = 1;
    for (const std::int64_t dim : shape) product *= dim;
    GYRE_ARG_CHECK(shape.size() <= kMaxShapeDims && product == static_cast<std::int64_t>(d.spec.sizes[k]),
                   "parameter-server key ", k, ": a shape of ", shape.size(), " dimensions and ", product,
                   " elements for ", d.spec.sizes[k], " elements (at most ", kMaxShapeDims, " dimensions)");
    w.u32(static_cast<std::uint32_t>(shape.size()));
    for (const std::int64_t dim : shape) w.i64(dim);
  }
  GYRE_ARG_CHECK(out.size() <= kMaxDeclarationBytes, "a parameter-server table of ", d.spec.sizes.size(),
                 " keys is too large to declare");
  return out;
}

Declaration decodeDeclaration(std::span<const std::uint8_t> bytes) {
  if (bytes.size() > kMaxDeclarationBytes) GYRE_THROW(ProtocolError, "declaration of ", bytes.size(), " bytes is too large");
  ByteReader r(bytes);
  Declaration d;
  const std::uint32_t keys = r.u32("key count");
  if (keys > kMaxKeys) GYRE_THROW(ProtocolError, "declaration has ", keys, " keys (at most ", kMaxKeys, ")");
  if (std::size_t(keys) * 8 > r.remaining()) GYRE_THROW(ProtocolError, "truncated declaration: ", keys, " key sizes");
  d.spec.sizes.resize(keys);
  for (auto& size : d.spec.sizes) {
    const std::int64_t n = r.i64("key size");
    if (n < 0 || n > (std::int64_t(1) << 40)) GYRE_THROW(ProtocolError, "key size ", n, " out of range");
    size = static_cast<std::size_t>(n);
  }
  const std::uint8_t consistency = r.u8("consistency");
  if (consistency < 1 || consistency > 3) GYRE_THROW(ProtocolError, "unknown consistency ", int(consistency));
  d.spec.mode.consistency = static_cast<Consistency>(consistency);
  const std::uint32_t staleness = r.u32("staleness");
  if (staleness > (1u << 20)) GYRE_THROW(ProtocolError, "staleness bound ", staleness, " out of range");
  d.spec.mode.staleness = static_cast<int>(staleness);
  const std::uint8_t kind = r.u8("optimizer");
  if (kind < 1 || kind > 2) GYRE_THROW(ProtocolError, "unknown optimizer ", int(kind));
  OptimizerOptions& o = d.spec.optimizer;
  o.kind = static_cast<OptimizerOptions::Kind>(kind);
  for (float* f : {&o.momentum, &o.weightDecay, &o.beta1, &o.beta2, &o.eps}) *f = bitsFloat(r.u32("optimizer setting"));
  const std::uint8_t replicate = r.u8("replication flag");
  if (replicate > 1) GYRE_THROW(ProtocolError, "replication flag ", int(replicate), " is not 0 or 1");
  d.spec.replicate = replicate == 1;
  d.numWorkers = r.u32("worker count");
  if (d.numWorkers < 1 || d.numWorkers > kMaxWorkers) GYRE_THROW(ProtocolError, "worker count ", d.numWorkers, " out of range");
  const std::uint32_t servers = r.u32("server count");
  if (servers < 1 || servers > kMaxServers) GYRE_THROW(ProtocolError, "server count ", servers, " out of range");
  for (std::uint32_t i = 0; i < servers; ++i) d.servers.push_back(r.string(256, "server address"));
  const std::uint32_t shapes = r.u32("shape count");
  if (shapes != 0 && shapes != keys)
    GYRE_THROW(ProtocolError, "declaration has ", shapes, " shapes for ", keys, " keys");
  for (std::uint32_t k = 0; k < shapes; ++k) {
    const std::uint32_t dims = r.u32("shape rank");
    if (dims > kMaxShapeDims) GYRE_THROW(ProtocolError, "shape of key ", k, " has ", dims, " dimensions");
    std::vector<std::int64_t> shape(dims);
    constexpr std::uint64_t kCap = std::uint64_t(1) << 41;  // above any key's size
    std::uint64_t product = 1;                              // saturates at kCap
    for (auto& dim : shape) {
      dim = r.i64("shape dimension");
      if (dim < 0 || dim > (std::int64_t(1) << 40))
        GYRE_THROW(ProtocolError, "shape dimension ", dim, " out of range");
      const auto d64 = static_cast<std::uint64_t>(dim);
      product = d64 != 0 && product > kCap / d64 ? kCap : product * d64;
    }
    if (product != d.spec.sizes[k])
      GYRE_THROW(ProtocolError, "the shape of key ", k, " does not have its ", d.spec.sizes[k], " elements");
    d.spec.shapes.push_back(std::move(shape));
  }
  expectEnd(r, "declaration");
  return d;
}

std::vector<std::uint8_t> encodeServerStats(const ServerStats& s) {
  std::vector<std::uint8_t> out;
  ByteWriter w(out);
  for (std::uint64_t v : {s.updates, s.replicated, s.bytesIn, s.bytesOut, s.refusedConnections})
    w.i64(static_cast<std::int64_t>(v));
  w.u32(static_cast<std::uint32_t>(s.staleness.size()));
  for (std::uint64_t v : s.staleness) w.i64(static_cast<std::int64_t>(v));
  return out;
}

ServerStats decodeServerStats(std::span<const std::uint8_t> bytes) {
  ByteReader r(bytes);
  ServerStats s;
  for (std::uint64_t* v : {&s.updates, &s.replicated, &s.bytesIn, &s.bytesOut, &s.refusedConnections})
    *v = static_cast<std::uint64_t>(r.i64("server counter"));
  const std::uint32_t n = r.u32("histogram size");
  if (n > 4096) GYRE_THROW(ProtocolError, "staleness histogram of ", n, " entries");
  s.staleness.assign(n, 0);
  for (auto& v : s.staleness) v = static_cast<std::uint64_t>(r.i64("histogram entry"));
  expectEnd(r, "server stats");
  return s;
}

}  // namespace gyre::ps
