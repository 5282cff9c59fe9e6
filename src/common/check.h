// Invariant checks that throw typed errors with both values and file:line.
#pragma once

#include <sstream>
#include <string>

#include "gyre/errors.h"

namespace gyre::detail {

template <typename E, typename... Args>
[[noreturn]] void fail(const char* file, int line, const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  out << " (" << file << ":" << line << ")";
  throw E(out.str());
}

}  // namespace gyre::detail

// GYRE_THROW(InvalidArgument, "count ", n, " too large")
#define GYRE_THROW(Type, ...) ::gyre::detail::fail<::gyre::Type>(__FILE__, __LINE__, __VA_ARGS__)

// GYRE_ENFORCE(cond, "message parts"...): throws gyre::Error when cond is false.
#define GYRE_ENFORCE(cond, ...)                                                                   \
  do {                                                                                            \
    if (!(cond))                                                                                  \
      ::gyre::detail::fail<::gyre::Error>(__FILE__, __LINE__,                                     \
                                          "check failed: " #cond " " __VA_OPT__(, ) __VA_ARGS__); \
  } while (0)

#define GYRE_ENFORCE_OP_(Type, a, b, op, ...)                                                                \
  do {                                                                                                       \
    const auto& gyre_a_ = (a);                                                                               \
    const auto& gyre_b_ = (b);                                                                               \
    if (!(gyre_a_ op gyre_b_))                                                                               \
      ::gyre::detail::fail<::gyre::Type>(__FILE__, __LINE__, #a " " #op " " #b " failed: ", gyre_a_, " vs ", \
                                         gyre_b_, " " __VA_OPT__(, ) __VA_ARGS__);                           \
  } while (0)

#define GYRE_ENFORCE_EQ(a, b, ...) GYRE_ENFORCE_OP_(Error, a, b, == __VA_OPT__(, ) __VA_ARGS__)
#define GYRE_ENFORCE_LE(a, b, ...) GYRE_ENFORCE_OP_(Error, a, b, <= __VA_OPT__(, ) __VA_ARGS__)
#define GYRE_ENFORCE_LT(a, b, ...) GYRE_ENFORCE_OP_(Error, a, b, < __VA_OPT__(, ) __VA_ARGS__)
// Argument checks: the same, but throw InvalidArgument.
#define GYRE_ARG_CHECK(cond, ...)                                                                \
  do {                                                                                           \
    if (!(cond)) ::gyre::detail::fail<::gyre::InvalidArgument>(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

// Checks of what a user typed (flags, host lists): InvalidArgument with the message alone, since
// a file:line means nothing at the command line.
#define GYRE_USAGE_CHECK(cond, ...)                      \
  do {                                                   \
    if (!(cond)) ::gyre::detail::failUsage(__VA_ARGS__); \
  } while (0)
// GYRE_USAGE_ERROR("message parts"...): the same, always.
#define GYRE_USAGE_ERROR(...) ::gyre::detail::failUsage(__VA_ARGS__)

namespace gyre::detail {

template <typename... Args>
[[noreturn]] void failUsage(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  throw ::gyre::InvalidArgument(out.str());
}

template <typename... Args>
[[noreturn]] void failPeerLost(int rank, const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  throw ::gyre::PeerLostError(out.str(), rank);
}

}  // namespace gyre::detail

// GYRE_THROW_PEER_LOST(rank, "message parts"...): PeerLostError naming `rank`.
#define GYRE_THROW_PEER_LOST(rank, ...) ::gyre::detail::failPeerLost((rank), __VA_ARGS__)
