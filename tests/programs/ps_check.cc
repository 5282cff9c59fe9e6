// gyre_ps_check: a worker for `gyre run --servers S` tests. It joins the parameter servers with
// gyre::ps::Worker::fromEnvironment, declaring a table of two keys ({1000, 7} floats, bsp, plain
// SGD); worker 0 initializes it (key k, element i: k + i / 1024, exact in float); then every
// worker runs STEPS steps of: pull both keys and check them, push a gradient of 1.0 everywhere
// with lr 0.1, clock(). Under bsp the step's update is the workers' average gradient, 1.0, so
// after step c every value is its initial value minus 0.1 applied c times (in float, as the
// server does). A final pull checks the last step. Prints `ps worker R ok` and exits 0; prints
// what differed (or the error) on stderr and exits 1.
//
//   gyre_ps_check [STEPS [SLEEP_MS [STEPPED_FILE]]]   (defaults: 5 steps, no sleep, no file)
//
// SLEEP_MS: a pause after each step. STEPPED_FILE: worker 0 creates it after its first step, when
// every server is up and serving (a test then kills one to see the workers fail over).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gyre/ps.h"

namespace {

constexpr float kLr = 0.1f;

float initial(int key, std::size_t i) {
  return static_cast<float>(key) + static_cast<float>(i) / 1024.0f;
}

// The value after `steps` updates of gradient 1.0, computed as the server computes it.
float expected(int key, std::size_t i, int steps) {
  float v = initial(key, i);
  for (int s = 0; s < steps; ++s) v -= kLr * 1.0f;
  return v;
}

// Compares a pulled key with its expected value; prints the first difference.
bool check(int worker, int key, const std::vector<float>& got, int steps) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float want = expected(key, i, steps);
    // Exact up to the rounding of a fused multiply-add the server may use.
    if (std::fabs(got[i] - want) > 1e-5f * std::max(1.0f, std::fabs(want))) {
      std::fprintf(stderr, "ps worker %d: after %d step(s), key %d [%zu] = %.9g, expected %.9g\n", worker,
                   steps, key, i, static_cast<double>(got[i]), static_cast<double>(want));
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 5;
  const int sleepMs = argc > 2 ? std::atoi(argv[2]) : 0;
  const std::string steppedFile = argc > 3 ? argv[3] : "";
  if (argc > 4 || steps < 1 || sleepMs < 0) {
    std::fprintf(stderr, "usage: gyre_ps_check [STEPS [SLEEP_MS [STEPPED_FILE]]]\n");
    return 2;
  }
  int id = -1;
  try {
    gyre::ps::TableSpec spec;
    spec.sizes = {1000, 7};
    spec.mode = gyre::ps::Mode::parse("bsp");
    auto worker = gyre::ps::Worker::fromEnvironment(spec);
    id = worker->workerId();
    const int keys = static_cast<int>(spec.sizes.size());
    std::vector<std::vector<float>> params(keys), grads(keys);
    for (int k = 0; k < keys; ++k) {
      params[k].resize(spec.sizes[k]);
      grads[k].assign(spec.sizes[k], 1.0f);
    }
    if (id == 0) {
      std::vector<std::vector<float>> init(keys);
      std::vector<std::shared_ptr<gyre::Work>> works;
      for (int k = 0; k < keys; ++k) {
        for (std::size_t i = 0; i < spec.sizes[k]; ++i) init[k].push_back(initial(k, i));
        works.push_back(worker->init(k, init[k].data()));
      }
      for (auto& w : works) w->wait();
    }
    const auto pullAll = [&] {
      std::vector<std::shared_ptr<gyre::Work>> works;
      for (int k = 0; k < keys; ++k) works.push_back(worker->pull(k, params[k].data()));
      for (auto& w : works) w->wait();
    };
    for (int step = 0; step < steps; ++step) {
      pullAll();
      for (int k = 0; k < keys; ++k)
        if (!check(id, k, params[k], step)) return 1;
      for (int k = 0; k < keys; ++k) worker->push(k, grads[k].data(), kLr);
      worker->clock();
      if (step == 0 && id == 0 && !steppedFile.empty()) std::ofstream(steppedFile) << "stepped\n";
      if (sleepMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs));
    }
    pullAll();
    for (int k = 0; k < keys; ++k)
      if (!check(id, k, params[k], steps)) return 1;
    std::printf("ps worker %d ok\n", id);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps worker %d: %s\n", id, e.what());
    return 1;
  }
}
