// Values on the runtime's wire: arguments, results and objects are MessagePack (msgpack-cxx,
// Debian's libmsgpack-cxx-dev). It is self-describing, so a value of another type than the one
// expected is caught and named instead of read as garbage, and its parser takes limits, so a
// malformed or oversized message is refused before anything large is allocated. PODs, strings,
// vectors, maps, tuples and optionals work as they are; a struct of the user's adds
// MSGPACK_DEFINE(fields...) (see docs/runtime.md).
#pragma once

#include <msgpack.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>

#include "gyre/errors.h"

namespace gyre::rt {

// A serialized value: MessagePack bytes.
using Bytes = std::string;

// The most a message may nest, and hold in one array, map or string, when it is read.
struct UnpackLimits {
  std::size_t depth = 64;
  std::size_t elements = std::size_t{1} << 26;  // per array or map
  std::size_t bytes = std::size_t{1} << 32;     // per string, binary or extension
};

template <class T>
Bytes pack(const T& value) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, value);
  return Bytes(buffer.data(), buffer.size());
}

namespace detail {
// Parses `bytes` into an object kept alive by the handle; ProtocolError when they are not one
// whole MessagePack value within `limits`. `what` names the value in the message.
msgpack::object_handle parse(std::string_view bytes, std::string_view what, const UnpackLimits& limits = {});
[[noreturn]] void throwTypeMismatch(std::string_view what, const msgpack::object& got, std::string_view wanted);
std::string typeName(const msgpack::object& o);
}  // namespace detail

// The value of type T in `bytes`; InvalidArgument naming `what` when it holds another type,
// ProtocolError when it is not MessagePack.
template <class T>
T unpack(std::string_view bytes, std::string_view what) {
  const msgpack::object_handle handle = detail::parse(bytes, what);
  try {
    return handle.get().as<T>();
  } catch (const msgpack::type_error&) {
    detail::throwTypeMismatch(what, handle.get(), typeid(T).name());
  }
}

namespace detail {
template <class T>
void convertArgument(const msgpack::object& o, T& out, std::string_view function, std::size_t position) {
  try {
    o.convert(out);
  } catch (const msgpack::type_error&) {
    throwTypeMismatch(std::string(function) + "'s argument " + std::to_string(position), o, typeid(T).name());
  }
}
}  // namespace detail

// The arguments of `function`, taking std::tuple<P...>: InvalidArgument when their number or a
// type differs, naming the function and the argument.
template <class Tuple>
Tuple unpackArguments(std::string_view bytes, std::string_view function) {
  const msgpack::object_handle handle = detail::parse(bytes, function);
  const msgpack::object& o = handle.get();
  constexpr std::size_t kArity = std::tuple_size_v<Tuple>;
  if (o.type != msgpack::type::ARRAY || o.via.array.size != kArity)
    throw InvalidArgument(std::string(function) + " takes " + std::to_string(kArity) + " argument" +
                          (kArity == 1 ? "" : "s") + ", the call passed " +
                          (o.type == msgpack::type::ARRAY ? std::to_string(o.via.array.size) : detail::typeName(o)));
  Tuple args;
  std::size_t position = 0;
  std::apply(
      [&](auto&... arg) {
        ((detail::convertArgument(o.via.array.ptr[position], arg, function, position + 1), ++position), ...);
      },
      args);
  return args;
}

}  // namespace gyre::rt
