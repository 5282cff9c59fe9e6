#include "info/info_system.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/clock.h"
#include "common/socket.h"
#include "gyre/errors.h"
#include "launcher/process.h"

namespace gyre::info {
namespace {

// Reads `size` bytes at `offset`; false when the file is shorter.
bool readAt(int fd, void* out, std::size_t size, std::uint64_t offset) {
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return true;
}

std::string readSmallFile(const std::string& path, std::size_t maxBytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string text(maxBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(maxBytes));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

bool isFile(const std::string& path) {
  return ::access(path.c_str(), R_OK) == 0;
}

}  // namespace

std::vector<std::string> elfNeeded(const std::string& path) {
  net::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return {};
  Elf64_Ehdr eh{};
  if (!readAt(fd.get(), &eh, sizeof eh, 0)) return {};
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 4096)
    return {};
  std::vector<Elf64_Phdr> segments(eh.e_phnum);
  if (!readAt(fd.get(), segments.data(), segments.size() * sizeof(Elf64_Phdr), eh.e_phoff)) return {};

  std::vector<Elf64_Dyn> dynamic;
  for (const Elf64_Phdr& ph : segments) {
    if (ph.p_type != PT_DYNAMIC || ph.p_filesz > (1 << 20)) continue;
    dynamic.resize(ph.p_filesz / sizeof(Elf64_Dyn));
    if (!readAt(fd.get(), dynamic.data(), dynamic.size() * sizeof(Elf64_Dyn), ph.p_offset)) return {};
  }
  std::uint64_t strtabAddr = 0, strtabSize = 0;
  for (const Elf64_Dyn& d : dynamic) {
    if (d.d_tag == DT_STRTAB) strtabAddr = d.d_un.d_ptr;
    if (d.d_tag == DT_STRSZ) strtabSize = d.d_un.d_val;
  }
  if (strtabSize == 0 || strtabSize > (64u << 20)) return {};
  // The string table is named by its address once loaded; find where the file holds it.
  std::uint64_t strtabOffset = UINT64_MAX;
  for (const Elf64_Phdr& ph : segments) {
    if (ph.p_type == PT_LOAD && strtabAddr >= ph.p_vaddr && strtabAddr - ph.p_vaddr < ph.p_filesz) {
      strtabOffset = strtabAddr - ph.p_vaddr + ph.p_offset;
      break;
    }
  }
  if (strtabOffset == UINT64_MAX) return {};
  std::string strtab(strtabSize, '\0');
  if (!readAt(fd.get(), strtab.data(), strtab.size(), strtabOffset)) return {};

  std::vector<std::string> needed;
  for (const Elf64_Dyn& d : dynamic) {
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag != DT_NEEDED || d.d_un.d_val >= strtab.size()) continue;
    needed.emplace_back(strtab.c_str() + d.d_un.d_val);
  }
  return needed;
}

std::vector<std::string> symlinkChain(const std::string& path) {
  std::vector<std::string> chain{path};
  std::string current = path;
  for (int hops = 0; hops < 40; ++hops) {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(current.c_str(), buf, sizeof buf - 1);
    if (n <= 0) break;
    std::string target(buf, static_cast<std::size_t>(n));
    if (target.front() != '/') {
      const auto slash = current.rfind('/');
      target = (slash == std::string::npos ? std::string() : current.substr(0, slash + 1)) + target;
    }
    chain.push_back(target);
    current = target;
  }
  // Relative links may leave "..": name the final file as the kernel resolves it.
  char real[PATH_MAX];
  if (chain.size() > 1 && ::realpath(path.c_str(), real) != nullptr && chain.back() != real)
    chain.back() = real;
  return chain;
}

BlasProbe probeBlas(const std::string& soname) {
  BlasProbe probe;
  probe.soname = soname;
  void* handle = ::dlopen(soname.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    probe.loaderError = error ? error : "not found";
    probe.verdict = classifyBlas("", probe.markers);
    return probe;
  }
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr)
    probe.loadedPath = map->l_name;
  if (probe.loadedPath.empty()) probe.loadedPath = soname;
  probe.chain = symlinkChain(probe.loadedPath);
  for (std::string_view marker : kBlasMarkers) {
    void* symbol = ::dlsym(handle, std::string(marker).c_str());
    if (symbol == nullptr) continue;
    probe.markers.emplace_back(marker);
    if (marker == kOpenBlasMarker) {
      using GetConfig = const char* (*)();
      const char* config = reinterpret_cast<GetConfig>(symbol)();
      if (config != nullptr) probe.config = config;
    }
  }
  probe.verdict = classifyBlas(probe.chain.back(), probe.markers);
  return probe;
}

TorchProbe probeTorch(const std::string& cmakePrefixPath) {
  TorchProbe probe;
  for (const std::string& header : torchHeaderCandidates(cmakePrefixPath)) {
    if (!isFile(header)) continue;
    if (auto version = parseTorchVersionHeader(readSmallFile(header, 64 * 1024))) {
      probe.version = *version;
      probe.header = header;
      break;
    }
  }
  for (const std::string& library : torchLibraryCandidates(cmakePrefixPath, multiarchTriple())) {
    if (!isFile(library)) continue;
    probe.library = library;
    probe.needed = elfNeeded(library);
    break;
  }
  return probe;
}

std::string multiarchTriple() {
#if defined(__x86_64__)
  return "x86_64-linux-gnu";
#elif defined(__aarch64__)
  return "aarch64-linux-gnu";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return "powerpc64le-linux-gnu";
#elif defined(__riscv) && __riscv_xlen == 64
  return "riscv64-linux-gnu";
#else
  return "";
#endif
}

Cores countCores() {
  Cores cores;
  cores.online = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  CPU_ZERO(&set);
  cores.usable = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : cores.online;
  if (cores.online < 1) cores.online = static_cast<int>(std::thread::hardware_concurrency());
  if (cores.usable < 1) cores.usable = cores.online;
  return cores;
}

}  // namespace gyre::info
