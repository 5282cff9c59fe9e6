#include "ps/server_backup.h"

#include <sys/uio.h>

#include <algorithm>

#include "common/logging.h"
#include "gyre/errors.h"

namespace gyre::ps {

namespace {
constexpr std::chrono::milliseconds kConnectBound{5000};
}  // namespace

BackupLink::BackupLink(int index, int backupIndex, std::string secret, std::chrono::milliseconds timeout)
    : index_(index), backupIndex_(backupIndex), secret_(std::move(secret)), timeout_(timeout) {}

BackupLink::~BackupLink() {
  std::unique_ptr<Link> link;
  {
    MutexLock lock(mutex_);
    link = std::move(link_);
  }
  if (link) link->close();  // callbacks of requests in flight run here, outside mutex_
}

void BackupLink::setAddress(const std::string& address) {
  MutexLock lock(mutex_);
  address_ = address;
}

void BackupLink::markGone(const std::string& why) {
  if (gone_.exchange(true)) return;
  log::warn("ps server ", index_, ": backup server ", backupIndex_,
            " is gone; its slices are no longer replicated (", why, ")");
}

Link* BackupLink::linkOrNull() {
  MutexLock lock(mutex_);
  if (gone_.load() || address_.empty()) return nullptr;
  if (!link_) {
    Header hello;
    hello.type = Type::kHello;
    hello.worker = kServerPeer;
    const std::string name = "ps server " + std::to_string(backupIndex_) + " (" + address_ + ")";
    try {
      // Every server listens before a worker declares the table, so a backup that refuses the
      // connection for long is gone; a short bound keeps its slices from stalling meanwhile.
      link_ = Link::connect(address_, secret_, hello, name, Deadline::after(std::min(timeout_, kConnectBound)));
    } catch (const std::exception& e) {
      markGone(std::string("cannot connect: ") + e.what());
      return nullptr;
    }
  }
  return link_.get();
}

bool BackupLink::send(Header request, std::shared_ptr<const std::vector<float>> payload,
                      std::size_t payloadBytes, std::function<void()> acknowledged) {
  Link* link = linkOrNull();
  if (link == nullptr) return false;
  const iovec part{const_cast<float*>(payload->data()), payloadBytes};
  const std::size_t parts = payloadBytes > 0 ? 1 : 0;
  const std::string what = std::string(toString(request.type)) + " of slice " + std::to_string(request.slice);
  link->send(request, std::span<const iovec>(&part, parts), nullptr, 0,
             [this, payload, what, acknowledged = std::move(acknowledged)](Link::Outcome&& outcome) {
               if (outcome.error) {
                 try {
                   std::rethrow_exception(outcome.error);
                 } catch (const PeerLostError& e) {
                   markGone(e.what());
                 } catch (const std::exception& e) {
                   // The backup refused the update: it has diverged from this primary. The update
                   // is applied here, so the worker is answered all the same.
                   log::error("ps server ", index_, ": backup server ", backupIndex_, " refused the ", what,
                              ": ", e.what());
                 }
               }
               acknowledged();
             });
  return true;
}

}  // namespace gyre::ps
