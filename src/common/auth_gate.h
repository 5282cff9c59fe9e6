// The front door of every listening socket gyre opens (the TCP store, a communicator's
// transport listener, a parameter server): one thread accepts connections and runs the server
// side of the auth handshake for all of them with non-blocking I/O, so nobody who has not proved
// the job secret gets a thread, and a flood of idle or slow connections cannot keep real clients
// out. Thousands may be pending; when the gate is full, or one source address holds its share,
// the oldest pending handshake (of that source) is closed to make room for the newest, since a
// real client finishes in one round trip and a flood's connections are the ones left waiting.
// Each pending handshake has a time-out. Refused and evicted connections are counted and logged
// (the first few of every interval one by one, then a count). Clients retry a connection closed
// under them (auth::connectAuthenticated).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/socket.h"

namespace gyre::auth {

struct GateOptions {
  std::string secret;
  std::string context;  // the handshake's protocol name ("store", "transport/<communicator>")
  std::string name;     // who is listening, for the log: "tcp store 127.0.0.1:4000"
  std::chrono::milliseconds handshakeTimeout{5000};
  std::size_t maxPending = 4096;
  std::size_t maxPendingPerSource = 1024;  // per IP address
};

struct GateStats {
  std::uint64_t accepted = 0;       // connections taken off the listening socket
  std::uint64_t authenticated = 0;  // handed on
  std::uint64_t refused = 0;        // failed the handshake, timed out, or evicted
  std::uint64_t evicted = 0;        // of refused: closed to make room
};

class AuthGate {
 public:
  // Called on the gate's thread with each connection that completed the handshake, in blocking
  // mode, and the peer's "host:port". It should hand the socket on quickly.
  using OnAuthenticated = std::function<void(net::Fd fd, const std::string& peer)>;

  // Starts accepting on `listenFd`, which the gate makes non-blocking but does not own; it must
  // outlive the gate.
  AuthGate(int listenFd, GateOptions options, OnAuthenticated onAuthenticated);
  // Stops the thread and closes every pending connection.
  ~AuthGate();
  AuthGate(const AuthGate&) = delete;
  AuthGate& operator=(const AuthGate&) = delete;

  GateStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gyre::auth
