// loom_host_api.param_created (ABI 1.18) as a model calls it through the host's table: nothing
// happens without an adopter; with one installed for a build, each parameter reaches it and
// its rebinding is what the model's tensor then holds; one build at a time.
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

class Recorder final : public ParamAdopter {
 public:
  void created(const std::string& name, at::Tensor& param) override {
    names.push_back(name);
    param.set_data(at::zeros({1}));  // rebound: every handle to the tensor sees it
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
