#include "common/config.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>
#include <vector>

#include "common/check.h"

extern char** environ;

namespace gyre::config {
namespace {

// The table. Keep it in documentation order; docs/configuration.md is generated from it.
constexpr std::array<Knob, 38> kKnobs = {{
    {"GYRE_RANK",
     KnobType::kInt,
     "",
     "This process's rank in the job, 0 <= rank < GYRE_WORLD_SIZE (set by `gyre run`).",
     {},
     0,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_WORLD_SIZE",
     KnobType::kInt,
     "",
     "Number of processes in the job (set by `gyre run`).",
     {},
     1,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_LOCAL_RANK",
     KnobType::kInt,
     "0",
     "Rank of this process among those on its host.",
     {},
     0,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_LOCAL_SIZE",
     KnobType::kInt,
     "1",
     "Number of the job's processes on this host.",
     {},
     1,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_STORE_ADDR",
     KnobType::kString,
     "",
     "Rendezvous store: `host:port` or `[v6]:port` of a TCP store, or `file:PATH` of a file store. "
     "Overrides the address a launcher implies.",
     {},
     0,
     INT64_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_HOST_STORE", KnobType::kChoice, "auto",
     "Whether this process starts the TCP store server at GYRE_STORE_ADDR. auto: rank 0 under "
     "torchrun, Slurm and mpirun; nobody under `gyre run` (the launcher hosts it).",
     "auto|1|0", 0, INT64_MAX, KnobOrigin::kLauncher},
    {"GYRE_SECRET",
     KnobType::kString,
     "",
     "Job secret every store and transport connection proves it knows (HMAC). `gyre run` generates one; "
     "other launchers fall back to one derived from the job id, with a warning.",
     {},
     0,
     INT64_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_JOB_ID",
     KnobType::kString,
     "",
     "Job identifier (default: the launcher's own job id).",
     {},
     0,
     INT64_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_TIMEOUT_MS",
     KnobType::kInt,
     "60000",
     "Default time-out of every blocking operation, in milliseconds (store, connection, collective).",
     {},
     1,
     INT32_MAX},
    {"GYRE_START_TIMEOUT_MS",
     KnobType::kInt,
     "30000",
     "Milliseconds a rank may take at start-up to reach the store and connect to every peer; then it fails "
     "naming the address it tried (`gyre run --start-timeout` sets it).",
     {},
     1,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_RDZV", KnobType::kString, "",
     "`gyre run --elastic`'s default for `--rdzv`: the etcd cluster and path an elastic job's state lives "
     "in, `etcd://host:port[,host:port...]/JOB` (docs/elastic.md). Unset, or a job without `--elastic`: the "
     "launcher holds the state."},
    {"GYRE_TIMELINE", KnobType::kString, "",
     "A Chrome-trace/Perfetto timeline file that gyre's libtorch training writes (backward, each bucket's "
     "allreduce, waits, optimizer steps; one track per rank). Unset: none."},
    {"GYRE_SAMPLE_LOG", KnobType::kString, "",
     "A file prefix: each `gyre train` worker appends, for every step, the indices of the training samples "
     "it trained to PREFIX.PID.jsonl (epoch, step, part, samples), to check that an epoch trains each sample "
     "once through restarts and membership changes. Unset: none."},
    {"GYRE_NUM_THREADS",
     KnobType::kInt,
     "0",
     "Compute threads per worker (libtorch intra-op, OpenMP, OpenBLAS). `gyre run` sets it to the host's "
     "cores "
     "divided by its local workers; 0: the library's own default.",
     {},
     0,
     4096,
     KnobOrigin::kLauncher},
    {"GYRE_MAX_RESTARTS",
     KnobType::kInt,
     "0",
     "How many times `gyre run` starts every worker again after one fails (its `--max-restarts`); workers "
     "get the value `gyre run` used.",
     {},
     0,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_RESTART_COUNT",
     KnobType::kInt,
     "",
     "The job's generation, set by `gyre run` in every worker: 0 at first, 1 after the first restart, and so "
     "on. "
     "A program resumes from its newest checkpoint when it is above 0.",
     {},
     0,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_ELASTIC",
     KnobType::kBool,
     "0",
     "Set by `gyre run --elastic` in every worker: the world is whatever membership the launcher publishes, "
     "joined through gyre::elastic (docs/elastic.md), and GYRE_RANK is the worker's id, not its rank.",
     {},
     0,
     INT64_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_ELASTIC_ID",
     KnobType::kInt,
     "",
     "The worker's id in an elastic job (`gyre run --elastic`): 0, 1, ... in the order the launcher started "
     "workers; a replacement gets a new one.",
     {},
     0,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_MIN_NP",
     KnobType::kInt,
     "",
     "An elastic job's --min-np: below it the workers wait for replacements, up to GYRE_ELASTIC_TIMEOUT_MS.",
     {},
     1,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_MAX_NP",
     KnobType::kInt,
     "",
     "An elastic job's --max-np: the most workers it grows to.",
     {},
     1,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_ELASTIC_TIMEOUT_MS",
     KnobType::kInt,
     "600000",
     "How long an elastic job's workers wait for a membership they can train in (fewer than --min-np "
     "workers, a newcomer not yet admitted) before they fail (`gyre run --elastic-timeout`, in ms).",
     {},
     1,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_PS_SERVERS",
     KnobType::kInt,
     "",
     "Set by `gyre run --servers S` in every worker and parameter server: how many parameter servers the "
     "job has (gyre::ps::Worker::fromEnvironment finds their addresses in the job's store; "
     "docs/gyre-run.md).",
     {},
     1,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_PS_SERVER_INDEX",
     KnobType::kInt,
     "",
     "Set by `gyre run --servers S` in each parameter server process (`gyre ps-server`): its index, "
     "0 <= index < GYRE_PS_SERVERS.",
     {},
     0,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_PS_METRICS_PORT_BASE",
     KnobType::kInt,
     "",
     "Set by `gyre run --servers S --metrics-port P` in every process: parameter server i serves its "
     "figures for Prometheus on this port + i (P + 1 + i; docs/metrics.md).",
     {},
     1,
     65535,
     KnobOrigin::kLauncher},
    {"GYRE_TUNE_TRIAL_ID",
     KnobType::kInt,
     "",
     "Set by `gyre tune` in each trial's run: the trial's number.",
     {},
     0,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_TUNE_TRIAL_DIR",
     KnobType::kString,
     "",
     "Set by `gyre tune` in each trial's run: the trial's own directory, for its files.",
     {},
     0,
     INT64_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_TUNE_CHECKPOINT_DIR",
     KnobType::kString,
     "",
     "Set by `gyre tune` in each trial's run: where the trial keeps its checkpoint (saved before each "
     "report, read "
     "when GYRE_TUNE_START_ITERATION is above 0; PBT copies it between trials).",
     {},
     0,
     INT64_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_TUNE_START_ITERATION",
     KnobType::kInt,
     "",
     "Set by `gyre tune` in each trial's run: the iteration the trial's checkpoint holds (0: start afresh); "
     "gyre::tune::report() numbers its reports from the next one.",
     {},
     0,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_TUNE_STOP_AT",
     KnobType::kInt,
     "",
     "Set by `gyre tune` in each trial's run: the iteration the run ends at (a rung, a PBT interval or the "
     "last); "
     "a run still going 10 s after reporting it is stopped.",
     {},
     1,
     INT32_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_TUNE_REPORT_FILE",
     KnobType::kString,
     "",
     "Set by `gyre tune` in each trial's run: the file gyre::tune::report() appends the trial's results to, "
     "one "
     "JSON object per line.",
     {},
     0,
     INT64_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_TRANSPORT", KnobType::kChoice, "auto",
     "Transport between ranks: auto (shared memory on one host, TCP between hosts), tcp, shm, or mpi (MPI "
     "point-to-point messages; only under mpirun, in a build with MPI; never chosen by auto).",
     "auto|tcp|shm|mpi"},
    {"GYRE_IFACE",
     KnobType::kString,
     "",
     "Network interface name (eth0) or address to listen on. Default: the address that reaches the store, or "
     "loopback for a single-host job.",
     {},
     0,
     INT64_MAX,
     KnobOrigin::kLauncher},
    {"GYRE_DEBUG_COLLECTIVES", KnobType::kBool, "0",
     "Fingerprint every collective across ranks and report mismatched calls by rank instead of hanging."},
    {"GYRE_LOG_LEVEL", KnobType::kChoice, "warn", "Log verbosity on stderr.", "error|warn|info|debug"},
    {"GYRE_COST_MODEL", KnobType::kString, "",
     "Fixed cost model for algorithm choice, `alpha_us,beta_GBps,gamma_GBps` (latency per message, link "
     "bandwidth, reduction bandwidth). Empty: measured at start-up."},
    {"GYRE_SPIN_US",
     KnobType::kInt,
     "50",
     "Microseconds a waiting rank, or a gyre::rt caller waiting for an answer, spins before it blocks (0: block "
     "at once; ranks may outnumber cores).",
     {},
     0,
     10'000'000},
    {"GYRE_SHM_RING_BYTES",
     KnobType::kInt,
     "4194304",
     "Size in bytes of each shared-memory ring between two ranks on one host.",
     {},
     4096,
     std::int64_t{1} << 32},
    {"GYRE_BENCH_SECRET",
     KnobType::kString,
     "",
     "Internal: the secret `gyre bench collectives` hands the worker processes it starts (they unset it "
     "once read).",
     {},
     0,
     INT64_MAX,
     KnobOrigin::kLauncher},
}};

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

const Knob& knobOfType(std::string_view name, KnobType type) {
  const Knob& k = knob(name);
  GYRE_ARG_CHECK(k.type == type, "configuration knob ", name, " is read with the wrong type");
  return k;
}

// The raw value of `name`: the environment's, else the default.
std::string rawValue(const Env& env, const Knob& k) {
  auto it = env.find(std::string(k.name));
  if (it != env.end() && !it->second.empty()) return trim(it->second);
  return std::string(k.defaultValue);
}

std::int64_t parseInt(const Knob& k, const std::string& text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  GYRE_ARG_CHECK(ec == std::errc() && end == text.data() + text.size() && !text.empty(), k.name, "='", text,
                 "' is not an integer");
  GYRE_ARG_CHECK(value >= k.min && value <= k.max, k.name, "=", value, " is out of range [", k.min, ", ",
                 k.max, "]");
  return value;
}

// "int", "bool", "string", or the choices joined with `separator`.
std::string typeName(const Knob& k, std::string_view separator = "|") {
  switch (k.type) {
    case KnobType::kInt:
      return "int";
    case KnobType::kBool:
      return "bool";
    case KnobType::kString:
      return "string";
    case KnobType::kChoice: {
      std::string out;
      for (char c : k.choices) {
        if (c == '|') {
          out += separator;
        } else {
          out.push_back(c);
        }
      }
      return out;
    }
  }
  return "?";
}

// " Range [a, b]." / " At least a." for integer knobs whose bounds say something.
std::string rangeNote(const Knob& k) {
  if (k.type != KnobType::kInt) return "";
  std::ostringstream out;
  if (k.max < INT32_MAX) {
    out << " Range [" << k.min << ", " << k.max << "].";
  } else if (k.min > 0) {
    out << " At least " << k.min << ".";
  }
  return out.str();
}

}  // namespace

Env processEnvironment() {
  Env env;
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    const std::string entry(*p);
    const auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::span<const Knob> knobs() {
  return kKnobs;
}

const Knob& knob(std::string_view name) {
  for (const Knob& k : kKnobs)
    if (k.name == name) return k;
  GYRE_THROW(InvalidArgument, "unknown configuration knob ", name);
}

bool isSet(const Env& env, std::string_view name) {
  auto it = env.find(std::string(name));
  return it != env.end() && !trim(it->second).empty();
}

std::optional<bool> parseBool(std::string_view text) {
  const std::string v = lower(trim(text));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return std::nullopt;
}

std::int64_t getInt(const Env& env, std::string_view name) {
  const Knob& k = knobOfType(name, KnobType::kInt);
  const std::string text = rawValue(env, k);
  GYRE_ARG_CHECK(!text.empty(), k.name, " is not set and has no default");
  return parseInt(k, text);
}

std::optional<std::int64_t> getOptionalInt(const Env& env, std::string_view name) {
  const Knob& k = knobOfType(name, KnobType::kInt);
  if (!isSet(env, name)) return std::nullopt;
  return parseInt(k, rawValue(env, k));
}

bool getBool(const Env& env, std::string_view name) {
  const Knob& k = knobOfType(name, KnobType::kBool);
  const std::string text = rawValue(env, k);
  auto value = parseBool(text);
  GYRE_ARG_CHECK(value.has_value(), k.name, "='", text,
                 "' is not a boolean; use 1/0, true/false, yes/no or on/off");
  return *value;
}

std::string getString(const Env& env, std::string_view name) {
  return rawValue(env, knobOfType(name, KnobType::kString));
}

std::string getChoice(const Env& env, std::string_view name) {
  const Knob& k = knobOfType(name, KnobType::kChoice);
  const std::string value = lower(rawValue(env, k));
  std::string_view rest = k.choices;
  while (!rest.empty()) {
    const auto bar = rest.find('|');
    if (rest.substr(0, bar) == value) return value;
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  GYRE_THROW(InvalidArgument, k.name, "='", value, "' is not one of ", k.choices);
}

std::optional<CostModelOverride> getCostModel(const Env& env) {
  const std::string text = getString(env, "GYRE_COST_MODEL");
  if (text.empty()) return std::nullopt;
  std::vector<double> values;
  std::string_view rest = text;
  for (;;) {
    const auto comma = rest.find(',');
    const std::string field = trim(rest.substr(0, comma));
    double v = 0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
    GYRE_ARG_CHECK(
        ec == std::errc() && end == field.data() + field.size() && !field.empty() && std::isfinite(v),
        "GYRE_COST_MODEL='", text, "': '", field,
        "' is not a number; expected alpha_us,beta_GBps,gamma_GBps");
    values.push_back(v);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  GYRE_ARG_CHECK(values.size() == 3, "GYRE_COST_MODEL='", text, "' has ", values.size(),
                 " fields; expected alpha_us,beta_GBps,gamma_GBps");
  GYRE_ARG_CHECK(values[0] >= 0 && values[1] > 0 && values[2] > 0, "GYRE_COST_MODEL='", text,
                 "': alpha must be >= 0 and both bandwidths > 0");
  return CostModelOverride{values[0], values[1], values[2]};
}

std::string formatMarkdown() {
  std::ostringstream out;
  out << "| variable | type | default | meaning |\n|---|---|---|---|\n";
  for (const Knob& k : kKnobs) {
    out << "| `" << k.name << "` | " << typeName(k, ", ") << " | ";
    if (k.defaultValue.empty()) {
      out << "(unset)";
    } else {
      out << "`" << k.defaultValue << "`";
    }
    out << " | " << k.doc << rangeNote(k) << " |\n";
  }
  return out.str();
}

std::string formatText(const Env& env) {
  std::size_t width = 0;
  for (const Knob& k : kKnobs) width = std::max(width, k.name.size());
  std::ostringstream out;
  for (const Knob& k : kKnobs) {
    out << std::string(k.name) << std::string(width + 2 - k.name.size(), ' ') << "[" << typeName(k) << "]  ";
    if (isSet(env, k.name)) {
      out << "= " << env.at(std::string(k.name)) << "  (environment)";
      if (const std::string error = checkValue(env, k.name); !error.empty()) out << "  INVALID: " << error;
    } else if (k.defaultValue.empty()) {
      out << "unset  (default)";
    } else {
      out << "= " << k.defaultValue << "  (default)";
    }
    out << "\n" << std::string(width + 2, ' ') << k.doc << rangeNote(k) << "\n";
  }
  return out.str();
}

void checkEnvironment(const Env& env) {
  for (const Knob& k : kKnobs) {
    const std::string error = checkValue(env, k.name);
    if (!error.empty()) throw InvalidArgument(error);
  }
}

std::string checkValue(const Env& env, std::string_view name) {
  const Knob& k = knob(name);
  if (!isSet(env, name)) return "";
  try {
    switch (k.type) {
      case KnobType::kInt:
        getInt(env, name);
        break;
      case KnobType::kBool:
        getBool(env, name);
        break;
      case KnobType::kChoice:
        getChoice(env, name);
        break;
      case KnobType::kString:
        if (name == "GYRE_COST_MODEL") getCostModel(env);
        break;
    }
  } catch (const InvalidArgument& e) {
    // Drop the " (file.cc:123)" GYRE_ARG_CHECK appends.
    std::string message = e.what();
    const auto open = message.rfind(" (");
    const auto colon = message.rfind(':');
    if (open != std::string::npos && colon != std::string::npos && colon > open && message.back() == ')' &&
        colon + 2 < message.size() &&
        std::all_of(message.begin() + static_cast<std::ptrdiff_t>(colon) + 1, message.end() - 1,
                    [](unsigned char c) { return std::isdigit(c); }))
      message.erase(open);
    return message;
  }
  return "";
}

}  // namespace gyre::config
