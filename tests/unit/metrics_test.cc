// The Prometheus endpoint's pieces: the text exposition format (HELP/TYPE lines, labels and their
// escaping, histograms, special numbers, refused names), and the HTTP server: /metrics answers
// what render() says with Prometheus's content type, other paths are 404, and a port in use is an
// error that names the flag and the address.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <string>

#include "collectives/tally.h"
#include "gyre/errors.h"
#include "metrics/exposition.h"
#include "metrics/server.h"

namespace gyre::metrics {
namespace {

std::string get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "connect failed";
  }
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  [[maybe_unused]] auto n = ::write(fd, request.data(), request.size());
  std::string response;
  char buf[4096];
  for (ssize_t got; (got = ::read(fd, buf, sizeof buf)) > 0;)
    response.append(buf, static_cast<std::size_t>(got));
  ::close(fd);
  return response;
}

TEST(MetricsExposition, WritesFamiliesLabelsAndHistogramsInTheTextFormat) {
  std::vector<Family> families;
  families.push_back(Family{"gyre_x_total", "Things\nwith a \\ in the help", "counter", {}}.add(3).add(
      4.5, {{"op", "all\"reduce"}, {"path", "a\\b\nc"}}));
  families.push_back(
      Family{"gyre_h", "A histogram", "histogram", {}}.histogram({0, 1, 2}, {5, 3, 0, 2}, 10, {{"k", "v"}}));
  families.push_back(Family{"gyre_g", "Odd numbers", "gauge", {}}
                         .add(std::nan(""))
                         .add(INFINITY, {{"s", "+"}})
                         .add(-INFINITY, {{"s", "-"}}));
  EXPECT_EQ(render(families),
            "# HELP gyre_x_total Things\\nwith a \\\\ in the help\n"
            "# TYPE gyre_x_total counter\n"
            "gyre_x_total 3\n"
            "gyre_x_total{op=\"all\\\"reduce\",path=\"a\\\\b\\nc\"} 4.5\n"
            "# HELP gyre_h A histogram\n"
            "# TYPE gyre_h histogram\n"
            "gyre_h_bucket{k=\"v\",le=\"0\"} 5\n"
            "gyre_h_bucket{k=\"v\",le=\"1\"} 8\n"
            "gyre_h_bucket{k=\"v\",le=\"2\"} 8\n"
            "gyre_h_bucket{k=\"v\",le=\"+Inf\"} 10\n"
            "gyre_h_sum{k=\"v\"} 10\n"
            "gyre_h_count{k=\"v\"} 10\n"
            "# HELP gyre_g Odd numbers\n"
            "# TYPE gyre_g gauge\n"
            "gyre_g NaN\n"
            "gyre_g{s=\"+\"} +Inf\n"
            "gyre_g{s=\"-\"} -Inf\n");
  EXPECT_EQ(render({Family{"gyre_s", "", "histogram", {}}.integerHistogram({4, 0, 2})}),
            "# HELP gyre_s \n# TYPE gyre_s histogram\ngyre_s_bucket{le=\"0\"} 4\ngyre_s_bucket{le=\"1\"} 4\n"
            "gyre_s_bucket{le=\"+Inf\"} 6\ngyre_s_sum 4\ngyre_s_count 6\n");
  EXPECT_EQ(formatValue(0.1), "0.1");
  EXPECT_EQ(formatValue(1e21), "1e+21");
  EXPECT_THROW(render({Family{"9bad", "", "gauge", {}}.add(1)}), InvalidArgument);
  EXPECT_THROW(render({Family{"ok", "", "gauge", {}}.add(1, {{"bad-label", "x"}})}), InvalidArgument);
  EXPECT_THROW(render({Family{"ok", "", "gauge", {}}.add(1, {{"__reserved", "x"}})}), InvalidArgument);
}

TEST(MetricsServer, ServesMetricsAndRefusesAPortInUse) {
  int scrapes = 0;
  Server server(
      "127.0.0.1", 0, [&] { return "gyre_up " + std::to_string(++scrapes) + "\n"; }, "--metrics-port");
  ASSERT_GT(server.port(), 0);
  const std::string first = get(server.port(), "/metrics");
  EXPECT_NE(first.find("HTTP/1.1 200"), std::string::npos) << first;
  EXPECT_NE(first.find("Content-Type: text/plain; version=0.0.4; charset=utf-8"), std::string::npos) << first;
  EXPECT_NE(first.find("gyre_up 1\n"), std::string::npos) << first;
  EXPECT_NE(get(server.port(), "/metrics").find("gyre_up 2\n"), std::string::npos);
  EXPECT_NE(get(server.port(), "/other").find("HTTP/1.1 404"), std::string::npos);

  const std::string inUse = "--metrics-port " + std::to_string(server.port()) +
                            ": cannot listen on 127.0.0.1:" + std::to_string(server.port()) +
                            ": Address already in use";
  try {
    Server second(
        "127.0.0.1", server.port(), [] { return ""; }, "--metrics-port");
    ADD_FAILURE() << "a second server got the port";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(inUse), std::string::npos) << e.what();
  }
  try {
    checkPortFree("127.0.0.1", server.port(), "--metrics-port");
    ADD_FAILURE() << "the port was taken as free";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(inUse), std::string::npos) << e.what();
  }
}

// The check leaves the port free for the server that comes after it (a worker, in gyre train).
TEST(MetricsServer, APortCheckedFreeStaysFree) {
  int port = 0;
  {
    port = Server(
               "127.0.0.1", 0, [] { return ""; }, "--metrics-port")
               .port();
  }
  checkPortFree("127.0.0.1", port, "--metrics-port");
  Server after(
      "127.0.0.1", port, [] { return "gyre_up 1\n"; }, "--metrics-port");
  EXPECT_NE(get(port, "/metrics").find("gyre_up 1\n"), std::string::npos);
}

TEST(CollectiveTallies, CountCallsBytesAndSecondsByOpAndAlgorithm) {
  const auto before = [](const std::string& op) {
    for (const collectives::Tally& t : collectives::tallies())
      if (t.op == op && t.algorithm == "testalgo") return t;
    return collectives::Tally{};
  };
  const collectives::Tally start = before("testop");
  collectives::addTally("testop", "testalgo", 100, 0.5);
  collectives::addTally("testop", "testalgo", 28, 0.25);
  const collectives::Tally now = before("testop");
  EXPECT_EQ(now.calls - start.calls, 2u);
  EXPECT_EQ(now.bytes - start.bytes, 128u);
  EXPECT_DOUBLE_EQ(now.seconds - start.seconds, 0.75);
}

}  // namespace
}  // namespace gyre::metrics
