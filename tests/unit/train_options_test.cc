// The built-in trainer's option table (src/train/options.h): flags generated for both programs,
// the arguments `gyre train` hands its workers, and one validation with one message per flag.
#include "train/options.h"

#include <gtest/gtest.h>

#include <cmath>

#include <set>
#include <string>
#include <variant>
#include <vector>

#include "gyre/errors.h"
#include "train/layout.h"

namespace gyre::train {
namespace {

// Parses `args` with the flags of `scope` into a fresh TrainOptions.
TrainOptions parse(const std::vector<std::string>& args, FlagScope scope) {
  TrainOptions o;
  CLI::App app{"test"};
  addTrainFlags(app, o, scope);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  return o;
}

// The message validateOptions gives, or "" when it accepts.
std::string refusal(const TrainOptions& o) {
  try {
    validateOptions(o);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(TrainOptions, TableNamesEveryFlagOnceWithHelp) {
  std::set<std::string_view> names;
  for (const TrainFlag& f : trainFlags()) {
    EXPECT_TRUE(f.name.starts_with("--")) << f.name;
    EXPECT_TRUE(names.insert(f.name).second) << f.name << " is declared twice";
    EXPECT_FALSE(f.help.empty()) << f.name;
    if (!f.needs.empty()) {
      EXPECT_NO_THROW(trainFlag(f.needs)) << f.name;
    }
  }
  EXPECT_GT(names.size(), 40u);
  EXPECT_THROW(trainFlag("--frobnicate"), InvalidArgument);
}

TEST(TrainOptions, EachProgramGetsItsFlags) {
  TrainOptions o;
  CLI::App launcher{"gyre train"}, worker{"worker"};
  addTrainFlags(launcher, o, FlagScope::kLauncher);
  addTrainFlags(worker, o, FlagScope::kWorker);
  for (const TrainFlag& f : trainFlags()) {
    const std::string name(f.name);
    EXPECT_EQ(launcher.get_option_no_throw(name) != nullptr, f.scope != FlagScope::kWorker) << name;
    EXPECT_EQ(worker.get_option_no_throw(name) != nullptr, f.scope != FlagScope::kLauncher) << name;
  }
  const std::string help = launcher.help();
  EXPECT_NE(help.find("--checkpoint-every"), std::string::npos);
  EXPECT_NE(help.find("{mlp, cnn or vit}"), std::string::npos) << help;
  EXPECT_NE(help.find("Elastic training"), std::string::npos) << help;
}

// What gyre train passes on is what the worker reads back, field for field.
TEST(TrainOptions, WorkerArgumentsRoundTrip) {
  TrainOptions o;
  o.model = "cnn";
  o.epochs = 3;
  o.batch = 96;
  o.lr = 0.0125;
  o.momentum = 0.5;
  o.compression = "bf16";
  o.lrScaling = "sqrt";
  o.warmupEpochs = 0.25;
  o.lrSchedule = "cosine";
  o.seed = 1234567890123ULL;
  o.dataDir = "/data/fm";
  o.runDir = "/tmp/run";
  o.maxSteps = 40;
  o.skipSteps = 3;
  o.eval = false;
  o.threads = 7;  // not forwarded: gyre run sets GYRE_NUM_THREADS
  o.dataWorkers = 3;
  o.bucketCapMb = 0.5;
  o.json = true;
  o.progress = "off";
  o.referenceSamplesPerS = 1234.5;
  o.checkpointDir = "/ck";
  o.checkpointEvery = 5;
  o.keepLast = 2;
  o.resume = true;
  o.stopAtStep = 9;
  o.commitEvery = 4;
  o.mode = "ps:ssp:2";
  o.stragglerRank = 1;
  o.stragglerFactor = 2.5;
  o.evalEvery = 6;
  o.faultAtStep = 8;
  o.faultRank = 1;
  o.np = 4;  // the job's: not forwarded
  const TrainOptions back = parse(workerArguments(o), FlagScope::kWorker);
  // Field for field, from the table: a flag both programs take comes back as given; any other
  // (the job's, the worker's own, or one gyre run passes another way) comes back as its default.
  const TrainOptions defaults{};
  for (const TrainFlag& f : trainFlags())
    std::visit(
        [&](auto member) {
          const bool passedOn = f.scope == FlagScope::kBoth && f.forwarded;
          EXPECT_EQ(back.*member, passedOn ? o.*member : defaults.*member) << f.name;
        },
        f.field);
  EXPECT_EQ(back.np, 1);
  EXPECT_FALSE(back.plain);

  // The defaults pass on as defaults.
  const TrainOptions plain = parse(workerArguments(TrainOptions{}), FlagScope::kWorker);
  EXPECT_TRUE(plain.eval);
  EXPECT_FALSE(plain.json);
  EXPECT_EQ(plain.mode, "allreduce");
  EXPECT_EQ(plain.stragglerRank, -1);
}

// Every bounded flag: an out-of-range value is refused with one message naming the flag.
TEST(TrainOptions, EveryBoundIsCheckedWithTheFlagsName) {
  EXPECT_EQ(refusal(TrainOptions{}), "");
  int checked = 0;
  for (const TrainFlag& f : trainFlags()) {
    if (f.bound == Bound::kNone && f.choices.empty()) continue;
    TrainOptions o;
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(o.*member)>;
          if constexpr (std::is_same_v<T, std::string>) {
            o.*member = "bogus";
          } else if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool> && std::is_signed_v<T>) {
            o.*member = f.bound == Bound::kRankOrNone ? T(-2) : f.bound == Bound::kAtLeast ? T(f.min - 1) : T(-1);
          }
        },
        f.field);
    const std::string message = refusal(o);
    EXPECT_TRUE(message.starts_with(std::string(f.name) + " ")) << f.name << ": '" << message << "'";
    ++checked;
  }
  EXPECT_GT(checked, 25);
  TrainOptions o;
  o.lr = 0;
  EXPECT_EQ(refusal(o), "--lr must be a finite number above 0; got 0");
  o = {};
  o.keepLast = 0;
  EXPECT_EQ(refusal(o), "--keep-last must be an integer of at least 1; got 0");
  o = {};
  o.model = "resnet";
  EXPECT_EQ(refusal(o), "--model 'resnet': expected mlp, cnn or vit");
  o = {};
  o.bucketCapMb = 1e300;
  EXPECT_EQ(refusal(o), "--bucket-cap-mb must be a finite number in (0, 1048576]; got 1e+300");
  o = {};
  o.mode = "ps:ssp";
  EXPECT_NE(refusal(o).find("--mode 'ps:ssp'"), std::string::npos);
}

// Every number flag's neighbours of a bad value: NaN, the infinities, and one past its largest.
TEST(TrainOptions, EveryNumberIsFiniteAndInsideItsRange) {
  int checked = 0;
  for (const TrainFlag& f : trainFlags()) {
    if (f.bound == Bound::kNone) continue;
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(TrainOptions().*member)>;
          std::vector<T> bad;
          if constexpr (std::is_same_v<T, double>) {
            bad = {std::nan(""), HUGE_VAL, -HUGE_VAL};
            if (f.max < numbers::kNoMax) bad.push_back(f.max * 1.5);
          } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            if (f.max < numbers::kNoMax) bad.push_back(static_cast<T>(f.max) + 1);
          }
          for (T value : bad) {
            TrainOptions o;
            o.*member = value;
            const std::string message = refusal(o);
            EXPECT_TRUE(message.starts_with(std::string(f.name) + " must be ")) << f.name << ": '" << message << "'";
            ++checked;
          }
        },
        f.field);
  }
  EXPECT_GT(checked, 25);
}

TEST(TrainOptions, CombinationsAreRefused) {
  TrainOptions o;
  o.checkpointEvery = 5;
  EXPECT_EQ(refusal(o), "--checkpoint-every needs --checkpoint-dir (where to save)");
  o = {};
  o.elastic = true;
  o.resume = true;
  o.checkpointDir = "ck";
  EXPECT_NE(refusal(o).find("--elastic keeps its state in memory"), std::string::npos);
  o = {};
  o.servers = 2;
  EXPECT_NE(refusal(o).find("--servers 2 needs a parameter-server --mode"), std::string::npos);
  o = {};
  o.shardOptimizer = true;
  o.compression = "fp16";
  EXPECT_NE(refusal(o).find("--shard-optimizer reduce-scatters"), std::string::npos);
  o = {};
  o.maxRestarts = 1;
  EXPECT_NE(refusal(o).find("--max-restarts 1 needs --checkpoint-dir"), std::string::npos);
}

TEST(TrainOptions, ResizeAndAugmentationsAreParsedOrRefusedByName) {
  EXPECT_EQ(parseResize("32x24"), (std::pair{32, 24}));
  for (const char* bad : {"32", "x32", "32x", "0x32", "32x-1", "32x32x3", "axb"})
    EXPECT_EQ(parseResize(bad), std::nullopt) << bad;
  const std::vector<AugmentStage> stages = parseAugment("flip,crop:4");
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].name, "flip");
  EXPECT_EQ(stages[1].name, "crop");
  EXPECT_EQ(stages[1].padding, 4);
  EXPECT_TRUE(parseAugment("").empty());
  TrainOptions o;
  o.augment = "flip,rotate";
  EXPECT_EQ(refusal(o), "--augment 'flip,rotate': 'rotate' is not flip or crop:N");
  o.augment = "crop:0";
  EXPECT_EQ(refusal(o), "--augment 'crop:0': crop:N needs a padding N from 1 to 1024, not '0'");
  o = {};
  o.data = "d";
  o.resize = "32";
  EXPECT_EQ(refusal(o), "--resize '32': expected HEIGHTxWIDTH, like 32x32");
}

TEST(TrainOptions, ZeroStagesAndWhatTheyDoNotGoWith) {
  auto zero = [](int stage) {
    TrainOptions o;
    o.zero = stage;
    return o;
  };
  EXPECT_EQ(refusal(zero(1)), "");
  EXPECT_EQ(refusal(zero(3)), "");
  EXPECT_EQ(refusal(zero(2)), "");
  EXPECT_NE(refusal(zero(4)).find("--zero"), std::string::npos);
  TrainOptions o = zero(3);
  o.shardOptimizer = true;
  EXPECT_NE(refusal(o).find("--shard-optimizer is --zero 1: it does not go with --zero 3"), std::string::npos);
  o = zero(3);
  o.checkpointDir = "ck";  // every worker saves its own part
  EXPECT_EQ(refusal(o), "");
  o = zero(2);
  o.compression = "fp16";
  EXPECT_NE(refusal(o).find("--zero 2 reduce-scatters float32 gradients"), std::string::npos);
  o = zero(3);
  o.optimizer = "lamb";
  EXPECT_NE(refusal(o).find("--optimizer lamb takes the norm of whole layers"), std::string::npos);
  o = zero(3);
  o.evalEvery = 10;
  EXPECT_NE(refusal(o).find("--eval-every"), std::string::npos);
  o = zero(3);
  o.plain = true;
  EXPECT_NE(refusal(o).find("--zero 3 shards the data-parallel optimizer step"), std::string::npos);
  o = zero(3);
  o.pp = 2;
  EXPECT_NE(refusal(o).find("--zero 3 is not supported with --pp yet"), std::string::npos);
  o = zero(2);  // the replicas of each stage shard their optimizer state and gradients
  o.pp = 2;
  EXPECT_EQ(refusal(o), "");
  o = zero(1);
  o.autotune = true;
  EXPECT_NE(refusal(o).find("--autotune tunes the data-parallel gradient buckets"), std::string::npos);
  EXPECT_EQ(zeroStage(zero(0)), 0);
  o = {};
  o.shardOptimizer = true;
  EXPECT_EQ(zeroStage(o), 1);
  EXPECT_EQ(zeroStage(zero(3)), 3);
}

TEST(TrainOptions, TheVitsShapeMustFitAndIsForTheVitOnly) {
  TrainOptions o;
  o.model = "vit";
  o.vitWidth = 96;
  o.vitHeads = 6;
  o.vitPatch = 4;
  EXPECT_EQ(refusal(o), "");
  o.vitHeads = 5;
  EXPECT_EQ(refusal(o), "--vit-heads 5 does not divide --vit-width 96");
  o.vitHeads = 6;
  o.vitPatch = 5;
  EXPECT_EQ(refusal(o), "--vit-patch 5 does not divide the 28-pixel images (1, 2, 4, 7, 14 or 28)");
  o = {};
  o.model = "cnn";
  o.vitDepth = 8;
  EXPECT_EQ(refusal(o), "--vit-depth, --vit-width, --vit-heads and --vit-patch shape --model vit, not cnn");
}

TEST(TrainOptions, WorldChecksNameTheWorld) {
  TrainOptions o;
  o.batch = 100;
  EXPECT_THROW(checkWorld(o, 3), InvalidArgument);
  EXPECT_NO_THROW(checkWorld(o, 4));
  o.elastic = true;
  EXPECT_NO_THROW(checkWorld(o, 3));  // elastic worlds weigh uneven shares
  o = {};
  o.stragglerRank = 2;
  try {
    checkWorld(o, 2);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "--straggler-rank 2 is not a rank of the 2 workers (0 to 1, or -1 for none)");
  }
}

// The pipeline's flags: what it cannot run or be combined with yet is refused with a message that
// says so, before any worker starts.
TEST(TrainOptions, ModelParallelFlagsAreCheckedBeforeAnyWorker) {
  TrainOptions o;
  o.microBatches = 4;
  EXPECT_NE(refusal(o).find("they need --pp 2 or more"), std::string::npos) << refusal(o);
  o = {};
  o.pp = 2;
  EXPECT_EQ(refusal(o), "");
  o.schedule = "interleaved";
  EXPECT_EQ(refusal(o), "--schedule interleaved needs --virtual-stages 2 or more (stages per worker)");
  o.virtualStages = 2;
  o.microBatches = 3;
  EXPECT_EQ(refusal(o), "--schedule interleaved runs micro-batches in rounds of --pp: --micro-batches 3 is not a "
                        "multiple of 2");
  o.microBatches = 0;
  EXPECT_EQ(refusal(o), "");
  o.schedule = "gpipe";
  o.virtualStages = 2;
  EXPECT_EQ(refusal(o), "--virtual-stages 2 is for --schedule interleaved");
  o.virtualStages = 1;
  o.checkpointDir = "ck";
  EXPECT_EQ(refusal(o), "");  // every rank saves its part
  o.checkpointDir.clear();
  o.compression = "topk:0.01";
  EXPECT_NE(refusal(o).find("--compression topk:0.01 is not supported with --pp yet"), std::string::npos);
  o.compression = "bf16";
  EXPECT_EQ(refusal(o), "");
  o.balance = "2,x";
  EXPECT_NE(refusal(o).find("--balance '2,x': expected even, time, or layer counts"), std::string::npos);
  o.balance = "1,2,3";
  EXPECT_EQ(refusal(o), "--balance '1,2,3' gives 3 stages; --pp 2 needs 2");
  o.balance = "2,4";
  EXPECT_EQ(refusal(o), "");
  EXPECT_EQ(explicitBalance(o), (std::vector<int>{2, 4}));
  o = {};
  o.model = "vit";
  o.vitDepth = 2;
  o.pp = 5;
  EXPECT_EQ(refusal(o), "the vit has 4 layers: too few for 5 pipeline stages (a deeper --vit-depth adds layers)");
}

TEST(TrainOptions, TheLayoutPutsAPipelinesRanksSideBySide) {
  TrainOptions o;
  o.pp = 2;
  o.batch = 66;
  const Layout l = layoutOf(o, 6, 5);
  EXPECT_EQ(l.dp, 3);
  EXPECT_EQ(l.stageRank(), 1);
  EXPECT_EQ(l.replica(), 2);
  EXPECT_THROW(layoutOf(o, 5, 0), InvalidArgument);  // 2 does not divide 5
  o.dp = 2;
  EXPECT_THROW(layoutOf(o, 6, 0), InvalidArgument);  // 2 x 2 is not 6
  o.dp = 0;
  o.batch = 64;
  EXPECT_THROW(layoutOf(o, 6, 0), InvalidArgument);  // 64 over 3 replicas
  o.batch = 6;
  o.microBatches = 3;
  EXPECT_THROW(checkWorld(o, 6), InvalidArgument);   // 2 samples per replica, 3 micro-batches
  o.microBatches = 2;
  EXPECT_NO_THROW(checkWorld(o, 6));
  TrainOptions three;
  three.pp = 3;
  EXPECT_EQ(microBatchesOf(three), 6);
}

TEST(TrainOptions, TensorParallelismSplitsTheVitsHeadsAndGroupsNeighbours) {
  TrainOptions o;
  o.model = "vit";
  o.tp = 2;
  EXPECT_EQ(refusal(o), "");
  const Layout l = layoutOf(o, 4, 3);  // dp 2 x tp 2: rank 3 is the second rank of replica 1
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(l.tpRank(), 1);
  EXPECT_EQ(l.stageRank(), 0);
  EXPECT_EQ(l.replica(), 1);
  EXPECT_THROW(layoutOf(o, 3, 0), InvalidArgument);  // 2 does not divide 3
  o.dp = 4;
  try {
    checkWorld(o, 4);
    ADD_FAILURE() << "--dp 4 x --tp 2 on 4 workers was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--dp 4 × --pp 1 × --tp 2 is 8, not the 4 workers"), std::string::npos)
        << e.what();
  }
  o.dp = 0;
  o.vitHeads = 6;
  o.vitWidth = 96;
  o.tp = 4;
  EXPECT_EQ(refusal(o), "--tp 4 does not divide the vit's 6 heads (--vit-heads): each rank computes whole heads");
  o = {};
  o.tp = 2;
  EXPECT_EQ(refusal(o), "--tp splits the vit's transformer blocks: --model mlp has none (use --model vit)");
  o.model = "vit";
  o.pp = 2;
  EXPECT_EQ(refusal(o), "");  // 1f1b
  o.schedule = "zero-bubble";
  EXPECT_EQ(refusal(o), "");
  o.schedule = "1f1b";
  const Layout mesh = layoutOf(o, 8, 6);  // dp 2 x pp 2 x tp 2: rank 6 is replica 1's stage 1, tp rank 0
  EXPECT_EQ(mesh.dp, 2);
  EXPECT_EQ(mesh.tpRank(), 0);
  EXPECT_EQ(mesh.stageRank(), 1);
  EXPECT_EQ(mesh.replica(), 1);
  o.pp = 1;
  o.zero = 3;
  EXPECT_EQ(refusal(o), "--zero 3 is not supported with --tp yet (--zero 1 and 2 shard the replicas' optimizer "
                        "state and gradients)");
  o.zero = 2;
  EXPECT_EQ(refusal(o), "");
  o.zero = 0;
  o.checkpointDir = "ck";
  EXPECT_EQ(refusal(o), "");  // every rank saves its part
  o.evalEvery = 5;
  EXPECT_NE(refusal(o).find("--eval-every is not supported with --tp yet"), std::string::npos);
}

TEST(TrainOptions, FlagsGivenWithoutTheFlagTheyNeedAreRefused) {
  TrainOptions o;
  CLI::App app{"gyre train"};
  addTrainFlags(app, o, FlagScope::kLauncher);
  app.parse(std::vector<std::string>{"2", "--min-np"});
  try {
    checkGivenTogether(app);
    FAIL() << "--min-np without --elastic was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "--min-np needs --elastic");
  }
  TrainOptions elastic;
  CLI::App ok{"gyre train"};
  addTrainFlags(ok, elastic, FlagScope::kLauncher);
  ok.parse(std::vector<std::string>{"2", "--min-np", "--elastic"});
  EXPECT_NO_THROW(checkGivenTogether(ok));
  EXPECT_TRUE(elastic.elastic);
  EXPECT_EQ(elastic.minNp, 2);
}

}  // namespace
}  // namespace gyre::train
