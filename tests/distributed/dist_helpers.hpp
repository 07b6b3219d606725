// dist_helpers.hpp: what the multi-rank tests share: a small manifest, the losses a run logged,
// a checkpoint's weights (consolidated when sharded), a free port, closeness checks.
#pragma once

#include "torch_doctest.hpp"  // before any torch or doctest header
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "abi/checkpoint_backend.hpp"
#include "checkpoint/sharded_checkpoint.hpp"
#include "plugin_slots.hpp"
#include "run_host.hpp"

namespace loom_dist_test {

namespace fs = std::filesystem;

// The default model is a small MLP; model_table replaces its [model] table.
inline const char* kMlpModel = "[model]\nuse = \"mlp_lm\"\nn_embd = 16\ncontext = 2\nhidden = 32\n";

inline std::string manifest(const fs::path& dir, int steps, const std::string& model_table = kMlpModel) {
  const fs::path path = dir / "m.toml";
  std::ofstream(path) << "[run]\ndir = \"" << dir.string() << "\"\nsteps = " << steps
                      << "\nlog_every = 1\nthreads = 1\npeak_flops = 1e9\n" << model_table
                      << "[data]\nuse = \"synthetic\"\nseq_len = 16\n"
                         "[optimizer]\nuse = \"adamw\"\nlr = 0.01\n"
                         "[[trackers]]\nuse = \"jsonl\"\n"
                         "[checkpoint]\nevery = 10\nkeep = 5\n"
                         "[distributed]\ntimeout_s = 20\n";
  return path.string();
}

inline std::vector<double> losses(const fs::path& run) {
  std::vector<double> out;
  std::istringstream in(loom_test::read_file(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line).at("loss"));
  return out;
}

// Every tensor of a checkpoint (consolidated when sharded): weights, optimizer state, counters.
inline std::map<std::string, at::Tensor> checkpoint_tensors(const fs::path& checkpoint) {
  const loom::RunContext run{checkpoint.string(), "cpu", 0, 0, 1, 0};
  loom::CheckpointBackendInstance backend(loom_test::plugin_slot(LOOM_KIND_CHECKPOINT, "checkpoint", "safetensors"), run);
  return loom::read_checkpoint(backend, checkpoint).tensors;
}

inline std::map<std::string, at::Tensor> weights(const fs::path& checkpoint) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, t] : checkpoint_tensors(checkpoint))
    if (name.rfind("model/", 0) == 0) out[name] = t;
  return out;
}

// A TCP port nobody listens on right now, below the kernel's ephemeral range
// (ip_local_port_range): a port the kernel assigned once (bind to port 0) can be handed again to
// any outgoing connection (Gloo's, a torchrun's, of a test beside this one) before the run binds
// it; below the range only an explicit bind takes it. Random, so that tests beside each other
// seldom try the same one; tried before it is returned.
inline int free_port() {
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  const int low = 20000, high = std::max(low + 1000, ephemeral_low);
  static std::mt19937 pick(std::random_device{}());
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = std::uniform_int_distribution<int>(low, high - 1)(pick);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (bound) return port;
  }
  FAIL("no free TCP port between " << low << " and " << high);
  return 0;
}

inline void check_close(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(b[i] == doctest::Approx(a[i]).epsilon(1e-5));
}

inline void check_close(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) {
    CAPTURE(name);
    // Relative to the tensor's norm: summation order differs across layouts, and AdamW's
    // normalization magnifies that on the few elements whose second moment is near zero.
    CHECK((t - b.at(name)).norm().item<double>() <= 1e-5 * t.norm().item<double>());
  }
}

}  // namespace loom_dist_test
