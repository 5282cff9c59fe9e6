// Little-endian encoding of integers and length-prefixed byte strings, for the TCP store's
// messages and the file store's records. The reader checks every length against a limit and
// against the bytes actually present BEFORE it allocates anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gyre::rendezvous {

// Appends to a byte vector it does not own.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<std::uint8_t>& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u32(std::uint32_t v);
  void i64(std::int64_t v);
  // u32 length, then the bytes.
  void bytes(const void* data, std::size_t n);
  void bytes(const std::string& s) { bytes(s.data(), s.size()); }
  void bytes(const std::vector<std::uint8_t>& v) { bytes(v.data(), v.size()); }

 private:
  std::vector<std::uint8_t>& out_;
};

// Reads from a span it does not own. Every method throws ProtocolError (naming `what`) when
// the input is too short or a length exceeds its limit.
class ByteReader {
 public:
  explicit ByteReader(std::span<const std::uint8_t> in) : in_(in) {}
  std::uint8_t u8(const char* what);
  std::uint32_t u32(const char* what);
  std::int64_t i64(const char* what);
  std::vector<std::uint8_t> bytes(std::size_t maxBytes, const char* what);
  std::string string(std::size_t maxBytes, const char* what);
  std::size_t remaining() const { return in_.size() - pos_; }
  std::size_t position() const { return pos_; }

 private:
  std::span<const std::uint8_t> take(std::size_t n, const char* what);
  std::size_t lengthPrefix(std::size_t maxBytes, const char* what);

  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
};

// Raw little-endian helpers for fixed headers.
void putU32(std::uint8_t* out, std::uint32_t v);
std::uint32_t getU32(const std::uint8_t* in);

}  // namespace gyre::rendezvous
