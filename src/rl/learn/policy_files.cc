#include "rl/learn/policy_files.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "gyre/errors.h"

namespace gyre::rl {
namespace {

constexpr const char* kFormat = "gyre-policy-1";

std::string checkpointPath(const RlOptions& o) {
  return (std::filesystem::path(o.checkpointDir) / "policy.json").string();
}

}  // namespace

PolicyFiles::PolicyFiles(const RlOptions& o, const EnvShape& env, int outputs) : o_(o), env_(env), outputs_(outputs) {}

std::optional<Weights> PolicyFiles::resumed() const {
  if (o_.resume.empty()) return std::nullopt;
  const std::string path = std::filesystem::is_directory(o_.resume)
                               ? (std::filesystem::path(o_.resume) / "policy.json").string()
                               : o_.resume;
  std::ifstream in(path);
  if (!in) throw InvalidArgument("gyre rl --resume: " + path + " cannot be read (no checkpoint there?)");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("gyre rl --resume: " + path + " is not a policy file: " + e.what());
  }
  auto field = [&](const char* name) {
    if (!j.contains(name)) throw InvalidArgument("gyre rl --resume: " + path + " has no \"" + name + "\"");
    return j.at(name);
  };
  if (field("format") != kFormat)
    throw InvalidArgument("gyre rl --resume: " + path + " is not a " + kFormat + " policy file");
  const auto mismatch = [&](const std::string& what, const std::string& theirs, const std::string& ours) {
    if (theirs != ours)
      throw InvalidArgument(fmt::format("gyre rl --resume: {} holds a policy of {} {}, this run's is {}", path,
                                        what, theirs, ours));
  };
  mismatch("algorithm", field("algo").get<std::string>(), o_.algo);
  mismatch("environment", field("env").get<std::string>(), o_.env);
  mismatch("network (observations x hidden x outputs)",
           fmt::format("{}x{}x{}", field("observations").get<int>(), field("hidden").get<int>(),
                       field("outputs").get<int>()),
           fmt::format("{}x{}x{}", env_.observations, o_.hidden, outputs_));
  Weights w = field("weights").get<Weights>();
  fmt::print("gyre rl: resumed from {} ({} env steps, {} updates before)\n", path, j.value("env_steps", 0),
             j.value("updates", 0));
  return w;
}

void PolicyFiles::write(const std::string& path, const Weights& weights, const RlProgress& p) const {
  const nlohmann::json j = {{"format", kFormat},      {"algo", o_.algo},        {"env", o_.env},
                            {"observations", env_.observations}, {"actions", env_.actions},
                            {"outputs", outputs_},    {"hidden", o_.hidden},    {"env_steps", p.envSteps},
                            {"updates", p.updates},   {"weights", weights}};
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  files::writeAtomically(path, j.dump());
}

void PolicyFiles::maybeSave(const std::function<Weights()>& weights, const RlProgress& p) {
  if (o_.checkpointDir.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - lastSave_ < std::chrono::seconds(5)) return;
  lastSave_ = now;
  write(checkpointPath(o_), weights(), p);
}

void PolicyFiles::finish(const Weights& weights, const RlProgress& p) {
  if (!o_.checkpointDir.empty()) write(checkpointPath(o_), weights, p);
  if (!o_.exportPath.empty()) {
    write(o_.exportPath, weights, p);
    fmt::print("gyre rl: the policy is in {}\n", o_.exportPath);
  }
}

}  // namespace gyre::rl
