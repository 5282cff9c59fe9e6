// The elastic job's membership, as `gyre run --elastic` publishes it in the job's store and the
// workers read it (docs/elastic.md). Libtorch-free: the launcher and gyre_core both use it.
//
// Keys, all under "elastic/":
//   epoch          the newest published membership's number, decimal; absent until the first
//   members/<E>    membership E: worker ids, comma-separated, in rank order
//   ready/<id>     set by worker <id> when it waits to join (its host name as the value)
//   arrived/<E>    how many members of E reached its rendezvous (a counter)
//   outcome/<E>    "go" (every member arrived: build E's communicator) or "abandon" (a newer
//                  membership came first); written once, by compare-and-set
//   failed         the launcher's reason when the job cannot go on; workers waiting throw it
//   place/<id>     where worker <id> is, as it last said (Place): "waiting <E> <T> <why>" (it
//                  left membership E, or 0: none yet, and waits for the next; T: its
//                  communicator's time-out in ms) or "arrived <E> <T>" (it reached membership E's
//                  rendezvous and trains in E once it forms)
//   places         how many places were written (a counter): the launcher reads the places again
//                  when it changes, to find a member that stopped answering (elastic_policy.h)
//
// Worker ids are the launcher's: 0, 1, ... in the order it started the workers; a replacement
// gets a new id. A membership lists survivors first, in their previous rank order, then the
// newcomers by id, so rank 0 of a new membership holds the state whenever anyone does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gyre/store.h"

namespace gyre::elastic {

struct Membership {
  std::int64_t epoch = 0;    // from 1
  std::vector<int> members;  // worker ids in rank order
  // The rank of worker `id`, or -1 when it is not a member.
  int rankOf(int id) const;
};

// Writes members/<E>, then epoch (so a reader of epoch always finds its members).
void publishMembership(Store& store, const Membership& membership);
// The newest published membership, without waiting; nullopt before the first.
std::optional<Membership> latestMembership(Store& store);
// The newest epoch number without its members (one key read); 0 before the first.
std::int64_t latestEpoch(Store& store);

// The newest membership whose rendezvous succeeded (outcome "go"): the one the members train
// in. nullopt when none has formed yet.
std::optional<Membership> lastFormedMembership(Store& store);

void announceReady(Store& store, int id, const std::string& host);
bool isReady(Store& store, int id);

// Where a worker is in the membership protocol, as it says itself (the key list above).
struct Place {
  enum class Kind { kWaiting, kArrived };
  Kind kind = Kind::kWaiting;
  std::int64_t epoch = 0;      // left (kWaiting; 0: was in none) or reached (kArrived)
  std::int64_t timeoutMs = 0;  // its communicator's time-out: how long its peers may take to notice
  std::string reason;          // kWaiting: why it left epoch (empty: it saw a newer membership)
};
void recordPlace(Store& store, int id, const Place& place);
// nullopt: worker `id` has not said yet. Throws ProtocolError on a malformed record.
std::optional<Place> placeOf(Store& store, int id);
// The places counter: changes whenever a worker records its place.
std::int64_t placeEvents(Store& store);
// The launcher gives up (below --min-np past --elastic-timeout): every waiting worker throws.
void publishFailure(Store& store, const std::string& reason);
std::optional<std::string> publishedFailure(Store& store);

// The next membership: `current` without the ids in `gone`, then `joining` (ascending, those
// not already members), at most maxSize in all (newcomers beyond it are left out).
std::vector<int> nextMembers(const std::vector<int>& current, const std::vector<int>& gone,
                             const std::vector<int>& joining, int maxSize);

// "0,2,5" and back; parse throws ProtocolError on anything else.
std::string formatMembers(const std::vector<int>& members);
std::vector<int> parseMembers(const std::string& text);

}  // namespace gyre::elastic
