// Scratch: one grow-only buffer per communicator, 64-byte aligned (a cache line, and enough for
// any vector width the reduce kernels use). Algorithms take what they need with a single get()
// per call and carve it, since a larger get() replaces the buffer.
#include "collectives/context.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/check.h"

namespace gyre::collectives {

namespace {
constexpr std::size_t kAlignment = 64;
}  // namespace

void Scratch::FreeDeleter::operator()(void* p) const {
  std::free(p);
}

void* Scratch::get(std::size_t bytes) {
  if (data_ != nullptr && bytes <= capacity_) return data_.get();
  // aligned_alloc wants a multiple of the alignment; never hand out a null pointer for 0 bytes.
  std::size_t size = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (size == 0) size = kAlignment;
  GYRE_ARG_CHECK(size >= bytes, "scratch size ", bytes, " overflows");
  data_.reset();  // free first: the old contents are not kept, and peak memory stays lower
  capacity_ = 0;
  void* p = std::aligned_alloc(kAlignment, size);
  if (p == nullptr) GYRE_THROW(Error, "out of memory allocating ", size, " bytes of collective scratch");
  data_.reset(p);
  capacity_ = size;
  return p;
}

Context Context::within(std::span<const int> group, CostModel& groupCost) const {
  const int me = mesh.rank();
  const auto at = std::find(group.begin(), group.end(), me);
  GYRE_ENFORCE(at != group.end(), "rank ", me, " runs a group it is not in");
  return Context{
      mesh, deadline, scratch, groupCost, guard, book, topology, group, static_cast<int>(at - group.begin())};
}

void Context::run(std::vector<transport::Op>& ops) {
  if (members.empty()) return runOnMesh(ops);
  for (transport::Op& op : ops) op.peer = members[static_cast<std::size_t>(op.peer)];
  try {
    runOnMesh(ops);
  } catch (...) {
    restorePeers(ops);
    throw;
  }
  restorePeers(ops);
}

void Context::restorePeers(std::vector<transport::Op>& ops) const {
  for (transport::Op& op : ops)
    op.peer = static_cast<int>(std::find(members.begin(), members.end(), op.peer) - members.begin());
}

void Context::runOnMesh(std::vector<transport::Op>& ops) {
  if (guard == nullptr) return mesh.run(ops, deadline);
  using transport::Op;
  const int p = mesh.size();
  GuardBook& b = *book;
  if (b.guarded.size() != static_cast<std::size_t>(p)) {
    b.guarded.assign(p, 0);
    b.received.assign(p, CallGuard{});
  }
  b.withGuards.clear();
  b.moved.assign(ops.size(), -1);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    Op op = ops[i];
    std::uint8_t& state = b.guarded[op.peer];
    if (op.kind == Op::Kind::kSend && !(state & 1)) {
      b.withGuards.push_back(Op::send(op.peer, guard, sizeof(CallGuard)));
      b.withGuards.back().more = true;  // out with the first data, in one packet
      state |= 1;
    } else if (op.kind != Op::Kind::kSend && !(state & 2)) {
      Op check = Op::recv(op.peer, &b.received[op.peer], sizeof(CallGuard));
      check.expect = guard;
      // Not read before the data could be: a guard receive no earlier than its data's would
      // add a system call to every pass of a waiting rank (chained receive-reduces).
      if (op.after >= 0) check.after = b.moved[op.after];
      b.withGuards.push_back(check);
      state |= 2;
    }
    if (op.after >= 0) op.after = b.moved[op.after];
    b.moved[i] = static_cast<int>(b.withGuards.size());
    b.withGuards.push_back(op);
  }
  try {
    mesh.run(b.withGuards, deadline);
  } catch (const transport::CallMismatch& e) {
    // Detected here: say what differed, and tell every rank. Reported by a peer: pass it on.
    const int peer = e.peer();
    if (e.reported() || peer < 0 || peer >= p) throw;
    std::ostringstream what;
    what << "the ranks made different collective calls: rank " << mesh.rank() << " called "
         << describe(*guard) << ", rank " << peer << " "
         << (b.received[peer].magic == CallGuard{}.magic ? "called " : "sent ") << describe(b.received[peer]);
    mesh.reportMismatch(what.str());
    throw transport::CallMismatch(what.str(), peer, false);
  }
  for (std::size_t i = 0; i < ops.size(); ++i) ops[i].done = b.withGuards[b.moved[i]].done;
}

}  // namespace gyre::collectives
