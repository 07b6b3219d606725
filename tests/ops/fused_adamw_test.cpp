// The fused AdamW update (plugins/optimizers/adamw/fused_adamw.cpp): the same numbers as the
// eight tensor ops it replaces, and as torch.optim.AdamW in Python (written from the paper,
// not by us), over a buffer long enough to be split across threads and with a decay mask.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/fused_adamw.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "python_torch.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using loom_ops::AdamWStep;

namespace {

constexpr int64_t kElements = 1'000'003;  // odd: the last chunk is a partial vector
constexpr int kSteps = 5;
constexpr double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8, kDecay = 0.1;

struct Buffers {
  at::Tensor p, m, v;
  loom_ops::AdamWScratch scratch;
};

Buffers start(const at::Tensor& p0) { return {p0.clone(), at::zeros_like(p0), at::zeros_like(p0), {}}; }

AdamWStep hyper(int step, double weight_decay) {
  return {kLr, kBeta1, kBeta2, kEps, weight_decay, 1.0 - std::pow(kBeta1, step),
          std::sqrt(1.0 - std::pow(kBeta2, step)), step};
}

void write_floats(const fs::path& path, const at::Tensor& t) {
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
}

at::Tensor read_floats(const fs::path& path, int64_t n) {
  at::Tensor t = at::empty({n}, at::kFloat);
  std::ifstream(path, std::ios::binary).read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  return t;
}

double max_relative_error(const at::Tensor& got, const at::Tensor& want) {
  return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item<double>();
}

}  // namespace

TEST_CASE("fused AdamW: one pass gives the tensor ops' numbers, with and without weight decay") {
  at::manual_seed(7);
  const at::Tensor p0 = at::randn({kElements});
  const at::Tensor mask = (at::rand({kElements}) < 0.7).to(at::kFloat);
  for (double weight_decay : {kDecay, 0.0}) {
    Buffers fused = start(p0), ops = start(p0);
    for (int step = 1; step <= kSteps; ++step) {
      const at::Tensor g = at::randn({kElements}) * 0.01;
      loom_ops::adamw_step(fused.p, g, fused.m, fused.v, mask, fused.scratch, hyper(step, weight_decay));
      loom_ops::adamw_step_tensor_ops(ops.p, g, ops.m, ops.v, mask, ops.scratch, hyper(step, weight_decay));
    }
    INFO("weight_decay " << weight_decay);
    // The same operations in the same order; the tensor ops may run vector code whose last
    // bit differs (a reciprocal square root, a fused multiply-add), so allow float rounding.
    CHECK(max_relative_error(fused.p, ops.p) < 1e-6);
    CHECK(max_relative_error(fused.m, ops.m) < 1e-6);
    CHECK(max_relative_error(fused.v, ops.v) < 1e-6);
    CHECK(!at::equal(fused.p, p0));  // it moved
  }
}

// The path CUDA takes (at::_fused_adamw_, torch.optim.AdamW(fused=True)'s kernel, with the
// decay mask as a pass of its own), run here on LibTorch's CPU build of the same kernel.
TEST_CASE("fused AdamW: LibTorch's fused kernel gives the one-pass loop's numbers") {
  at::manual_seed(9);
  const at::Tensor p0 = at::randn({kElements});
  const at::Tensor mask = (at::rand({kElements}) < 0.7).to(at::kFloat);
  for (double weight_decay : {kDecay, 0.0}) {
    Buffers loop = start(p0), kernel = start(p0);
    for (int step = 1; step <= kSteps; ++step) {
      const at::Tensor g = at::randn({kElements}) * 0.01;
      loom_ops::adamw_step(loop.p, g, loop.m, loop.v, mask, loop.scratch, hyper(step, weight_decay));
      loom_ops::adamw_step_libtorch_fused(kernel.p, g, kernel.m, kernel.v, mask, kernel.scratch,
                                            hyper(step, weight_decay));
    }
    INFO("weight_decay " << weight_decay);
    MESSAGE("LibTorch's kernel against the loop, weight_decay " << weight_decay << ": p "
                                                                << max_relative_error(kernel.p, loop.p));
    CHECK(max_relative_error(kernel.p, loop.p) < 1e-6);
    CHECK(max_relative_error(kernel.m, loop.m) < 1e-6);
    CHECK(max_relative_error(kernel.v, loop.v) < 1e-6);
    CHECK(kernel.scratch.step_count.item<float>() == static_cast<float>(kSteps));
    CHECK(!at::equal(kernel.p, p0));
  }
}

TEST_CASE("fused AdamW: equals torch.optim.AdamW in Python") {
  std::string tried;
  const std::string python = loom_test::python_with_torch(tried);
  if (python.empty()) {
    MESSAGE("skipped: no python3 with torch (tried " << tried << ")");
    return;
  }
  const fs::path dir = loom_test::tmp_dir("fused-adamw-python");
  at::manual_seed(11);
  const at::Tensor p0 = at::randn({kElements});
  const at::Tensor mask = (at::rand({kElements}) < 0.7).to(at::kFloat);
  write_floats(dir / "p0.bin", p0);
  write_floats(dir / "mask.bin", mask);
  Buffers fused = start(p0);
  for (int step = 1; step <= kSteps; ++step) {
    const at::Tensor g = at::randn({kElements}) * 0.01;
    write_floats(dir / ("g" + std::to_string(step) + ".bin"), g);
    loom_ops::adamw_step(fused.p, g, fused.m, fused.v, mask, fused.scratch, hyper(step, kDecay));
  }
  // The decayed and the exempt elements are two parameter groups, as a PyTorch user sets it up.
  std::ofstream(dir / "reference.py") << R"(import sys, torch
d, n, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
load = lambda name: torch.frombuffer(bytearray(open(f"{d}/{name}.bin", "rb").read()), dtype=torch.float32)
p, decays = load("p0").clone(), load("mask") == 1
a, b = torch.nn.Parameter(p[decays].clone()), torch.nn.Parameter(p[~decays].clone())
opt = torch.optim.AdamW([{"params": [a], "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0}],
                        lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
for step in range(1, steps + 1):
    g = load(f"g{step}")
    a.grad, b.grad = g[decays].clone(), g[~decays].clone()
    opt.step()
for name, key in (("p", None), ("m", "exp_avg"), ("v", "exp_avg_sq")):
    out = torch.empty(n)
    out[decays] = a.detach() if key is None else opt.state[a][key]
    out[~decays] = b.detach() if key is None else opt.state[b][key]
    open(f"{d}/{name}_ref.bin", "wb").write(out.numpy().tobytes())
)";
  const auto r = loom_test::run_shell(python + " " + (dir / "reference.py").string() + " " + dir.string() + " " +
                                      std::to_string(kElements) + " " + std::to_string(kSteps));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const double p_error = max_relative_error(fused.p, read_floats(dir / "p_ref.bin", kElements));
  const double m_error = max_relative_error(fused.m, read_floats(dir / "m_ref.bin", kElements));
  const double v_error = max_relative_error(fused.v, read_floats(dir / "v_ref.bin", kElements));
  MESSAGE("largest error relative to the largest value: p " << p_error << ", exp_avg " << m_error << ", exp_avg_sq "
                                                            << v_error);
  CHECK(p_error < 1e-6);
  CHECK(m_error < 1e-6);
  CHECK(v_error < 1e-6);
}
