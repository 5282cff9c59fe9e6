// Horovod's coordination for gyre's Python API: before each collective of `import gyre` (and of
// gyre.torch's DistributedOptimizer, once per reduction), every rank of the process set announces
// the call it makes in a fixed-size CallDescriptor, and all of them are exchanged (one allgather
// of 256 bytes per rank). Because the exchange has the same size whatever the call, it cannot go
// out of step, so what Horovod's coordinator refuses before anything moves, gyre refuses too:
//
//   - ranks that make different calls (operation, name, dtype, shape, reduction, root, factors)
//     get a CallMismatch on every rank, naming the first rank that differs and both calls, and
//     the next call works: nothing was sent;
//   - a rank whose call was refused by its own checks (a bad dtype, a non-contiguous tensor for
//     an in-place call, a root outside the set) still takes part in the exchange (refuse()), so
//     the others raise a CallMismatch naming that rank and its error instead of waiting for it;
//   - a rank that has run out of data calls join() (hvd.join): it announces kJoin in every round
//     and takes part in what the others do, with zeros in allreduces and reduce-scatters (the
//     identity for min, max and product), no rows in allgathers, a barrier's arrival, and its
//     DistributedOptimizer's reduction with zero gradients (Horovod's semantics: the average is
//     still over the whole set). A broadcast whose root has joined and an alltoall with a joined
//     rank are refused on the ranks that call them. join() returns, on every rank, once all have
//     joined, the last rank to join.
//
// The cost is that one exchange per call, a small collective before the call's own (about 2-3 us
// between two ranks of a host); allgather uses the shapes it carries instead of a shape exchange
// of its own. torch.distributed's backend (process_group.h) does not coordinate, as torch's own
// backends do not.
//
// Thread-safety: the calls on one communicator must be made in the same order on every rank, as
// every collective's; exchange() releases nothing itself and must be called without the GIL.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gyre/communicator.h"
#include "gyre/types.h"

namespace gyre::python {

enum class CallKind : std::uint8_t {
  kNone = 0,
  kAllreduce,
  kBroadcast,
  kAllgather,
  kReduceScatter,
  kAlltoall,
  kBarrier,
  kOptimizer,  // a DistributedOptimizer's reduction (its buckets), `optimizer` its creation index
  kBroadcastTensors,  // broadcast_parameters, broadcast_optimizer_state: several broadcasts
  kJoin,       // hvd.join(): this rank has no data left
  kRefused,    // this rank's own checks refused its call; `detail` holds the error
};

// What a rank announces; 256 bytes whatever the call.
struct CallDescriptor {
  static constexpr int kShapeDims = 6;
  std::uint8_t magic = 0x6B;
  CallKind kind = CallKind::kNone;
  std::uint8_t dtype = 0;     // DataType
  std::uint8_t op = 0;        // ReduceOp, reductions only
  std::int32_t root = 0;      // broadcast; kJoin: 1 in a rank's first round of join()
  std::int32_t ndim = 0;
  std::int32_t optimizer = 0;
  std::int64_t shape[kShapeDims] = {};  // the first kShapeDims dimensions
  std::int64_t numel = 0;
  std::int64_t rowElements = 0;  // elements per index of dimension 0 (allgather, alltoall)
  double prescale = 1.0;
  double postscale = 1.0;
  std::uint64_t nameHash = 0;  // 0: no name given; kJoin: a bit per DistributedOptimizer it has
  std::int32_t scalarType = 0;  // the tensor's torch dtype (c10::ScalarType)
  std::int32_t pad = 0;
  char call[32] = {};          // "allreduce_async", for messages
  char detail[112] = {};       // the tensor's name (truncated), or kRefused's error
};
static_assert(sizeof(CallDescriptor) == 256);

// Ranks that made different calls, or a call another rank refused: a Python RuntimeError that
// is also gyre.InvalidArgumentError (gyre.CallMismatchError), raised on every rank.
class CallMismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A descriptor of a call on `tensor` (its dtype, shape, name).
CallDescriptor describeCall(CallKind kind, const char* call, const at::Tensor& tensor, const char* name);
CallDescriptor describeCall(CallKind kind, const char* call);

// "allreduce_async(float32 [4, 3], average, name 'grad.w')".
std::string toString(const CallDescriptor& d);

// Every rank's descriptor of this round, in rank order. Collective over `comm`; no GIL.
std::vector<CallDescriptor> exchange(Communicator& comm, const CallDescriptor& mine);

// The round for a call of this rank: exchanges `mine` and throws CallMismatch when a rank that
// has not joined made a different call or refused its own, or when joined ranks cannot take part
// (a broadcast from a joined root, an alltoall). Returns every rank's descriptor. No GIL.
std::vector<CallDescriptor> coordinate(Communicator& comm, const CallDescriptor& mine);

// A rank whose own checks refused its call (`error`) tells the others, so that they raise
// instead of waiting. Collective; no GIL. Never throws for the others' descriptors.
void refuse(Communicator& comm, const char* call, const std::string& error);

// The calls of gyre's Python API on one communicator, in the order they were made: a blocking
// call runs on its caller's thread once every call made before it has finished (no hand-off when
// none is pending), an asynchronous one on the coordinator's own thread, in its turn. So an
// *_async call returns at once, as Horovod's, and coordinates with the other ranks (coordinate())
// in the background, while every rank's exchanges stay in the order of its calls. Calls are
// bounded by their communicator's time-out; the destructor runs what is queued.
class Coordinator {
 public:
  // One call queued: done once it has run; its error, if it threw.
  class Task {
   public:
    bool done() const;
    // Waits for it to run; rethrows what it threw.
    void wait();

   private:
    friend class Coordinator;
    std::function<void()> run_;
    std::uint64_t ticket_ = 0;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;
    std::exception_ptr error_;
  };

  explicit Coordinator(std::shared_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  Communicator& communicator() const { return *comm_; }
  const std::shared_ptr<Communicator>& shared() const { return comm_; }

  // Runs `call` here, after every call submitted before it. No GIL.
  void runInOrder(const std::function<void()>& call);
  // Queues `call` to run after the ones before it, on the coordinator's thread.
  std::shared_ptr<Task> submit(std::function<void()> call);

 private:
  void threadLoop();
  // Waits (with `lock`) for the calls before `ticket` to finish.
  void awaitTurn(std::unique_lock<std::mutex>& lock, std::uint64_t ticket);
  void finished(std::unique_lock<std::mutex>& lock);

  std::shared_ptr<Communicator> comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  std::uint64_t issued_ = 0;    // tickets handed out
  std::uint64_t finished_ = 0;  // calls finished: the next to run holds ticket finished_
  bool stop_ = false;
  std::thread thread_;  // started by the first submit()
};

// Where a round of join() leaves the joined rank (decided from every rank's descriptor).
struct JoinRound {
  enum class Then {
    kDone,         // every rank has joined: `lastJoined` is the last to
    kOptimizer,    // a DistributedOptimizer's reduction: `optimizer`, by creation index
    kTakePart,     // the others' call, `call` (the first active rank's descriptor)
    kSkip,         // the others' call fails on their side (mismatch, refusal, not with joined ranks)
  } then = Then::kSkip;
  int lastJoined = -1;
  int optimizer = -1;
  CallDescriptor call;
};
JoinRound readJoinRound(const std::vector<CallDescriptor>& all);

}  // namespace gyre::python
