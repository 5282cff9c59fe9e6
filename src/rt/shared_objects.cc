#include "rt/shared_objects.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/mutex.h"
#include "gyre/errors.h"

namespace gyre::rt::detail {
namespace {

constexpr const char* kDir = "/dev/shm/";
constexpr std::uint64_t kMagic = 0x67797265'72746f62;  // "gyrertob"
constexpr std::size_t kHeader = 64;                    // the data starts cache-line aligned
constexpr std::size_t kPoolSegments = 4;

struct Header {
  std::uint64_t magic;
  std::uint64_t id;
  std::uint64_t size;
};

std::size_t pageRounded(std::size_t n) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

std::string hex(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

[[noreturn]] void fail(const std::string& what) {
  throw Error("gyre::rt: shared memory: " + what + ": " + std::strerror(errno));
}

constexpr const char* kOwnerPrefix = "gyre-rt-";   // an owner's files: gyre-rt-<pid>-<n>-...
constexpr const char* kCopyPrefix = "gyre-rt-c-";  // copies of other hosts' objects

// Whether a file is locked by no process (then it is locked here, until fd closes).
bool unlockedElsewhere(int fd) {
  return ::flock(fd, LOCK_EX | LOCK_NB) == 0;
}

// Files of owners that no longer run (killed before they could remove them), and copies of other
// hosts' objects that no process maps (their last reader was killed).
void removeOrphans() {
  DIR* dir = ::opendir(kDir);
  if (dir == nullptr) return;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind(kCopyPrefix, 0) == 0) {
      const int fd = ::open((kDir + name).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0 && unlockedElsewhere(fd)) ::unlink((kDir + name).c_str());
      if (fd >= 0) ::close(fd);
      continue;
    }
    if (name.rfind(kOwnerPrefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + std::strlen(kOwnerPrefix), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) ::unlink((kDir + name).c_str());
  }
  ::closedir(dir);
}

// A mapping of an object's file, holding a shared lock on it while it lives. A copy of another
// host's object (`removeWhenLast`) is removed by the last reader on this host to let it go.
struct Mapping {
  int fd = -1;
  void* at = nullptr;
  std::size_t length = 0;
  std::string removeWhenLast;
  ~Mapping() {
    if (at != nullptr) ::munmap(at, length);
    if (fd >= 0 && !removeWhenLast.empty() && unlockedElsewhere(fd)) {
      struct stat mine {};
      struct stat named {};
      if (::fstat(fd, &mine) == 0 && ::stat(removeWhenLast.c_str(), &named) == 0 &&
          mine.st_ino == named.st_ino)
        ::unlink(removeWhenLast.c_str());
    }
    if (fd >= 0) ::close(fd);  // and with it the lock
  }
};

// Maps the object in `m->fd` (its header says `id`; shared-locked by the caller): read-only, or
// privately (copy on write). nullopt when the file holds another object (reused: this one was freed).
std::optional<Buffer> mapObject(std::shared_ptr<Mapping> m, std::uint64_t id, Access access,
                                const std::string& path) {
  Header header{};
  if (::pread(m->fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header) ||
      header.magic != kMagic || header.id != id)
    return std::nullopt;  // reused for another object: this one was freed
  struct stat st {};
  if (::fstat(m->fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < kHeader + header.size)
    return std::nullopt;
  m->length = kHeader + header.size;
  // Copy on write: a private mapping, populated read-only (populating a writable private mapping
  // would copy every page), then made writable, so that only the pages written are copied.
  const bool private_ = access == Access::kCopyOnWrite;
  void* at =
      ::mmap(nullptr, m->length, PROT_READ, (private_ ? MAP_PRIVATE : MAP_SHARED) | MAP_POPULATE, m->fd, 0);
  if (at == MAP_FAILED) fail("cannot map " + path);
  m->at = at;
  if (private_ && ::mprotect(at, m->length, PROT_READ | PROT_WRITE) != 0)
    fail("cannot make a private mapping of " + path + " writable");
  const std::byte* data = static_cast<const std::byte*>(at) + kHeader;
  return Buffer(std::move(m), data, header.size, private_);
}

// Writes `n` bytes at `offset` of `fd`; false when the file system refuses them (full).
bool writeAt(int fd, const char* data, std::size_t n, std::size_t offset) {
  for (std::size_t done = 0; done < n;) {
    const ssize_t w = ::pwrite(fd, data + done, n - done, static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<std::size_t>(w);
  }
  return true;
}

// This host's copy of another host's object, when one is here: mapped, shared-locked, and removed
// by the last reader here.
std::optional<Buffer> openCopy(const std::string& path, std::uint64_t id, Access access) {
  auto m = std::make_shared<Mapping>();
  m->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (m->fd < 0) return std::nullopt;
  while (::flock(m->fd, LOCK_SH) != 0)
    if (errno != EINTR) return std::nullopt;
  m->removeWhenLast = path;
  return mapObject(std::move(m), id, access, path);
}

// An identity of this host as the runtime's processes see it: the machine (its boot id) and the
// network namespace, so that processes in other namespaces of one machine (tests/netns' hosts)
// count as other hosts, as they would in containers, and do not map each other's files.
std::string computeHostKey() {
  std::string id;
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char line[64] = {};
    if (std::fgets(line, sizeof line, f) != nullptr) id = line;
    std::fclose(f);
  }
  struct stat ns {};
  if (::stat("/proc/self/ns/net", &ns) == 0) {
    id += '/';
    id += std::to_string(ns.st_ino);
  }
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  return hex(h);
}

}  // namespace

// A file of /dev/shm mapped read-write in its owner.
class Segment {
 public:
  std::weak_ptr<SegmentPool> pool;
  bool retired = false;  // renamed out of the way of readers (guarded by the pool's mutex)
  int fd = -1;
  std::byte* at = nullptr;
  std::size_t capacity = 0;  // mapped bytes, the header included
  std::string path;
  std::size_t size = 0;

  const std::byte* data() const { return at + kHeader; }
  void destroy() {
    if (at != nullptr) ::munmap(at, capacity);
    ::unlink(path.c_str());
    if (fd >= 0) ::close(fd);
    delete this;
  }
};

struct SegmentPool {
  std::string prefix;
  Mutex mu;
  std::vector<Segment*> free GYRE_GUARDED_BY(mu);  // mapped and warm, named <prefix>-pool-<n>
  std::int64_t named GYRE_GUARDED_BY(mu) = 0;
  bool closed GYRE_GUARDED_BY(mu) = false;

  // Renames s out of the way of readers (to <prefix>-pool-<n>), once.
  bool retireLocked(Segment* s) GYRE_REQUIRES(mu) {
    if (s->retired) return true;
    const std::string path = kDir + prefix + "-pool-" + std::to_string(named++);
    if (::rename(s->path.c_str(), path.c_str()) != 0) return false;
    s->path = path;
    s->retired = true;
    return true;
  }

  // The last reference went: to the pool while it has room, else removed.
  void release(Segment* s) GYRE_EXCLUDES(mu) {
    {
      MutexLock lock(mu);
      if (!closed && free.size() < kPoolSegments && retireLocked(s)) {
        free.push_back(s);
        return;
      }
    }
    s->destroy();
  }
};

SharedObjects::SharedObjects() : pool_(std::make_shared<SegmentPool>()) {
  static std::atomic<int> runtimes{0};
  pool_->prefix = kOwnerPrefix + std::to_string(::getpid()) + "-" + std::to_string(runtimes.fetch_add(1));
  removeOrphans();
}

SharedObjects::~SharedObjects() {
  std::vector<Segment*> free;
  {
    MutexLock lock(pool_->mu);
    pool_->closed = true;
    free.swap(pool_->free);
  }
  for (Segment* s : free) s->destroy();
}

const std::string& SharedObjects::prefix() const {
  return pool_->prefix;
}

std::shared_ptr<const Segment> SharedObjects::put(std::uint64_t id,
                                                  std::span<const std::span<const std::byte>> parts) {
  std::size_t size = 0;
  for (const auto& part : parts) size += part.size();
  const std::size_t need = pageRounded(kHeader + size);
  const std::string path = kDir + pool_->prefix + "-" + hex(id);
  Segment* s = nullptr;
  {
    // A warm file of about the size, that no reader maps any more.
    MutexLock lock(pool_->mu);
    for (auto it = pool_->free.begin(); it != pool_->free.end(); ++it) {
      if ((*it)->capacity < need || (*it)->capacity > 2 * need) continue;
      if (::flock((*it)->fd, LOCK_EX | LOCK_NB) != 0) continue;
      s = *it;
      pool_->free.erase(it);
      break;
    }
  }
  if (s != nullptr) {
    if (::rename(s->path.c_str(), path.c_str()) != 0) {
      s->destroy();
      fail("cannot rename a pooled file to " + path);
    }
    s->path = path;
    s->retired = false;
  } else {
    s = new Segment;
    s->pool = pool_;
    s->path = path;
    s->capacity = need;
    s->fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (s->fd < 0) {
      delete s;
      fail("cannot create " + path);
    }
    void* at = MAP_FAILED;
    if (::ftruncate(s->fd, static_cast<off_t>(need)) == 0)
      at = ::mmap(nullptr, need, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, s->fd, 0);
    if (at == MAP_FAILED) {
      const int saved = errno;
      s->destroy();
      errno = saved;
      fail("cannot size and map " + std::to_string(need) + " bytes in " + path +
           " (is /dev/shm full? df -h /dev/shm)");
    }
    s->at = static_cast<std::byte*>(at);
    ::flock(s->fd, LOCK_EX);
  }
  s->size = size;
  const Header header{kMagic, id, size};
  std::memcpy(s->at, &header, sizeof header);
  std::byte* to = s->at + kHeader;
  for (const auto& part : parts) {
    if (!part.empty()) std::memcpy(to, part.data(), part.size());
    to += part.size();
  }
  ::flock(s->fd, LOCK_UN);
  std::weak_ptr<SegmentPool> pool = pool_;
  return std::shared_ptr<const Segment>(s, [pool](const Segment* done) {
    auto* seg = const_cast<Segment*>(done);
    if (auto p = pool.lock())
      p->release(seg);
    else
      seg->destroy();
  });
}

void SharedObjects::retire(const Segment& s) {
  auto* seg = const_cast<Segment*>(&s);
  if (auto p = seg->pool.lock()) {
    MutexLock lock(p->mu);
    p->retireLocked(seg);
  } else {
    ::unlink(seg->path.c_str());
  }
}

Buffer SharedObjects::view(const std::shared_ptr<const Segment>& s) {
  return Buffer(s, s->data(), s->size);
}

std::string SharedObjects::copy(const Segment& s) {
  return std::string(reinterpret_cast<const char*>(s.data()), s.size);
}

const std::string& SharedObjects::hostKey() {
  static const std::string key = computeHostKey();
  return key;
}

std::optional<Buffer> SharedObjects::open(const std::string& ownerPrefix, std::uint64_t id, Access access) {
  auto m = std::make_shared<Mapping>();
  const std::string path = kDir + ownerPrefix + "-" + hex(id);
  m->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (m->fd < 0) return std::nullopt;
  // The owner writes under an exclusive lock: this waits for a put to finish, and keeps the
  // file from being reused while the Buffer lives.
  while (::flock(m->fd, LOCK_SH) != 0)
    if (errno != EINTR) return std::nullopt;
  return mapObject(std::move(m), id, access, path);
}

Buffer SharedObjects::fetchOnce(const std::string& ownerHost, const std::string& ownerPrefix,
                                std::uint64_t id, Access access, const std::function<std::string()>& fetch) {
  // Named for this host, the owner's host (owners on two hosts may have the same pid), the owner
  // and the object.
  const std::string path = std::string(kDir) + kCopyPrefix + hostKey() + "-" + ownerHost + "-" +
                           ownerPrefix.substr(std::strlen(kOwnerPrefix)) + "-" + hex(id);
  if (std::optional<Buffer> here = openCopy(path, id, access)) return *std::move(here);
  // One reader of the host fetches at a time; the others wait for it and map its copy.
  const std::string lockPath = path + ".lock";
  const int lock = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) {  // no room for even that: a copy of this reader's own
    const std::string bytes = fetch();
    return Buffer::copyOf(bytes.data(), bytes.size());
  }
  struct Unlock {  // a waiter holding the removed file goes on: it finds the copy, or fetches
    int fd;
    const std::string& path;
    ~Unlock() {
      ::unlink(path.c_str());
      ::close(fd);
    }
  } unlock{lock, lockPath};
  while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
  }
  if (std::optional<Buffer> here = openCopy(path, id, access)) return *std::move(here);
  const std::string bytes = fetch();  // throws when the object was freed, or its owner lost
  // Written under a temporary name, shared-locked before anyone can see it, then renamed.
  // The name is this writer's own (another may be writing too when the lock file was replaced).
  static std::atomic<std::uint64_t> temps{0};
  const std::string temp =
      path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(temps.fetch_add(1));
  auto m = std::make_shared<Mapping>();
  m->fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (m->fd < 0) return Buffer::copyOf(bytes.data(), bytes.size());
  if (::flock(m->fd, LOCK_SH) != 0) {
    ::unlink(temp.c_str());
    return Buffer::copyOf(bytes.data(), bytes.size());
  }
  const Header header{kMagic, id, bytes.size()};
  std::string head(kHeader, '\0');
  std::memcpy(head.data(), &header, sizeof header);
  const bool written =
      writeAt(m->fd, head.data(), kHeader, 0) && writeAt(m->fd, bytes.data(), bytes.size(), kHeader);
  if (!written || ::rename(temp.c_str(), path.c_str()) != 0) {  // /dev/shm full: a private copy
    ::unlink(temp.c_str());
    return Buffer::copyOf(bytes.data(), bytes.size());
  }
  m->removeWhenLast = path;
  std::optional<Buffer> mapped = mapObject(std::move(m), id, access, path);
  return mapped ? *std::move(mapped) : Buffer::copyOf(bytes.data(), bytes.size());
}

}  // namespace gyre::rt::detail
