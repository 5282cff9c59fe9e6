// etcd addresses (rendezvous/etcd_client.h): what parseEtcdUrl makes of them, and back.
#include <gtest/gtest.h>

#include "gyre/errors.h"
#include "rendezvous/etcd_client.h"

namespace gyre::rendezvous {
namespace {

TEST(EtcdUrl, EndpointsAndThePathBecomeEndpointsAndAKeyPrefix) {
  const EtcdUrl one = parseEtcdUrl("etcd://10.0.0.5:2379/jobs/42");
  EXPECT_EQ(one.endpoints, (std::vector<std::string>{"10.0.0.5:2379"}));
  EXPECT_EQ(one.prefix, "/jobs/42/");
  EXPECT_TRUE(one.hasPath);
  const EtcdUrl three = parseEtcdUrl("etcd://a:1,[::1]:2,c:3/job/");
  EXPECT_EQ(three.endpoints, (std::vector<std::string>{"a:1", "[::1]:2", "c:3"}));
  EXPECT_EQ(three.prefix, "/job/");
  EXPECT_EQ(formatEtcdUrl(three), "etcd://a:1,[::1]:2,c:3/job");
  EXPECT_EQ(parseEtcdUrl(formatEtcdUrl(one)).prefix, one.prefix);
}

TEST(EtcdUrl, WithoutAPathKeysGoUnderGyre) {
  const EtcdUrl url = parseEtcdUrl("etcd://127.0.0.1:2379");
  EXPECT_EQ(url.prefix, "/gyre/");
  EXPECT_FALSE(url.hasPath);
}

TEST(EtcdUrl, MalformedAddressesAreInvalidArguments) {
  for (const char* bad :
       {"http://a:1/j", "etcd://", "etcd://a:1,,b:2/j", "etcd://a/j", "etcd://a:notaport/j", "etcd://,a:1"})
    EXPECT_THROW(parseEtcdUrl(bad), InvalidArgument) << bad;
}

}  // namespace
}  // namespace gyre::rendezvous
