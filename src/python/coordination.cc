#include "python/coordination.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include <pybind11/pybind11.h>

#include <optional>

#include "gyre/torch/broadcast.h"

namespace gyre::python {
namespace {

std::uint64_t hashName(const char* name) {
  if (name == nullptr || *name == '\0') return 0;
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* c = name; *c != '\0'; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return h == 0 ? 1 : h;
}

template <std::size_t N>
void copyText(char (&to)[N], const std::string& from) {
  const std::size_t n = std::min(from.size(), N - 1);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

template <std::size_t N>
std::string textOf(const char (&from)[N]) {
  return std::string(from, strnlen(from, N));
}

std::string_view kindName(CallKind kind) {
  switch (kind) {
    case CallKind::kAllreduce: return "allreduce";
    case CallKind::kBroadcast: return "broadcast";
    case CallKind::kAllgather: return "allgather";
    case CallKind::kReduceScatter: return "reducescatter";
    case CallKind::kAlltoall: return "alltoall";
    case CallKind::kBarrier: return "barrier";
    case CallKind::kOptimizer: return "DistributedOptimizer's reduction";
    case CallKind::kBroadcastTensors: return "broadcast_parameters";
    case CallKind::kJoin: return "join";
    case CallKind::kRefused: return "a refused call";
    case CallKind::kNone: break;
  }
  return "nothing";
}

// What a joined rank takes part in (JoinRound::Then::kTakePart, kOptimizer).
bool runsWithJoined(CallKind kind) {
  return kind == CallKind::kAllreduce || kind == CallKind::kReduceScatter || kind == CallKind::kAllgather ||
         kind == CallKind::kBroadcast || kind == CallKind::kBarrier || kind == CallKind::kOptimizer;
}

bool reduces(CallKind kind) {
  return kind == CallKind::kAllreduce || kind == CallKind::kReduceScatter;
}

// Dimension 0 may differ between ranks (allgather, alltoall): the rest must match.
bool rowsMayDiffer(CallKind kind) {
  return kind == CallKind::kAllgather || kind == CallKind::kAlltoall;
}

bool sameShape(const CallDescriptor& a, const CallDescriptor& b) {
  if (a.ndim != b.ndim) return false;
  const int dims = std::min<int>(a.ndim, CallDescriptor::kShapeDims);
  for (int d = rowsMayDiffer(a.kind) ? 1 : 0; d < dims; ++d)
    if (a.shape[d] != b.shape[d]) return false;
  return rowsMayDiffer(a.kind) ? a.rowElements == b.rowElements : a.numel == b.numel;
}

// The first way `b` differs from `a` ("data types"), or empty when it does not.
std::string difference(const CallDescriptor& a, const CallDescriptor& b) {
  if (a.kind != b.kind) return "operations";
  if (a.nameHash != 0 && b.nameHash != 0 && a.nameHash != b.nameHash) return "names";
  if (a.kind == CallKind::kBarrier) return "";
  if (a.kind == CallKind::kOptimizer) return a.optimizer == b.optimizer ? "" : "optimizers";
  if (a.kind == CallKind::kBroadcastTensors)
    return a.numel != b.numel ? "numbers of tensors" : a.root != b.root ? "broadcast root ranks" : "";
  if (a.dtype != b.dtype) return "data types";
  if (reduces(a.kind) && a.op != b.op) return "reduction ops";
  if (!sameShape(a, b)) return a.kind == CallKind::kAllgather ? "allgather tensor shapes" : "tensor shapes";
  if (a.kind == CallKind::kBroadcast && a.root != b.root) return "broadcast root ranks";
  if (a.prescale != b.prescale) return "prescale factors";
  if (a.postscale != b.postscale) return "postscale factors";
  return "";
}

[[noreturn]] void mismatch(const CallDescriptor& mine, const std::string& what) {
  throw CallMismatch("gyre." + textOf(mine.call) + ": " + what);
}

}  // namespace

CallDescriptor describeCall(CallKind kind, const char* call) {
  CallDescriptor d;
  d.kind = kind;
  copyText(d.call, call);
  return d;
}

CallDescriptor describeCall(CallKind kind, const char* call, const at::Tensor& tensor, const char* name) {
  CallDescriptor d = describeCall(kind, call);
  d.dtype = static_cast<std::uint8_t>(gyre::torch::toDataType(tensor.scalar_type()));
  d.scalarType = static_cast<std::int32_t>(tensor.scalar_type());
  const at::Tensor t = tensor.dim() == 0 && rowsMayDiffer(kind) ? tensor.reshape({1}) : tensor;
  d.ndim = static_cast<std::int32_t>(t.dim());
  for (int i = 0; i < std::min<int>(d.ndim, CallDescriptor::kShapeDims); ++i) d.shape[i] = t.size(i);
  d.numel = t.numel();
  d.rowElements = 1;
  for (int i = 1; i < d.ndim; ++i) d.rowElements *= t.size(i);
  d.nameHash = hashName(name);
  if (name != nullptr) copyText(d.detail, name);
  return d;
}

std::string toString(const CallDescriptor& d) {
  std::ostringstream out;
  out << (d.call[0] != '\0' ? textOf(d.call) : std::string(kindName(d.kind)));
  if (d.kind == CallKind::kRefused) return out.str() + ", refused: " + textOf(d.detail);
  if (d.kind == CallKind::kJoin || d.kind == CallKind::kBarrier) return out.str() + "()";
  if (d.kind == CallKind::kBroadcastTensors) {
    out << "(" << d.numel << " tensors, root " << d.root << ")";
    return out.str();
  }
  if (d.kind == CallKind::kOptimizer) {
    out << "(DistributedOptimizer #" << d.optimizer << ")";
    return out.str();
  }
  out << "(" << toString(static_cast<DataType>(d.dtype)) << " [";
  for (int i = 0; i < d.ndim; ++i) {
    if (i > 0) out << ", ";
    if (i < CallDescriptor::kShapeDims) {
      out << d.shape[i];
    } else {
      out << "...";
      break;
    }
  }
  out << "]";
  if (reduces(d.kind)) out << ", " << toString(static_cast<ReduceOp>(d.op));
  if (d.kind == CallKind::kBroadcast) out << ", root " << d.root;
  if (d.prescale != 1.0) out << ", prescale " << d.prescale;
  if (d.postscale != 1.0) out << ", postscale " << d.postscale;
  if (d.nameHash != 0) out << ", name '" << textOf(d.detail) << "'";
  out << ")";
  return out.str();
}

std::vector<CallDescriptor> exchange(Communicator& comm, const CallDescriptor& mine) {
  std::vector<CallDescriptor> all(static_cast<std::size_t>(comm.size()));
  if (comm.size() == 1) {
    all[0] = mine;
    return all;
  }
  CollectiveOptions o;
  o.dtype = DataType::kUInt8;
  comm.allgather(&mine, all.data(), sizeof(CallDescriptor), o);
  return all;
}

std::vector<CallDescriptor> coordinate(Communicator& comm, const CallDescriptor& mine) {
  std::vector<CallDescriptor> all = exchange(comm, mine);
  const int p = comm.size();
  // Every rank reads the same descriptors in the same order, so all raise the same error.
  for (int r = 0; r < p; ++r)
    if (all[r].kind == CallKind::kRefused)
      mismatch(mine, "rank " + std::to_string(r) + "'s own call was refused (" + textOf(all[r].detail) +
                         "), so no rank ran " + textOf(mine.call) + "; the next call can go on");
  int reference = -1;
  for (int r = 0; r < p && reference < 0; ++r)
    if (all[r].kind != CallKind::kJoin) reference = r;
  for (int r = reference + 1; r < p; ++r) {
    if (all[r].kind == CallKind::kJoin) continue;
    const std::string what = difference(all[reference], all[r]);
    if (!what.empty())
      mismatch(mine, "Mismatched " + what + ": rank " + std::to_string(reference) + " called " +
                         toString(all[reference]) + ", rank " + std::to_string(r) + " called " + toString(all[r]) +
                         "; nothing was sent, the next call can go on");
  }
  for (int r = 0; r < p; ++r) {
    if (all[r].kind != CallKind::kJoin) continue;
    if (mine.kind == CallKind::kBroadcast && mine.root == r)
      mismatch(mine, "the root rank " + std::to_string(r) + " has joined (gyre.join) and has nothing to send");
    if (mine.kind == CallKind::kOptimizer &&
        (mine.optimizer >= 64 || ((all[r].nameHash >> mine.optimizer) & 1) == 0))
      mismatch(mine, "rank " + std::to_string(r) + " has joined (gyre.join) without DistributedOptimizer #" +
                         std::to_string(mine.optimizer) + " (it was garbage-collected there): keep the optimizer "
                         "alive until join() returns");
    if (!runsWithJoined(mine.kind))
      mismatch(mine, "rank " + std::to_string(r) + " has joined (gyre.join); " + textOf(mine.call) +
                         " does not run with joined ranks");
  }
  return all;
}

void refuse(Communicator& comm, const char* call, const std::string& error) {
  CallDescriptor d = describeCall(CallKind::kRefused, call);
  copyText(d.detail, error);
  exchange(comm, d);
}

JoinRound readJoinRound(const std::vector<CallDescriptor>& all) {
  JoinRound round;
  const int p = static_cast<int>(all.size());
  std::vector<int> active;
  for (int r = 0; r < p; ++r)
    if (all[r].kind != CallKind::kJoin) active.push_back(r);
  if (active.empty()) {
    // The last to join are those in their first round of join() now; the highest of them.
    round.then = JoinRound::Then::kDone;
    round.lastJoined = p - 1;
    for (int r = p - 1; r >= 0; --r)
      if (all[r].root == 1) {
        round.lastJoined = r;
        break;
      }
    return round;
  }
  const CallDescriptor& ref = all[active.front()];
  // The active ranks raise where they disagree, refuse, or cannot run with joined ranks.
  for (int r : active)
    if (all[r].kind == CallKind::kRefused || !difference(ref, all[r]).empty()) return round;
  if (!runsWithJoined(ref.kind)) return round;
  if (ref.kind == CallKind::kBroadcast && (ref.root < 0 || ref.root >= p || all[ref.root].kind == CallKind::kJoin))
    return round;
  if (ref.kind == CallKind::kOptimizer)
    for (int r = 0; r < p; ++r)  // the active ranks raise when a joined rank lacks the optimizer
      if (all[r].kind == CallKind::kJoin && (ref.optimizer >= 64 || ((all[r].nameHash >> ref.optimizer) & 1) == 0))
        return round;
  round.call = ref;
  round.then = ref.kind == CallKind::kOptimizer ? JoinRound::Then::kOptimizer : JoinRound::Then::kTakePart;
  round.optimizer = ref.optimizer;
  return round;
}

}  // namespace gyre::python

namespace gyre::python {

bool Coordinator::Task::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

void Coordinator::Task::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

Coordinator::~Coordinator() {
  // Without the GIL: the queued calls may need it to release the tensors they hold.
  std::optional<pybind11::gil_scoped_release> release;
  if (Py_IsInitialized() && PyGILState_Check()) release.emplace();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Coordinator::awaitTurn(std::unique_lock<std::mutex>& lock, std::uint64_t ticket) {
  cv_.wait(lock, [&] { return finished_ == ticket; });
}

void Coordinator::finished(std::unique_lock<std::mutex>& lock) {
  ++finished_;
  lock.unlock();
  cv_.notify_all();
  lock.lock();
}

void Coordinator::runInOrder(const std::function<void()>& call) {
  std::unique_lock lock(mu_);
  const std::uint64_t ticket = issued_++;
  awaitTurn(lock, ticket);
  lock.unlock();
  try {
    call();
  } catch (...) {
    lock.lock();
    finished(lock);
    throw;
  }
  lock.lock();
  finished(lock);
}

std::shared_ptr<Coordinator::Task> Coordinator::submit(std::function<void()> call) {
  auto task = std::make_shared<Task>();
  task->run_ = std::move(call);
  {
    std::lock_guard lock(mu_);
    // The thread first: should it fail to start, no ticket is taken that would never finish.
    if (!thread_.joinable()) thread_ = std::thread([this] { threadLoop(); });
    task->ticket_ = issued_++;
    queue_.push_back(task);
  }
  cv_.notify_all();
  return task;
}

void Coordinator::threadLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !queue_.empty() || stop_; });
    if (queue_.empty()) return;  // stopped, nothing left
    std::shared_ptr<Task> task = queue_.front();
    awaitTurn(lock, task->ticket_);
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      task->run_();
    } catch (...) {
      error = std::current_exception();
    }
    task->run_ = nullptr;  // what it kept alive goes now
    {
      std::lock_guard done(task->mu_);
      task->error_ = error;
      task->done_ = true;
    }
    task->cv_.notify_all();
    lock.lock();
    finished(lock);
  }
}

}  // namespace gyre::python
