#include "info/info_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "launcher/agent.h"

namespace gyre::info {
namespace {

std::string kindName(BlasKind kind) {
  switch (kind) {
    case BlasKind::kNotFound:
      return "not_found";
    case BlasKind::kReference:
      return "reference";
    case BlasKind::kOpenBlas:
      return "openblas";
    case BlasKind::kMkl:
      return "mkl";
    case BlasKind::kBlis:
      return "blis";
    case BlasKind::kAtlas:
      return "atlas";
    case BlasKind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::string check(bool on) {
  return on ? "[X]" : "[ ]";
}

std::string joined(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : std::string(separator)) + item;
  return out;
}

// Which program loads the BLAS the report describes, for the section's title.
std::string blasUser(const Report& r) {
  const auto libs = linearAlgebraLibraries(r.torch.needed);
  if (std::find(libs.begin(), libs.end(), r.blas.soname) != libs.end()) return "the one libtorch links";
  if (!r.torch.library.empty()) return "libtorch links no BLAS by name; what Debian's numpy and others load";
  return "what Debian's libtorch and numpy load";
}

void appendTransports(std::string& out, const Report& r) {
  out += "\nAvailable transports:\n";
  out += fmt::format("    {} tcp     any hosts\n", check(true));
  out += fmt::format("    {} shm     shared memory between ranks on one host\n", check(true));
  out += fmt::format("    {} mpi     {}\n", check(r.mpiTransport),
                     r.mpiTransport ? "MPI point-to-point, when started by mpirun"
                                    : "not in this build (configure gyre where CMake finds MPI)");
}

void appendLaunchers(std::string& out, const Report& r) {
  out += "\nAvailable launchers:\n";
  std::size_t width = 0;
  for (const auto& l : r.launchers) width = std::max(width, l.name.size());
  for (const auto& l : r.launchers) {
    std::string text = l.path.empty() ? "not found in PATH" : l.path;
    if (!l.version.empty()) text += "  (" + l.version + ")";
    if (!l.note.empty()) text += "  " + l.note;
    out += fmt::format("    {} {:<{}}  {}\n", check(!l.path.empty()), l.name, width, text);
  }
  out += fmt::format(
      "    MPI baseline of `gyre bench`: {}\n",
      r.mpiBenchmark.empty() ? "gyre_mpi_bench not built (CMake did not find MPI)" : r.mpiBenchmark);
}

void appendTorch(std::string& out, const Report& r) {
  out += "\nlibtorch (gyre's core does not link it; the trainer and the examples do):\n";
  if (r.torch.version.empty()) {
    out +=
        "    version     not installed (no torch/version.h under CMAKE_PREFIX_PATH, /usr/local or /usr;\n"
        "                on Debian: apt-get install libtorch-dev)\n";
  } else {
    out += fmt::format("    version     {}  ({})\n", r.torch.version, r.torch.header);
  }
  if (r.torch.library.empty()) {
    out += "    library     libtorch_cpu.so not found\n";
  } else {
    const auto libs = linearAlgebraLibraries(r.torch.needed);
    out += fmt::format("    library     {}\n", r.torch.library);
    out += fmt::format("    links       {}\n",
                       libs.empty() ? "no BLAS or LAPACK library by name" : joined(libs, ", "));
  }
}

void appendBlas(std::string& out, const Report& r) {
  const BlasProbe& b = r.blas;
  out += fmt::format("\nBLAS ({}, {}):\n", b.soname, blasUser(r));
  if (b.loadedPath.empty()) {
    out += fmt::format("    library     not found: {}\n", b.loaderError);
  } else {
    out += fmt::format("    library     {}\n", b.chain.front());
    for (std::size_t i = 1; i < b.chain.size(); ++i)
      out += fmt::format("                -> {}\n", b.chain[i]);
  }
  out +=
      fmt::format("    kind        {}{}\n", b.verdict.name, b.config.empty() ? "" : "  (" + b.config + ")");
  const std::string warning = blasWarning(b.verdict, b.soname, b.chain, r.multiarch);
  if (!warning.empty()) out += "\n" + warning;
}

void appendCores(std::string& out, const Report& r) {
  out += "\nCores:\n";
  out += fmt::format("    online      {}\n", r.cores.online);
  out += fmt::format("    usable      {}  (the CPUs this process may run on, sched_getaffinity)\n",
                     r.cores.usable);
  std::string perWorker;
  for (int workers : exampleWorkerCounts(r.cores.usable)) {
    const int threads = defaultWorkerThreads(r.cores.usable, workers);
    perWorker += fmt::format("{}{} worker{}: {} thread{}", perWorker.empty() ? "" : ", ", workers,
                             workers == 1 ? "" : "s", threads, threads == 1 ? "" : "s");
  }
  out +=
      "    per worker  `gyre run` sets GYRE_NUM_THREADS (and OMP_, MKL_, OPENBLAS_NUM_THREADS unless set)\n";
  out += "                to usable cores / local workers, at least 1 (`gyre run --threads N` overrides):\n";
  out += "                " + perWorker + "\n";
  for (const auto& [name, value] : r.threadVariables)
    out += fmt::format("    {:<11} {}\n", name, value.empty() ? "unset" : value);
}

void appendKnobs(std::string& out, const Report& r) {
  out += "\nEnvironment knobs (docs/configuration.md), with the values set here:\n";
  std::string table = config::formatText(r.gyreEnv);
  // Indent the table like the sections above.
  std::size_t start = 0;
  while (start < table.size()) {
    const auto eol = table.find('\n', start);
    out += "    " + table.substr(start, eol == std::string::npos ? eol : eol - start + 1);
    if (eol == std::string::npos) break;
    start = eol + 1;
  }
  const auto unknown = unknownGyreVariables(r.gyreEnv);
  if (!unknown.empty()) {
    out += "\nGYRE_* variables set here that gyre does not read (misspelt?):\n";
    for (const auto& name : unknown) out += fmt::format("    {}={}\n", name, r.gyreEnv.at(name));
  }
}

}  // namespace

int defaultWorkerThreads(int usableCores, int localWorkers) {
  return launcher::threadEnvironment(0, usableCores, localWorkers, [](const std::string&) { return true; })
      .threads;
}

std::vector<int> exampleWorkerCounts(int usableCores) {
  std::vector<int> counts{1, 2, 4};
  if (usableCores > 4) counts.push_back(usableCores);
  return counts;
}

std::vector<std::string> unknownGyreVariables(const config::Env& env) {
  std::vector<std::string> out;
  for (const auto& entry : env) {
    const std::string& name = entry.first;  // not a structured binding: the lambda captures it
    if (!name.starts_with("GYRE_")) continue;
    const auto knobs = config::knobs();
    if (std::none_of(knobs.begin(), knobs.end(), [&](const config::Knob& k) { return k.name == name; }))
      out.push_back(name);
  }
  return out;
}

std::string formatReportText(const Report& r) {
  std::string out = fmt::format("gyre {}  ({})\n", r.version, r.executable);
  appendTransports(out, r);
  appendLaunchers(out, r);
  appendTorch(out, r);
  appendBlas(out, r);
  appendCores(out, r);
  appendKnobs(out, r);
  return out;
}

std::string formatReportJson(const Report& r) {
  nlohmann::json launchers = nlohmann::json::array();
  for (const auto& l : r.launchers)
    launchers.push_back({{"name", l.name},
                         {"found", !l.path.empty()},
                         {"path", l.path},
                         {"version", l.version},
                         {"note", l.note}});
  nlohmann::json perWorker = nlohmann::json::object();
  for (int workers : exampleWorkerCounts(r.cores.usable))
    perWorker[std::to_string(workers)] = defaultWorkerThreads(r.cores.usable, workers);
  nlohmann::json threadVariables = nlohmann::json::object();
  for (const auto& [name, value] : r.threadVariables) threadVariables[name] = value;
  nlohmann::json knobs = nlohmann::json::array();
  for (const config::Knob& k : config::knobs()) {
    nlohmann::json knob = {{"name", k.name}, {"default", k.defaultValue}, {"doc", k.doc}};
    if (!k.choices.empty()) knob["choices"] = k.choices;
    if (config::isSet(r.gyreEnv, k.name)) {
      knob["value"] = r.gyreEnv.at(std::string(k.name));
      if (const std::string error = config::checkValue(r.gyreEnv, k.name); !error.empty())
        knob["error"] = error;
    }
    knobs.push_back(knob);
  }
  const nlohmann::json j = {
      {"version", r.version},
      {"executable", r.executable},
      {"transports", {{"tcp", true}, {"shm", true}, {"mpi", r.mpiTransport}}},
      {"launchers", launchers},
      {"gyre_mpi_bench", r.mpiBenchmark},
      {"libtorch",
       {{"installed", !r.torch.version.empty()},
        {"version", r.torch.version},
        {"header", r.torch.header},
        {"library", r.torch.library},
        {"links", linearAlgebraLibraries(r.torch.needed)}}},
      {"blas",
       {{"soname", r.blas.soname},
        {"found", !r.blas.loadedPath.empty()},
        {"path", r.blas.chain.empty() ? "" : r.blas.chain.back()},
        {"chain", r.blas.chain},
        {"kind", kindName(r.blas.verdict.kind)},
        {"name", r.blas.verdict.name},
        {"slow", r.blas.verdict.slow},
        {"config", r.blas.config},
        {"error", r.blas.loaderError}}},
      {"cores",
       {{"online", r.cores.online},
        {"usable", r.cores.usable},
        {"threads_per_worker", perWorker},
        {"variables", threadVariables}}},
      {"knobs", knobs},
      {"unknown_gyre_variables", unknownGyreVariables(r.gyreEnv)},
  };
  return j.dump() + "\n";
}

}  // namespace gyre::info
