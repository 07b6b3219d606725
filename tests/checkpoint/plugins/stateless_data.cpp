// stateless_data: a dataset written with the C++ helpers that keeps no position (it does not
// override save_state/load_state), so its vtable has no state callbacks and a resumed run must
// say that its batches differ from an uninterrupted run's.
#include <loom/dataset.hpp>

#include <vector>

struct StatelessData final : loom::Dataset {
  static constexpr const char* name = "stateless_data";
  static constexpr const char* summary = "Counting token batches (4 x 8), no saved position.";
  int64_t next_token = 0;
  StatelessData(const loom::Config&, const loom::Context&) {}
  Batch next() override {
    std::vector<int64_t> inputs(4 * 8), targets(4 * 8);
    for (size_t i = 0; i < inputs.size(); ++i) {
      inputs[i] = next_token % 64;
      targets[i] = (next_token + 1) % 64;
      ++next_token;
    }
    return {loom::dlpack_int64(inputs, {4, 8}), loom::dlpack_int64(targets, {4, 8})};
  }
};

LOOM_PLUGIN("stateless_data", "0.1.0", loom::component<StatelessData>())
