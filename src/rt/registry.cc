#include "gyre/rt/registry.h"

#include <map>
#include <typeinfo>

#include "common/mutex.h"
#include "gyre/rt/future.h"

namespace gyre::rt::detail {

std::string demangle(const char* name);  // serialize.cc

namespace {

struct ActorClass {
  ActorFactory make;
  std::map<std::string, MethodInvoker> methods;  // by name
  std::map<std::string, std::string> names;      // method key -> name
};

// The process's table. Filled during static initialisation (the macros), read afterwards; the
// mutex only orders a registration made later, from a thread, against the readers.
struct Table {
  Mutex mu;
  std::map<std::string, Invoker> functions GYRE_GUARDED_BY(mu);
  std::map<std::string, std::string> functionNames GYRE_GUARDED_BY(mu);  // key -> name
  std::map<std::string, ActorClass> actors GYRE_GUARDED_BY(mu);
  std::map<std::type_index, std::string> actorNames GYRE_GUARDED_BY(mu);
};

Table& table() {
  static Table* t = new Table();  // never destroyed: registrations may outlive static destruction order
  return *t;
}

}  // namespace

std::exception_ptr remoteError(const std::string& function, std::exception_ptr thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const std::exception& e) {
    return std::make_exception_ptr(RemoteError(function, demangle(typeid(e).name()), e.what()));
  } catch (...) {
    return std::make_exception_ptr(RemoteError(function, "an exception not derived from std::exception", ""));
  }
}

bool addFunction(const std::string& name, std::string key, Invoker invoke) {
  Table& t = table();
  MutexLock lock(t.mu);
  if (!t.functions.emplace(name, std::move(invoke)).second)
    throw InvalidArgument("gyre::rt: a remote function named " + name + " is registered twice");
  t.functionNames[std::move(key)] = name;
  return true;
}

bool addActorClass(const std::string& name, std::type_index type, ActorFactory make) {
  Table& t = table();
  MutexLock lock(t.mu);
  ActorClass& c = t.actors[name];
  if (c.make) throw InvalidArgument("gyre::rt: an actor class named " + name + " is registered twice");
  c.make = std::move(make);
  t.actorNames[type] = name;
  return true;
}

bool addMethod(const std::string& className, const std::string& method, std::string key,
               MethodInvoker invoke) {
  Table& t = table();
  MutexLock lock(t.mu);
  ActorClass& c = t.actors[className];  // the class may register after its methods (another file)
  if (!c.methods.emplace(method, std::move(invoke)).second)
    throw InvalidArgument("gyre::rt: the method " + className + "::" + method + " is registered twice");
  c.names[std::move(key)] = method;
  return true;
}

const Invoker& function(const std::string& name) {
  Table& t = table();
  MutexLock lock(t.mu);
  const auto it = t.functions.find(name);
  if (it == t.functions.end())
    throw InvalidArgument("gyre::rt: no remote function named " + name +
                          " is registered in this program (GYRE_RT_FUNCTION(" + name + "))");
  return it->second;
}

std::string functionName(const std::string& key) {
  Table& t = table();
  MutexLock lock(t.mu);
  const auto it = t.functionNames.find(key);
  if (it == t.functionNames.end())
    throw InvalidArgument(
        "gyre::rt: task(): the function is not registered as a remote function: add "
        "GYRE_RT_FUNCTION(its name) at namespace scope");
  return it->second;
}

const ActorFactory& actorFactory(const std::string& className) {
  Table& t = table();
  MutexLock lock(t.mu);
  const auto it = t.actors.find(className);
  if (it == t.actors.end() || !it->second.make)
    throw InvalidArgument("gyre::rt: no actor class named " + className +
                          " is registered in this program (GYRE_RT_ACTOR(" + className +
                          ", its constructor's parameter types))");
  return it->second.make;
}

std::string actorClassName(std::type_index type) {
  Table& t = table();
  MutexLock lock(t.mu);
  const auto it = t.actorNames.find(type);
  if (it == t.actorNames.end())
    throw InvalidArgument("gyre::rt: actor(): " + demangle(type.name()) +
                          " is not a registered actor class: add GYRE_RT_ACTOR(" + demangle(type.name()) +
                          ", its constructor's parameter types)");
  return it->second;
}

const MethodInvoker& method(const std::string& className, const std::string& name) {
  Table& t = table();
  MutexLock lock(t.mu);
  const auto c = t.actors.find(className);
  if (c != t.actors.end())
    if (const auto it = c->second.methods.find(name); it != c->second.methods.end()) return it->second;
  throw InvalidArgument("gyre::rt: " + className + " has no registered method " + name + " (GYRE_RT_METHOD(" +
                        className + ", " + name + "))");
}

std::string methodName(const std::string& className, const std::string& key) {
  Table& t = table();
  MutexLock lock(t.mu);
  const auto c = t.actors.find(className);
  if (c != t.actors.end())
    if (const auto it = c->second.names.find(key); it != c->second.names.end()) return it->second;
  throw InvalidArgument("gyre::rt: call(): the method is not registered for " + className +
                        ": add GYRE_RT_METHOD(" + className + ", its name) at namespace scope");
}

}  // namespace gyre::rt::detail
