// The TCP store's state and request semantics, apart from any I/O: it answers requests, parks
// get/wait requests whose keys are missing, and hands back the answers that become due when
// keys appear or time-outs pass. Clients are named by the server's connection ids.
//
// Thread-safety: none; the server's loop thread owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "rendezvous/store_table.h"
#include "rendezvous/tcp_store_protocol.h"

namespace gyre::rendezvous {

class StoreService {
 public:
  struct Answer {
    std::uint64_t client;
    Response response;
  };

  // `name` appears in time-out messages ("tcp store 10.0.0.1:29500").
  explicit StoreService(std::string name) : name_(std::move(name)) {}

  // Serves one request. Returns its response, or nullopt when the request waits for keys (at
  // most one parked request per client; its answer comes from takeReady or expire).
  std::optional<Response> serve(std::uint64_t client, Request request);
  // Answers to parked requests whose keys all exist now.
  std::vector<Answer> takeReady();
  // Time-out answers to parked requests whose deadline is at or before `now`.
  std::vector<Answer> expire(Clock::time_point now);
  // The earliest deadline of a parked request; nullopt when none is parked.
  std::optional<Clock::time_point> nextDeadline() const;
  // Drops the parked request of a client that went away.
  void forget(std::uint64_t client);

 private:
  struct Waiter {
    std::uint64_t client;
    Request request;
    Clock::time_point deadline;
  };

  const std::string name_;
  KeyValueTable table_;
  std::vector<Waiter> waiters_;
  bool changed_ = false;  // the table changed since the last takeReady
};

}  // namespace gyre::rendezvous
