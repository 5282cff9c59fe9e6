// The file store: an append-only log of records in one file, serialised between processes with
// flock(2). Each instance keeps the log replayed into a table and reads only what was appended
// since its last look.
//
// File: "GYREFS01", then records: u8 kind (1 set, 2 delete), key (u32 length + bytes), value
// (u32 length + bytes). A record cut short by a crashed writer is ignored and overwritten by
// the next writer.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/check.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/socket.h"
#include "rendezvous/store_table.h"
#include "rendezvous/wire.h"

namespace gyre {
namespace {

constexpr char kMagic[8] = {'G', 'Y', 'R', 'E', 'F', 'S', '0', '1'};
constexpr std::uint8_t kSetRecord = 1;
constexpr std::uint8_t kDeleteRecord = 2;
constexpr std::chrono::milliseconds kMaxPollInterval{20};

class FileStore final : public Store {
 public:
  explicit FileStore(std::string path) : path_(std::move(path)) {
    GYRE_ARG_CHECK(!path_.empty(), "file store path is empty");
    MutexLock guard(mutex_);
    Locked locked(*this, LOCK_SH);  // fails early on a path that cannot be opened
  }

  void set(const std::string& key, const Bytes& value) override {
    rendezvous::checkKey(key);
    rendezvous::checkValue(value);
    MutexLock guard(mutex_);
    Locked locked(*this, LOCK_EX);
    append(locked.fd(), kSetRecord, key, value);
  }

  Bytes get(const std::string& key, Duration timeout) override {
    rendezvous::checkKey(key);
    Bytes value;
    waitFor({key}, resolve(timeout), "get", [&]() GYRE_REQUIRES(mutex_) { value = *table_.find(key); });
    return value;
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    rendezvous::checkKey(key);
    MutexLock guard(mutex_);
    Locked locked(*this, LOCK_EX);
    rendezvous::KeyValueTable scratch;
    if (const Bytes* current = table_.find(key)) scratch.set(key, *current);
    const std::int64_t result = scratch.add(key, delta);
    append(locked.fd(), kSetRecord, key, *scratch.find(key));
    return result;
  }

  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    rendezvous::checkKey(key);
    rendezvous::checkValue(desired);
    MutexLock guard(mutex_);
    Locked locked(*this, LOCK_EX);
    const Bytes* current = table_.find(key);
    const bool swap = current == nullptr ? expected.empty() : (!expected.empty() && *current == expected);
    if (!swap) return current == nullptr ? Bytes{} : *current;
    append(locked.fd(), kSetRecord, key, desired);
    return desired;
  }

  bool deleteKey(const std::string& key) override {
    rendezvous::checkKey(key);
    MutexLock guard(mutex_);
    Locked locked(*this, LOCK_EX);
    if (table_.find(key) == nullptr) return false;
    append(locked.fd(), kDeleteRecord, key, {});
    return true;
  }

  bool check(const std::vector<std::string>& keys) override {
    rendezvous::checkKeys(keys);
    MutexLock guard(mutex_);
    Locked locked(*this, LOCK_SH);
    return table_.containsAll(keys);
  }

  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    rendezvous::checkKeys(keys);
    waitFor(keys, resolve(timeout), "wait", [] {});
  }

 private:
  // The file opened and flock'ed, with the table brought up to date. Caller holds mutex_.
  class Locked {
   public:
    Locked(FileStore& store, int operation) GYRE_REQUIRES(store.mutex_) {
      fd_ = net::Fd(::open(store.path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
      if (!fd_.valid()) net::throwErrno("file store: open " + store.path_);
      while (::flock(fd_.get(), operation) != 0)
        if (errno != EINTR) net::throwErrno("file store: flock " + store.path_);
      store.replay(fd_.get());
    }
    int fd() const { return fd_.get(); }

   private:
    net::Fd fd_;  // closing it releases the lock
  };

  // Applies the records appended since the last replay (all of them if the file was replaced).
  void replay(int fd) GYRE_REQUIRES(mutex_) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) net::throwErrno("file store: fstat " + path_);
    const auto size = static_cast<std::size_t>(st.st_size);
    if (!known_ || st.st_dev != dev_ || st.st_ino != ino_ || size < fileEnd_) {
      table_.clear();
      validEnd_ = 0;
      dev_ = st.st_dev, ino_ = st.st_ino, known_ = true;
    }
    fileEnd_ = size;
    if (size <= validEnd_) return;
    std::vector<std::uint8_t> data(size - validEnd_);
    readAt(fd, data.data(), data.size(), validEnd_);
    std::size_t pos = 0;
    if (validEnd_ == 0) {
      if (data.size() < sizeof(kMagic)) return;  // a writer died before finishing the header
      if (std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0)
        GYRE_THROW(ProtocolError, "file store: ", path_, " is not a gyre store file");
      pos = sizeof(kMagic);
    }
    while (pos < data.size()) {
      // Header: kind, key length; then key, value length, value. Short: a torn last record.
      const std::size_t left = data.size() - pos;
      const std::uint8_t* p = data.data() + pos;
      if (left < 5) break;
      const std::uint8_t kind = p[0];
      const std::size_t keyBytes = rendezvous::getU32(p + 1);
      if ((kind != kSetRecord && kind != kDeleteRecord) || keyBytes > rendezvous::kMaxKeyBytes)
        GYRE_THROW(ProtocolError, "file store ", path_, " is corrupt at offset ", validEnd_ + pos);
      if (left < 9 + keyBytes) break;
      const std::size_t valueBytes = rendezvous::getU32(p + 5 + keyBytes);
      if (valueBytes > rendezvous::kMaxValueBytes)
        GYRE_THROW(ProtocolError, "file store ", path_, " is corrupt at offset ", validEnd_ + pos);
      if (left < 9 + keyBytes + valueBytes) break;
      std::string key(reinterpret_cast<const char*>(p + 5), keyBytes);
      if (kind == kSetRecord) {
        table_.set(key, Bytes(p + 9 + keyBytes, p + 9 + keyBytes + valueBytes));
      } else {
        table_.erase(key);
      }
      pos += 9 + keyBytes + valueBytes;
    }
    validEnd_ += pos;
  }

  // Appends one record after the last complete one (cutting off a torn record) and applies it.
  void append(int fd, std::uint8_t kind, const std::string& key, const Bytes& value) GYRE_REQUIRES(mutex_) {
    if (fileEnd_ > validEnd_ && ::ftruncate(fd, static_cast<off_t>(validEnd_)) != 0)
      net::throwErrno("file store: ftruncate " + path_);
    if (validEnd_ == 0) {
      writeAt(fd, reinterpret_cast<const std::uint8_t*>(kMagic), sizeof(kMagic), 0);
      validEnd_ = sizeof(kMagic);
    }
    std::vector<std::uint8_t> record;
    rendezvous::ByteWriter writer(record);
    writer.u8(kind);
    writer.bytes(key);
    writer.bytes(value);
    writeAt(fd, record.data(), record.size(), validEnd_);
    validEnd_ += record.size();
    fileEnd_ = validEnd_;
    if (kind == kSetRecord) {
      table_.set(key, value);
    } else {
      table_.erase(key);
    }
  }

  void writeAt(int fd, const std::uint8_t* data, std::size_t n, std::size_t offset) {
    std::size_t done = 0;
    while (done < n) {
      ssize_t w = ::pwrite(fd, data + done, n - done, static_cast<off_t>(offset + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) net::throwErrno("file store: write " + path_);
      done += static_cast<std::size_t>(w);
    }
  }

  void readAt(int fd, std::uint8_t* out, std::size_t n, std::size_t offset) {
    std::size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) net::throwErrno("file store: read " + path_);
      if (r == 0) GYRE_THROW(SystemError, "file store: ", path_, " shrank while locked");
      done += static_cast<std::size_t>(r);
    }
  }

  // Polls until every key exists, sleeping a little longer each round, then runs onReady under
  // the lock.
  template <typename F>
  void waitFor(const std::vector<std::string>& keys, Duration timeout, const char* what, F&& onReady)
      GYRE_EXCLUDES(mutex_) {
    const Deadline deadline = rendezvous::deadlineAfter(timeout);
    std::chrono::milliseconds interval{1};
    for (;;) {
      {
        MutexLock guard(mutex_);
        Locked locked(*this, LOCK_SH);
        if (table_.containsAll(keys)) {
          onReady();
          return;
        }
        if (deadline.expired())
          GYRE_THROW(TimeoutError, "file store ", what, " timed out after ", timeout.count(), " ms; missing ",
                     rendezvous::describeKeys(table_.missing(keys)), " in ", path_);
      }
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
          interval, std::chrono::milliseconds(deadline.remainingMs()) + std::chrono::milliseconds(1)));
      interval = std::min(interval * 2, kMaxPollInterval);
    }
  }

  const std::string path_;
  Mutex mutex_;
  // The replayed log and where it ends.
  rendezvous::KeyValueTable table_ GYRE_GUARDED_BY(mutex_);
  std::size_t validEnd_ GYRE_GUARDED_BY(mutex_) = 0;  // end of the last complete record
  std::size_t fileEnd_ GYRE_GUARDED_BY(mutex_) = 0;   // file size at the last look
  bool known_ GYRE_GUARDED_BY(mutex_) = false;
  dev_t dev_ GYRE_GUARDED_BY(mutex_) = 0;
  ino_t ino_ GYRE_GUARDED_BY(mutex_) = 0;
};

}  // namespace

std::shared_ptr<Store> createFileStore(const std::string& path) {
  return std::make_shared<FileStore>(path);
}

}  // namespace gyre
