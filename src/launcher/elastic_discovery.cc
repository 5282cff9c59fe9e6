#include "launcher/elastic_discovery.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <thread>

#include "common/check.h"
#include "launcher/failures.h"

namespace gyre::launcher {
namespace {

constexpr std::size_t kMaxOutput = 1 << 20;
constexpr std::size_t kMaxErrors = 4096;
const std::string kSource = "--host-discovery-script";

// Appends what `fd` has now to `text` (up to `cap` bytes kept); closes it at its end.
void readSome(net::Fd& fd, std::string& text, std::size_t cap) {
  char buffer[4096];
  while (fd.valid()) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, std::min(static_cast<std::size_t>(n), cap - std::min(cap, text.size())));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      fd = net::Fd();
    } else if (errno == EAGAIN) {
      return;
    }
  }
}

std::string firstLine(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_first_of("\r\n", begin) - begin);
}

}  // namespace

std::vector<HostSlots> parseDiscoveredHosts(const std::string& text) {
  bool any = false;
  for (std::size_t at = 0; at < text.size() && !any;) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    any = line.substr(0, line.find('#')).find_first_not_of(" \t\r") != std::string::npos;
    at = end + 1;
  }
  if (!any) return {};
  std::vector<HostSlots> hosts = parseHostfile(text, kSource);
  std::set<std::string> seen;
  for (const HostSlots& h : hosts)
    GYRE_USAGE_CHECK(seen.insert(h.name).second, kSource, ": host '", h.name, "' is listed twice");
  return hosts;
}

HostDiscovery::HostDiscovery(std::string script, std::chrono::milliseconds interval,
                             std::chrono::milliseconds limit)
    : script_(std::move(script)), interval_(interval), limit_(limit) {}

void HostDiscovery::start() {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) GYRE_THROW(SystemError, "pipe2: ", std::strerror(errno));
  out_ = net::Fd(out[0]);
  net::Fd outWrite(out[1]);
  if (pipe2(err, O_CLOEXEC) != 0) GYRE_THROW(SystemError, "pipe2: ", std::strerror(errno));
  err_ = net::Fd(err[0]);
  net::Fd errWrite(err[1]);
  net::Fd devNull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ChildSpec spec;
  spec.name = kSource;
  spec.path = "/bin/sh";
  spec.argv = {"sh", "-c", script_};
  spec.stdinFd = devNull.get();
  spec.stdoutFd = outWrite.get();
  spec.stderrFd = errWrite.get();
  spec.ownProcessGroup = true;  // killed with whatever it starts
  outText_.clear();
  errText_.clear();
  pid_ = group_.spawn(spec);
  net::setNonBlocking(out_.get(), true);
  net::setNonBlocking(err_.get(), true);
  killAt_ = Clock::now() + limit_;
}

void HostDiscovery::drain() {
  readSome(out_, outText_, kMaxOutput);
  readSome(err_, errText_, kMaxErrors);
}

HostDiscovery::Result HostDiscovery::finish(const ChildExit* exit) {
  drain();
  // Anything it left running in the background goes too, and its pipes with it.
  ::kill(-pid_, SIGKILL);
  pid_ = 0;
  out_ = net::Fd();
  err_ = net::Fd();
  nextRun_ = Clock::now() + interval_;
  Result r;
  const std::string why = firstLine(errText_);
  if (exit == nullptr) {
    r.error = "did not finish within " + formatSeconds(static_cast<double>(limit_.count()) / 1000) + " s";
  } else if (!exit->ok()) {
    r.error = exit->signal != 0 ? "was killed by " + signalName(exit->signal)
                                : "exited with code " + std::to_string(exit->code);
    if (!why.empty()) r.error += ": " + why;
  } else {
    try {
      r.hosts = parseDiscoveredHosts(outText_);
      r.ok = true;
    } catch (const Error& e) {
      r.error = e.what();
    }
  }
  return r;
}

std::optional<HostDiscovery::Result> HostDiscovery::poll() {
  if (pid_ == 0) {
    if (Clock::now() < nextRun_) return std::nullopt;
    start();
  }
  drain();
  const std::vector<ChildExit> exits = group_.reap();
  if (!exits.empty()) return finish(&exits.front());
  if (Clock::now() < killAt_) return std::nullopt;
  group_.stopAll(std::chrono::milliseconds(0));
  return finish(nullptr);
}

HostDiscovery::Result HostDiscovery::runNow() {
  nextRun_ = Clock::now();
  while (true) {
    if (auto r = poll()) return *r;
    std::vector<pollfd> fds;
    for (const net::Fd* fd : {&out_, &err_})
      if (fd->valid()) fds.push_back({fd->get(), POLLIN, 0});
    if (fds.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    else
      ::poll(fds.data(), fds.size(), 10);
  }
}

}  // namespace gyre::launcher
