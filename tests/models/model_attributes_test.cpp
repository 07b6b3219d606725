// model_attributes_test.cpp: ABI 1.15's loom_model_attributes, the one struct in which a model
// says what it handles. Today's SDK models answer through it (their 1.11 and 1.12 callbacks are
// NULL), context parallelism (1.16) included; models of a plugin built for ABI 1.14
// (tests/conformance/plugins/model_attributes) answer through those callbacks, and the host reads
// them the same, and never as handling context parallelism, which they cannot say.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <string>
#include <tuple>
#include <utility>

#include "abi/plugin_loader.hpp"
#include "model_harness.hpp"

using namespace loom_test;

TEST_CASE("what a model handles: through attributes (ABI 1.15), and from a plugin built for ABI 1.14") {
  const auto mlp = make_model("mlp_lm", toml::table{{"n_embd", 8}, {"context", 2}, {"hidden", 8}});
  CHECK_FALSE(mlp->handles_sequence_parallel());  // the SDK's default: handles neither
  CHECK_FALSE(mlp->handles_expert_parallel());
  CHECK_FALSE(mlp->handles_context_parallel());

  loom::Registry registry;
  loom::load_plugins(registry, {{std::string(LOOM_TEST_PLUGIN_DIR) + "/model_attributes", "test"}},
                     /*keep_going=*/false);
  const loom::RunContext run{LOOM_TEST_TMP, "cpu", 0, 0, 1, 1};
  for (const auto& [abi, minor] : {std::pair<std::string, uint32_t>{"abi_1_14", 14}, {"abi_1_15", LOOM_ABI_MINOR}}) {
    for (const auto& [what, sequence, experts, context] :
         {std::tuple<std::string, bool, bool, bool>{"sequence", true, false, false}, {"expert", false, true, false},
          {"context", false, false, true}}) {
      if (what == "context" && minor < 16) continue;  // 1.14 has no way to say it
      const std::string component = abi + "_" + what + "_model";
      CAPTURE(component);
      const loom::Component* c = registry.lookup(LOOM_KIND_MODEL, component);
      REQUIRE(c != nullptr);
      CHECK(c->plugin->abi_minor == minor);
      loom::ModelInstance model(loom::SlotConfig{"model", c, {}}, run);
      CHECK(model.handles_sequence_parallel() == sequence);
      CHECK(model.handles_expert_parallel() == experts);
      CHECK(model.handles_context_parallel() == context);
    }
  }
}
