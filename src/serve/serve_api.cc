// gyre/serve.h's Server: the server `gyre serve` runs (server.h), for any ServedModel.
#include "gyre/serve.h"

#include "common/check.h"
#include "gyre/errors.h"
#include "serve/options.h"
#include "serve/server.h"

namespace gyre::serve {

namespace {

ServedModel checked(ServedModel model, const ServeOptions& options) {
  GYRE_USAGE_CHECK(!model.name.empty(), "a served model needs a name (it is in the URLs)");
  GYRE_USAGE_CHECK(model.name.find_first_of("/:? #") == std::string::npos, "the model name '", model.name,
                   "' has a character a URL path cannot hold as it is ('/', ':', '?', ' ' or '#')");
  GYRE_USAGE_CHECK(static_cast<bool>(model.makeReplica), "the served model '", model.name, "' has no makeReplica");
  GYRE_USAGE_CHECK(!options.replicaProcesses,
                   "replicaProcesses is gyre serve's (--replica-processes); a Server's replicas are threads");
  ServeOptions checked = options;
  if (checked.model.empty()) checked.model = model.name;  // the CLI's MODEL, which a Server does not take
  validateServeOptions(checked);
  return model;
}

}  // namespace

Server::Server(ServedModel model, const ServeOptions& options)
    : impl_(std::make_unique<ModelServer>(checked(std::move(model), options), options)) {}

Server::~Server() { stop(); }

int Server::port() const { return impl_->port(); }

void Server::serve() { impl_->serve(); }

void Server::start() {
  GYRE_USAGE_CHECK(!thread_.joinable(), "the server was started already");
  thread_ = std::thread([this] { impl_->serve(); });
}

void Server::stop() {
  impl_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gyre::serve
