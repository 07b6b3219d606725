#include "hf/hf_config.hpp"

#include <loom/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "formats/format_error.hpp"
#include "formats/hf_folder.hpp"
#include "hf/hf_families.hpp"
#include "hf/hf_keys.hpp"
#include "hf/hf_sliding_windows.hpp"

namespace loom_gpt {
namespace {

// YaRN's settings (out has type and factor), with transformers' defaults: the original context
// is max_position_embeddings when not given, beta_fast 32, beta_slow 1, truncate true, and the
// attention factor 0.1 ln(factor) + 1 unless given (or the ratio of mscale to mscale_all_dim's).
RopeScaling yarn_from(const Keys& keys, const std::string& key, const Keys& scaling, RopeScaling out,
                      int64_t max_positions) {
  out.type = RopeScaling::Type::yarn;
  out.original_max_positions = double(scaling.positive("original_max_position_embeddings", max_positions));
  out.beta_fast = scaling.number("beta_fast", 32.0);
  out.beta_slow = scaling.number("beta_slow", 1.0);
  out.truncate = scaling.flag("truncate", true);
  if (!(out.beta_fast > 0.0 && out.beta_slow > 0.0)) keys.fail(key, "needs beta_fast and beta_slow above 0");
  const auto mscale_of = [](double factor, double m) { return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; };
  const double mscale = scaling.number("mscale", 0.0), mscale_all_dim = scaling.number("mscale_all_dim", 0.0);
  if (scaling.has("attention_factor"))
    out.attention_factor = scaling.number("attention_factor", 1.0);
  else if (mscale != 0.0 && mscale_all_dim != 0.0)
    out.attention_factor = mscale_of(out.factor, mscale) / mscale_of(out.factor, mscale_all_dim);
  else
    out.attention_factor = mscale_of(out.factor, 1.0);
  if (!(out.attention_factor > 0.0)) keys.fail(key, "attention_factor must be positive");
  return out;
}

// The scaling that `r` (a rope_scaling or rope_parameters object, named `key` in config.json)
// describes; its kind is rope_type (older configs: type).
RopeScaling scaling_from(const Keys& keys, const std::string& key, const nlohmann::json& r, int64_t max_positions) {
  RopeScaling out;
  const Keys scaling(r, key);
  const std::string type = scaling.text("rope_type", scaling.text("type", "default"));
  if (type == "default") return out;
  if (type != "linear" && type != "llama3" && type != "yarn" && type != "dynamic")
    keys.fail(key, "has type \"" + type +
                       "\", which Loom does not implement (it implements default, linear, dynamic, yarn and "
                       "llama3); refusing rather than computing different positions");
  out.factor = scaling.number("factor", 1.0);
  if (!(out.factor >= 1.0)) keys.fail(key, "factor must be at least 1");
  // Dynamic NTK scaling raises theta only for positions past max_position_embeddings, which
  // hf_causal_lm never reaches (seq_len and the decode cache stop there): default frequencies.
  if (type == "dynamic") return out;
  if (type == "linear") {
    out.type = RopeScaling::Type::linear;
    return out;
  }
  if (type == "yarn") return yarn_from(keys, key, scaling, out, max_positions);
  out.type = RopeScaling::Type::llama3;
  out.low_freq_factor = scaling.number("low_freq_factor", 1.0);
  out.high_freq_factor = scaling.number("high_freq_factor", 4.0);
  out.original_max_positions = double(scaling.has("original_max_position_embeddings")
                                          ? scaling.positive("original_max_position_embeddings")
                                          : max_positions);
  if (!(out.high_freq_factor > out.low_freq_factor) || !(out.low_freq_factor > 0.0))
    keys.fail(key, "needs 0 < low_freq_factor < high_freq_factor");
  return out;
}

// The fields of a rope_parameters object that Loom reads; any other one could change the
// positions (partial rotary, yarn's attention factor, per-layer-type tables), so it is refused.
constexpr const char* kRopeParameterFields[] = {"rope_type", "type", "rope_theta", "factor", "low_freq_factor",
                                                 "high_freq_factor", "original_max_position_embeddings",
                                                 "beta_fast", "beta_slow", "truncate", "attention_factor",
                                                 "mscale", "mscale_all_dim"};

// The rotary settings. transformers 4 wrote rope_theta and rope_scaling at the top level;
// transformers 5 writes one rope_parameters object ({"rope_type", "rope_theta", the scaling
// fields}) and no top-level rope_theta, so reading only the old keys would silently fall back
// to theta 10000 and compute another model. Both spellings at once must agree.
void read_rope(const Keys& keys, int64_t max_positions, double default_theta, double& theta, RopeScaling& scaling) {
  if (!keys.has("rope_parameters")) {
    theta = keys.number("rope_theta", default_theta);
    scaling = RopeScaling{};
    if (keys.has("rope_scaling")) {
      if (!keys.at("rope_scaling").is_object()) keys.fail("rope_scaling", "must be an object or null");
      scaling = scaling_from(keys, "rope_scaling", keys.at("rope_scaling"), max_positions);
    }
    return;
  }
  const nlohmann::json& r = keys.at("rope_parameters");
  if (!r.is_object()) keys.fail("rope_parameters", "must be an object");
  for (const auto& [field, value] : r.items()) {
    bool known = false;
    for (const char* f : kRopeParameterFields) known = known || field == f;
    if (!known)
      keys.fail("rope_parameters", "has \"" + field +
                                       "\", which Loom does not implement; refusing rather than computing different "
                                       "positions");
  }
  const Keys params(r, "rope_parameters");
  if (!params.has("rope_theta")) keys.fail("rope_parameters", "has no rope_theta");
  theta = params.number("rope_theta", 0.0);
  if (!(theta > 0.0)) keys.fail("rope_parameters", "rope_theta must be positive");
  if (keys.has("rope_theta") && keys.number("rope_theta", theta) != theta)
    keys.fail("rope_theta", "disagrees with rope_parameters' rope_theta");
  scaling = scaling_from(keys, "rope_parameters", r, max_positions);
  if (keys.has("rope_scaling") && keys.at("rope_scaling") != r) {
    if (!keys.at("rope_scaling").is_object()) keys.fail("rope_scaling", "must be an object or null");
    const RopeScaling old = scaling_from(keys, "rope_scaling", keys.at("rope_scaling"), max_positions);
    if (old.type != scaling.type || old.factor != scaling.factor) keys.fail("rope_scaling", "disagrees with rope_parameters");
  }
}

}  // namespace

HfModelConfig read_hf_config(const std::string& dir) {
  const std::string path = loom::formats::join(dir, loom::formats::kHfConfig);
  HfModelConfig out;
  try {
    out.config = loom::formats::read_json_object(path);
  } catch (const loom::formats::FormatError& e) {
    throw loom::Error(std::string("hf_causal_lm: ") + e.what() + "; `from` must name a Hugging Face model folder",
                      LOOM_STATUS_CODE_INVALID_ARGUMENT);
  }
  const Keys keys(out.config, path);
  // transformers' AutoModelForCausalLM refuses a config.json without model_type; so does Loom.
  if (!keys.has("model_type") || !keys.at("model_type").is_string())
    keys.fail("model_type", "must name the model family, such as \"llama\" (transformers cannot load the folder "
                            "without it either)");
  const std::string model_type = keys.at("model_type").get<std::string>();
  if (keys.has("architectures")) {
    if (!keys.at("architectures").is_array() || keys.at("architectures").empty() ||
        !keys.at("architectures")[0].is_string())
      keys.fail("architectures", "must be a list naming the model class, such as [\"LlamaForCausalLM\"]");
    const std::string name = keys.at("architectures")[0].get<std::string>();
    out.family = find_hf_family(name, false);
    if (out.family == nullptr)
      keys.fail("architectures", "names " + name + ", which hf_causal_lm does not build; it builds " + hf_family_list());
    if (model_type != out.family->model_type)
      keys.fail("model_type", "is \"" + model_type + "\" but " + name + " has model_type \"" +
                                  out.family->model_type + "\"");
  } else {  // AutoModelForCausalLM picks the class by model_type alone
    out.family = find_hf_family(model_type, true);
    if (out.family == nullptr)
      keys.fail("model_type", "is \"" + model_type + "\" and config.json names no architectures; hf_causal_lm builds " +
                                  hf_family_list());
  }
  out.max_positions = out.family->model == HfModel::gpt2
                          ? keys.positive("n_positions", 1024)
                          : keys.positive("max_position_embeddings", out.family->defaults.max_positions);
  return out;
}

// The sparse layers of a mixture of experts, as transformers builds them:
//   Qwen2-MoE, Qwen3-MoE: layer i is sparse unless listed in mlp_only_layers, when
//     (i + 1) % decoder_sparse_step == 0; experts: num_experts (transformers 5 writes
//     Qwen3-MoE's as num_local_experts), width moe_intermediate_size; Qwen2-MoE adds a shared
//     expert of shared_expert_intermediate_size; norm_topk_prob as given (default false);
//   Mixtral: every layer; num_local_experts of width intermediate_size; the top k always
//     renormalised; router_jitter_noise must be 0 (its training noise is not built).
// The auxiliary loss joins the training loss when output_router_logits, times router_aux_loss_coef.
MoeSpec moe_from(const Keys& keys, const HfFamily& family, int64_t n_layer, int64_t dense_hidden) {
  MoeSpec m;
  if (keys.has("num_experts") && keys.has("num_local_experts") &&
      keys.positive("num_experts") != keys.positive("num_local_experts"))
    keys.fail("num_local_experts", "disagrees with num_experts");
  m.experts = keys.has("num_experts") ? keys.positive("num_experts") : keys.positive("num_local_experts");
  m.top_k = keys.positive("num_experts_per_tok", family.defaults.top_k);
  if (m.top_k > m.experts) keys.fail("num_experts_per_tok", "is more than the experts");
  m.aux_loss_in_loss = keys.flag("output_router_logits", false);
  m.aux_loss_coef = keys.number("router_aux_loss_coef", 0.001);
  m.sparse.assign(static_cast<size_t>(n_layer), true);
  if (family.experts == HfExperts::mixtral) {
    m.expert_hidden = dense_hidden;
    m.norm_topk_prob = true;
    m.mixtral_names = true;
    if (keys.number("router_jitter_noise", 0.0) != 0.0)
      keys.fail("router_jitter_noise", "is not 0; Loom does not draw Mixtral's router jitter; set it to 0");
    return m;
  }
  m.expert_hidden = keys.positive("moe_intermediate_size");
  m.norm_topk_prob = keys.flag("norm_topk_prob", false);
  if (family.experts == HfExperts::qwen_shared)  // Qwen2MoeConfig's default when left out: 5632
    m.shared_hidden = keys.count("shared_expert_intermediate_size", 5632);
  const int64_t step = keys.positive("decoder_sparse_step", 1);
  for (int64_t i = 0; i < n_layer; ++i) m.sparse[static_cast<size_t>(i)] = (i + 1) % step == 0;
  if (keys.has("mlp_only_layers")) {
    const nlohmann::json& dense = keys.at("mlp_only_layers");
    if (!dense.is_array()) keys.fail("mlp_only_layers", "must be a list of layer indices");
    for (const nlohmann::json& i : dense) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= n_layer)
        keys.fail("mlp_only_layers", "names " + i.dump() + ", which is no layer (num_hidden_layers = " +
                                         std::to_string(n_layer) + ")");
      m.sparse[static_cast<size_t>(i.get<int64_t>())] = false;
    }
  }
  return m;
}

// The Llama family's modeling code builds nn.Embedding(vocab, hidden, padding_idx = pad_token_id):
// that row gets no gradient. A negative id counts from the end, as nn.Embedding does; one
// outside the table makes transformers refuse the model, and Loom too.
int64_t padding_row(const Keys& keys, int64_t vocab_size) {
  if (!keys.has("pad_token_id")) return -1;
  const nlohmann::json& pad = keys.at("pad_token_id");
  if (!pad.is_number_integer() || pad.get<int64_t>() < -vocab_size || pad.get<int64_t>() >= vocab_size)
    keys.fail("pad_token_id", "is " + pad.dump() + ", not a row of the " + std::to_string(vocab_size) +
                                  "-token embedding (transformers refuses it as padding_idx too)");
  const int64_t id = pad.get<int64_t>();
  return id < 0 ? id + vocab_size : id;
}

LlamaSpec llama_spec_from_hf(const HfModelConfig& hf, const std::string& path, int64_t seq_len) {
  const Keys keys(hf.config, path);
  const HfFamily& family = *hf.family;
  const HfDefaults& defaults = family.defaults;
  LlamaSpec s;
  s.component = "hf_causal_lm";
  s.vocab_size = keys.positive("vocab_size");
  s.n_embd = keys.positive("hidden_size");
  s.n_layer = keys.positive("num_hidden_layers");
  s.n_head = keys.positive("num_attention_heads");
  s.n_kv_head = keys.positive("num_key_value_heads", defaults.kv_heads > 0 ? defaults.kv_heads : s.n_head);
  s.ffn_hidden = keys.positive("intermediate_size", defaults.intermediate);
  // Qwen3 gives head_dim apart from hidden_size / heads (128 when left out); the others may give it too.
  if (keys.has("head_dim") || defaults.head_dim > 0) {
    s.head_dim = keys.positive("head_dim", defaults.head_dim);
  } else {
    if (s.n_embd % s.n_head != 0)
      keys.fail("hidden_size", "must be a multiple of num_attention_heads when head_dim is not given");
    s.head_dim = s.n_embd / s.n_head;
  }
  if (s.n_head % s.n_kv_head != 0) keys.fail("num_key_value_heads", "must divide num_attention_heads");
  s.seq_len = seq_len;
  read_rope(keys, hf.max_positions, defaults.rope_theta, s.rope_theta, s.rope_scaling);
  s.rms_norm_eps = keys.number("rms_norm_eps", defaults.rms_norm_eps);
  s.tie_embeddings = keys.flag("tie_word_embeddings", false);
  s.init_std = keys.number("initializer_range", 0.02);
  s.padding_idx = padding_row(keys, s.vocab_size);
  const std::string act = keys.text("hidden_act", "silu");  // transformers' "swish" is the same SiLU
  if (act != "silu" && act != "swish")
    keys.fail("hidden_act", "is \"" + act + "\"; the Llama family here computes silu (SwiGLU)");
  if (keys.flag("mlp_bias", false)) keys.fail("mlp_bias", "is true; Loom's Llama MLP has no biases");
  switch (family.biases) {
    case HfBiases::qkv_key:  // transformers 5's Qwen2MoeConfig; never an o_proj bias
      s.bias = keys.flag("qkv_bias", true) ? ProjectionBias::qkv : ProjectionBias::none;
      break;
    case HfBiases::qkv_always:  // Qwen2 always has q/k/v biases and never an o_proj bias
      s.bias = ProjectionBias::qkv;
      break;
    case HfBiases::attention_bias:
      s.bias = keys.flag("attention_bias", false) ? ProjectionBias::qkv_and_output : ProjectionBias::none;
      break;
  }
  s.head_norm = family.head_norm ? HeadNorm::rms : HeadNorm::none;
  s.sliding_windows = sliding_windows(keys, family, s.n_layer);
  if (family.experts != HfExperts::none) s.moe = moe_from(keys, family, s.n_layer, s.ffn_hidden);
  return s;
}

GptSpec gpt_spec_from_hf(const HfModelConfig& hf, const std::string& path, int64_t seq_len) {
  const Keys keys(hf.config, path);
  GptSpec s;
  s.component = "hf_causal_lm";
  s.vocab_size = keys.positive("vocab_size");
  s.n_embd = keys.positive("n_embd");
  s.n_layer = keys.positive("n_layer");
  s.n_head = keys.positive("n_head");
  if (s.n_embd % s.n_head != 0) keys.fail("n_embd", "must be a multiple of n_head");
  s.n_inner = keys.positive("n_inner", 4 * s.n_embd);
  s.n_positions = hf.max_positions;
  s.seq_len = seq_len;
  s.layer_norm_eps = keys.number("layer_norm_epsilon", 1e-5);
  s.init_std = keys.number("initializer_range", 0.02);
  // gelu_new, gelu_pytorch_tanh and gelu_fast are the same tanh approximation.
  const std::string act = keys.text("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu_fast")
    keys.fail("activation_function", "is \"" + act + "\"; Loom's GPT-2 computes gelu_new (the tanh approximation)");
  if (!keys.flag("tie_word_embeddings", true))
    keys.fail("tie_word_embeddings", "is false; Loom's GPT-2 computes logits through the input embedding");
  if (!keys.flag("scale_attn_weights", true))
    keys.fail("scale_attn_weights", "is false; Loom always scales attention by 1/sqrt(head dim)");
  if (keys.flag("scale_attn_by_inverse_layer_idx", false))
    keys.fail("scale_attn_by_inverse_layer_idx", "is true, which Loom does not implement");
  if (keys.flag("add_cross_attention", false)) keys.fail("add_cross_attention", "is true; Loom's GPT-2 is decoder-only");
  return s;
}

nlohmann::json gpt_hf_config(const GptSpec& s) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", s.vocab_size},
          {"n_positions", s.n_positions},
          {"n_embd", s.n_embd},
          {"n_layer", s.n_layer},
          {"n_head", s.n_head},
          {"n_inner", s.n_inner},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", s.layer_norm_eps},
          {"resid_pdrop", s.dropout},
          {"embd_pdrop", s.dropout},
          {"attn_pdrop", s.dropout},
          {"initializer_range", s.init_std},
          {"scale_attn_weights", true},
          {"tie_word_embeddings", true}};
}

nlohmann::json llama_hf_config(const LlamaSpec& s) {
  nlohmann::json rope_scaling = nullptr;
  if (s.rope_scaling.type == RopeScaling::Type::linear)
    rope_scaling = {{"rope_type", "linear"}, {"factor", s.rope_scaling.factor}};
  if (s.rope_scaling.type == RopeScaling::Type::llama3)
    rope_scaling = {{"rope_type", "llama3"},
                    {"factor", s.rope_scaling.factor},
                    {"low_freq_factor", s.rope_scaling.low_freq_factor},
                    {"high_freq_factor", s.rope_scaling.high_freq_factor},
                    {"original_max_position_embeddings", int64_t(s.rope_scaling.original_max_positions)}};
  // The Hugging Face class whose math this spec is: q/k norms make it Qwen3, q/k/v biases Qwen2.
  const bool head_norm = s.head_norm == HeadNorm::rms, biased = s.bias != ProjectionBias::none;
  const char* architecture = head_norm ? "Qwen3ForCausalLM" : biased ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
  const char* model_type = head_norm ? "qwen3" : biased ? "qwen2" : "llama";
  return {{"architectures", {architecture}},
          {"model_type", model_type},
          {"vocab_size", s.vocab_size},
          {"hidden_size", s.n_embd},
          {"intermediate_size", s.ffn_hidden},
          {"num_hidden_layers", s.n_layer},
          {"num_attention_heads", s.n_head},
          {"num_key_value_heads", s.n_kv_head},
          {"head_dim", s.head_dim},
          {"max_position_embeddings", s.seq_len},
          {"rms_norm_eps", s.rms_norm_eps},
          {"rope_theta", s.rope_theta},
          {"rope_scaling", rope_scaling},
          {"attention_bias", biased},
          {"attention_dropout", s.dropout},
          {"mlp_bias", false},
          {"hidden_act", "silu"},
          {"initializer_range", s.init_std},
          {"tie_word_embeddings", s.tie_embeddings}};
}

}  // namespace loom_gpt
