// The contract every Store must honour (tests/support/store_contract_cases.h), run against each
// in-process implementation: memory, file, TCP (server + clients), the hosted TCP store init()
// uses, and a prefix view over memory.
#include "rendezvous/host_store.h"
#include "support/store_contract_cases.h"

namespace gyre {
namespace {

std::vector<Kind> kinds() {
  return {
      {"memory",
       [] {
         auto s = createMemoryStore();
         return StoreUnderTest{s, [s] { return s; }, nullptr};
       }},
      {"file",
       [] {
         auto dir = std::make_shared<test::TempDir>();
         const std::string path = dir->path() + "/store";
         return StoreUnderTest{createFileStore(path), [path] { return createFileStore(path); }, dir};
       }},
      {"tcp",
       [] {
         std::shared_ptr<TcpStoreServer> server = createTcpStoreServer("contract-secret");
         const std::string address = server->address();
         auto connect = [address] {
           return connectTcpStore(address, "contract-secret", std::chrono::seconds(10));
         };
         return StoreUnderTest{connect(), connect, server};
       }},
      {"hosted_tcp",
       [] {
         auto s = rendezvous::hostTcpStore("hosted-secret", "127.0.0.1", 0);
         return StoreUnderTest{s, [s] { return s; }, nullptr};
       }},
      {"prefix_memory",
       [] {
         auto inner = createMemoryStore();
         return StoreUnderTest{createPrefixStore("job7/", inner),
                               [inner] { return createPrefixStore("job7/", inner); }, inner};
       }},
  };
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreContract, ::testing::ValuesIn(kinds()),
                         [](const ::testing::TestParamInfo<Kind>& p) { return p.param.name; });

TEST(PrefixStore, PrefixesEveryKeyInTheInnerStore) {
  auto inner = createMemoryStore();
  auto a = createPrefixStore("a/", inner);
  auto b = createPrefixStore("b/", inner);
  a->setString("x", "from a");
  b->setString("x", "from b");
  EXPECT_EQ(inner->getString("a/x", milliseconds(100)), "from a");
  EXPECT_EQ(inner->getString("b/x", milliseconds(100)), "from b");
  EXPECT_TRUE(a->check({"x"}));
  EXPECT_FALSE(a->check({"y"}));
  EXPECT_EQ(a->add("n", 2), 2);
  EXPECT_EQ(inner->getString("a/n", milliseconds(100)), "2");
  EXPECT_TRUE(b->deleteKey("x"));
  EXPECT_TRUE(inner->check({"a/x"}));
  EXPECT_FALSE(inner->check({"b/x"}));
  EXPECT_THROW(createPrefixStore("p", nullptr), InvalidArgument);
}

}  // namespace
}  // namespace gyre
