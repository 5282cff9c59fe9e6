// A primary server's link to its backup (the next server), over which it replicates the
// updates of the slices it leads. Connected on first use; once it cannot be connected or breaks,
// the backup is gone for good and those slices are no longer replicated (the primary keeps
// serving: its workers lose nothing it acknowledged, since it still holds every update).
//
// Thread-safety: every method may be called from any thread. send() may be called while holding
// a slice mutex (that is what keeps a slice's updates in version order on the wire);
// `acknowledged` may then run on the caller's thread before send() returns, so it must not take
// that mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "ps/link.h"
#include "ps/protocol.h"

namespace gyre::ps {

class BackupLink {
 public:
  BackupLink(int index, int backupIndex, std::string secret, std::chrono::milliseconds timeout);
  // Closes the link: `acknowledged` of every request still in flight runs before this returns.
  ~BackupLink();
  BackupLink(const BackupLink&) = delete;
  BackupLink& operator=(const BackupLink&) = delete;

  // The backup's "host:port", from the declaration; before it is set, send() returns false.
  void setAddress(const std::string& address) GYRE_EXCLUDES(mutex_);
  bool gone() const { return gone_.load(); }

  // Sends `request` with the first `payloadBytes` bytes of `payload` (kept alive until the
  // backup answered). Returns true when the request was handed to the link: `acknowledged`
  // then runs exactly once, when the backup answered or the link broke. Returns false, without
  // running it, when the backup is gone or cannot be connected.
  bool send(Header request, std::shared_ptr<const std::vector<float>> payload, std::size_t payloadBytes,
            std::function<void()> acknowledged) GYRE_EXCLUDES(mutex_);

 private:
  Link* linkOrNull() GYRE_EXCLUDES(mutex_);
  void markGone(const std::string& why);

  const int index_;
  const int backupIndex_;
  const std::string secret_;
  const std::chrono::milliseconds timeout_;
  std::atomic<bool> gone_{false};
  Mutex mutex_;  // connecting, address_, link_
  std::string address_ GYRE_GUARDED_BY(mutex_);
  std::unique_ptr<Link> link_ GYRE_GUARDED_BY(mutex_);
};

}  // namespace gyre::ps
