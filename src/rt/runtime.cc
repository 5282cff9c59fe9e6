// The Runtime's construction and end, and its tasks. Impl's parts are in runtime_impl.h.
#include "gyre/rt/runtime.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "gyre/errors.h"
#include "rt/runtime_impl.h"
#include "rt/store_keys.h"

namespace gyre::rt {
namespace {

int threadsOf(const RuntimeOptions& options) {
  if (options.threads < 0) throw InvalidArgument("gyre::rt: RuntimeOptions::threads must not be negative");
  if (options.threads > 0) return options.threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

const RuntimeOptions& checked(const RuntimeOptions& o) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    throw InvalidArgument("gyre::rt: rank " + std::to_string(o.rank) + " is not a rank of a runtime of " +
                          std::to_string(o.size) + " processes");
  if (o.size > 1 && (!o.store || o.secret.empty()))
    throw InvalidArgument("gyre::rt: a runtime of " + std::to_string(o.size) +
                          " processes needs the job's store and secret (RuntimeOptions::store, ::secret)");
  return o;
}

}  // namespace

namespace detail {

Done fulfil(std::shared_ptr<Promise> promise) {
  return [promise = std::move(promise)](Bytes value, std::exception_ptr error) {
    if (error) {
      promise->setError(std::move(error));
    } else {
      promise->setValue(std::move(value));
    }
  };
}

}  // namespace detail

Runtime::Impl::Impl(const RuntimeOptions& o, Runtime* self) : o_(checked(o)), node_(threadsOf(o), self) {
  if (!o_.store) o_.store = createMemoryStore();  // a runtime of one keeps its books in memory
  placement_.offer(node_.threads());
  sharedPrefixes_.publish(shared_.prefix());
  if (o_.size == 1) return;
  server_ = std::make_unique<detail::Server>(node_, o_.secret, o_.host,
                                             "gyre::rt process " + std::to_string(o_.rank));
  o_.store->setString(detail::addressKey(o_.rank), server_->address());
}

Runtime::Impl::~Impl() {
  server_.reset();  // no more calls from the others
  node_.stop();     // runs what it has queued, which may still call the others
  peers_.close();
}

Runtime::Runtime(const RuntimeOptions& options) : impl_(std::make_unique<Impl>(options, this)) {}
Runtime::~Runtime() = default;

Runtime* Runtime::current() {
  return static_cast<Runtime*>(detail::currentContext());
}

int Runtime::rank() const {
  return impl_->o_.rank;
}
int Runtime::size() const {
  return impl_->o_.size;
}
int Runtime::threads() const {
  return impl_->node_.threads();
}

std::shared_ptr<detail::Promise> Runtime::submitTask(const std::string& function, Bytes args,
                                                     const CallOptions& options) {
  detail::function(function);  // unregistered: thrown here, at the call
  if (options.rank >= size())
    throw InvalidArgument("gyre::rt: CallOptions::rank " + std::to_string(options.rank) +
                          " is not a process of the " + std::to_string(size()));
  auto promise = std::make_shared<detail::Promise>();
  wire::Message m;
  m.type = static_cast<std::uint8_t>(wire::Type::kTask);
  m.name = function;
  m.payload = std::move(args);
  // A task placed in turn runs again elsewhere when its process is lost; one placed on a rank not.
  const bool pinned = options.rank >= 0;
  impl_->peers_.send(
      std::move(m),
      [this, rank = options.rank, pinned] { return pinned ? rank : impl_->placement_.spread(); },
      pinned ? 0 : options.maxRetries, detail::fulfil(promise));
  const std::chrono::milliseconds timeout =
      options.timeout.count() > 0 ? options.timeout : impl_->o_.callTimeout;
  if (timeout.count() > 0)
    impl_->deadlines_.watch(
        promise, timeout,
        function + (options.rank >= 0 ? " on process " + std::to_string(options.rank) : ""));
  return promise;
}

}  // namespace gyre::rt
