// gyre._C's half of gyre.rt (python/gyre/rt/): Ray Core's tasks, actors and objects for Python on
// gyre::rt. A Python task is the registered function pythonTask, an actor the registered class
// PythonActor: both carry pickled bytes (the function or class and its arguments, by
// python/gyre/rt/_executor.py) and run them under the GIL in whichever process the runtime
// places them. Objects put from Python are bytes in shared memory (Runtime::putBuffer), which a
// get on the same host maps read-only (RtBuffer's buffer protocol), without a copy.
#include <torch/extension.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "gyre/rt.h"
#include "python/rt.h"

namespace py = pybind11;

namespace gyre::python {
namespace {

// The executor's functions, imported once (under the GIL) and never released.
py::object executor(const char* name) {
  static py::object* module = new py::object(py::module_::import("gyre.rt._executor"));
  return module->attr(name);
}

// The GIL for one call on a thread of the runtime's pool. The thread's Python thread state is
// made once and kept (pybind11 would make and destroy one per call, a good part of a small task).
class CallGil {
 public:
  CallGil() {
    thread_local bool kept = false;
    if (!kept) {
      gil_.inc_ref();
      kept = true;
    }
  }

 private:
  py::gil_scoped_acquire gil_;
};

}  // namespace

// A Python task: `payload` is (function, args, kwargs) pickled; the answer is the executor's
// status byte and the pickled result or error (python/gyre/rt/_executor.py).
std::string pythonTask(std::string payload) {
  CallGil gil;
  return executor("run_task")(py::bytes(payload)).cast<std::string>();
}

// A Python actor: its constructor builds the instance from (class, args, kwargs) pickled; call()
// runs one method, (name, args, kwargs) pickled. A constructor that raises fails the actor with
// its error and traceback (ActorDiedError at every call).
class PythonActor {
 public:
  explicit PythonActor(std::string payload) {
    CallGil gil;
    py::tuple made = executor("make_actor")(py::bytes(payload));
    if (!made[0].cast<bool>()) throw std::runtime_error(made[1].cast<std::string>());
    instance_ = new py::object(made[1]);
  }
  ~PythonActor() {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    delete instance_;
  }
  PythonActor(const PythonActor&) = delete;
  PythonActor& operator=(const PythonActor&) = delete;

  std::string call(std::string payload) {
    CallGil gil;
    return executor("call_method")(*instance_, py::bytes(payload)).cast<std::string>();
  }

 private:
  py::object* instance_ = nullptr;  // deleted under the GIL
};

}  // namespace gyre::python

GYRE_RT_FUNCTION(gyre::python::pythonTask);
GYRE_RT_ACTOR(gyre::python::PythonActor, std::string);
GYRE_RT_METHOD(gyre::python::PythonActor, call);

namespace gyre::python {
namespace {

using Millis = std::chrono::milliseconds;

// A task's or method's answer on its way.
class RtFuture {
 public:
  explicit RtFuture(rt::Future<std::string> f) : future_(std::move(f)) {}
  // The answer's bytes; GetTimeoutError after `timeoutMs` (< 0: no limit); the call's error.
  py::bytes get(double timeoutMs) {
    std::string bytes;
    {
      py::gil_scoped_release release;
      bytes = timeoutMs < 0 ? future_.get() : future_.get(Millis(static_cast<std::int64_t>(timeoutMs)));
    }
    return py::bytes(bytes);
  }
  bool ready() const { return future_.isCompleted(); }
  const rt::Future<std::string>& future() const { return future_; }

 private:
  rt::Future<std::string> future_;
};

// An object of this runtime's (put from Python): alive while a copy of this is.
struct RtObject {
  rt::ObjectRef<rt::Buffer> ref;
  std::uint64_t id() const { return ref.id(); }
  int owner() const { return ref.owner(); }
};

// Bytes of an object, mapped read-only: a Python buffer (memoryview(buffer)) without a copy.
struct RtBuffer {
  rt::Buffer buffer;
};

rt::ObjectRef<rt::Buffer> refOf(std::uint64_t id, int owner) {
  return rt::unpack<rt::ObjectRef<rt::Buffer>>(rt::pack(std::make_tuple(id, owner)), "an object reference");
}

rt::ActorRef actorOf(const py::tuple& t) {
  rt::ActorRef ref;
  ref.id = t[0].cast<std::uint64_t>();
  ref.rank = t[1].cast<int>();
  ref.callTimeout = Millis(t[2].cast<std::int64_t>());
  ref.maxTaskRetries = t[3].cast<int>();
  return ref;
}

constexpr const char* kActorClass = "gyre::python::PythonActor";

class RtRuntime {
 public:
  RtRuntime(rt::RuntimeOptions options) : store_(options.store) {
    if (!store_) store_ = createMemoryStore();
    options.store = store_;
    py::gil_scoped_release release;
    rt_ = std::make_unique<rt::Runtime>(options);
  }
  ~RtRuntime() {
    py::gil_scoped_release release;  // its threads may be running Python calls: let them finish
    rt_.reset();
  }

  // `keep`: the objects the call's arguments refer to, alive until it answers.
  RtFuture submit(const py::bytes& payload, std::vector<RtObject> keep, int rank, int maxRetries,
                  std::int64_t timeoutMs) {
    rt::CallOptions o;
    o.rank = rank;
    o.maxRetries = maxRetries;
    o.timeout = Millis(timeoutMs);
    rt::Bytes args = rt::pack(std::make_tuple(std::string(payload)));
    py::gil_scoped_release release;
    return kept(rt_->submitTask("gyre::python::pythonTask", std::move(args), o), std::move(keep));
  }

  py::tuple createActor(const py::bytes& payload, int rank, const std::string& host, int maxRestarts,
                        int maxTaskRetries, double cpus, std::int64_t memory, std::int64_t callTimeoutMs,
                        int maxConcurrency) {
    rt::ActorOptions o;
    o.rank = rank;
    o.host = host;
    o.maxRestarts = maxRestarts;
    o.maxTaskRetries = maxTaskRetries;
    o.cpus = cpus;
    o.memoryBytes = memory;
    o.callTimeout = Millis(callTimeoutMs);
    o.maxConcurrency = maxConcurrency;
    rt::Bytes args = rt::pack(std::make_tuple(std::string(payload)));
    rt::ActorRef ref;
    {
      py::gil_scoped_release release;
      ref = rt_->createActor(kActorClass, std::move(args), o);
    }
    return py::make_tuple(ref.id, ref.rank, ref.callTimeout.count(), ref.maxTaskRetries);
  }

  RtFuture call(const py::tuple& actor, const py::bytes& payload, std::vector<RtObject> keep) {
    rt::Bytes args = rt::pack(std::make_tuple(std::string(payload)));
    const rt::ActorRef ref = actorOf(actor);
    py::gil_scoped_release release;
    return kept(rt_->submitMethod(ref, kActorClass, "call", std::move(args)), std::move(keep));
  }

  void kill(const py::tuple& actor) {
    const rt::ActorRef ref = actorOf(actor);
    py::gil_scoped_release release;
    rt_->killActor(ref);
  }

  // The parts (each a buffer: bytes, memoryview, a pickle's out-of-band buffers) one after the
  // other in one object in shared memory.
  RtObject put(const std::vector<py::buffer>& parts) {
    std::vector<py::buffer_info> infos;
    std::vector<std::span<const std::byte>> spans;
    for (const auto& part : parts) {
      infos.push_back(part.request());
      const py::buffer_info& info = infos.back();
      spans.emplace_back(static_cast<const std::byte*>(info.ptr), static_cast<std::size_t>(info.size * info.itemsize));
    }
    py::gil_scoped_release release;
    return RtObject{rt_->putBuffer(spans)};
  }

  RtBuffer get(std::uint64_t id, int owner) {
    const auto ref = refOf(id, owner);
    py::gil_scoped_release release;
    return RtBuffer{rt_->get(ref)};
  }

  // The indices of the futures that are ready once `k` are, or after `timeoutMs` (< 0: no limit).
  std::vector<std::size_t> wait(const std::vector<RtFuture*>& futures, std::size_t k, double timeoutMs) {
    std::vector<std::shared_ptr<rt::detail::Promise>> promises;
    for (const RtFuture* f : futures) promises.push_back(f->future().promise());
    const Millis timeout = timeoutMs < 0 ? Millis(std::chrono::hours(24 * 365)) : Millis(static_cast<std::int64_t>(timeoutMs));
    py::gil_scoped_release release;
    return rt::detail::waitSome(promises, k, timeout);
  }

  static RtFuture kept(std::shared_ptr<rt::detail::Promise> promise, std::vector<RtObject> keep) {
    if (!keep.empty()) promise->onReady([keep = std::move(keep)] {});
    return RtFuture(rt::Future<std::string>(std::move(promise)));
  }

  int rank() const { return rt_->rank(); }
  int size() const { return rt_->size(); }
  int threads() const { return rt_->threads(); }

  // The job's store, for gyre.rt's own keys (named actors, the driver's end).
  void storeSet(const std::string& key, const py::bytes& value) {
    const std::string v = value;
    py::gil_scoped_release release;
    store_->set(key, Store::Bytes(v.begin(), v.end()));
  }
  // The value now stored at `key` when it was absent and `value` was stored, else what is there.
  py::bytes storeCompareSet(const std::string& key, const py::bytes& value) {
    const std::string v = value;
    Store::Bytes now;
    {
      py::gil_scoped_release release;
      now = store_->compareSet(key, {}, Store::Bytes(v.begin(), v.end()));
    }
    return py::bytes(reinterpret_cast<const char*>(now.data()), now.size());
  }
  std::optional<py::bytes> storeGet(const std::string& key) {
    Store::Bytes value;
    {
      py::gil_scoped_release release;
      if (!store_->check({key})) return std::nullopt;
      value = store_->get(key);
    }
    return py::bytes(reinterpret_cast<const char*>(value.data()), value.size());
  }
  bool storeDelete(const std::string& key) {
    py::gil_scoped_release release;
    return store_->deleteKey(key);
  }
  // Blocks until `key` exists (a worker process until the driver's end), polling `everyMs`.
  void storeWait(const std::string& key, std::int64_t everyMs) {
    py::gil_scoped_release release;
    while (!store_->check({key})) std::this_thread::sleep_for(Millis(everyMs));
  }

 private:
  std::shared_ptr<Store> store_;
  std::unique_ptr<rt::Runtime> rt_;
};

// The runtime's options: from the launcher's variables, or explicit (gyre.rt.init starting its
// own worker processes: the driver's TCP store at `storeAddress`).
rt::RuntimeOptions optionsOf(int rank, int size, const std::string& storeAddress, const std::string& secret,
                             int threads, double cpus, std::int64_t memory, bool placeHere) {
  rt::RuntimeOptions o = size > 0 ? rt::RuntimeOptions{} : rt::RuntimeOptions::fromEnvironment();
  if (size > 0) {
    o.rank = rank;
    o.size = size;
    o.secret = secret;
    if (size > 1) o.store = connectTcpStore(storeAddress, secret);
  }
  o.threads = threads;
  o.cpus = cpus;
  o.memoryBytes = memory;
  o.placeHere = placeHere;
  return o;
}

}  // namespace

void bindRt(py::module_& m) {
  auto r = m.def_submodule("rt", "gyre::rt for gyre.rt (python/gyre/rt)");
  static py::exception<rt::RemoteError> remote(r, "RemoteError", PyExc_RuntimeError);
  static py::exception<rt::ActorDiedError> died(r, "ActorDiedError", PyExc_RuntimeError);
  static py::exception<rt::GetTimeoutError> timeout(r, "GetTimeoutError", PyExc_TimeoutError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const rt::RemoteError& e) {
      remote(e.what());
    } catch (const rt::ActorDiedError& e) {
      died(e.what());
    } catch (const rt::GetTimeoutError& e) {
      timeout(e.what());
    }
  });
  py::class_<RtFuture>(r, "Future")
      .def("get", &RtFuture::get, py::arg("timeout_ms") = -1.0)
      .def("ready", &RtFuture::ready);
  py::class_<RtObject>(r, "Object").def_property_readonly("id", &RtObject::id).def_property_readonly("owner", &RtObject::owner);
  py::class_<RtBuffer>(r, "Buffer", py::buffer_protocol()).def_buffer([](RtBuffer& b) {
    return py::buffer_info(const_cast<std::byte*>(b.buffer.data()), 1, py::format_descriptor<std::uint8_t>::format(), 1,
                           {static_cast<py::ssize_t>(b.buffer.size())}, {1}, /*readonly=*/true);
  });
  py::class_<RtRuntime>(r, "Runtime")
      .def(py::init([](int rank, int size, const std::string& store, const std::string& secret, int threads,
                       double cpus, std::int64_t memory, bool placeHere) {
             return std::make_unique<RtRuntime>(
                 optionsOf(rank, size, store, secret, threads, cpus, memory, placeHere));
           }),
           py::arg("rank") = 0, py::arg("size") = 0, py::arg("store") = "", py::arg("secret") = "",
           py::arg("threads") = 0, py::arg("cpus") = 0.0, py::arg("memory") = 0, py::arg("place_here") = true,
           "size 0: the launcher's processes (a runtime of one without a launcher); else explicit")
      .def("submit", &RtRuntime::submit, py::arg("payload"), py::arg("keep"), py::arg("rank") = -1,
           py::arg("max_retries") = 3,
           py::arg("timeout_ms") = 0)
      .def("create_actor", &RtRuntime::createActor, py::arg("payload"), py::arg("rank") = -1, py::arg("host") = "",
           py::arg("max_restarts") = 0, py::arg("max_task_retries") = 0, py::arg("cpus") = 0.0,
           py::arg("memory") = 0, py::arg("call_timeout_ms") = 0, py::arg("max_concurrency") = 1)
      .def("call", &RtRuntime::call, py::arg("actor"), py::arg("payload"), py::arg("keep"))
      .def("kill", &RtRuntime::kill, py::arg("actor"))
      .def("put", &RtRuntime::put, py::arg("parts"))
      .def("get", &RtRuntime::get, py::arg("id"), py::arg("owner"))
      .def("wait", &RtRuntime::wait, py::arg("futures"), py::arg("k"), py::arg("timeout_ms") = -1.0)
      .def_property_readonly("rank", &RtRuntime::rank)
      .def_property_readonly("size", &RtRuntime::size)
      .def_property_readonly("threads", &RtRuntime::threads)
      .def("store_set", &RtRuntime::storeSet)
      .def("store_compare_set", &RtRuntime::storeCompareSet)
      .def("store_get", &RtRuntime::storeGet)
      .def("store_delete", &RtRuntime::storeDelete)
      .def("store_wait", &RtRuntime::storeWait, py::arg("key"), py::arg("every_ms") = 50);
  r.def(
      "store_server",
      [](const std::string& secret) {
        auto server = createTcpStoreServer(secret);
        std::string address = server->address();
        return py::make_tuple(py::capsule(server.release(),
                                          [](void* s) { delete static_cast<TcpStoreServer*>(s); }),
                              address);
      },
      "A TCP store on loopback for gyre.rt.init's worker processes: (its handle, its address).");
}

}  // namespace gyre::python
