// fields_model: a bigram model that reads the batch's named fields (ABI 1.2). Its first
// forward writes every field it received, in order, to <run_dir>/fields.json (name, dtype,
// shape, sum), so a test can compare them with what the dataset made. position_dtype picks
// the dtype it demands of position_ids, to provoke a mismatch. It also reports three metrics
// of the inputs, one per reduction (inputs_mean, micro_batches, inputs_max), and with
// units = "samples" counts its loss units per row instead of per label token.
#include <loom/model.hpp>

#include <fstream>
#include <sstream>

namespace {

class FieldsModel final : public loom::Model {
 public:
  static constexpr const char* name = "fields_model";
  static constexpr const char* summary = "Bigram logits; records the batch fields it receives.";
  static constexpr loom_option_spec options[] = {
      loom::option("position_dtype", LOOM_OPTION_TYPE_STRING, "int64", "int64 or float32: what position_ids must be."),
      loom::option("units", LOOM_OPTION_TYPE_STRING, "tokens", "tokens (the host counts them) or samples (rows).")};

  FieldsModel(const loom::Config& c, const loom::Context& ctx)
      : position_dtype_(c.str("position_dtype") == "float32" ? at::kFloat : at::kLong),
        per_sample_(c.str("units") == "samples"),
        record_(ctx.run_dir + "/fields.json") {
    table_ = add_param("table", at::zeros({64, 64}, at::Device(ctx.device)));
  }

  at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor& targets) override {
    return loom::token_loss_sum(at::embedding(table_, inputs), targets);
  }

  at::Tensor loss_sum(const loom::BatchFields& batch) override {
    batch.require("position_ids", position_dtype_, 2);
    if (!recorded_) record(batch);
    const at::Tensor inputs = batch.input_ids.to(at::kDouble);
    report("inputs_mean", inputs.mean());  // weighted by this micro-batch's units
    report("micro_batches", at::ones({}, inputs.options()), LOOM_METRIC_REDUCTION_SUM);
    report("inputs_max", inputs.max(), LOOM_METRIC_REDUCTION_MAX);
    if (per_sample_) set_units(at::full({}, static_cast<double>(batch.input_ids.size(0)), inputs.options()));
    return loss_sum(batch.input_ids, batch.labels);
  }

 private:
  void record(const loom::BatchFields& batch) {
    std::ostringstream json;
    json << "[";
    const auto entry = [&](const std::string& field, const at::Tensor& t) {
      json << (json.tellp() > 1 ? "," : "") << "{\"name\":\"" << field << "\",\"dtype\":\""
           << c10::toString(t.scalar_type()) << "\",\"device\":\"" << t.device().str() << "\",\"shape\":[";
      for (int64_t d = 0; d < t.dim(); ++d) json << (d ? "," : "") << t.size(d);
      json << "],\"sum\":" << t.to(at::kCPU, at::kDouble).sum().item<double>() << "}";
    };
    entry("input_ids", batch.input_ids);
    entry("labels", batch.labels);
    for (const auto& [field, t] : batch.others) entry(field, t);
    json << "]";
    std::ofstream(record_) << json.str() << "\n";
    recorded_ = true;
  }

  at::ScalarType position_dtype_;
  bool per_sample_;
  std::string record_;
  bool recorded_ = false;
  at::Tensor table_;
};

}  // namespace

LOOM_PLUGIN("fields_model", "0.1.0", loom::component<FieldsModel>())
