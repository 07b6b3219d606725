// fields_data: batches with named fields beyond inputs and targets (ABI 1.2), each of a
// different dtype and rank, all computed from one formula that the test repeats:
//   inputs[b][t] = (16 * n + 4 * b + t) % 64 and targets the next token, for batch n;
//   position_ids  int64 [2, 4]: t
//   loss_weight   float32 [2, 4]: 0.25 * (b + 1)
//   span_values   int32 [3]: n, n + 1, n + 2;  span_offsets int64 [3]: 0, 1, 3 (ragged, CSR)
//   row_flags     uint8 [2]: b + 1
// bad_name = true adds a field whose name is not lower_snake_case.
#include <loom/dataset.hpp>

#include <vector>

namespace {

struct FieldsData final : loom::Dataset {
  static constexpr const char* name = "fields_data";
  static constexpr const char* summary = "Counting batches (2 x 4) with five named fields of mixed dtypes.";
  static constexpr loom_option_spec options[] = {
      loom::option("bad_name", LOOM_OPTION_TYPE_BOOL, "false", "Also add a field named \"Bad-Name\".")};
  bool bad_name;
  int64_t n = 0;
  FieldsData(const loom::Config& c, const loom::Context&) : bad_name(c.flag("bad_name")) {}

  Batch next() override {
    std::vector<int64_t> inputs, targets, positions;
    std::vector<float> weights;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 4; ++t) {
        inputs.push_back((16 * n + 4 * b + t) % 64);
        targets.push_back((16 * n + 4 * b + t + 1) % 64);
        positions.push_back(t);
        weights.push_back(0.25f * static_cast<float>(b + 1));
      }
    Batch batch{loom::dlpack_int64(inputs, {2, 4}), loom::dlpack_int64(targets, {2, 4})};
    batch.fields.push_back({"position_ids", loom::dlpack_int64(positions, {2, 4})});
    batch.fields.push_back({"loss_weight", loom::dlpack_tensor<float>(weights, {2, 4})});
    const auto k = static_cast<int32_t>(n);
    batch.fields.push_back({"span_values", loom::dlpack_tensor<int32_t>({k, k + 1, k + 2}, {3})});
    batch.fields.push_back({"span_offsets", loom::dlpack_int64({0, 1, 3}, {3})});
    batch.fields.push_back({"row_flags", loom::dlpack_tensor<uint8_t>({1, 2}, {2})});
    if (bad_name) batch.fields.push_back({"Bad-Name", loom::dlpack_int64({0}, {1})});
    ++n;
    return batch;
  }
};

}  // namespace

LOOM_PLUGIN("fields_data", "0.1.0", loom::component<FieldsData>())
