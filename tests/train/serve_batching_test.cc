// gyre serve's pure parts: the wire formats (serve/codec.h) and dynamic batching (serve/batcher.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve/autoscaler.h"
#include "serve/batcher.h"
#include "serve/codec.h"

namespace gyre::serve {
namespace {

using nlohmann::json;
const std::vector<std::int64_t> kImage = {1, 28, 28};

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const BadRequest& e) {
    return std::to_string(e.status()) + " " + e.what();
  }
  return "accepted";
}

TEST(ServeCodec, V1RowsTakeTheModelsShapeHoweverTheyAreNested) {
  json flat = {{"instances", json::array({std::vector<float>(784, 0.5f), std::vector<float>(784, 0.25f)})}};
  const ::torch::Tensor a = decodeV1(flat.dump(), kImage);
  EXPECT_EQ(a.sizes().vec(), (std::vector<std::int64_t>{2, 1, 28, 28}));
  EXPECT_EQ(a[1][0][27][27].item<float>(), 0.25f);
  json nested = {{"instances", json::array({json::array({std::vector<std::vector<float>>(28, std::vector<float>(28, 1))})})}};
  EXPECT_EQ(decodeV1(nested.dump(), kImage).sizes().vec(), (std::vector<std::int64_t>{1, 1, 28, 28}));
  // Without a row shape (a TorchScript model), the request's own.
  EXPECT_EQ(decodeV1(R"({"instances": [[1, 2, 3], [4, 5, 6]]})", {}).sizes().vec(), (std::vector<std::int64_t>{2, 3}));
}

// The common {"instances": ...} body is read without the JSON DOM; it reads every body as the DOM
// does (a second key sends the same instances through the DOM), bit for bit.
TEST(ServeCodec, TheQuickV1ReaderReadsAsTheDomReader) {
  const std::vector<std::string> instances = {
      "[[1, 2, 3], [4, 5, 6]]",
      " [ [ -0.5 ,1e-3,\n2.5E+2 ] ]",
      "[[[1.0000001, 0.1], [0.2, 0.3]], [[3.4028234e38, -1.17549435e-38], [123456789, 9007199254740993]]]",
      "[[0.30000000000000004, 1e-46, -0]]",
      "[[1, 2], [3]]",     // ragged: both refuse it
      "[[1, 2], [3, [4]]]",
      "[[01]]",            // not JSON
      "[[1.]]",
      "[[NaN]]",
      "[[\"a\"]]",
  };
  for (const std::string& x : instances) {
    const auto read = [](const std::string& body) -> std::string {
      try {
        const ::torch::Tensor t = decodeV1(body, {});
        std::string bits(reinterpret_cast<const char*>(t.data_ptr<float>()), t.numel() * sizeof(float));
        std::string shape;
        for (const std::int64_t d : t.sizes()) shape += std::to_string(d) + ",";
        return shape + " " + bits;
      } catch (const BadRequest& e) {
        return std::string("refused: ") + e.what();
      }
    };
    EXPECT_EQ(read("{\"instances\": " + x + "}"), read("{\"instances\": " + x + ", \"signature_name\": \"s\"}")) << x;
  }
}

TEST(ServeCodec, BadBodiesAreRefusedNamingTheProblem) {
  EXPECT_EQ(refusal([] { decodeV1("{\"instances\": [", kImage); }), "400 the body is not JSON");
  EXPECT_EQ(refusal([] { decodeV1("[1]", kImage); }), "400 the body is a JSON array, not an object");
  EXPECT_NE(refusal([] { decodeV1("{}", kImage); }).find("no \"instances\""), std::string::npos);
  EXPECT_NE(refusal([] { decodeV1(R"({"instances": []})", kImage); }).find("non-empty"), std::string::npos);
  EXPECT_EQ(refusal([] { decodeV1(R"({"instances": [[1, 2, 3]]})", kImage); }),
            "400 a row has 3 values; this model takes 784 (shape [1, 28, 28])");
  EXPECT_NE(refusal([] { decodeV1(R"({"instances": [[1, 2], [3]]})", {}); }).find("ragged"), std::string::npos);
  EXPECT_NE(refusal([] { decodeV1(R"({"instances": [["a"]]})", {}); }).find("holds a string"), std::string::npos);
  EXPECT_NE(refusal([] { decodeV2(R"({"inputs": [{"shape": [1, 2], "datatype": "BYTES", "data": [1, 2]}]})", {}); })
                .find("datatype 'BYTES'"),
            std::string::npos);
  EXPECT_NE(refusal([] { decodeV2(R"({"inputs": [{"shape": [1, 3], "datatype": "FP32", "data": [1, 2]}]})", {}); })
                .find("holds 2 values"),
            std::string::npos);
  EXPECT_NE(refusal([] { decodeRaw("abcd", "", {}); }).find("X-Gyre-Shape"), std::string::npos);
  EXPECT_NE(refusal([] { decodeRaw("abcd", "1,x", {}); }).find("not a list of positive integers"), std::string::npos);
  EXPECT_NE(refusal([] { decodeRaw("abcd", "1,2", {}); }).find("takes 8"), std::string::npos);
}

TEST(ServeCodec, AnswersReadBackBitForBit) {
  const ::torch::Tensor out = ::torch::randn({3, 10}) * 1e3;
  const json v1 = json::parse(encodeV1(out));
  const json v2 = json::parse(encodeV2(out, "m"));
  EXPECT_EQ(v2["model_name"], "m");
  EXPECT_EQ(v2["outputs"][0]["shape"], json::array({3, 10}));
  const std::string raw = encodeRaw(out);
  ASSERT_EQ(raw.size(), 30 * sizeof(float));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 10; ++j) {
      const float want = out[i][j].item<float>();
      EXPECT_EQ(v1["predictions"][i][j].get<float>(), want);
      EXPECT_EQ(v2["outputs"][0]["data"][i * 10 + j].get<float>(), want);
      float got = 0;
      std::memcpy(&got, raw.data() + (i * 10 + j) * sizeof(float), sizeof got);
      EXPECT_EQ(got, want);
    }
  // The raw request's decoding is the inverse of the raw answer's encoding.
  EXPECT_TRUE(decodeRaw(raw, shapeText(out), {}).equal(out));
}

// A forward pass that doubles its input and records the rows of each batch.
struct Recorder {
  std::mutex mu;
  std::vector<std::int64_t> batches;
  Batcher::Forward forward() {
    return [this](const ::torch::Tensor& x) {
      std::lock_guard<std::mutex> lock(mu);
      batches.push_back(x.size(0));
      return x * 2;
    };
  }
};

TEST(ServeBatcher, RequestsFillABatchAndEachGetsItsOwnRows) {
  Recorder r;
  std::vector<std::future<::torch::Tensor>> answers;
  {
    Batcher b({r.forward()}, {.maxBatchSize = 4, .wait = std::chrono::milliseconds(300), .maxQueue = 16});
    for (int i = 0; i < 6; ++i) answers.push_back(b.submit(::torch::full({1, 3}, static_cast<float>(i))));
    for (int i = 0; i < 6; ++i) EXPECT_TRUE(answers[i].get().equal(::torch::full({1, 3}, 2.0f * i))) << i;
    const BatchStats s = b.stats();
    EXPECT_EQ(s.requests, 6u);
    EXPECT_EQ(s.rows, 6u);
  }
  // Four fill the first batch at once; the other two wait out the 300 ms for company.
  EXPECT_EQ(r.batches, (std::vector<std::int64_t>{4, 2}));
}

TEST(ServeBatcher, RowsOfAnotherShapeOrBeyondTheBatchWaitForTheNext) {
  Recorder r;
  Batcher b({r.forward()}, {.maxBatchSize = 4, .wait = std::chrono::milliseconds(100), .maxQueue = 16});
  auto big = b.submit(::torch::ones({6, 2}));  // larger than a batch: runs alone
  auto other = b.submit(::torch::ones({1, 5}));
  EXPECT_EQ(big.get().size(0), 6);
  EXPECT_EQ(other.get().size(1), 5);
  EXPECT_EQ(r.batches, (std::vector<std::int64_t>{6, 1}));
}

TEST(ServeBatcher, AFailingForwardFailsItsBatchOnlyAndAFullQueueRefuses) {
  std::atomic<int> calls{0};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  Batcher b({[&](const ::torch::Tensor& x) {
              if (calls++ == 0) {
                released.wait();
                throw std::runtime_error("boom");
              }
              return x;
            }},
            {.maxBatchSize = 1, .wait = std::chrono::milliseconds(0), .maxQueue = 2});
  auto first = b.submit(::torch::ones({1, 1}));
  while (b.stats().busy == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto second = b.submit(::torch::ones({1, 1}));
  auto third = b.submit(::torch::ones({1, 1}));
  EXPECT_THROW(b.submit(::torch::ones({1, 1})), QueueFull);
  release.set_value();
  EXPECT_THROW(first.get(), std::runtime_error);
  EXPECT_TRUE(second.get().equal(::torch::ones({1, 1})));
  EXPECT_TRUE(third.get().equal(::torch::ones({1, 1})));
  EXPECT_EQ(b.stats().failedBatches, 1u);
}

TEST(ServeBatcher, StoppingAnswersEveryAcceptedRequest) {
  Recorder r;
  std::vector<std::future<::torch::Tensor>> answers;
  {
    Batcher b({r.forward(), r.forward()}, {.maxBatchSize = 2, .wait = std::chrono::seconds(30), .maxQueue = 64});
    for (int i = 0; i < 5; ++i) answers.push_back(b.submit(::torch::full({1, 1}, static_cast<float>(i))));
  }  // the odd one out does not wait its 30 s
  for (int i = 0; i < 5; ++i) EXPECT_EQ(answers[i].get().item<float>(), 2.0f * i);
}

TEST(ServeBatcher, ReplicasComeAndGoWithoutDroppingARequest) {
  std::atomic<int> calls{0};
  const Batcher::Forward slow = [&](const ::torch::Tensor& x) {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return x + 1;
  };
  Batcher b({slow}, {.maxBatchSize = 1, .wait = std::chrono::milliseconds(0), .maxQueue = 256});
  EXPECT_EQ(b.replicas(), 1);
  EXPECT_THROW(b.removeReplica(), InvalidArgument);  // never the last one
  std::vector<std::future<::torch::Tensor>> answers;
  for (int i = 0; i < 60; ++i) {
    answers.push_back(b.submit(::torch::full({1, 1}, static_cast<float>(i))));
    if (i == 10) b.addReplica(slow);
    if (i == 20) b.addReplica(slow);
    if (i == 30) b.removeReplica();
    if (i == 40) b.removeReplica();
  }
  EXPECT_EQ(b.replicas(), 1);
  for (int i = 0; i < 60; ++i) EXPECT_EQ(answers[static_cast<std::size_t>(i)].get().item<float>(), i + 1.0f) << i;
  EXPECT_EQ(calls.load(), 60);
  // A replica counts its batch done just after it answers it: wait for that.
  for (int i = 0; i < 5000 && b.stats().running != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(b.stats().running, 0);
  EXPECT_EQ(b.stats().queued, 0);
}

// Ray Serve's policy, replayed on a clock of its own: up after the upscale delay, down after the
// downscale delay to the most wanted over it, within [min, max].
TEST(ServeAutoscale, FollowsTheRequestsInFlightAfterItsDelays) {
  using namespace std::chrono_literals;
  AutoscalePolicy p({.minReplicas = 1, .maxReplicas = 4, .targetOngoing = 2, .upscaleDelay = 1s, .downscaleDelay = 5s});
  EXPECT_EQ(p.wanted(0), 1);
  EXPECT_EQ(p.wanted(3), 2);
  EXPECT_EQ(p.wanted(4), 2);
  EXPECT_EQ(p.wanted(100), 4);
  const AutoscalePolicy::Clock::time_point t0{};
  EXPECT_EQ(p.decide(t0, 7, 1), 1);           // 4 wanted: not yet
  EXPECT_EQ(p.decide(t0 + 500ms, 7, 1), 1);
  EXPECT_EQ(p.decide(t0 + 1s, 5, 1), 3);      // wanted for a second: the count now wanted
  EXPECT_EQ(p.decide(t0 + 2s, 1, 3), 3);      // fewer wanted from here
  EXPECT_EQ(p.decide(t0 + 4s, 3, 3), 3);      // 2 wanted meanwhile
  EXPECT_EQ(p.decide(t0 + 7s, 0, 3), 2);      // five seconds of fewer: to the most wanted over them
  EXPECT_EQ(p.decide(t0 + 8s, 0, 2), 2);
  EXPECT_EQ(p.decide(t0 + 9s, 4, 2), 2);      // as many as wanted: the clock restarts
  EXPECT_EQ(p.decide(t0 + 10s, 0, 2), 2);
  EXPECT_EQ(p.decide(t0 + 15s, 0, 2), 1);
  // A burst shorter than the upscale delay adds none.
  EXPECT_EQ(p.decide(t0 + 16s, 9, 1), 1);
  EXPECT_EQ(p.decide(t0 + 16500ms, 0, 1), 1);
  EXPECT_THROW(AutoscalePolicy({.minReplicas = 2, .maxReplicas = 1}), InvalidArgument);
  EXPECT_THROW(AutoscalePolicy({.minReplicas = 1, .maxReplicas = 2, .targetOngoing = 0}), InvalidArgument);
}

}  // namespace
}  // namespace gyre::serve
