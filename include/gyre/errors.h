// The exceptions gyre throws, typed by what the caller can do about them. See docs/errors.md.
#pragma once

#include <stdexcept>
#include <string>

namespace gyre {

// Base of every gyre exception.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// The caller passed something wrong (bad count, root out of range, unknown name, mismatched
// collective in debug mode). Fix the call.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A blocking call did not finish within its time-out. The communicator that raised it is
// broken: its streams may be out of step, so every later call fails too.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// A peer process died, closed its communicator, or reported that it lost a peer. Names the lost
// rank and its host. The communicator is broken and must be rebuilt.
class PeerLostError : public Error {
 public:
  PeerLostError(const std::string& what, int rank) : Error(what), rank_(rank) {}
  int rank() const { return rank_; }

 private:
  int rank_;
};

// A malformed, oversized or unauthenticated message arrived.
class ProtocolError : public Error {
 public:
  using Error::Error;
};

// An operating-system call failed (socket, mmap, file). Carries errno's text.
class SystemError : public Error {
 public:
  using Error::Error;
};

}  // namespace gyre
