// gyre/serve.h: any forward pass behind the same server as `gyre serve`, in this process, driven
// by a real HTTP client (Python's http.client): each caller gets its own rows of a batch, bad
// requests get a 4xx naming the problem, the Server's own misuse is refused, and stop() answers
// what was accepted.
#include "gyre/serve.h"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "serve_http.h"
#include "support/ranks.h"

namespace gyre::serve {
namespace {

using nlohmann::json;

// rows -> [row sum, row sum * 2]: each row's answer says which row it was.
ServedModel summer(std::atomic<int>& replicasMade) {
  ServedModel m;
  m.name = "summer";
  m.rowShape = {3};
  m.makeReplica = [&replicasMade]() -> Forward {
    ++replicasMade;
    return [](const ::torch::Tensor& rows) {
      const ::torch::Tensor sums = rows.sum(1, /*keepdim=*/true);
      return ::torch::cat({sums, sums * 2}, 1);
    };
  };
  return m;
}

TEST(ServeApi, ACallableServesItsRowsOverHttp) {
  std::atomic<int> made{0};
  ServeOptions o;
  o.port = 0;
  o.replicas = 2;
  o.maxBatchSize = 8;
  Server server(summer(made), o);
  EXPECT_EQ(made.load(), 2);
  ASSERT_GT(server.port(), 0);
  server.start();
  const Reply v1 = request(server.port(), "POST", "/v1/models/summer:predict",
                           json{{"instances", {{1, 2, 3}, {10, 20, 30}}}}.dump());
  ASSERT_EQ(v1.status, 200) << v1.body;
  EXPECT_EQ(json::parse(v1.body)["predictions"], json::parse("[[6.0, 12.0], [60.0, 120.0]]"));
  const Reply status = request(server.port(), "GET", "/v1/models/summer");
  EXPECT_EQ(status.status, 200);
  EXPECT_NE(status.body.find("callable"), std::string::npos) << status.body;
  const Reply wrong = request(server.port(), "POST", "/v1/models/summer:predict", json{{"instances", {{1, 2}}}}.dump());
  EXPECT_EQ(wrong.status, 400);
  EXPECT_NE(wrong.body.find("this model takes 3"), std::string::npos) << wrong.body;
  const Reply unknown = request(server.port(), "POST", "/v1/models/other:predict", json{{"instances", {{1, 2, 3}}}}.dump());
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  server.stop();
  server.stop();  // again: nothing to do
}

TEST(ServeApi, AServerStoppedBeforeOrJustAfterItStartsEnds) {
  std::atomic<int> made{0};
  ServeOptions o;
  o.port = 0;
  {
    Server never(summer(made), o);  // destroyed without serving
  }
  for (int i = 0; i < 20; ++i) {  // stop() racing start()'s thread on its way to listen
    Server server(summer(made), o);
    server.start();
    server.stop();
  }
}

TEST(ServeApi, MisuseIsRefusedNamingIt) {
  std::atomic<int> made{0};
  ServeOptions o;
  o.port = 0;
  ServedModel noName = summer(made);
  noName.name = "";
  EXPECT_THROW(Server(noName, o), InvalidArgument);
  ServedModel slash = summer(made);
  slash.name = "a/b";
  EXPECT_THROW(Server(slash, o), InvalidArgument);
  ServedModel none = summer(made);
  none.makeReplica = nullptr;
  EXPECT_THROW(Server(none, o), InvalidArgument);
  ServeOptions processes = o;
  processes.replicaProcesses = true;
  EXPECT_THROW(Server(summer(made), processes), InvalidArgument);
  ServeOptions batch = o;
  batch.maxBatchSize = 0;
  try {
    Server s(summer(made), batch);
    ADD_FAILURE() << "a batch of 0 rows was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--max-batch-size must be between 1 and 65536"), std::string::npos)
        << e.what();
  }
  Server first(summer(made), o);
  ServeOptions same = o;
  same.port = first.port();
  EXPECT_THROW(Server(summer(made), same), Error);  // the port is taken: said before any replica loads
  EXPECT_EQ(made.load(), 1);  // only `first` made a replica
}

}  // namespace
}  // namespace gyre::serve
