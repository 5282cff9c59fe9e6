#include "train/options.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "common/check.h"
#include "common/compression_spec.h"
#include "common/numbers.h"
#include "gyre/errors.h"
#include "gyre/ps.h"
#include "train/layout.h"

namespace gyre::train {
namespace {

// "a|b|c" -> {"a", "b", "c"}; "" -> {}.
std::vector<std::string_view> choiceNames(std::string_view choices) {
  std::vector<std::string_view> out;
  while (!choices.empty()) {
    const auto bar = choices.find('|');
    out.push_back(choices.substr(0, bar));
    choices = bar == std::string_view::npos ? std::string_view() : choices.substr(bar + 1);
  }
  return out;
}

// "a, b or c".
std::string spoken(std::string_view choices) {
  const std::vector<std::string_view> parts = choiceNames(choices);
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += i + 1 == parts.size() ? " or " : ", ";
    out += parts[i];
  }
  return out;
}

using numbers::format;  // the shortest text that reads back as the number

template <typename T>
std::string text(const T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else if constexpr (std::is_same_v<T, double>) {
    return format(value);
  } else {
    return std::to_string(value);
  }
}

// The flag's bound, checked on a number: finite (doubles) and inside [lower, f.max].
template <typename T>
void checkBound(const TrainFlag& f, T value) {
  double lower = 0;
  bool exclusive = false;
  std::string_view note;
  switch (f.bound) {
    case Bound::kNone:
      return;
    case Bound::kNonNegative:
      break;
    case Bound::kPositive:
      exclusive = true;
      break;
    case Bound::kAtLeast:
      lower = f.min;
      break;
    case Bound::kRankOrNone:
      lower = -1;
      note = "-1: none";
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    const auto min = static_cast<std::int64_t>(exclusive ? lower + 1 : lower);
    numbers::checkInt(f.name, static_cast<std::int64_t>(value), min, static_cast<std::int64_t>(f.max), note);
  } else {
    numbers::check(f.name, value, {.min = lower, .max = f.max, .minExclusive = exclusive, .note = note});
  }
}

// CLI11 reads an integer too large for its field as the field's largest value; this refuses it.
template <typename T>
CLI::Validator fitsIn() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        T parsed{};
        const auto [end, ec] = std::from_chars(input.data(), input.data() + input.size(), parsed);
        if (ec != std::errc::result_out_of_range) return {};  // other mistakes: CLI11's own message
        return input + " is out of range: integers from " +
               std::to_string(std::numeric_limits<T>::min()) + " to " + std::to_string(std::numeric_limits<T>::max());
      },
      "", "");
}

void checkFlag(const TrainFlag& f, const TrainOptions& o) {
  std::visit(
      [&](auto member) {
        using T = std::remove_cvref_t<decltype(o.*member)>;
        const T& value = o.*member;
        if constexpr (std::is_same_v<T, std::string>) {
          if (f.choices.empty()) return;
          const std::vector<std::string_view> choices = choiceNames(f.choices);
          GYRE_USAGE_CHECK(std::find(choices.begin(), choices.end(), value) != choices.end(), f.name, " '", value,
                           "': expected ", spoken(f.choices));
        } else if constexpr (!std::is_same_v<T, bool>) {
          checkBound(f, value);
        }
      },
      f.field);
}

// The --elastic combinations: the state lives in memory, so the checkpoint flags do not apply.
void checkElastic(const TrainOptions& o) {
  for (const auto& [given, flag] : {std::pair{!o.checkpointDir.empty(), "--checkpoint-dir"},
                                    std::pair{o.resume, "--resume"}, std::pair{o.stopAtStep > 0, "--stop-at-step"}})
    GYRE_USAGE_CHECK(!given, "--elastic keeps its state in memory (a commit every --commit-every steps): ", flag,
                     " belongs to restart mode and cannot be combined with it yet");
  GYRE_USAGE_CHECK(!o.plain, "--elastic trains through gyre: --plain does not apply");
}

// A ps mode keeps the model on the servers; the features that keep it in the workers
// (checkpoints, elastic worlds) or change what travels (compression) do not apply yet.
void checkParameterServerMode(const TrainOptions& o) {
  GYRE_USAGE_CHECK(!o.plain, "--mode ", o.mode, " trains through parameter servers: --plain does not apply");
  GYRE_USAGE_CHECK(!o.elastic, "--mode ", o.mode, " cannot be combined with --elastic yet");
  GYRE_USAGE_CHECK(o.checkpointDir.empty() && !o.resume, "--mode ", o.mode,
                   " keeps the parameters on the servers: checkpoints (--checkpoint-dir, --resume) are not supported "
                   "with it yet");
  GYRE_USAGE_CHECK(o.compression == "none", "--mode ", o.mode, " pushes float32 gradients: --compression ",
                   o.compression, " does not apply");
  GYRE_USAGE_CHECK(o.optimizer == "sgd" && o.weightDecay == 0, "--mode ", o.mode,
                   " updates the parameters on the servers with SGD and --momentum: --optimizer ",
                   o.optimizer, o.weightDecay != 0 ? " and --weight-decay" : "", " do not apply");
}

// --shard-optimizer, --zero 1 and --zero 3.
void checkShardOptimizer(const TrainOptions& o) {
  const std::string flag = o.zero > 0 ? "--zero " + std::to_string(o.zero) : "--shard-optimizer";
  GYRE_USAGE_CHECK(!o.shardOptimizer || o.zero <= 1, "--shard-optimizer is --zero 1: it does not go with ", flag);
  GYRE_USAGE_CHECK(!o.plain && !o.elastic && !isParameterServerMode(o.mode), flag,
                   " shards the data-parallel optimizer step: it does not apply with --plain, "
                   "--elastic or --mode ",
                   o.mode);
  GYRE_USAGE_CHECK(o.compression == "none", flag, " reduce-scatters float32 gradients: --compression ",
                   o.compression, " does not apply");
  GYRE_USAGE_CHECK(o.optimizer == "sgd" || o.optimizer == "adam", flag,
                   " splits the optimizer step "
                   "elementwise: --optimizer ",
                   o.optimizer, " takes the norm of whole layers (use sgd or adam)");
  if (o.zero < 3) return;
  GYRE_USAGE_CHECK(!o.syncBn && o.backupWorkers == 0, flag, " gathers each layer's parameters in the forward "
                   "pass, with every worker: --sync-bn and --backup-workers are not supported with it yet");
  GYRE_USAGE_CHECK(o.evalEvery == 0, flag, " keeps only a shard of the parameters on each worker: --eval-every "
                   "(snapshots of the whole model) is not supported with it yet");
}

}  // namespace

void addTrainFlags(CLI::App& app, TrainOptions& o, FlagScope scope) {
  for (const TrainFlag& f : trainFlags()) {
    if (f.scope != FlagScope::kBoth && f.scope != scope) continue;
    const std::string name(f.name);
    const std::string help(f.help);
    CLI::Option* option = std::visit(
        [&](auto member) -> CLI::Option* {
          using T = std::remove_cvref_t<decltype(o.*member)>;
          T& value = o.*member;
          if constexpr (std::is_same_v<T, bool>) {
            if (f.negated) return app.add_flag_callback(name, [&value] { value = false; }, help);
            return app.add_flag(name, value, help);
          } else {
            CLI::Option* added = app.add_option(name, value, help);
            if constexpr (std::is_same_v<T, std::string>) {
              if (!value.empty()) added->default_str(value);
              if (!f.choices.empty()) added->type_name("{" + spoken(f.choices) + "}");
            } else {
              added->default_str(text(value));
              if constexpr (std::is_integral_v<T>) added->check(fitsIn<T>());
            }
            return added;
          }
        },
        f.field);
    if (!f.group.empty()) option->group(std::string(f.group));
  }
}

void checkGivenTogether(const CLI::App& app) {
  for (const TrainFlag& f : trainFlags()) {
    if (f.needs.empty()) continue;
    const CLI::Option* given = app.get_option_no_throw(std::string(f.name));
    const CLI::Option* needed = app.get_option_no_throw(std::string(f.needs));
    if (given == nullptr || needed == nullptr) continue;  // not flags of this program
    GYRE_USAGE_CHECK(given->count() == 0 || needed->count() > 0, f.name, " needs ", f.needs);
  }
}

namespace {

// `f`'s arguments for `o`'s value: none for a bool at its flag's opposite or an empty string.
void appendArguments(std::vector<std::string>& argv, const TrainFlag& f, const TrainOptions& o) {
  std::visit(
      [&](auto member) {
        using T = std::remove_cvref_t<decltype(o.*member)>;
        const T& value = o.*member;
        if constexpr (std::is_same_v<T, bool>) {
          if (value != f.negated) argv.emplace_back(f.name);
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (!value.empty()) argv.insert(argv.end(), {std::string(f.name), value});
        } else {
          argv.insert(argv.end(), {std::string(f.name), text(value)});
        }
      },
      f.field);
}

bool sameValue(const TrainFlag& f, const TrainOptions& a, const TrainOptions& b) {
  return std::visit([&](auto member) { return a.*member == b.*member; }, f.field);
}

}  // namespace

std::vector<std::string> workerArguments(const TrainOptions& o) {
  std::vector<std::string> argv;
  for (const TrainFlag& f : trainFlags())
    if (f.scope == FlagScope::kBoth && f.forwarded) appendArguments(argv, f, o);
  return argv;
}

std::vector<std::string> changedArguments(const TrainOptions& o, FlagScope program) {
  const TrainOptions defaults;
  std::vector<std::string> argv;
  for (const TrainFlag& f : trainFlags()) {
    const bool takes = f.scope == program || (f.scope == FlagScope::kBoth &&
                                              (program == FlagScope::kLauncher || f.forwarded));
    if (takes && !sameValue(f, o, defaults)) appendArguments(argv, f, o);
  }
  return argv;
}

namespace {

// A whole decimal number, all of `text`.
std::optional<std::int64_t> wholeNumber(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<std::pair<int, int>> parseResize(const std::string& text) {
  const std::size_t x = text.find('x');
  if (x == std::string::npos) return std::nullopt;
  const std::optional<std::int64_t> h = wholeNumber(text.substr(0, x));
  const std::optional<std::int64_t> w = wholeNumber(text.substr(x + 1));
  if (!h || !w || *h < 1 || *w < 1 || *h > 65536 || *w > 65536) return std::nullopt;
  return std::pair{static_cast<int>(*h), static_cast<int>(*w)};
}

std::vector<AugmentStage> parseAugment(const std::string& text) {
  std::vector<AugmentStage> stages;
  if (text.empty()) return stages;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    if (item == "flip") {
      stages.push_back({"flip", 0});
    } else if (item.rfind("crop:", 0) == 0) {
      const std::optional<std::int64_t> n = wholeNumber(item.substr(5));
      GYRE_USAGE_CHECK(n && *n >= 1 && *n <= 1024, "--augment '", text, "': crop:N needs a padding N from 1 to 1024, not '",
                       item.substr(5), "'");
      stages.push_back({"crop", static_cast<int>(*n)});
    } else {
      throw InvalidArgument("--augment '" + text + "': '" + item + "' is not flip or crop:N");
    }
    begin = end + 1;
  }
  return stages;
}

void validateOptions(const TrainOptions& o) {
  for (const TrainFlag& f : trainFlags()) checkFlag(f, o);
  GYRE_USAGE_CHECK(o.resize.empty() || parseResize(o.resize), "--resize '", o.resize,
                   "': expected HEIGHTxWIDTH, like 32x32");
  parseAugment(o.augment);
  const bool ps = isParameterServerMode(o.mode);
  GYRE_USAGE_CHECK(o.restartCount >= 0, "GYRE_RESTART_COUNT must not be negative (got ", o.restartCount, ")");
  GYRE_USAGE_CHECK(o.maxSteps == 0 || o.skipSteps < o.maxSteps, "--skip-steps ", o.skipSteps,
                   " leaves none of the --max-steps ", o.maxSteps, " to time");
  GYRE_USAGE_CHECK(o.checkpointEvery == 0 || !o.checkpointDir.empty(),
                   "--checkpoint-every needs --checkpoint-dir (where to save)");
  GYRE_USAGE_CHECK(!o.resume || !o.checkpointDir.empty(), "--resume needs --checkpoint-dir (where to resume from)");
  GYRE_USAGE_CHECK(!o.plain || o.compression == "none", "--plain trains without gyre: --compression does not apply");
  GYRE_USAGE_CHECK(!o.plain || o.precision == "fp32",
                   "--plain is the fp32 libtorch reference loop: --precision ", o.precision,
                   " does not apply");
  GYRE_USAGE_CHECK(o.momentum < 1, "--momentum must be below 1 (got ", numbers::format(o.momentum), ")");
  GYRE_USAGE_CHECK(o.faultPoint == "after-step" || !o.elastic, "--fault-point ", o.faultPoint,
                   " is for restart mode; --elastic faults strike after a step");
  GYRE_USAGE_CHECK(o.faultPoint.find("checkpoint") == std::string::npos || !o.checkpointDir.empty(),
                   "--fault-point ", o.faultPoint, " needs --checkpoint-dir");
  GYRE_USAGE_CHECK(
      !o.syncBn || (o.model == "cnn" && !o.plain && !ps),
      "--sync-bn adds batch normalisation to the cnn, its statistics shared by the data-parallel "
      "workers: it needs --model cnn, and not --plain or a parameter-server --mode");
  const TrainOptions defaults;
  GYRE_USAGE_CHECK(o.model == "vit" || (o.vitDepth == defaults.vitDepth && o.vitWidth == defaults.vitWidth &&
                                        o.vitHeads == defaults.vitHeads && o.vitPatch == defaults.vitPatch),
                   "--vit-depth, --vit-width, --vit-heads and --vit-patch shape --model vit, not ", o.model);
  GYRE_USAGE_CHECK(o.vitWidth % o.vitHeads == 0, "--vit-heads ", o.vitHeads, " does not divide --vit-width ",
                   o.vitWidth);
  GYRE_USAGE_CHECK(28 % o.vitPatch == 0, "--vit-patch ", o.vitPatch,
                   " does not divide the 28-pixel images (1, 2, 4, 7, 14 or 28)");
  const std::string compression = parseCompressionSpec(o.compression, "--compression").kind;
  const bool lossy = compression == "topk" || compression == "powersgd";
  GYRE_USAGE_CHECK(o.stragglerThreshold == 0 || o.stragglerThreshold > 1,
                   "--straggler-threshold must be above 1, "
                   "or 0 for no straggler detection (got ",
                   numbers::format(o.stragglerThreshold), ")");
  GYRE_USAGE_CHECK(o.backupWorkers == 0 || o.stragglerThreshold > 0,
                   "--backup-workers needs --straggler-threshold above 1: it decides which workers are slow");
  GYRE_USAGE_CHECK(o.backupWorkers == 0 || (!ps && !o.plain && !o.elastic && !o.syncBn),
                   "--backup-workers is for the allreduce --mode, without --plain, --elastic or --sync-bn "
                   "(a worker that skips its forward pass would leave SyncBatchNorm's allreduces waiting)");
  GYRE_USAGE_CHECK(
      !o.autotune || (!ps && !o.plain && zeroStage(o) == 0),
      "--autotune tunes the data-parallel gradient buckets: not with --plain, a parameter-server "
      "--mode or --shard-optimizer / --zero (whose buckets never move)");
  GYRE_USAGE_CHECK(
      o.allreduce == "auto" || (!ps && !o.plain && zeroStage(o) == 0 && !lossy), "--allreduce ", o.allreduce,
      " picks the gradient buckets' allreduce: it does not apply with --plain, a parameter-server "
      "--mode, --shard-optimizer / --zero (a reduce-scatter) or --compression topk/powersgd (their own "
      "collectives)");
  GYRE_USAGE_CHECK(!o.autotune || !lossy, "--autotune tunes the gradient buckets, which --compression ",
                   o.compression, " does not use (it reduces every gradient at once)");
  if (o.elastic) checkElastic(o);
  if (ps) checkParameterServerMode(o);
  if (zeroStage(o) > 0) checkShardOptimizer(o);
  checkModelParallel(o);
  // The job's own flags (gyre train's; a worker has their defaults).
  GYRE_USAGE_CHECK(o.servers < 0 || ps, "--servers ", o.servers,
                   " needs a parameter-server --mode (ps:bsp, ps:asp or ps:ssp:S)");
  // -1 inside: not given (1 with a ps mode).
  if (o.servers >= 0) numbers::checkInt("--servers", o.servers, 1, static_cast<std::int64_t>(kMaxProcesses));
  GYRE_USAGE_CHECK(o.maxRestarts == 0 || o.elastic || !o.checkpointDir.empty(), "--max-restarts ", o.maxRestarts,
                   " needs --checkpoint-dir: a restarted generation resumes from the newest checkpoint there, and "
                   "without checkpoints it would start training over (or use --elastic, where it counts "
                   "replacement workers)");
  if (o.elastic) {
    const int maxNp = o.maxNp > 0 ? o.maxNp : o.np;
    GYRE_USAGE_CHECK(o.minNp <= o.np && o.np <= maxNp, "--np ", o.np, " is outside --min-np ", o.minNp,
                     " .. --max-np ", maxNp);
    GYRE_USAGE_CHECK(o.batch >= maxNp, "--batch ", o.batch,
                     " is the global batch: it needs at least one sample for each of --max-np ", maxNp, " workers");
    GYRE_USAGE_CHECK(o.batchShards <= o.batch, "--batch-shards ", o.batchShards, " cuts the global batch of ", o.batch,
                     " into more shards than it has samples");
  }
}

void checkWorld(const TrainOptions& o, int world) {
  // Elastic worlds need not divide the batch (each rank's loss is weighted by its share), and the
  // fault names a worker id, not a rank.
  const bool split = o.pp > 1 || o.tp > 1;
  if (split) checkLayout(o, world);  // the batch divides among the replicas
  GYRE_USAGE_CHECK(o.elastic || split || o.batch % world == 0, "--batch ", o.batch,
                   " is the global batch and must divide evenly among the ", world, " workers: choose a multiple of ",
                   world);
  GYRE_USAGE_CHECK(o.stragglerRank < world, "--straggler-rank ", o.stragglerRank, " is not a rank of the ", world,
                   " workers (0 to ", world - 1, ", or -1 for none)");
  GYRE_USAGE_CHECK(o.stragglerCpu == 0 || (o.stragglerRank >= 0 && o.stragglerCpu >= 0.01 && o.stragglerCpu <= 64),
                   "--straggler-cpu ", o.stragglerCpu, " needs --straggler-rank and a share in [0.01, 64] cores");
  GYRE_USAGE_CHECK(o.stragglerCpu == 0 || o.stragglerFactor == 1,
                   "--straggler-cpu and --straggler-factor are two ways to slow the straggler: give one");
  GYRE_USAGE_CHECK(o.backupWorkers < world, "--backup-workers ", o.backupWorkers, " must be fewer than the ",
                   world, " workers: the step needs at least one gradient");
  GYRE_USAGE_CHECK(o.faultAtStep == 0 || o.faultRank < world, "--fault-rank ", o.faultRank, " is not a ",
                   o.elastic ? "worker id" : "rank", " of the ", world, " workers (0 to ", world - 1, ")");
}

bool isParameterServerMode(const std::string& mode) {
  if (mode == "allreduce") return false;
  GYRE_USAGE_CHECK(mode.rfind("ps:", 0) == 0, "--mode '", mode,
                   "': allreduce, or a parameter-server mode: ps:bsp, ps:asp or ps:ssp:S");
  try {
    ps::Mode::parse(mode.substr(3));
  } catch (const InvalidArgument&) {
    GYRE_USAGE_CHECK(false, "--mode '", mode, "': the parameter-server modes are ps:bsp, ps:asp and ps:ssp:S ",
                     "(S >= 0 steps of staleness)");
  }
  return true;
}

}  // namespace gyre::train
