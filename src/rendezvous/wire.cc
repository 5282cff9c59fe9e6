#include "rendezvous/wire.h"

#include "common/check.h"

namespace gyre::rendezvous {

void putU32(std::uint8_t* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::uint32_t getU32(const std::uint8_t* in) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(in[i]) << (8 * i);
  return v;
}

void ByteWriter::u32(std::uint32_t v) {
  std::uint8_t buf[4];
  putU32(buf, v);
  out_.insert(out_.end(), buf, buf + 4);
}

void ByteWriter::i64(std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<std::uint8_t>(u >> (8 * i)));
}

void ByteWriter::bytes(const void* data, std::size_t n) {
  GYRE_ARG_CHECK(n <= UINT32_MAX, "a byte string of ", n, " bytes is too long to encode");
  u32(static_cast<std::uint32_t>(n));
  const auto* p = static_cast<const std::uint8_t*>(data);
  out_.insert(out_.end(), p, p + n);
}

std::span<const std::uint8_t> ByteReader::take(std::size_t n, const char* what) {
  if (n > remaining())
    GYRE_THROW(ProtocolError, "truncated message: ", what, " needs ", n, " bytes, ", remaining(), " left");
  auto out = in_.subspan(pos_, n);
  pos_ += n;
  return out;
}

std::uint8_t ByteReader::u8(const char* what) {
  return take(1, what)[0];
}

std::uint32_t ByteReader::u32(const char* what) {
  return getU32(take(4, what).data());
}

std::int64_t ByteReader::i64(const char* what) {
  auto b = take(8, what);
  std::uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= static_cast<std::uint64_t>(b[i]) << (8 * i);
  return static_cast<std::int64_t>(u);
}

std::size_t ByteReader::lengthPrefix(std::size_t maxBytes, const char* what) {
  const std::size_t n = u32(what);
  if (n > maxBytes) GYRE_THROW(ProtocolError, what, " of ", n, " bytes exceeds the limit of ", maxBytes);
  if (n > remaining())
    GYRE_THROW(ProtocolError, "truncated message: ", what, " claims ", n, " bytes, ", remaining(), " left");
  return n;
}

std::vector<std::uint8_t> ByteReader::bytes(std::size_t maxBytes, const char* what) {
  auto b = take(lengthPrefix(maxBytes, what), what);
  return std::vector<std::uint8_t>(b.begin(), b.end());
}

std::string ByteReader::string(std::size_t maxBytes, const char* what) {
  auto b = take(lengthPrefix(maxBytes, what), what);
  return std::string(b.begin(), b.end());
}

}  // namespace gyre::rendezvous
