// hf_causal_lm.cpp: the `hf_causal_lm` component, a pretrained Hugging Face causal language
// model: `from` names a folder with config.json and safetensors weights (one file or shards
// with an index). config.json picks the architecture (hf_config.cpp); the weights are read
// through the memory map into the run's fp32 parameters (formats/weight_loading.hpp). The
// model exports itself back as the same architecture (`host export --format hf`).
#include <loom/model.hpp>

#include <algorithm>

#include "layers/causal_lm.hpp"
#include "layers/cuda_kernels.hpp"
#include "layers/model_common.hpp"
#include "components.hpp"
#include "formats/format_error.hpp"
#include "hf/hf_config.hpp"
#include "hf/hf_config_keys.hpp"
#include "formats/weight_loading.hpp"

namespace loom_gpt {
namespace {

constexpr int64_t kDefaultSeqLen = 2048;

class HfCausalLm final : public loom::Model {
 public:
  static constexpr const char* name = "hf_causal_lm";
  static constexpr const char* summary =
      "A pretrained Hugging Face causal LM from a folder (config.json + safetensors): LlamaForCausalLM, "
      "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel, and the mixtures of experts "
      "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, MixtralForCausalLM.";
  static constexpr loom_option_spec options[] = {
      loom::option("from", LOOM_OPTION_TYPE_STRING, nullptr,
                   "Hugging Face model folder: config.json and model.safetensors (or shards with "
                   "model.safetensors.index.json)."),
      loom::option("strict", LOOM_OPTION_TYPE_BOOL, "true",
                   "Refuse weights with missing, unexpected or mis-shaped tensors, and config.json keys Loom "
                   "neither reads nor knows to be harmless. false: load what matches, initialise the rest "
                   "randomly, ignore the unknown keys, and log each."),
      loom::option("seq_len", LOOM_OPTION_TYPE_INT, "0",
                   "Longest training input, at most the model's max_position_embeddings. 0: that limit, capped "
                   "at 2048."),
      loom::option("dropout", LOOM_OPTION_TYPE_FLOAT, "0.0",
                   "Dropout on attention weights and residual branches during training (config.json's "
                   "attention_dropout is not used)."),
      kActivationCheckpointingOption,
      kCheckpointEveryOption,
      kCudaKernelsOption,
  };

  HfCausalLm(const loom::Config& c, const loom::Context& ctx)
      : dir_(c.str("from")), tp_rank_(ctx.tensor_parallel_rank), tp_size_(ctx.tensor_parallel_size) {
    require(!dir_.empty(), "hf_causal_lm: option from is empty; name a Hugging Face model folder");
    use_cuda_kernels_from(c, ctx, "hf_causal_lm");
    hf_ = read_hf_config(dir_);
    const std::string config_path = loom::formats::join(dir_, loom::formats::kHfConfig);
    int64_t seq_len = c.i64("seq_len");
    if (seq_len == 0) seq_len = std::min(hf_.max_positions, kDefaultSeqLen);
    require(seq_len >= 1 && seq_len <= hf_.max_positions,
            "hf_causal_lm: seq_len " + std::to_string(seq_len) + " must be in [1, " +
                std::to_string(hf_.max_positions) + "], the model's max_position_embeddings in " + config_path);
    const bool strict = c.flag("strict");
    check_config_keys(config_path, strict);
    loom::formats::LoadRules rules;
    rules.strict = strict;
    if (hf_.family->model == HfModel::gpt2) {
      GptSpec spec = gpt_spec_from_hf(hf_, config_path, seq_len);
      spec.dropout = c.f64("dropout");
      spec.recompute = recompute_policy_from(c);
      spec.seed = ctx.seed;
      spec.random_init = !strict;  // strict: every parameter is loaded, or creation fails
      inner_ = make_gpt(spec, ctx);
      // Hub GPT-2 files often store the base model's names ("h.0...") and its attention mask buffers.
      rules.optional_prefixes = {"transformer."};
      rules.ignored_suffixes = {".attn.bias", ".attn.masked_bias", "lm_head.weight"};
      tied_ = true;
    } else {
      LlamaSpec spec = llama_spec_from_hf(hf_, config_path, seq_len);
      spec.dropout = c.f64("dropout");
      spec.recompute = recompute_policy_from(c);
      spec.seed = ctx.seed;
      spec.random_init = !strict;
      inner_ = make_llama(spec, ctx);
      // Buffers some checkpoints carry beside the parameters: rotary tables, a tied output layer.
      rules.ignored_suffixes = {".rotary_emb.inv_freq"};
      if (spec.tie_embeddings) rules.ignored_suffixes.push_back("lm_head.weight");
      tied_ = spec.tie_embeddings;
      if (hf_.family->experts == HfExperts::qwen_shared && spec.moe.shared_hidden == 0) {
        no_shared_expert_ = true;  // check_empty_shared_expert
        rules.ignored_suffixes.insert(rules.ignored_suffixes.end(), std::begin(kSharedExpertTensors),
                                      std::end(kSharedExpertTensors));
      }
    }
    adopt_params(*inner_);
    if (const auto* lm = dynamic_cast<const CausalLm*>(inner_.get()))
      rules.held_elsewhere.insert(lm->held_elsewhere().begin(), lm->held_elsewhere().end());
    load(rules);
  }

  // A key that could change the computation is never read past in silence (hf_config_keys.hpp).
  void check_config_keys(const std::string& config_path, bool strict) const {
    for (const std::string& key : unknown_config_keys(hf_.config, *hf_.family)) {
      const std::string what = config_path + ": \"" + key + "\" is a key hf_causal_lm neither reads for " +
                               hf_.family->architecture + " nor knows to leave the computation unchanged";
      if (strict)
        throw loom::Error("hf_causal_lm: " + what + "; refusing rather than computing another model (set "
                          "[model] strict = false to load anyway)", LOOM_STATUS_CODE_INVALID_ARGUMENT);
      loom::log(LOOM_LOG_LEVEL_WARN, "hf_causal_lm", what + "; ignored (strict = false)");
    }
  }

  at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor& targets) override {
    return inner_->loss_sum(inputs, targets);
  }
  at::Tensor loss_sum(const loom::BatchFields& batch) override { return part_loss_sum(*inner_, batch); }
  at::Tensor logits(const loom::BatchFields& batch) override { return inner_->logits(batch); }
  at::Tensor decode(const at::Tensor& inputs, int64_t past) override { return inner_->decode(inputs, past); }
  void set_training(bool training) override { inner_->set_training(training); }
  double flops_per_token() const override { return inner_->flops_per_token(); }
  bool sequence_parallel() const override { return inner_->sequence_parallel(); }
  bool context_parallel() const override { return inner_->context_parallel(); }
  bool expert_parallel() const override { return inner_->expert_parallel(); }
  int64_t pipeline_layers() const override { return inner_->pipeline_layers(); }
  at::Tensor stage_forward(const loom::BatchFields& batch, int64_t begin, int64_t end, const at::Tensor& hidden) override {
    return part_stage_forward(*inner_, batch, begin, end, hidden);
  }

  // The source folder's own config.json (every field it had), its generation config and
  // tokenizer files.
  std::string hugging_face() const override {
    nlohmann::json out = {{"config", hf_.config}, {"files_from", dir_}};
    const std::string generation = loom::formats::join(dir_, loom::formats::kHfGenerationConfig);
    if (loom::formats::is_regular_file(generation)) {
      try {
        out["generation_config"] = loom::formats::read_json_object(generation);
      } catch (const loom::formats::FormatError& e) {
        loom::log(LOOM_LOG_LEVEL_WARN, "hf_causal_lm", std::string(e.what()) + "; exporting without it");
      }
    }
    return out.dump();
  }

 private:
  // A tied model computes its logits through the embedding. transformers 5 keeps a stored
  // lm_head.weight that differs from the embedding (untied, with a warning) even when the config
  // says tie_word_embeddings; dropping it would compute another model, so that is refused.
  void check_stored_head(const loom::formats::HfWeightSource& source) const {
    if (!tied_ || !source.has("lm_head.weight")) return;
    for (const char* embedding : {"model.embed_tokens.weight", "transformer.wte.weight", "wte.weight"}) {
      if (!source.has(embedding)) continue;
      const at::Tensor head = source.view("lm_head.weight"), table = source.view(embedding);
      if (head.sizes() == table.sizes() && head.scalar_type() == table.scalar_type() && at::equal(head, table)) return;
      throw loom::Error("hf_causal_lm: " + dir_ + ": config.json says tie_word_embeddings, but the weights hold an "
                        "lm_head.weight that differs from " + std::string(embedding) + "; transformers keeps that "
                        "head untied, Loom would drop it. Set \"tie_word_embeddings\": false in config.json to load "
                        "the stored head, or remove lm_head.weight to tie", LOOM_STATUS_CODE_INVALID_ARGUMENT);
    }
  }

  // Qwen2-MoE with shared_expert_intermediate_size 0: transformers builds the shared expert with
  // zero-width projections (their output is 0, whatever its gate says) and saves them. Loom builds
  // none and skips those tensors, but only when they are empty, or it would drop real weights.
  static constexpr const char* kSharedExpertTensors[] = {
      ".mlp.shared_expert.gate_proj.weight", ".mlp.shared_expert.up_proj.weight",
      ".mlp.shared_expert.down_proj.weight", ".mlp.shared_expert_gate.weight"};
  void check_empty_shared_expert(const loom::formats::HfWeightSource& source) const {
    if (!no_shared_expert_) return;
    for (const std::string& name : source.names())
      if (name.find(".mlp.shared_expert.") != std::string::npos && source.view(name).numel() != 0)
        throw loom::Error("hf_causal_lm: " + dir_ + ": config.json's \"shared_expert_intermediate_size\" is 0, but " +
                              name + " holds weights; fix the config's width", LOOM_STATUS_CODE_INVALID_ARGUMENT);
  }

  void load(const loom::formats::LoadRules& rules) {
    try {
      const loom::formats::HfWeightSource source(dir_);
      check_stored_head(source);
      check_empty_shared_expert(source);
      // Under tensor parallelism this rank's pieces of the split weights (loom/tensor_parallel.hpp).
      loom::formats::TensorSplits split;
      for (const SplitOf& p : splits())
        if (p.dim >= 0) split[p.name] = {p.dim, p.blocks};
      const loom::formats::TensorPieceSource pieces(source, std::move(split), tp_rank_, tp_size_);
      // The base weights alone: LoRA adapters ([lora]) are new and keep their initialisation.
      // Each value goes in as the host keeps its parameter (a slice, or nothing of another
      // pipeline stage's layer), so that loading never holds the whole model.
      loom::formats::LoadRules writing = rules;
      writing.write = [](const std::string& name, const at::Tensor& param, const at::Tensor& value) {
        write_param(name, param, value);
      };
      const loom::formats::LoadReport report =
          loom::formats::load_weights(pieces, named_params(LOOM_PARAM_FLAG_ADAPTER), writing);
      if (!report.clean())
        loom::log(LOOM_LOG_LEVEL_WARN, "hf_causal_lm",
                  "strict = false: loaded " + std::to_string(report.loaded) + " tensors from " + dir_ + "; " +
                      report.summary() + " (the rest keep their random initialisation)");
    } catch (const loom::formats::FormatError& e) {
      throw loom::Error(std::string("hf_causal_lm: ") + e.what() + config_keys_behind(e.what()),
                        e.kind() == loom::formats::FormatError::Kind::io ? LOOM_STATUS_CODE_INTERNAL
                                                                         : LOOM_STATUS_CODE_INVALID_ARGUMENT);
    }
  }

  // Weights that do not fit usually mean a config.json key that sizes or places them (left out,
  // so the family's default applies, or wrong): name the keys behind the tensors the error lists.
  static std::string config_keys_behind(const std::string& message) {
    std::string keys;
    const auto add = [&](const char* tensor_part, const char* names) {
      if (message.find(tensor_part) != std::string::npos && keys.find(names) == std::string::npos)
        keys += (keys.empty() ? "" : "; ") + std::string(names);
    };
    add(".mlp.experts.", "mlp_only_layers and decoder_sparse_step (which layers are mixtures of experts)");
    add(".mlp.gate.weight", "mlp_only_layers and decoder_sparse_step (which layers are mixtures of experts)");
    add("shared_expert", "shared_expert_intermediate_size");
    add("_proj.weight", "num_key_value_heads, head_dim and intermediate_size (the projections' shapes)");
    return keys.empty() ? "" : " (config.json's keys behind these tensors: " + keys + ")";
  }

  std::string dir_;
  int64_t tp_rank_ = 0, tp_size_ = 1;  // the tensor-parallel group (loom::Context)
  bool tied_ = false;                   // logits through the input embedding (check_stored_head)
  bool no_shared_expert_ = false;       // Qwen2-MoE's shared expert is 0 wide (check_empty_shared_expert)
  HfModelConfig hf_;
  std::unique_ptr<loom::Model> inner_;
};

}  // namespace

const loom_component* hf_causal_lm_component() { return loom::component<HfCausalLm>(); }

}  // namespace loom_gpt
