#include "support/fake_mesh.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <sstream>

#include "common/check.h"
#include "common/mutex.h"
#include "common/reduce.h"
#include "gyre/errors.h"

namespace gyre::test {

struct FakeNetwork::Fifo {
  Mutex mu;
  std::vector<std::byte> ring GYRE_GUARDED_BY(mu);  // allocated on first write
  std::size_t head GYRE_GUARDED_BY(mu) = 0;
  std::size_t used GYRE_GUARDED_BY(mu) = 0;
  std::size_t sent GYRE_GUARDED_BY(mu) = 0;
  // Sizes of the messages begun and not yet read in full.
  std::deque<std::size_t> messages GYRE_GUARDED_BY(mu);
};

struct FakeNetwork::Doorbell {
  mutable Mutex mu;
  mutable CondVar cv;
  std::uint64_t epoch GYRE_GUARDED_BY(mu) = 0;
};

struct FakeNetwork::Failure {
  mutable Mutex mu;
  bool broken GYRE_GUARDED_BY(mu) = false;
  int lostRank GYRE_GUARDED_BY(mu) = -1;
  std::string reason GYRE_GUARDED_BY(mu);
};

FakeNetwork::FakeNetwork(int size, std::size_t capacity)
    : size_(size), capacity_(capacity), failure_(std::make_unique<Failure>()) {
  GYRE_ARG_CHECK(size >= 1 && capacity >= 8, "FakeNetwork needs a size >= 1 and a capacity >= 8");
  for (int i = 0; i < size * size; ++i) fifos_.push_back(std::make_unique<Fifo>());
  for (int i = 0; i < size; ++i) doorbells_.push_back(std::make_unique<Doorbell>());
}

FakeNetwork::~FakeNetwork() = default;

FakeNetwork::Fifo& FakeNetwork::fifo(int src, int dst) const {
  return *fifos_[static_cast<std::size_t>(src) * static_cast<std::size_t>(size_) +
                 static_cast<std::size_t>(dst)];
}

void FakeNetwork::ring(int rank) const {
  Doorbell& d = *doorbells_[static_cast<std::size_t>(rank)];
  {
    MutexLock lock(d.mu);
    ++d.epoch;
  }
  d.cv.notifyAll();
}

std::size_t FakeNetwork::pendingBytes() const {
  std::size_t total = 0;
  for (const auto& f : fifos_) {
    MutexLock lock(f->mu);
    total += f->used;
  }
  return total;
}

std::size_t FakeNetwork::sentBytes(int src, int dst) const {
  Fifo& f = fifo(src, dst);
  MutexLock lock(f.mu);
  return f.sent;
}

std::size_t FakeNetwork::sentBytes() const {
  std::size_t total = 0;
  for (const auto& f : fifos_) {
    MutexLock lock(f->mu);
    total += f->sent;
  }
  return total;
}

std::size_t FakeNetwork::write(int src, int dst, const std::byte* data, std::size_t bytes,
                               std::size_t message, std::size_t offset) {
  Fifo& f = fifo(src, dst);
  std::size_t n = 0;
  {
    MutexLock lock(f.mu);
    if (f.ring.empty()) f.ring.resize(capacity_);
    n = std::min(bytes, capacity_ - f.used);
    if (offset == 0 && n > 0) f.messages.push_back(message);
    const std::size_t tail = (f.head + f.used) % capacity_;
    const std::size_t first = std::min(n, capacity_ - tail);
    std::memcpy(f.ring.data() + tail, data, first);
    std::memcpy(f.ring.data(), data + first, n - first);
    f.used += n;
    f.sent += n;
  }
  if (n > 0) ring(dst);
  return n;
}

std::size_t FakeNetwork::read(int src, int dst, std::byte* data, std::size_t bytes, std::size_t unit,
                              std::size_t message, std::size_t offset) {
  Fifo& f = fifo(src, dst);
  std::size_t n = 0;
  {
    MutexLock lock(f.mu);
    if (f.used == 0) return 0;
    if (f.messages.front() != message)
      GYRE_THROW(ProtocolError, "rank ", dst, " receives a message of ", message, " bytes from rank ", src,
                 ", which sent one of ", f.messages.front(),
                 " bytes (every send op must meet one receive op of ", "the same size)");
    n = std::min(bytes, f.used) / unit * unit;
    if (n > 0 && offset + n == message) f.messages.pop_front();
    const std::size_t first = std::min(n, capacity_ - f.head);
    if (n > 0) {
      std::memcpy(data, f.ring.data() + f.head, first);
      std::memcpy(data + first, f.ring.data(), n - first);
    }
    f.head = (f.head + n) % capacity_;
    f.used -= n;
  }
  if (n > 0) ring(src);
  return n;
}

std::uint64_t FakeNetwork::epoch(int rank) const {
  Doorbell& d = *doorbells_[static_cast<std::size_t>(rank)];
  MutexLock lock(d.mu);
  return d.epoch;
}

bool FakeNetwork::wait(int rank, std::uint64_t seen, Clock::time_point deadline) const {
  Doorbell& d = *doorbells_[static_cast<std::size_t>(rank)];
  MutexLock lock(d.mu);
  auto changed = [&]() GYRE_REQUIRES(d.mu) { return d.epoch != seen; };
  if (deadline == Clock::time_point::max()) {
    d.cv.wait(d.mu, changed);
    return true;
  }
  return d.cv.waitUntil(d.mu, deadline, changed);
}

void FakeNetwork::breakAll(int lostRank, const std::string& reason) {
  {
    MutexLock lock(failure_->mu);
    if (failure_->broken) return;
    failure_->broken = true;
    failure_->lostRank = lostRank;
    failure_->reason = reason;
  }
  for (int r = 0; r < size_; ++r) ring(r);
}

void FakeNetwork::throwIfBroken() const {
  MutexLock lock(failure_->mu);
  if (failure_->broken) throw PeerLostError(failure_->reason, failure_->lostRank);
}

FakeMesh::FakeMesh(std::shared_ptr<FakeNetwork> network, int rank, std::vector<int> hosts)
    : network_(std::move(network)), rank_(rank), hosts_(std::move(hosts)), staging_(network_->capacity()) {
  if (hosts_.empty()) hosts_.assign(static_cast<std::size_t>(network_->size()), 0);
  GYRE_ARG_CHECK(hosts_.size() == static_cast<std::size_t>(network_->size()), "FakeMesh: ", hosts_.size(),
                 " host indices for ", network_->size(), " ranks");
}

void FakeMesh::validate(std::span<transport::Op> ops) const {
  using Kind = transport::Op::Kind;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const transport::Op& op = ops[i];
    GYRE_ARG_CHECK(op.peer >= 0 && op.peer < size() && op.peer != rank_, "rank ", rank_, " op ", i,
                   ": bad peer ", op.peer);
    GYRE_ARG_CHECK(op.bytes == 0 || op.data != nullptr, "rank ", rank_, " op ", i, ": null buffer");
    GYRE_ARG_CHECK(op.after >= -1 && op.after < static_cast<int>(i), "rank ", rank_, " op ", i,
                   ": after = ", op.after, " does not name an earlier op");
    GYRE_ARG_CHECK(op.after < 0 || ops[static_cast<std::size_t>(op.after)].bytes >= op.bytes, "rank ", rank_,
                   " op ", i, " (", op.bytes, " bytes) waits on op ", op.after, " which has only ",
                   op.after < 0 ? 0 : ops[static_cast<std::size_t>(op.after)].bytes);
    if (op.kind == Kind::kRecvReduce)
      GYRE_ARG_CHECK(op.bytes % dtypeSize(op.dtype) == 0, "rank ", rank_, " op ", i, ": ", op.bytes,
                     " bytes is not a whole number of ", toString(op.dtype), " elements");
  }
}

void FakeMesh::run(std::span<transport::Op> ops, Deadline deadline) {
  using Kind = transport::Op::Kind;
  network_->throwIfBroken();
  if (!brokenBy_.empty()) throw TimeoutError(brokenBy_);
  validate(ops);

  // Ops with the same peer and direction run in list order: each waits for its predecessor.
  std::vector<int> predecessor(ops.size(), -1);
  std::vector<int> lastSend(static_cast<std::size_t>(size()), -1);
  std::vector<int> lastRecv(static_cast<std::size_t>(size()), -1);
  std::size_t remaining = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    auto& last = ops[i].kind == Kind::kSend ? lastSend : lastRecv;
    predecessor[i] = last[static_cast<std::size_t>(ops[i].peer)];
    last[static_cast<std::size_t>(ops[i].peer)] = static_cast<int>(i);
    ops[i].done = 0;
    if (ops[i].bytes > 0) ++remaining;
  }

  while (remaining > 0) {
    network_->throwIfBroken();
    const std::uint64_t seen = network_->epoch(rank_);
    bool progressed = false;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      transport::Op& op = ops[i];
      if (op.done == op.bytes) continue;
      const int before = predecessor[i];
      if (before >= 0 &&
          ops[static_cast<std::size_t>(before)].done < ops[static_cast<std::size_t>(before)].bytes)
        continue;
      std::size_t limit = op.bytes;
      if (op.after >= 0) limit = std::min(limit, ops[static_cast<std::size_t>(op.after)].done);
      if (op.done >= limit) continue;
      std::byte* data = static_cast<std::byte*>(op.data) + op.done;
      std::size_t moved = 0;
      switch (op.kind) {
        case Kind::kSend:
          moved = network_->write(rank_, op.peer, data, limit - op.done, op.bytes, op.done);
          break;
        case Kind::kRecv:
          moved = network_->read(op.peer, rank_, data, limit - op.done, 1, op.bytes, op.done);
          break;
        case Kind::kRecvReduce: {
          const std::size_t unit = dtypeSize(op.dtype);
          const std::size_t most = std::min(limit - op.done, staging_.size());
          moved = network_->read(op.peer, rank_, staging_.data(), most, unit, op.bytes, op.done);
          const void* left = op.other == nullptr ? data : static_cast<const std::byte*>(op.other) + op.done;
          if (moved > 0) reduce::apply(op.dtype, op.op, data, left, staging_.data(), moved / unit);
          break;
        }
      }
      if (moved == 0) continue;
      op.done += moved;
      progressed = true;
      if (op.done == op.bytes) --remaining;
    }
    if (remaining == 0 || progressed) continue;
    if (!network_->wait(rank_, seen, deadline.at())) {
      network_->throwIfBroken();
      std::ostringstream what;
      what << "fake mesh rank " << rank_ << ": timed out waiting on";
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const transport::Op& op = ops[i];
        if (op.done == op.bytes) continue;
        what << " [op " << i << (op.kind == Kind::kSend ? " send to " : " receive from ") << op.peer << ": "
             << op.done << "/" << op.bytes << " bytes]";
      }
      brokenBy_ = what.str();
      throw TimeoutError(brokenBy_);
    }
  }
}

void FakeMesh::abort(int lostRank, const std::string& reason) {
  network_->breakAll(lostRank, "rank " + std::to_string(rank_) + " aborted (lost rank " +
                                   std::to_string(lostRank) + "): " + reason);
}

FakeJob::FakeJob(int size, std::size_t capacity, std::vector<int> hosts)
    : network_(std::make_shared<FakeNetwork>(size, capacity)),
      scratch_(static_cast<std::size_t>(size)),
      costs_(static_cast<std::size_t>(size)) {
  for (int r = 0; r < size; ++r) {
    meshes_.push_back(std::make_unique<FakeMesh>(network_, r, hosts));
    topologies_.push_back(collectives::Topology::of(meshes_.back()->hostIndices(), r));
  }
  for (int r = 0; r < size; ++r) threads_.emplace_back([this, r] { serve(r); });
}

FakeJob::~FakeJob() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  changed_.notifyAll();
  for (auto& t : threads_) t.join();
}

void FakeJob::run(const Task& fn, std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  task_ = &fn;
  deadline_ = Deadline::after(timeout);
  busy_ = size();
  ++generation_;
  changed_.notifyAll();
  changed_.wait(mu_, [&]() GYRE_REQUIRES(mu_) { return busy_ == 0; });
  task_ = nullptr;
}

void FakeJob::serve(int r) {
  const auto i = static_cast<std::size_t>(r);
  std::uint64_t seen = 0;
  for (;;) {
    const Task* task = nullptr;
    Deadline deadline = Deadline::never();
    {
      MutexLock lock(mu_);
      changed_.wait(mu_, [&]() GYRE_REQUIRES(mu_) { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      task = task_;
      deadline = deadline_;
    }
    collectives::Context c{*meshes_[i], deadline, scratch_[i], costs_[i]};
    c.topology = &topologies_[i];
    try {
      (*task)(c, r);
    } catch (const std::exception& e) {
      meshes_[i]->abort(r, e.what());
      ADD_FAILURE() << "rank " << r << " threw: " << e.what();
    }
    MutexLock lock(mu_);
    if (--busy_ == 0) changed_.notifyAll();
  }
}

}  // namespace gyre::test
