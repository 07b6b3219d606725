// loom_host_api.param_created (ABI 1.18) and param_write (1.19) as a model calls them through
// the host's table: without an adopter created does nothing and write copies the whole value;
// with one installed for a build, each parameter reaches it, its rebinding is what the model's
// tensor then holds, and a write it takes writes only what it keeps; one build at a time.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom/torch.hpp>

#include <string>
#include <vector>

#include "abi/host_api.hpp"
#include "abi/param_created.hpp"

using namespace loom;

namespace {

// Calls the entry as the SDK's add_param does.
loom_status* announce(const char* name, at::Tensor& param) {
  loom_param_created_args args{};
  args.struct_size = sizeof(args);
  args.name = name;
  args.tensor = handle(param);
  return host_api()->param_created(&args);
}

// Calls the entry as the SDK's write_param does.
loom_status* write(const char* name, at::Tensor& param, const at::Tensor& value) {
  loom_param_write_args args{};
  args.struct_size = sizeof(args);
  args.name = name;
  args.tensor = handle(param);
  at::Tensor v = value;
  args.value = handle(v);
  return host_api()->param_write(&args);
}

std::string message_of(loom_status* status) {
  REQUIRE(status != nullptr);
  std::string out = host_api()->status_get_message(status);
  host_api()->status_destroy(status);
  return out;
}

class Recorder final : public ParamAdopter {
 public:
  void created(const std::string& name, at::Tensor& param) override {
    names.push_back(name);
    param.set_data(at::zeros({1}));  // rebound: every handle to the tensor sees it
  }
  // Keeps the first element of "w" only; leaves the others to the host's whole copy.
  bool write(const std::string& name, at::Tensor& param, const at::Tensor& value) override {
    if (name != "w") return false;
    param.view(-1)[0].copy_(value.reshape(-1)[0]);
    return true;
  }
  std::vector<std::string> names;
};

}  // namespace

TEST_CASE("param_created reaches the adopter of the build under way, and nothing otherwise") {
  const bool in_table = host_api()->param_created != nullptr;
  REQUIRE(in_table);
  at::Tensor w = at::ones({2, 3});
  CHECK(announce("w", w) == nullptr);  // no build takes parameters over: left as it was
  CHECK(at::equal(w, at::ones({2, 3})));
  Recorder recorder;
  {
    ParamAdopterScope scope(recorder);
    const at::Tensor held_by_model = w;  // another handle, as the model keeps
    CHECK(announce("w", w) == nullptr);
    CHECK(held_by_model.sizes() == at::IntArrayRef({1}));
    Recorder other;
    CHECK_THROWS_WITH_AS([&] { ParamAdopterScope nested(other); }(), doctest::Contains("another model build"),
                         std::exception);
  }
  at::Tensor b = at::ones({4});
  CHECK(announce("b", b) == nullptr);  // the scope ended: no adopter
  CHECK(recorder.names == std::vector<std::string>{"w"});
  loom_status* bad = host_api()->param_created(nullptr);
  REQUIRE(bad != nullptr);
  CHECK(std::string(host_api()->status_get_message(bad)).find("must be set") != std::string::npos);
  host_api()->status_destroy(bad);
}

TEST_CASE("param_write copies the whole value without an adopter, only what the build's adopter keeps with one") {
  const bool in_table = host_api()->param_write != nullptr;
  REQUIRE(in_table);
  at::Tensor w = at::zeros({2, 3}).requires_grad_(true);  // a leaf, as parameters are
  CHECK(write("w", w, at::arange(6, at::kDouble).reshape({2, 3})) == nullptr);  // converted to w's dtype
  CHECK(at::equal(w.detach(), at::arange(6, at::kFloat).reshape({2, 3})));
  Recorder recorder;
  {
    ParamAdopterScope scope(recorder);
    at::Tensor kept = at::zeros({2, 3});
    CHECK(write("w", kept, at::full({2, 3}, 7.0)) == nullptr);
    CHECK(at::equal(kept.reshape(-1), at::tensor({7.f, 0.f, 0.f, 0.f, 0.f, 0.f})));  // the adopter's part only
    at::Tensor other = at::zeros({2});
    CHECK(write("b", other, at::ones({2})) == nullptr);  // not the adopter's: copied whole
    CHECK(at::equal(other, at::ones({2})));
  }
  CHECK(message_of(write("w", w, at::ones({3, 2}))).find("param_write: w: a value of shape [3, 2] for a parameter of shape [2, 3]") !=
        std::string::npos);
  CHECK(message_of(host_api()->param_write(nullptr)).find("must be set") != std::string::npos);
}
