// gyre::torch checkpoints: a round trip restores the model, the optimizer (momentum and rate),
// the sampler position, the generator and the user's values; invalid checkpoints (a flipped byte,
// a truncated file, no manifest) are reported and skipped for the previous valid one; keepLast
// bounds the count; a full disk and an unwritable directory give a clear error on the next
// save()/wait() and leave the earlier checkpoints and the training state as they were.
#include "gyre/torch/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "support/ranks.h"
#include "torch/checkpoint_files.h"

namespace gyre::torch {
namespace {

namespace fs = std::filesystem;
namespace nn = ::torch::nn;

// A model with parameters and buffers (batch norm's running statistics).
nn::Sequential makeModel(std::uint64_t seed) {
  ::torch::manual_seed(seed);
  return nn::Sequential(nn::Linear(6, 8), nn::BatchNorm1d(8), nn::ReLU(), nn::Linear(8, 3));
}

std::shared_ptr<::torch::optim::SGD> makeSgd(nn::Sequential& model, double lr) {
  return std::make_shared<::torch::optim::SGD>(
      model->parameters(), ::torch::optim::SGDOptions(lr).momentum(0.9).weight_decay(1e-4));
}

void trainSteps(nn::Sequential& model, ::torch::optim::SGD& sgd, int steps, std::uint64_t seed) {
  ::torch::manual_seed(seed);
  for (int i = 0; i < steps; ++i) {
    sgd.zero_grad();
    const auto x = ::torch::randn({16, 6});
    const auto y = ::torch::randint(0, 3, {16});
    ::torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    sgd.step();
  }
}

std::vector<::torch::Tensor> stateOf(nn::Sequential& model) {
  std::vector<::torch::Tensor> out;
  for (const auto& p : model->parameters()) out.push_back(p.detach().clone());
  for (const auto& b : model->buffers()) out.push_back(b.detach().clone());
  return out;
}

void expectSame(const std::vector<::torch::Tensor>& a, const std::vector<::torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].equal(b[i])) << "tensor " << i;
}

::torch::Tensor momentumOf(::torch::optim::SGD& sgd, const ::torch::Tensor& param) {
  const auto& state = sgd.state().at(c10::guts::to_string(param.unsafeGetTensorImpl()));
  return static_cast<const ::torch::optim::SGDParamState&>(*state).momentum_buffer();
}

CheckpointState stateAt(std::int64_t step) {
  CheckpointState s;
  s.step = step;
  s.epoch = 1;
  s.sampler = {1, 256};
  s.scheduleStep = step;
  s.lr = 0.0123;
  s.values = {{"note", "step " + std::to_string(step)}};
  s.config = R"({"model": "test"})";
  return s;
}

// Saves checkpoints of `steps` (training a step between them) and waits for them.
void saveAll(const std::string& dir, nn::Sequential& model, ::torch::optim::SGD& sgd,
             const std::vector<std::int64_t>& steps, int keepLast = 10) {
  Checkpointer ckpt({dir, keepLast});
  for (std::int64_t step : steps) {
    trainSteps(model, sgd, 1, static_cast<std::uint64_t>(step));
    ckpt.save(*model, sgd, stateAt(step));
  }
  ckpt.wait();
}

struct Skips {
  std::vector<std::string> paths;
  std::vector<std::string> reasons;
  LoadOptions options() {
    LoadOptions o;
    o.onSkip = [this](const std::string& path, const std::string& reason) {
      paths.push_back(path);
      reasons.push_back(reason);
    };
    return o;
  }
};

std::string ckptPath(const std::string& dir, std::int64_t step) {
  return dir + "/" + detail::checkpointName(step);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Crc32c, KnownValuesAndContinuation) {
  const std::string text = "123456789";
  EXPECT_EQ(detail::crc32c(text.data(), text.size()), 0xE3069283u);
  EXPECT_EQ(detail::crc32c("", 0), 0u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(detail::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
  std::string long_(1000, 'x');
  for (std::size_t i = 0; i < long_.size(); ++i) long_[i] = static_cast<char>(i * 7);
  const std::uint32_t whole = detail::crc32c(long_.data(), long_.size());
  EXPECT_EQ(detail::crc32c(long_.data() + 13, long_.size() - 13, detail::crc32c(long_.data(), 13)), whole);
}

TEST(Checkpoint, RoundTripRestoresEverything) {
  test::TempDir dir;
  nn::Sequential model = makeModel(1);
  auto sgd = makeSgd(model, 0.1);
  trainSteps(model, *sgd, 3, 7);
  gyre::torch::setTorchRngState(gyre::torch::torchRngState());  // a no-op that must not throw
  sgd->param_groups()[0].options().set_lr(0.0123);

  std::mt19937_64 engine(42);
  engine.discard(5);
  CheckpointState saved = stateAt(30);
  std::ostringstream engineText;
  engineText << engine;
  saved.values["engine"] = engineText.str();
  ::torch::manual_seed(99);
  SaveStats stats;
  {
    Checkpointer ckpt({dir.path(), 3});
    stats = ckpt.save(*model, *sgd, saved);
    ckpt.wait();
  }
  EXPECT_EQ(stats.step, 30);
  EXPECT_EQ(stats.path, ckptPath(dir.path(), 30));
  EXPECT_GT(stats.bytes, 0u);
  EXPECT_GE(stats.stallS, stats.waitS);
  const auto nextDraw = ::torch::rand({4});  // what the generator gives after the save
  const auto savedModel = stateOf(model);
  EXPECT_EQ(verifyCheckpoint(stats.path), "");

  nn::Sequential other = makeModel(2);
  auto otherSgd = makeSgd(other, 0.5);
  ::torch::manual_seed(12345);
  const auto loaded = loadLatestCheckpoint(dir.path(), *other, otherSgd.get());
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->path, stats.path);
  expectSame(stateOf(model), stateOf(other));
  const auto params = model->parameters();
  const auto otherParams = other->parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(momentumOf(*sgd, params[i]).equal(momentumOf(*otherSgd, otherParams[i]))) << "momentum " << i;
  const auto& options = static_cast<const ::torch::optim::SGDOptions&>(otherSgd->param_groups()[0].options());
  EXPECT_EQ(options.lr(), 0.0123);
  EXPECT_EQ(options.momentum(), 0.9);
  EXPECT_EQ(options.weight_decay(), 1e-4);
  EXPECT_TRUE(::torch::rand({4}).equal(nextDraw)) << "the generator's state is restored";

  const CheckpointState& s = loaded->state;
  EXPECT_EQ(s.step, 30);
  EXPECT_EQ(s.epoch, 1);
  EXPECT_EQ(s.sampler.epoch, 1);
  EXPECT_EQ(s.sampler.index, 256);
  EXPECT_EQ(s.scheduleStep, 30);
  EXPECT_EQ(s.lr, 0.0123);
  EXPECT_EQ(s.config, saved.config);
  EXPECT_EQ(s.values, saved.values);
  std::mt19937_64 restored;
  std::istringstream(s.values.at("engine")) >> restored;
  EXPECT_EQ(restored(), engine());

  // Both continue identically.
  trainSteps(model, *sgd, 2, 3);
  trainSteps(other, *otherSgd, 2, 3);
  expectSame(stateOf(model), stateOf(other));

  // model.pt is an ordinary torch::save of the module.
  nn::Sequential third = makeModel(3);
  ::torch::load(third, stats.path + "/model.pt");
  expectSame(savedModel, stateOf(third));
}

// Loading copies into the model's own tensors: a view of a parameter (as DistributedOptimizer's
// buckets and FullyShardedModel's shards hold) sees the loaded values. A tensor of another shape
// is refused with its name, not silently replaced.
TEST(Checkpoint, LoadingKeepsTheModelsStorage) {
  test::TempDir dir;
  nn::Sequential model = makeModel(1);
  auto sgd = makeSgd(model, 0.1);
  saveAll(dir.path(), model, *sgd, {5});
  nn::Sequential other = makeModel(2);
  ::torch::Tensor first = other->parameters().front();
  const ::torch::Tensor view = first.view({-1});
  const void* storage = first.data_ptr();
  ASSERT_TRUE(loadLatestCheckpoint(dir.path(), *other, nullptr).has_value());
  EXPECT_EQ(other->parameters().front().data_ptr(), storage);
  EXPECT_TRUE(view.equal(model->parameters().front().detach().view({-1})));
  expectSame(stateOf(model), stateOf(other));

  nn::Sequential wider(nn::Linear(6, 9), nn::BatchNorm1d(9), nn::ReLU(), nn::Linear(9, 3));
  try {
    loadLatestCheckpoint(dir.path(), *wider, nullptr);
    ADD_FAILURE() << "a model of another shape loaded the checkpoint";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "does not fit this model: 0.weight has the shape [8, 6] in the checkpoint and "
                                   "[9, 6] in this model"))
        << e.what();
  }
}

TEST(Checkpoint, SamplerPositionReshards) {
  EXPECT_EQ((SamplerPosition{2, 256}.localOffset(1)), 256);
  EXPECT_EQ((SamplerPosition{2, 256}.localOffset(2)), 128);
  EXPECT_THROW(SamplerPosition({2, 256}).localOffset(3), InvalidArgument);
}

TEST(Checkpoint, ValuesMustBeText) {
  test::TempDir dir;
  nn::Sequential model = makeModel(1);
  auto sgd = makeSgd(model, 0.1);
  Checkpointer ckpt({dir.path(), 3});
  CheckpointState s = stateAt(1);
  s.values["bad"] = std::string("\xff\xfe", 2);
  EXPECT_THROW(ckpt.save(*model, *sgd, s), InvalidArgument);
  EXPECT_NO_THROW(ckpt.wait());
  EXPECT_TRUE(listCheckpoints(dir.path()).empty());
}

void flipByte(const std::string& path, std::size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x01));
}

TEST(Checkpoint, InvalidOnesAreSkippedForThePreviousValidOne) {
  test::TempDir dir;
  nn::Sequential model = makeModel(1);
  auto sgd = makeSgd(model, 0.1);
  saveAll(dir.path(), model, *sgd, {1, 2, 3, 4});
  for (std::int64_t step : {1, 2, 3, 4}) EXPECT_EQ(verifyCheckpoint(ckptPath(dir.path(), step)), "");

  // Step 4: one flipped byte in the middle of the model.
  const std::string model4 = ckptPath(dir.path(), 4) + "/model.pt";
  flipByte(model4, fs::file_size(model4) / 2);
  // Step 3: the optimizer's state cut short.
  const std::string optimizer3 = ckptPath(dir.path(), 3) + "/optimizer.pt";
  fs::resize_file(optimizer3, fs::file_size(optimizer3) - 100);
  // Step 2: no manifest (the write never finished).
  fs::remove(ckptPath(dir.path(), 2) + "/manifest.json");

  Skips skips;
  nn::Sequential other = makeModel(5);
  auto otherSgd = makeSgd(other, 0.5);
  const auto loaded = loadLatestCheckpoint(dir.path(), *other, otherSgd.get(), skips.options());
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->state.step, 1);
  EXPECT_EQ(loaded->state.values.at("note"), "step 1");
  ASSERT_EQ(skips.paths.size(), 3u);
  EXPECT_EQ(skips.paths[0], ckptPath(dir.path(), 4));
  EXPECT_TRUE(contains(skips.reasons[0], "model.pt: corrupted")) << skips.reasons[0];
  EXPECT_EQ(skips.paths[1], ckptPath(dir.path(), 3));
  EXPECT_TRUE(contains(skips.reasons[1], "optimizer.pt: truncated")) << skips.reasons[1];
  EXPECT_EQ(skips.paths[2], ckptPath(dir.path(), 2));
  EXPECT_TRUE(contains(skips.reasons[2], "manifest.json missing")) << skips.reasons[2];
  EXPECT_NE(verifyCheckpoint(ckptPath(dir.path(), 4)), "");

  // None valid: nothing loaded, the model untouched.
  fs::remove(ckptPath(dir.path(), 1) + "/state.json");
  const auto before = stateOf(other);
  Skips none;
  EXPECT_FALSE(loadLatestCheckpoint(dir.path(), *other, otherSgd.get(), none.options()).has_value());
  EXPECT_EQ(none.paths.size(), 4u);
  EXPECT_TRUE(contains(none.reasons.back(), "state.json missing")) << none.reasons.back();
  expectSame(before, stateOf(other));
  EXPECT_FALSE(loadLatestCheckpoint(dir.path() + "/nowhere", *other, nullptr).has_value());
}

TEST(Checkpoint, ACorruptedManifestIsSkipped) {
  test::TempDir dir;
  nn::Sequential model = makeModel(1);
  auto sgd = makeSgd(model, 0.1);
  saveAll(dir.path(), model, *sgd, {1, 2});
  std::ofstream(ckptPath(dir.path(), 2) + "/manifest.json") << "{\"format\": \"gyre-chec";
  Skips skips;
  const auto loaded = loadLatestCheckpoint(dir.path(), *model, sgd.get(), skips.options());
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->state.step, 1);
  ASSERT_EQ(skips.reasons.size(), 1u);
  EXPECT_TRUE(contains(skips.reasons[0], "manifest.json: corrupted")) << skips.reasons[0];
}

TEST(Checkpoint, KeepLastBoundsTheCount) {
  test::TempDir dir;
  // A leftover of an interrupted write, older than what comes.
  fs::create_directories(ckptPath(dir.path(), 0));
  nn::Sequential model = makeModel(1);
  auto sgd = makeSgd(model, 0.1);
  saveAll(dir.path(), model, *sgd, {10, 20, 30, 40, 50}, 2);
  const auto left = listCheckpoints(dir.path());
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].step, 40);
  EXPECT_EQ(left[1].step, 50);
  EXPECT_TRUE(left[0].complete && left[1].complete);
  EXPECT_THROW(Checkpointer({dir.path(), 0}), InvalidArgument);
}

// Restores a soft resource limit when it goes out of scope.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing the process
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit lower = saved_;
    lower.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &lower), 0);
  }
  ~FileSizeLimit() { ::setrlimit(RLIMIT_FSIZE, &saved_); }

 private:
  rlimit saved_{};
};

TEST(Checkpoint, FullDiskFailsClearlyAndKeepsEverything) {
  test::TempDir dir;
  nn::Sequential model = makeModel(1);
  auto sgd = makeSgd(model, 0.1);
  Checkpointer ckpt({dir.path(), 1});
  trainSteps(model, *sgd, 1, 1);
  ckpt.save(*model, *sgd, stateAt(1));
  ckpt.wait();
  const auto before = stateOf(model);
  {
    FileSizeLimit limit(512);  // smaller than model.pt: the disk is "full" after 512 bytes
    ckpt.save(*model, *sgd, stateAt(2));
    try {
      ckpt.wait();
      ADD_FAILURE() << "the write of step 2 did not fail";
    } catch (const SystemError& e) {
      EXPECT_TRUE(contains(e.what(), ckptPath(dir.path(), 2) + "/model.pt")) << e.what();
      EXPECT_TRUE(contains(e.what(), "File too large")) << e.what();
      EXPECT_TRUE(contains(e.what(), "earlier checkpoints kept")) << e.what();
    }
    // The next save() reports a failed write too, and does nothing else.
    ckpt.save(*model, *sgd, stateAt(3));
    EXPECT_THROW(ckpt.save(*model, *sgd, stateAt(4)), SystemError);
    EXPECT_NO_THROW(ckpt.wait());
  }
  expectSame(before, stateOf(model));
  // Nothing half-written remains, and step 1 (keepLast 1) was not deleted.
  const auto left = listCheckpoints(dir.path());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].step, 1);
  nn::Sequential other = makeModel(9);
  const auto loaded = loadLatestCheckpoint(dir.path(), *other, nullptr);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->state.step, 1);

  // With room again the same Checkpointer works.
  ckpt.save(*model, *sgd, stateAt(5));
  EXPECT_NO_THROW(ckpt.wait());
  EXPECT_EQ(loadLatestCheckpoint(dir.path(), *other, nullptr)->state.step, 5);
}

// Makes `dir` unwritable for this thread (and the threads it starts) while in scope. Root can
// write anywhere, so it also gives up root's file-system rights (setfsuid is per thread).
class Unwritable {
 public:
  explicit Unwritable(const std::string& dir) : dir_(dir) {
    fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
    if (::geteuid() == 0) ::setfsuid(65534);
  }
  ~Unwritable() {
    if (::geteuid() == 0) ::setfsuid(0);
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  }

 private:
  std::string dir_;
};

TEST(Checkpoint, UnwritableDirectoryFailsClearlyAndKeepsEverything) {
  test::TempDir top;
  fs::permissions(top.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  const std::string dir = top.path() + "/ckpt";
  nn::Sequential model = makeModel(1);
  auto sgd = makeSgd(model, 0.1);
  Checkpointer ckpt({dir, 3});
  ckpt.save(*model, *sgd, stateAt(1));
  ckpt.wait();
  const auto before = stateOf(model);
  {
    Unwritable locked(dir);
    ckpt.save(*model, *sgd, stateAt(2));
    try {
      ckpt.wait();
      ADD_FAILURE() << "the write of step 2 did not fail";
    } catch (const SystemError& e) {
      EXPECT_TRUE(contains(e.what(), ckptPath(dir, 2))) << e.what();
      EXPECT_TRUE(contains(e.what(), "Permission denied")) << e.what();
    }
  }
  expectSame(before, stateOf(model));
  const auto left = listCheckpoints(dir);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].step, 1);
  EXPECT_EQ(verifyCheckpoint(left[0].path), "");

  // A directory that cannot be made at all.
  std::ofstream(top.path() + "/file") << "x";
  EXPECT_THROW(Checkpointer({top.path() + "/file/ckpt", 3}), SystemError);
}

}  // namespace
}  // namespace gyre::torch
