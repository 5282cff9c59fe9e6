#include "gyre/rt/serialize.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace gyre::rt::detail {

std::string demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> plain(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && plain ? std::string(plain.get()) : std::string(name);
}

msgpack::object_handle parse(std::string_view bytes, std::string_view what, const UnpackLimits& limits) {
  // An array or map header makes the parser reserve its elements before they arrive: no more
  // can follow than there are bytes, so that bounds what a short malformed message reserves.
  const std::size_t elements = std::min(limits.elements, bytes.size());
  const msgpack::unpack_limit limit(elements, elements, limits.bytes, limits.bytes, limits.bytes, limits.depth);
  std::size_t offset = 0;
  msgpack::object_handle handle;
  try {
    handle = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, limit);
  } catch (const std::exception& e) {  // msgpack's parse_error, insufficient_bytes, size_overflow, depth_size_overflow
    throw ProtocolError(std::string(what) + ": not a MessagePack value within the limits (" + e.what() + ")");
  }
  if (offset != bytes.size())
    throw ProtocolError(std::string(what) + ": " + std::to_string(bytes.size() - offset) +
                        " bytes after the MessagePack value");
  return handle;
}

std::string typeName(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "an integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "a floating-point number";
    case msgpack::type::STR: return "a string";
    case msgpack::type::BIN: return "binary data";
    case msgpack::type::ARRAY: return "an array of " + std::to_string(o.via.array.size);
    case msgpack::type::MAP: return "a map of " + std::to_string(o.via.map.size);
    case msgpack::type::EXT: return "an extension value";
  }
  return "an unknown value";
}

void throwTypeMismatch(std::string_view what, const msgpack::object& got, std::string_view wanted) {
  throw InvalidArgument(std::string(what) + " is " + typeName(got) + ", which does not convert to " +
                        demangle(std::string(wanted).c_str()));
}

}  // namespace gyre::rt::detail
