// A Channel over MPI point-to-point messages with one peer, on the MPI communicator of the
// gyre communicator (Group).
//
// Each Op is cut into segments of kSegmentBytes (the last one shorter), each sent as one MPI
// message with MPI_Isend and taken with MPI_Irecv. Both ends cut an op at the same offsets, so
// the k-th message of an op has the same size on both; a receive checks that it does. A segment
// is posted only when it lies wholly below the op's limit (its `after` dependency), and at most
// kWindow segments per direction are in flight. op.done advances over the segments that have
// completed, in order: for a send, bytes whose buffer MPI has released; for a receive, bytes
// that have landed (and, for kRecvReduce, been reduced from a staging buffer into the
// destination with the reduce kernels). So a dependent op sees whole segments at a time.
//
// Messages of one op share a tag: the number of ops started so far in that direction with this
// peer (modulo MPI_TAG_UB + 1), which both ends count alike because every send op is taken by
// exactly one receive op. So the messages of consecutive ops (and consecutive collectives) never
// match each other's receives, and MPI's non-overtaking rule orders the segments within an op.
//
// MPI progresses only inside MPI calls, and there is no descriptor to poll: Mesh keeps calling
// progressSend/progressRecv, which test the requests, while it waits.
//
// Thread-safety: as any Channel, one thread at a time (Mesh::run is serialized). MPI calls are
// made under Environment::lock().
#pragma once

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/channel.h"
#include "transport/mpi/mpi_group.h"

namespace gyre::transport::mpi {

class MpiChannel final : public Channel {
 public:
  static constexpr std::size_t kSegmentBytes = 512 * 1024;
  static constexpr int kWindow = 4;

  MpiChannel(std::shared_ptr<Group> group, int peer);
  // Cancels what is still in flight (only after a failure: a finished op has none).
  ~MpiChannel() override;
  MpiChannel(const MpiChannel&) = delete;
  MpiChannel& operator=(const MpiChannel&) = delete;

  std::size_t progressSend(Op& op, std::size_t limit) override;
  std::size_t progressRecv(Op& op, std::size_t limit) override;
  int pollFd() const override { return -1; }
  Transport kind() const override { return Transport::kMpi; }
  // Tells the Environment, so that gyre does not wait in MPI_Finalize for a process that is gone.
  void meshBroken() override { Environment::noteFailure(); }

 private:
  struct Segment {
    MPI_Request request = MPI_REQUEST_NULL;
    std::size_t begin = 0;
    std::size_t end = 0;
  };
  // One direction: the current op's segments in flight, oldest first, in a ring of kWindow.
  struct Stream {
    bool sending = false;
    bool active = false;        // an op is under way
    std::uint64_t started = 0;  // ops started so far; the current op's tag derives from it
    int tag = 0;
    std::size_t posted = 0;  // bytes [0, posted) of the current op have a request
    std::array<Segment, kWindow> inFlight;
    int first = 0;
    int count = 0;
  };

  std::size_t progress(Stream& s, Op& op, std::size_t limit);
  // Posts the segments below `limit` that fit in the window.
  void post(Stream& s, Op& op, std::size_t limit);
  // Tests the segments in flight, oldest first; returns how many at the front have finished.
  int test(Stream& s, const Op& op);
  // Reduces (kRecvReduce) and releases the first `finished` segments; returns their bytes.
  std::size_t retire(Stream& s, Op& op, int finished);
  std::uint8_t* staging(std::size_t begin);
  [[noreturn]] void fail(int code, const char* what, const Segment& segment, const Op& op) const;
  void cancel(Stream& s);

  std::shared_ptr<Group> group_;
  int peer_;
  Stream send_;
  Stream recv_;
  // kWindow segments for receives that reduce; allocated on first use.
  std::unique_ptr<std::uint8_t[]> staging_;
};

}  // namespace gyre::transport::mpi
