// `gyre train --pp`: a model cut into pipeline stages across workers trains the same model as one
// worker (the same global batch, the same arithmetic up to rounding), with data-parallel replicas
// of the pipeline too; the epoch's figures carry the pipeline's bubble, the timeline its stages'
// forwards and backwards, and model.pt the whole model. --zero 3 (the parameters sharded too) trains
// the same model with 1/N of the training state per worker.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/programs.h"
#include "support/ranks.h"
#include "torch/tensor_checks.h"
#include "train/cli_support.h"
#include "train/layout.h"
#include "train/models.h"

namespace gyre::train {
namespace {

using cli::contains;
using cli::gyreTool;
using cli::gyreTrain;
using cli::haveData;
using cli::jsonLines;

std::vector<double> stepLosses(const std::string& runDir) {
  std::vector<double> out;
  for (const nlohmann::json& j : jsonLines(runDir + "/steps.jsonl")) out.push_back(j.at("loss").get<double>());
  return out;
}

std::vector<::torch::Tensor> savedParameters(const std::string& runDir, const std::string& name = "mlp",
                                             const VitOptions& vit = {}) {
  ::torch::nn::Sequential model = makeModel(name, false, vit);
  ::torch::load(model, runDir + "/model.pt");
  std::vector<::torch::Tensor> out;
  for (const ::torch::Tensor& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

// The flags of `parts`, one after the other.
std::vector<std::string> concat(std::initializer_list<std::vector<std::string>> parts) {
  std::vector<std::string> out;
  for (const std::vector<std::string>& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

class PipelineCli : public cli::TrainerTest {
 protected:
  void SetUp() override {
    cli::TrainerTest::SetUp();
    if (!IsSkipped() && !haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }

  // The mlp (unless `layout` names a --model) for 12 steps of the global batch 96, 1 thread per
  // worker, with `layout`'s flags.
  nlohmann::json train(const std::string& name, std::vector<std::string> layout) {
    const std::string runDir = path(name);
    std::vector<std::string> args = {"--epochs", "1",  "--max-steps", "12",     "--batch", "96",
                                     "--threads", "1", "--json",      "--run-dir", runDir};
    if (std::find(layout.begin(), layout.end(), "--model") == layout.end()) args.insert(args.end(), {"--model", "mlp"});
    args.insert(args.end(), layout.begin(), layout.end());
    const test::ProgramRun r = gyreTrain(args);
    EXPECT_EQ(r.exitCode, 0) << name << ": " << r.describe() << "\nstdout:\n" << r.out;
    const std::vector<nlohmann::json> epochs = jsonLines(runDir + "/metrics.jsonl");
    return epochs.empty() ? nlohmann::json() : epochs.back();
  }

  // Run "split" of the vit of width 32, 4 heads and 2 blocks has run "whole"'s losses within 1e-5
  // and its final parameters within `tolerance`.
  void expectTheSmallVitsRun(double tolerance, const char* what) {
    const std::vector<double> want = stepLosses(path("whole")), got = stepLosses(path("split"));
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t s = 0; s < got.size(); ++s)
      EXPECT_NEAR(got[s], want[s], 1e-5 * std::abs(want[s])) << "step " << s + 1;
    const VitOptions shape{.depth = 2, .width = 32, .heads = 4};
    test::expectClose(savedParameters(path("split"), "vit", shape), savedParameters(path("whole"), "vit", shape),
                      tolerance, what);
  }
};

// Every layout trains on the same global batch: losses, test accuracy and the final parameters
// match one worker's up to float rounding (micro-batches sum in another order).
TEST_F(PipelineCli, EveryLayoutTrainsTheModelOfOneWorker) {
  const nlohmann::json one = train("one", {"--np", "1"});
  ASSERT_FALSE(one.is_null());
  const std::vector<double> losses = stepLosses(path("one"));
  ASSERT_EQ(losses.size(), 12u);
  const std::vector<::torch::Tensor> params = savedParameters(path("one"));

  const std::vector<std::pair<std::string, std::vector<std::string>>> layouts = {
      {"pp2", {"--np", "2", "--pp", "2"}},
      {"pp2-zero-bubble", {"--np", "2", "--pp", "2", "--schedule", "zero-bubble", "--micro-batches", "3",
                           "--balance", "2,4"}},
      {"pp3-gpipe-recompute", {"--np", "3", "--pp", "3", "--schedule", "gpipe", "--recompute", "--micro-batches",
                               "5"}},
      {"pp2-interleaved-timed", {"--np", "2", "--pp", "2", "--schedule", "interleaved", "--virtual-stages", "2",
                                 "--micro-batches", "4", "--balance", "time"}},
      {"dp2-pp2", {"--np", "4", "--pp", "2", "--dp", "2"}},
      {"dp2-pp2-zero2", {"--np", "4", "--pp", "2", "--zero", "2"}},
      {"zero3-np2", {"--np", "2", "--zero", "3"}},
      {"zero3-np3", {"--np", "3", "--zero", "3"}},
  };
  for (const auto& [name, layout] : layouts) {
    SCOPED_TRACE(name);
    const nlohmann::json epoch = train(name, layout);
    ASSERT_FALSE(epoch.is_null());
    const std::vector<double> got = stepLosses(path(name));
    ASSERT_EQ(got.size(), losses.size());
    for (std::size_t s = 0; s < got.size(); ++s) EXPECT_NEAR(got[s], losses[s], 1e-5 * losses[s]) << "step " << s + 1;
    EXPECT_NEAR(epoch.at("test_accuracy").get<double>(), one.at("test_accuracy").get<double>(), 2e-4);
    test::expectClose(savedParameters(path(name)), params, 1e-4, name.c_str());
    // No worker holds the whole model: its stages, or its shards (a timed cut may give one worker
    // every Linear layer of the mlp, and the ReLUs to the other).
    if (!name.ends_with("-timed")) {
      EXPECT_LT(epoch.at("parameter_bytes").get<double>(), one.at("parameter_bytes").get<double>());
    }
    if (name.starts_with("zero3")) {  // each worker holds 1/N of the training state (and padding)
      const double workers = name == "zero3-np2" ? 2 : 3;
      EXPECT_LE(epoch.at("model_state_bytes").get<double>(),
                one.at("model_state_bytes").get<double>() / workers * 1.1);
    }
  }
}

// Tensor parallelism: the vit's blocks split over 2 ranks, alone, in 2 replicas and in each stage
// of a 2-stage pipeline, train the one-worker vit; model.pt holds the whole model gathered from
// the shares.
TEST_F(PipelineCli, TensorParallelLayoutsTrainTheVitOfOneWorker) {
  const std::vector<std::string> vit = {"--model", "vit", "--vit-width", "32", "--vit-heads", "4", "--vit-depth", "2"};
  auto withVit = [&](std::vector<std::string> layout) {
    layout.insert(layout.end(), vit.begin(), vit.end());
    return layout;
  };
  const nlohmann::json one = train("vit-one", withVit({"--np", "1"}));
  ASSERT_FALSE(one.is_null());
  const std::vector<double> losses = stepLosses(path("vit-one"));
  const VitOptions shape{.depth = 2, .width = 32, .heads = 4};
  const std::vector<::torch::Tensor> params = savedParameters(path("vit-one"), "vit", shape);
  for (const auto& [name, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"tp2", {"--np", "2", "--tp", "2"}},
           {"dp2-tp2", {"--np", "4", "--tp", "2"}},
           {"dp2-tp2-zero1", {"--np", "4", "--tp", "2", "--zero", "1"}},  // the shares in ZeRO's buckets
           {"pp2-tp2", {"--np", "4", "--pp", "2", "--tp", "2", "--micro-batches", "3"}},
           {"pp2-tp2-zero-bubble-timed",
            {"--np", "4", "--pp", "2", "--tp", "2", "--schedule", "zero-bubble", "--balance", "time"}}}) {
    SCOPED_TRACE(name);
    const nlohmann::json epoch = train(name, withVit(layout));
    ASSERT_FALSE(epoch.is_null());
    // A worker holds its shares of its own stage alone (31% of the whole model here, its shares
    // of both stages 55%). (--balance time may cut elsewhere.)
    if (name == "pp2-tp2") {
      EXPECT_LT(epoch.at("parameter_bytes").get<double>(), 0.4 * one.at("parameter_bytes").get<double>());
    }
    const std::vector<double> got = stepLosses(path(name));
    ASSERT_EQ(got.size(), losses.size());
    for (std::size_t s = 0; s < got.size(); ++s) EXPECT_NEAR(got[s], losses[s], 1e-5 * losses[s]) << "step " << s + 1;
    EXPECT_NEAR(epoch.at("test_accuracy").get<double>(), one.at("test_accuracy").get<double>(), 2e-4);
    test::expectClose(savedParameters(path(name), "vit", shape), params, 1e-4, name.c_str());
  }
}

// A split model's checkpoints: every rank saves its own part under rank-<r>/ (its stages, its
// share, or with --zero its shard of the optimizer state (2) and of the parameters (3)); a run
// stopped at a checkpoint and resumed ends where an uninterrupted run does, momentum included.
// (Another layout converts them: the tests below.)
TEST_F(PipelineCli, ASplitModelResumesFromEveryRanksPart) {
  const std::vector<std::string> vit = {"--model", "vit", "--vit-width", "32", "--vit-heads", "4", "--vit-depth", "2"};
  for (const auto& [name, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"pp2", {"--np", "2", "--pp", "2"}},
           {"tp2", {"--np", "2", "--tp", "2"}},
           {"pp2-tp2", {"--np", "4", "--pp", "2", "--tp", "2"}},  // each part its shares of its stage
           {"zero2", {"--np", "2", "--zero", "2"}},
           {"zero3", {"--np", "2", "--zero", "3"}}}) {
    SCOPED_TRACE(name);
    std::vector<std::string> flags = layout;
    flags.insert(flags.end(), vit.begin(), vit.end());
    flags.push_back("--no-eval");  // the losses and the parameters say it all
    const nlohmann::json whole = train(name + "-whole", flags);
    ASSERT_FALSE(whole.is_null());
    const std::string ckpt = path(name + "-ckpt");
    std::vector<std::string> saving = flags;
    saving.insert(saving.end(), {"--checkpoint-dir", ckpt, "--checkpoint-every", "4"});
    std::vector<std::string> stopped = saving;
    stopped.insert(stopped.end(), {"--stop-at-step", "8"});
    train(name + "-split", stopped);  // no epoch record: it stops first
    EXPECT_TRUE(std::filesystem::exists(ckpt + "/rank-0/ckpt-000000000008")) << ckpt;
    EXPECT_TRUE(std::filesystem::exists(ckpt + "/rank-1/ckpt-000000000008")) << ckpt;
    std::vector<std::string> resumed = saving;
    resumed.push_back("--resume");
    const nlohmann::json epoch = train(name + "-split", resumed);
    ASSERT_FALSE(epoch.is_null());
    const std::vector<double> want = stepLosses(path(name + "-whole")), got = stepLosses(path(name + "-split"));
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t s = 0; s < got.size(); ++s) EXPECT_EQ(got[s], want[s]) << "step " << s + 1;
    const VitOptions shape{.depth = 2, .width = 32, .heads = 4};
    test::expectClose(savedParameters(path(name + "-split"), "vit", shape),
                      savedParameters(path(name + "-whole"), "vit", shape), 0, name);
  }
}

// A pipeline's checkpoint resumes on another layout, and an unsplit one on a pipeline: stopped at
// step 4 on 2 workers with --pp 2, resumed on 1 worker to step 8, then on 3 workers with --pp 3
// stopped before saving, on 1 worker to step 10, then on 4 workers with --pp 4 (other cuts): the
// run's losses and final
// parameters are the uninterrupted run's up to float rounding. Each conversion moves the earlier
// layout's checkpoints aside, where a resume finds them until the new layout saves.
TEST_F(PipelineCli, APipelinesCheckpointResumesOnAnotherLayout) {
  const std::vector<std::string> vit = {"--model", "vit", "--vit-width", "32", "--vit-heads", "4", "--vit-depth", "2",
                                        "--no-eval"};
  auto with = [&vit](const std::vector<std::string>& flags) { return concat({flags, vit}); };
  ASSERT_FALSE(train("whole", with({"--np", "2", "--pp", "2"})).is_null());
  const std::string ckpt = path("ckpt");
  const std::vector<std::string> saving = {"--checkpoint-dir", ckpt, "--checkpoint-every", "4"};
  auto phase = [&](const std::vector<std::string>& layout, const std::vector<std::string>& more) {
    return concat({layout, saving, more, vit});
  };
  train("split", phase({"--np", "2", "--pp", "2"}, {"--stop-at-step", "4"}));
  train("split", phase({"--np", "1"}, {"--resume", "--stop-at-step", "8"}));
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/earlier-layouts/step-4/rank-1/ckpt-000000000004")) << ckpt;
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/ckpt-000000000008")) << ckpt;
  // Converted to 3 stages and stopped before it saved: the step-8 checkpoint, set aside, is still
  // the one to resume.
  train("split", phase({"--np", "3", "--pp", "3"}, {"--resume", "--stop-at-step", "8"}));
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/earlier-layouts/step-8/ckpt-000000000008")) << ckpt;
  // Back on 1 worker to step 10 (the 3-stage run's empty directories must not hide its save)...
  train("split", phase({"--np", "1"}, {"--resume", "--stop-at-step", "10"}));
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/ckpt-000000000010")) << ckpt;
  EXPECT_FALSE(std::filesystem::exists(ckpt + "/rank-0")) << ckpt;
  // ...and on 4 stages from there to step 12.
  ASSERT_FALSE(train("split", phase({"--np", "4", "--pp", "4"}, {"--resume"})).is_null());
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/earlier-layouts/step-10/ckpt-000000000010")) << ckpt;
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/rank-3/ckpt-000000000012")) << ckpt;

  expectTheSmallVitsRun(1e-4, "resumed on two other layouts");
}

// A --tp checkpoint resumes on another layout and any checkpoint on --tp: Adam's state in shares
// of 2 tensor-parallel ranks, stopped at step 4, resumed whole on 1 worker to step 8, on 2 stages
// of 2 shares each to step 10, and on 2 replicas of 2 shares to step 12: the losses are the
// uninterrupted run's within 1e-5 and the final parameters within what rounding makes of Adam's
// steps (AZeroCheckpointResumesOnAnotherLayout's bound).
TEST_F(PipelineCli, ATensorParallelCheckpointResumesOnAnotherLayout) {
  const std::vector<std::string> vit = {"--model", "vit", "--vit-width", "32", "--vit-heads", "4", "--vit-depth", "2",
                                        "--optimizer", "adam", "--lr", "0.001", "--no-eval"};
  ASSERT_FALSE(train("whole", concat({{"--np", "2", "--tp", "2"}, vit})).is_null());
  const std::string ckpt = path("ckpt");
  const std::vector<std::string> saving = {"--checkpoint-dir", ckpt, "--checkpoint-every", "2"};
  auto phase = [&](const std::vector<std::string>& layout, const std::vector<std::string>& more) {
    return concat({layout, saving, more, vit});
  };
  train("split", phase({"--np", "2", "--tp", "2"}, {"--stop-at-step", "4"}));
  train("split", phase({"--np", "1"}, {"--resume", "--stop-at-step", "8"}));
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/earlier-layouts/step-4/rank-1/ckpt-000000000004")) << ckpt;
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/ckpt-000000000008")) << ckpt;
  train("split", phase({"--np", "4", "--pp", "2", "--tp", "2"}, {"--resume", "--stop-at-step", "10"}));
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/earlier-layouts/step-8/ckpt-000000000008")) << ckpt;
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/rank-3/ckpt-000000000010")) << ckpt;
  ASSERT_FALSE(train("split", phase({"--np", "4", "--tp", "2"}, {"--resume"})).is_null());
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/earlier-layouts/step-10/rank-3/ckpt-000000000010")) << ckpt;
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/rank-3/ckpt-000000000012")) << ckpt;

  expectTheSmallVitsRun(3e-3, "resumed on three other layouts");
}

// A ZeRO checkpoint resumes on any other layout and world, and any checkpoint on ZeRO (universal
// checkpoints): Adam's state cut into --zero 1 shards on 2 workers, stopped at step 4, resumed as
// --zero 3 shards on 3 workers to step 8, unsplit on 1 worker to step 10, and as --zero 2 on 2
// workers with other buckets to step 12: the losses are the uninterrupted run's within 1e-5 and
// the final parameters within what rounding makes of Adam's steps.
TEST_F(PipelineCli, AZeroCheckpointResumesOnAnotherLayout) {
  const std::vector<std::string> vit = {"--model", "vit", "--vit-width", "32", "--vit-heads", "4", "--vit-depth", "2",
                                        "--optimizer", "adam", "--lr", "0.001", "--no-eval"};
  auto with = [&vit](const std::vector<std::string>& flags) { return concat({flags, vit}); };
  ASSERT_FALSE(train("whole", with({"--np", "2", "--zero", "1"})).is_null());
  const std::string ckpt = path("ckpt");
  const std::vector<std::string> saving = {"--checkpoint-dir", ckpt, "--checkpoint-every", "4"};
  auto phase = [&](const std::vector<std::string>& layout, const std::vector<std::string>& more) {
    return concat({layout, saving, more, vit});
  };
  train("split", phase({"--np", "2", "--zero", "1"}, {"--stop-at-step", "4"}));
  train("split", phase({"--np", "3", "--zero", "3"}, {"--resume", "--stop-at-step", "8"}));
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/earlier-layouts/step-4/rank-1/ckpt-000000000004")) << ckpt;
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/rank-2/ckpt-000000000008")) << ckpt;
  train("split", phase({"--np", "1"}, {"--resume", "--stop-at-step", "10"}));
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/ckpt-000000000010")) << ckpt;
  ASSERT_FALSE(train("split", phase({"--np", "2", "--zero", "2", "--bucket-cap-mb", "0.01"}, {"--resume"})).is_null());
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/earlier-layouts/step-10/ckpt-000000000010")) << ckpt;
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/rank-1/ckpt-000000000012")) << ckpt;

  const std::vector<double> want = stepLosses(path("whole")), got = stepLosses(path("split"));
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t s = 0; s < got.size(); ++s) EXPECT_NEAR(got[s], want[s], 1e-5 * std::abs(want[s])) << "step " << s + 1;
  const VitOptions shape{.depth = 2, .width = 32, .heads = 4};
  // Adam moves an element whose gradient is about zero by about ±lr on rounding alone: uninterrupted
  // runs on 1 worker, on 3 with --zero 3 and on 2 with --zero 1 end up to 1.5e-3 apart.
  test::expectClose(savedParameters(path("split"), "vit", shape), savedParameters(path("whole"), "vit", shape), 3e-3,
                    "resumed on three other layouts");
}

// ZeRO beside --pp and --tp converts both ways: Adam's state in --zero 1 shards of 2 replicas of
// a 2-stage pipeline, stopped at step 4, resumed as --zero 2 shards of 2 replicas of 2
// tensor-parallel shares to step 8, unsplit on 1 worker to step 10, and as the first layout
// again to step 12: the losses are the uninterrupted run's within 1e-5 and the final parameters
// within what rounding makes of Adam's steps (AZeroCheckpointResumesOnAnotherLayout's bound).
TEST_F(PipelineCli, AZeroCheckpointBesidePpOrTpResumesOnAnotherLayout) {
  const std::vector<std::string> vit = {"--model", "vit", "--vit-width", "32", "--vit-heads", "4", "--vit-depth", "2",
                                        "--optimizer", "adam", "--lr", "0.001", "--no-eval"};
  const std::vector<std::string> zeroPp = {"--np", "4", "--pp", "2", "--zero", "1"};
  ASSERT_FALSE(train("whole", concat({zeroPp, vit})).is_null());
  const std::string ckpt = path("ckpt");
  const std::vector<std::string> saving = {"--checkpoint-dir", ckpt, "--checkpoint-every", "2"};
  auto phase = [&](const std::vector<std::string>& layout, const std::vector<std::string>& more) {
    return concat({layout, saving, more, vit});
  };
  train("split", phase(zeroPp, {"--stop-at-step", "4"}));
  train("split", phase({"--np", "4", "--tp", "2", "--zero", "2"}, {"--resume", "--stop-at-step", "8"}));
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/earlier-layouts/step-4/rank-3/ckpt-000000000004")) << ckpt;
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/rank-3/ckpt-000000000008")) << ckpt;
  train("split", phase({"--np", "1"}, {"--resume", "--stop-at-step", "10"}));
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/earlier-layouts/step-8/rank-3/ckpt-000000000008")) << ckpt;
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/ckpt-000000000010")) << ckpt;
  ASSERT_FALSE(train("split", phase(zeroPp, {"--resume"})).is_null());
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/earlier-layouts/step-10/ckpt-000000000010")) << ckpt;
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/rank-3/ckpt-000000000012")) << ckpt;

  expectTheSmallVitsRun(3e-3, "resumed on three other layouts");
}

TEST_F(PipelineCli, TheEpochReportsTheBubbleAndTheTimelineTheStages) {
  test::Environment env = test::cleanEnvironment();
  env["GYRE_TIMELINE"] = path("timeline.json");
  const std::string runDir = path("run");
  const test::ProgramRun r =
      gyreTrain({"--model", "mlp", "--np", "2", "--pp", "2", "--micro-batches", "4", "--epochs", "1", "--max-steps",
                 "6", "--threads", "1", "--no-eval", "--run-dir", runDir},
                env);
  ASSERT_EQ(r.exitCode, 0) << r.describe() << "\nstdout:\n" << r.out;
  EXPECT_TRUE(contains(r.out, "pipeline 1f1b m=4: bubble ")) << r.out;
  EXPECT_TRUE(contains(r.out, "(formula 20.0%, ")) << r.out;
  EXPECT_TRUE(contains(r.out, "% with the measured stages)")) << r.out;

  const std::vector<nlohmann::json> epochs = jsonLines(runDir + "/metrics.jsonl");
  ASSERT_EQ(epochs.size(), 1u);
  const nlohmann::json& p = epochs[0].at("pipeline");
  EXPECT_EQ(p.at("pp"), 2);
  EXPECT_EQ(p.at("dp"), 1);
  EXPECT_EQ(p.at("micro_batches"), 4);
  EXPECT_EQ(p.at("schedule"), "1f1b");
  EXPECT_EQ(p.at("balance"), nlohmann::json({3, 3}));
  EXPECT_GT(p.at("bubble").get<double>(), 0);
  EXPECT_LT(p.at("bubble").get<double>(), 1);
  EXPECT_DOUBLE_EQ(p.at("ideal_bubble").get<double>(), 0.2);
  // The measured stages' own bubble: at least the formula's (equal stages make the least), and
  // each rank's compute per micro-batch.
  EXPECT_GE(p.at("stage_times_bubble").get<double>(), 0.2 - 1e-9);
  EXPECT_LT(p.at("stage_times_bubble").get<double>(), 1);
  ASSERT_EQ(p.at("stage_ms").size(), 2u);
  for (const auto& ms : p.at("stage_ms")) EXPECT_GT(ms.get<double>(), 0);
  EXPECT_GT(p.at("peak_activation_bytes").get<std::int64_t>(), 0);

  // Each rank's row holds its forwards and backwards of the 4 micro-batches, 6 steps of each.
  std::ifstream in(path("timeline.json"));
  ASSERT_TRUE(in) << "no timeline written";
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::map<std::pair<int, std::string>, int> spans;
  for (const nlohmann::json& e : trace.at("traceEvents"))
    if (e.value("ph", "") == "X") ++spans[{e.at("pid").get<int>(), e.at("name").get<std::string>()}];
  for (int rank = 0; rank < 2; ++rank)
    for (const char* name : {"F0", "F3", "B0", "B3"}) EXPECT_EQ((spans[{rank, name}]), 6) << rank << " " << name;
  EXPECT_GT((spans[{0, "pipeline exchange"}]), 0);
}

// A layout that does not fit is refused by gyre train before any worker starts.
TEST_F(PipelineCli, ALayoutThatDoesNotFitIsRefusedBeforeTraining) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--np", "4", "--pp", "3"}, "--pp 3 does not divide the 4 workers"},
      {{"--np", "4", "--pp", "2", "--dp", "3"}, "--dp 3 × --pp 2 is 6, not the 4 workers"},
      {{"--np", "2", "--pp", "2", "--balance", "3,2"}, "--balance '3,2' holds 5 layers, but the mlp has 6"},
      {{"--np", "2", "--pp", "2", "--micro-batches", "200"}, "--micro-batches 200 is more than the 128 samples"},
      {{"--np", "8", "--pp", "8"}, "the mlp has 6 layers: too few for 8 pipeline stages"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> all = {"--model", "mlp", "--run-dir", path("refused")};
    all.insert(all.end(), args.begin(), args.end());
    const test::ProgramRun r = gyreTrain(all);
    EXPECT_EQ(r.exitCode, 2) << r.describe();
    EXPECT_TRUE(contains(r.err, message)) << "wanted: " << message << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(path("refused") + "/config.json")) << "a refused job wrote its run";
  }
}

// A vit whose unsharded training state (25M parameters: 151 MB, with gradients and Adam's two
// moments 604 MB) does not fit a worker's 1200 MiB (RLIMIT_DATA, --memory-limit-mb; a worker's
// libtorch, dataset and buffers take about 650 MB of it): one worker stops with an out-of-memory
// error that says what to do; ZeRO-3 over 4 workers, each with the same limit, trains it.
TEST_F(PipelineCli, AModelTooBigForOneWorkerTrainsShardedOverFour) {
  const std::vector<std::string> model = {"--model",       "vit", "--vit-width", "512", "--vit-heads", "8",
                                          "--vit-depth",   "12",  "--optimizer", "adam", "--lr",       "0.001",
                                          "--epochs",      "1",   "--max-steps", "2",    "--batch",    "64",
                                          "--no-eval",     "--threads", "1",    "--memory-limit-mb", "1200"};
  std::vector<std::string> one = {"--np", "1", "--run-dir", path("one")};
  one.insert(one.end(), model.begin(), model.end());
  const test::ProgramRun failed = gyreTrain(one);
  EXPECT_NE(failed.exitCode, 0) << failed.describe();
  EXPECT_TRUE(contains(failed.err, "worker 0 is out of memory of its 1200 MiB (--memory-limit-mb)")) << failed.err;
  EXPECT_TRUE(contains(failed.err, "--zero 3 shards the parameters")) << failed.err;

  std::vector<std::string> sharded = {"--np", "4", "--zero", "3", "--json", "--run-dir", path("sharded")};
  sharded.insert(sharded.end(), model.begin(), model.end());
  const test::ProgramRun r = gyreTrain(sharded);
  ASSERT_EQ(r.exitCode, 0) << r.describe() << "\nstdout:\n" << r.out;
  const std::vector<nlohmann::json> epochs = jsonLines(path("sharded") + "/metrics.jsonl");
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_TRUE(std::isfinite(epochs[0].at("loss").get<double>()));
  // Each worker holds a quarter: under 604 MB / 4 + 10%.
  EXPECT_LT(epochs[0].at("model_state_bytes").get<double>(), 604e6 / 4 * 1.1);
}

// A vit of 201M parameters (805 MB: the parameters alone, before gradients and momentum) under
// 1500 MiB per worker: one worker cannot train it, and a pipeline whose workers each made the
// whole model first could not either (1.8 GiB peak RSS measured that way). Each worker makes only
// its stages (every layer drawn, the others' given back at once), with ZeRO-3 only its shard of each layer, with --tp only its share of each
// block, and with both only its shares of its stage's blocks, so none holds the whole model
// while training; model.pt, gathered on worker 0 once its training state is gone, holds it all,
// the same in the four.
TEST_F(PipelineCli, FourWorkersTrainAModelNoWorkerHoldsWithPpZeroThreeOrTp) {
  const VitOptions vit{.depth = 16, .width = 1024, .heads = 8, .patch = 14};
  const std::vector<std::string> model = {"--model",       "vit", "--vit-width", "1024", "--vit-heads",  "8",
                                          "--vit-depth",   "16",  "--vit-patch", "14",   "--optimizer",  "sgd",
                                          "--lr",          "0.01", "--epochs",   "1",    "--max-steps",  "2",
                                          "--batch",       "64",  "--no-eval",   "--threads", "1",
                                          "--memory-limit-mb", "1500"};
  const test::ProgramRun failed = gyreTrain(concat({{"--np", "1", "--run-dir", path("one")}, model}));
  EXPECT_NE(failed.exitCode, 0) << failed.describe();
  EXPECT_TRUE(contains(failed.err, "worker 0 is out of memory of its 1500 MiB (--memory-limit-mb)")) << failed.err;

  std::vector<::torch::Tensor> first;  // the pipeline's model.pt, which ZeRO-3's and --tp's must equal
  // (--pp 4 on an even cut: a timed cut follows the machine's load, and one that gives a stage more
  // blocks passes the training-state bound below.)
  for (const std::vector<std::string>& layout : {std::vector<std::string>{"--pp", "4"},
                                                 {"--zero", "3"},
                                                 {"--tp", "4"},
                                                 {"--pp", "2", "--tp", "2"}}) {
    std::string name;
    for (const std::string& flag : layout) name += flag.starts_with("--") ? flag.substr(2) : flag;
    SCOPED_TRACE(name);
    const std::string run = path(name);
    const test::ProgramRun r = gyreTrain(concat({{"--np", "4", "--json", "--run-dir", run}, layout, model}));
    ASSERT_EQ(r.exitCode, 0) << r.describe() << "\nstdout:\n" << r.out;
    const std::vector<nlohmann::json> epochs = jsonLines(run + "/metrics.jsonl");
    ASSERT_EQ(epochs.size(), 1u);
    EXPECT_TRUE(std::isfinite(epochs[0].at("loss").get<double>()));
    // The most any worker held for training: its stages' (shards', shares') parameters, gradients
    // and momentum, under the whole model's parameters.
    EXPECT_LT(epochs[0].at("model_state_bytes").get<double>(), 805e6);
    const std::vector<::torch::Tensor> saved = savedParameters(run, "vit", vit);
    std::int64_t elements = 0;
    for (const ::torch::Tensor& p : saved) {
      elements += p.numel();
      EXPECT_TRUE(p.isfinite().all().item<bool>());
    }
    EXPECT_GT(elements, 200'000'000);
    if (first.empty()) {
      first = saved;
      continue;
    }
    ASSERT_EQ(saved.size(), first.size());
    for (std::size_t k = 0; k < saved.size(); ++k)
      EXPECT_TRUE(::torch::allclose(saved[k], first[k], 1e-4, 1e-5)) << "parameter " << k;
  }
}

// gyre bench parallel's smallest run: every layout runs and reports its figures, the pipeline's
// rows their bubble and activations; the summary names the targets it could measure.
TEST_F(PipelineCli, BenchParallelRunsEveryLayout) {
  const test::ProgramRun r =
      test::runProgram({{gyreTool(), "bench", "parallel", "--model", "mlp", "--schedule", "1f1b",
                         "--micro-batches", "2", "--steps", "6", "--skip", "1", "--json"},
                        test::cleanEnvironment()},
                       cli::kTrainTimeout);
  ASSERT_EQ(r.exitCode, 0) << r.describe() << "\nstdout:\n" << r.out;
  std::vector<nlohmann::json> rows;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  // 1 worker, dp=2, dp=2 zero-1, zero-2, zero-3, pp=2 1f1b m=2, dp=2 x pp=2, dp=4, dp=4 zero-3, summary
  ASSERT_EQ(rows.size(), 10u) << r.out;
  for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
    EXPECT_GT(rows[i].at("samples_per_s").get<double>(), 0) << rows[i];
    EXPECT_GT(rows[i].at("peak_rss_bytes").get<double>(), 0) << rows[i];
    EXPECT_EQ(rows[i].at("bubble").is_null(), rows[i].at("pp") == 1) << rows[i];
  }
  EXPECT_EQ(rows[4].at("zero"), 3);
  EXPECT_EQ(rows[5].at("layout"), "pp=2 1f1b m=2");
  EXPECT_DOUBLE_EQ(rows[5].at("ideal_bubble").get<double>(), 1.0 / 3);
  EXPECT_GE(rows[5].at("stage_times_bubble").get<double>(), 1.0 / 3 - 1e-9);
  EXPECT_GT(rows[5].at("peak_activation_bytes").get<double>(), 0);
  EXPECT_EQ(rows[6].at("np"), 4);
  EXPECT_EQ(rows[8].at("layout"), "dp=4 zero-3");
  // Each ZeRO stage holds less training state per worker than the one before; ZeRO-3 about 1/N
  // of plain data parallelism's.
  auto state = [&](std::size_t row) { return rows[row].at("model_state_bytes").get<double>(); };
  EXPECT_LT(state(2), state(1));
  EXPECT_LT(state(3), state(2));
  EXPECT_LT(state(4), state(3));
  EXPECT_LT(state(4), 0.55 * state(1));
  EXPECT_LT(state(8), 0.275 * state(7));
  EXPECT_TRUE(rows.back().at("summary").get<bool>());
  std::vector<std::string> targets;
  for (const nlohmann::json& t : rows.back().at("targets")) targets.push_back(t.at("name"));
  EXPECT_NE(std::find(targets.begin(), targets.end(), "zero-3 state N=4"), targets.end()) << rows.back();
}

// The layer counts gyre train checks a pipeline against, without libtorch, are the models'.
TEST(TrainLayout, ModelLayersAreTheSequentialsLayers) {
  for (const char* model : {"mlp", "cnn", "vit"}) {
    TrainOptions o;
    o.model = model;
    o.vitDepth = 3;
    EXPECT_EQ(modelLayers(o), static_cast<int>(makeModel(model, false, {.depth = 3})->size())) << model;
  }
  TrainOptions bn;
  bn.model = "cnn";
  bn.syncBn = true;
  EXPECT_EQ(modelLayers(bn), static_cast<int>(makeModel("cnn", true)->size()));
}

}  // namespace
}  // namespace gyre::train
