// One authenticated connection from a client (a worker, or a primary server replicating to its
// backup) to a parameter server, with any number of requests in flight, matched to their
// responses by id. Requests are written whole, header and payload gathered with writev straight
// from the caller's buffers (no copy); a reader thread receives responses and writes a
// response's payload straight into the buffer its request named (zero-copy pulls).
//
// Thread-safety: send() may be called from any thread; callbacks run on the reader thread, one
// at a time, and may call send() on this or another Link.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "ps/protocol.h"

namespace gyre::ps {

class Link {
 public:
  // The outcome of one request: the response header and, unless the request named a buffer for
  // it, the payload (an error message, stats). `error` is set instead when the request failed:
  // PeerLostError when the connection broke, ProtocolError/TimeoutError/Error from the server's
  // status.
  struct Outcome {
    Header header;
    std::vector<std::uint8_t> payload;
    std::exception_ptr error;
  };
  using Callback = std::function<void(Outcome&&)>;

  // Connects, runs the handshake and sends `hello` (answered before this returns). `peerName`
  // names the server in messages ("ps server 1 (127.0.0.1:4000)"). Throws TimeoutError,
  // PeerLostError or ProtocolError.
  static std::unique_ptr<Link> connect(const std::string& address, const std::string& secret, const Header& hello,
                                       const std::string& peerName, Deadline deadline);

  // Stops the reader and closes the connection; requests still in flight fail with
  // PeerLostError (their callbacks run before this returns).
  virtual ~Link() = default;

  // Sends a request (its id is assigned here; payloadBytes is set from `payload`). A response
  // payload of exactly `intoBytes` bytes is read into `into` when `into` is not null; any other
  // size fails the request with ProtocolError. Once the link broke, the callback runs at once
  // (on the caller's thread) with PeerLostError.
  virtual void send(Header request, std::span<const iovec> payload, void* into, std::size_t intoBytes,
                    Callback done) = 0;

  // Sends and waits for the outcome; throws its error. For handshakes and tests.
  Outcome call(Header request, std::span<const iovec> payload, Deadline deadline);

  // Breaks the link (when it is not already) and returns once the reader stopped and every
  // request in flight failed with PeerLostError, its callback run. Idempotent; not from a
  // callback of this link.
  virtual void close() = 0;

  virtual bool broken() const = 0;
  virtual const std::string& peerName() const = 0;
};

}  // namespace gyre::ps
