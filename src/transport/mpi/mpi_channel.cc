#include "transport/mpi/mpi_channel.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/check.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/reduce.h"

namespace gyre::transport::mpi {
namespace {

// How long a destructor waits for a cancelled receive to finish (see cancel()).
constexpr auto kCancelGrace = std::chrono::milliseconds(200);

}  // namespace

MpiChannel::MpiChannel(std::shared_ptr<Group> group, int peer) : group_(std::move(group)), peer_(peer) {
  send_.sending = true;
}

MpiChannel::~MpiChannel() {
  if ((send_.count == 0 && recv_.count == 0) || Environment::finalized()) return;
  auto lock = group_->env().lock();
  cancel(send_);
  cancel(recv_);
}

std::unique_ptr<Channel> createChannel(std::shared_ptr<Group> group, int peer) {
  return std::make_unique<MpiChannel>(std::move(group), peer);
}

std::size_t MpiChannel::progressSend(Op& op, std::size_t limit) {
  return progress(send_, op, limit);
}

std::size_t MpiChannel::progressRecv(Op& op, std::size_t limit) {
  return progress(recv_, op, limit);
}

std::size_t MpiChannel::progress(Stream& s, Op& op, std::size_t limit) {
  auto lock = group_->env().lock();
  if (!s.active) {
    const auto tags = static_cast<std::uint64_t>(group_->env().tagUpperBound()) + 1;
    s.active = true;
    s.tag = static_cast<int>(s.started++ % tags);
    s.posted = 0;
  }
  post(s, op, limit);
  const int finished = test(s, op);
  if (finished == 0) return 0;
  // Reduce without holding the MPI mutex (when there is one): other threads' MPI calls go on.
  const bool relock = lock.owns_lock() && op.kind == Op::Kind::kRecvReduce;
  if (relock) lock.unlock();
  const std::size_t moved = retire(s, op, finished);
  if (relock) lock.lock();
  post(s, op, limit);  // into the window the retired segments freed
  if (op.done == op.bytes) s.active = false;
  return moved;
}

void MpiChannel::post(Stream& s, Op& op, std::size_t limit) {
  auto* base = static_cast<std::uint8_t*>(op.data);
  while (s.count < kWindow && s.posted < op.bytes) {
    // Whole segments only: the peer cuts the op at the same offsets.
    const std::size_t end = std::min(s.posted + kSegmentBytes, op.bytes);
    if (end > limit) break;
    Segment& seg = s.inFlight[(s.first + s.count) % kWindow];
    seg.begin = s.posted;
    seg.end = end;
    const int n = static_cast<int>(end - seg.begin);
    int rc = MPI_SUCCESS;
    if (s.sending) {
      rc = MPI_Isend(base + seg.begin, n, MPI_BYTE, peer_, s.tag, group_->comm(), &seg.request);
    } else {
      void* into = op.kind == Op::Kind::kRecvReduce ? staging(seg.begin) : base + seg.begin;
      rc = MPI_Irecv(into, n, MPI_BYTE, peer_, s.tag, group_->comm(), &seg.request);
    }
    if (rc != MPI_SUCCESS) fail(rc, s.sending ? "MPI_Isend" : "MPI_Irecv", seg, op);
    s.posted = end;
    ++s.count;
  }
}

int MpiChannel::test(Stream& s, const Op& op) {
  int finished = 0;
  for (; finished < s.count; ++finished) {
    Segment& seg = s.inFlight[(s.first + finished) % kWindow];
    if (seg.request == MPI_REQUEST_NULL) continue;  // finished on an earlier call, not yet retired
    int flag = 0;
    MPI_Status status;
    const int rc = MPI_Test(&seg.request, &flag, &status);
    if (rc != MPI_SUCCESS) fail(rc, "MPI_Test", seg, op);
    if (flag == 0) break;
    if (s.sending) continue;
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (static_cast<std::size_t>(got) != seg.end - seg.begin)
      GYRE_THROW(ProtocolError, "rank ", peer_, " sent ", got, " bytes where this rank expected the ",
                 seg.end - seg.begin, "-byte segment at byte ", seg.begin, " of a ", op.bytes,
                 "-byte receive: the ranks' calls differ");
  }
  return finished;
}

std::size_t MpiChannel::retire(Stream& s, Op& op, int finished) {
  std::size_t moved = 0;
  for (int i = 0; i < finished; ++i) {
    const Segment& seg = s.inFlight[s.first];
    const std::size_t n = seg.end - seg.begin;
    if (op.kind == Op::Kind::kRecvReduce) {
      auto* dst = static_cast<std::uint8_t*>(op.data) + seg.begin;
      const auto* other =
          static_cast<const std::uint8_t*>(op.other != nullptr ? op.other : op.data) + seg.begin;
      reduce::apply(op.dtype, op.op, dst, other, staging(seg.begin), n / dtypeSize(op.dtype));
    }
    op.done = seg.end;
    moved += n;
    s.first = (s.first + 1) % kWindow;
    --s.count;
  }
  return moved;
}

std::uint8_t* MpiChannel::staging(std::size_t begin) {
  // Segments finish in order and at most kWindow are in flight, so segment k's slot (k mod
  // kWindow) was retired, and reduced, before segment k is posted into it.
  if (!staging_) staging_ = std::make_unique<std::uint8_t[]>(kWindow * kSegmentBytes);
  return staging_.get() + (begin / kSegmentBytes) % kWindow * kSegmentBytes;
}

void MpiChannel::fail(int code, const char* what, const Segment& seg, const Op& op) const {
  int errorClass = MPI_ERR_OTHER;
  MPI_Error_class(code, &errorClass);
  if (errorClass == MPI_ERR_TRUNCATE)
    GYRE_THROW(ProtocolError, "rank ", peer_, " sent more than the ", seg.end - seg.begin,
               "-byte segment at byte ", seg.begin, " of a ", op.bytes,
               "-byte receive: the ranks' calls differ");
  // Mesh turns this into PeerLostError, after its control connections had their say.
  log::warn("MPI transport: ", what, " with rank ", peer_, " failed: ", errorText(code));
  throw ChannelClosed();
}

void MpiChannel::cancel(Stream& s) {
  // Only after a failure are requests left. An unmatched receive is cancelled; a matched one
  // lands within moments when its sender is alive (and never when it is dead). Either way MPI
  // must not write into memory that is freed after this: wait a little, and if a receive into
  // the staging buffer is still pending, leave the buffer to it.
  const auto until = Clock::now() + kCancelGrace;
  for (int i = 0; i < s.count; ++i) {
    Segment& seg = s.inFlight[(s.first + i) % kWindow];
    if (seg.request == MPI_REQUEST_NULL) continue;
    if (!s.sending) {
      MPI_Cancel(&seg.request);
      int flag = 0;
      while (MPI_Test(&seg.request, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag == 0 &&
             Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (seg.request == MPI_REQUEST_NULL) continue;
    // A send completes, or not, on its own; MPI frees the request then.
    MPI_Request_free(&seg.request);
    if (!s.sending && staging_) {
      log::warn("MPI transport: a receive from rank ", peer_, " did not finish after cancelling; its ",
                kWindow * kSegmentBytes, "-byte staging buffer is left allocated");
      (void)staging_.release();  // deliberately leaked: MPI may still write into it
    }
  }
  s.count = 0;
  s.active = false;
}

}  // namespace gyre::transport::mpi
