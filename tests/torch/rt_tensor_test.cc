// libtorch tensors in gyre::rt (gyre/rt/tensor.h): as arguments and results of tasks between two
// runtimes of this process over loopback (packed by value), and as shared objects
// (rt.put(tensor): mapped in the owner and in the other process, copy on write).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "gyre/rt.h"
#include "gyre/rt/tensor.h"
#include "support/rt_runtimes.h"

namespace gyre::rt {
namespace rt_tensor_test {

::torch::Tensor twice(::torch::Tensor t) { return t * 2; }
GYRE_RT_FUNCTION(twice);

double sumOf(ObjectRef<::torch::Tensor> ref) { return get(ref).sum().item<double>(); }
GYRE_RT_FUNCTION(sumOf);

class RtTensors : public ::testing::Test {
 protected:
  void SetUp() override { runtimes_ = test::loopbackRuntimes(2, 2, createMemoryStore()); }
  Runtime& rt(int r) { return *runtimes_[static_cast<std::size_t>(r)]; }
  std::vector<std::unique_ptr<Runtime>> runtimes_;
};

TEST_F(RtTensors, TravelAsArgumentsAndResultsWithTheirDtypeAndShape) {
  const std::vector<::torch::Tensor> inputs{
      ::torch::arange(12, ::torch::kFloat32).reshape({3, 4}),
      ::torch::arange(12, ::torch::kFloat64).reshape({4, 3}).t(),  // not contiguous
      ::torch::arange(5, ::torch::kInt64),
      ::torch::arange(6, ::torch::kFloat32).to(::torch::kBFloat16).reshape({2, 1, 3}),
      ::torch::tensor(7, ::torch::kInt32),  // no dimension
      ::torch::empty({0, 3}, ::torch::kFloat32),
  };
  for (const ::torch::Tensor& x : inputs) {
    const ::torch::Tensor y = rt(0).task(twice).options({.rank = 1}).remote(x).get();
    EXPECT_EQ(y.scalar_type(), x.scalar_type());
    EXPECT_EQ(y.sizes(), x.sizes());
    EXPECT_TRUE(::torch::equal(y, x * 2)) << x;
  }
}

TEST_F(RtTensors, AWrongArgumentIsNamed) {
  const Bytes args = pack(std::make_tuple(std::string("not a tensor")));
  try {
    (void)Future<::torch::Tensor>(rt(0).submitTask(detail::functionName(detail::keyOf(&twice)), args, {.rank = 1})).get();
    ADD_FAILURE() << "a string passed as a tensor";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("argument 1"), std::string::npos) << e.what();
  }
  // Bytes that do not match the sizes: [dtype, sizes, 8 bytes for 3 floats].
  msgpack::sbuffer bad;
  msgpack::packer<msgpack::sbuffer> p(bad);
  p.pack_array(1);
  p.pack_array(3);
  p.pack(std::string("float32"));
  p.pack(std::vector<std::int64_t>{3});
  p.pack_bin(8);
  p.pack_bin_body("01234567", 8);
  try {
    (void)Future<::torch::Tensor>(rt(0).submitTask(detail::functionName(detail::keyOf(&twice)), Bytes(bad.data(), bad.size()), {.rank = 1})).get();
    ADD_FAILURE() << "a tensor whose bytes do not match its sizes";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("do not match"), std::string::npos) << e.what();
  }
}

TEST_F(RtTensors, InSharedMemoryAreReadWithoutACopyAndCopiedOnWrite) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this machine";
  const ::torch::Tensor w = ::torch::arange(3 * 1024, ::torch::kFloat32).reshape({3, 1024});
  const ObjectRef<::torch::Tensor> ref = rt(0).put(w);
  for (int r : {0, 1}) {
    ::torch::Tensor mine = rt(r).get(ref);
    EXPECT_EQ(mine.sizes(), w.sizes());
    EXPECT_TRUE(::torch::equal(mine, w));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(mine.data_ptr()) % 64, 0u);
    mine.add_(1);  // this reader's pages only
    EXPECT_TRUE(::torch::equal(rt(1 - r).get(ref), w));
    EXPECT_TRUE(::torch::equal(rt(r).get(ref), w));
  }
  EXPECT_DOUBLE_EQ(rt(0).task(sumOf).options({.rank = 1}).remote(ref).get(), w.sum().item<double>());
}

TEST_F(RtTensors, AFreedTensorOrAnotherObjectIsRefused) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this machine";
  auto ref = std::make_unique<ObjectRef<::torch::Tensor>>(rt(0).put(::torch::ones({4})));
  ::torch::Tensor kept = rt(1).get(*ref);
  const auto borrowed = unpack<ObjectRef<::torch::Tensor>>(pack(*ref), "a reference");
  ref.reset();
  EXPECT_THROW((void)rt(1).get(borrowed), InvalidArgument);
  EXPECT_TRUE(::torch::equal(kept, ::torch::ones({4})));
  // A reference to other bytes, read as a tensor.
  const ObjectRef<Buffer> bytes = rt(0).putBuffer("bytes", 5);
  const auto notATensor = unpack<ObjectRef<::torch::Tensor>>(pack(bytes), "a reference");
  EXPECT_THROW((void)rt(1).get(notATensor), InvalidArgument);
}

}  // namespace rt_tensor_test
}  // namespace gyre::rt
