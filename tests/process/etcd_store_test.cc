// The Store contract (tests/support/store_contract_cases.h) on a real etcd (tests/etcd/etcd.sh):
// one member, and three members with the second handle talking to another member than the first
// (etcd's reads are linearizable: a write through one member is seen through any other). Then
// what only a cluster can do: lose a member, and lose all of them.
#include <atomic>
#include <memory>

#include "support/etcd_cluster.h"
#include "support/store_contract_cases.h"

namespace gyre {
namespace {

// One cluster of each size per test process, started by the first test that needs it.
test::EtcdCluster& cluster(int members) {
  static std::unique_ptr<test::EtcdCluster> clusters[4];
  auto& c = clusters[members];
  if (!c) c = std::make_unique<test::EtcdCluster>(members);
  if (!c->skipReason().empty()) throw StoreSkipped{c->skipReason()};
  if (!c->failure().empty()) throw std::runtime_error(c->failure());
  return *c;
}

// A fresh key space for each store: the tests of one process share the cluster.
std::string freshPath() {
  static std::atomic<int> next{0};
  return "contract/" + std::to_string(::getpid()) + "/" + std::to_string(next++);
}

// The endpoints from member `first` on, wrapped around.
std::string rotated(const std::string& endpoints, int first) {
  std::vector<std::string> all;
  for (std::size_t b = 0; b <= endpoints.size();) {
    const std::size_t e = std::min(endpoints.find(',', b), endpoints.size());
    all.push_back(endpoints.substr(b, e - b));
    b = e + 1;
  }
  std::string out;
  for (std::size_t i = 0; i < all.size(); ++i) out.append(i ? "," : "").append(all[(first + i) % all.size()]);
  return out;
}

StoreUnderTest etcdStore(int members) {
  test::EtcdCluster& c = cluster(members);
  const std::string path = freshPath();
  const std::string first = "etcd://" + c.endpoints() + "/" + path;
  const std::string second = "etcd://" + rotated(c.endpoints(), members > 1 ? 1 : 0) + "/" + path;
  return StoreUnderTest{connectEtcdStore(first, std::chrono::seconds(10)),
                        [second] { return connectEtcdStore(second, std::chrono::seconds(10)); }, nullptr};
}

std::vector<Kind> kinds() {
  return {{"etcd", [] { return etcdStore(1); }}, {"etcd_3_members", [] { return etcdStore(3); }}};
}

INSTANTIATE_TEST_SUITE_P(Etcd, StoreContract, ::testing::ValuesIn(kinds()),
                         [](const ::testing::TestParamInfo<Kind>& p) { return p.param.name; });

class EtcdStore : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<test::EtcdCluster>(3);
    if (!cluster_->skipReason().empty()) GTEST_SKIP() << cluster_->skipReason();
    ASSERT_TRUE(cluster_->failure().empty()) << cluster_->failure();
  }
  std::unique_ptr<test::EtcdCluster> cluster_;
};

TEST_F(EtcdStore, KeepsWorkingWhenAMemberIsLost) {
  auto store = connectEtcdStore(cluster_->url("lose-one"), std::chrono::seconds(20));
  store->setString("before", "1");
  EXPECT_EQ(store->add("n", 1), 1);
  cluster_->kill(0);  // the member this client talks to first
  EXPECT_EQ(store->getString("before", milliseconds(10000)), "1");
  EXPECT_EQ(store->add("n", 1), 2);
  store->setString("after", "2");
  auto other = connectEtcdStore(cluster_->url("lose-one"), std::chrono::seconds(20));
  EXPECT_EQ(other->getString("after", milliseconds(10000)), "2");
  EXPECT_EQ(other->compareSet("leader", {}, bytes("me")), bytes("me"));
}

TEST_F(EtcdStore, AnUnreachableClusterIsAClearErrorWithinTheTimeout) {
  const std::string endpoints = cluster_->endpoints();
  for (int i = 0; i < 3; ++i) cluster_->kill(i);
  const auto start = std::chrono::steady_clock::now();
  try {
    connectEtcdStore("etcd://" + endpoints + "/gone", std::chrono::seconds(2));
    FAIL() << "connected to a stopped cluster";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot reach etcd within 2000 ms"), std::string::npos) << what;
    // Each endpoint is named, with why.
    EXPECT_NE(what.find(endpoints.substr(0, endpoints.find(',')) + ": "), std::string::npos) << what;
    EXPECT_NE(what.find(endpoints.substr(endpoints.rfind(',') + 1) + ": "), std::string::npos) << what;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(EtcdStoreAddress, MalformedAddressesAreRefusedNamingTheProblem) {
  EXPECT_THROW(connectEtcdStore("http://127.0.0.1:2379", std::chrono::seconds(1)), InvalidArgument);
  EXPECT_THROW(connectEtcdStore("etcd://", std::chrono::seconds(1)), InvalidArgument);
  EXPECT_THROW(connectEtcdStore("etcd://127.0.0.1:2379,,127.0.0.1:2380", std::chrono::seconds(1)),
               InvalidArgument);
  EXPECT_THROW(connectEtcdStore("etcd://127.0.0.1/jobs", std::chrono::seconds(1)), InvalidArgument);
}

}  // namespace
}  // namespace gyre
