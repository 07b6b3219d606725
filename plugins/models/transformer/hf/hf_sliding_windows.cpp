#include "hf/hf_sliding_windows.hpp"

#include <algorithm>
#include <string>

namespace loom_gpt {
namespace {

constexpr int64_t kDefaultWindow = 4096;  // MistralConfig, Qwen2Config, Qwen3Config, the Qwen MoE configs

using Sliding = std::vector<bool>;  // per layer: attends through the window

bool any(const Sliding& s) { return std::find(s.begin(), s.end(), true) != s.end(); }

std::string layer_list(const Sliding& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i]) out += (out.empty() ? "" : ", ") + std::to_string(i);
  return out.empty() ? "no layer" : "layers " + out;
}

// layer_types, one kind per layer; transformers reads the legacy "attention" as full_attention.
// Empty when config.json has none.
Sliding listed_layer_types(const Keys& keys, int64_t n_layer) {
  if (!keys.has("layer_types")) return {};
  const nlohmann::json& given = keys.at("layer_types");
  if (!given.is_array() || static_cast<int64_t>(given.size()) != n_layer)
    keys.fail("layer_types", "must list one attention kind per layer (num_hidden_layers = " +
                                 std::to_string(n_layer) + ")");
  Sliding out;
  for (const nlohmann::json& t : given) {
    if (t != "sliding_attention" && t != "full_attention" && t != "attention")
      keys.fail("layer_types", "names " + t.dump() + "; Loom computes full_attention and sliding_attention");
    out.push_back(t == "sliding_attention");
  }
  return out;
}

// The width of sliding_window, or 0 when it is null (or absent where the family's default is none).
int64_t window_of(const Keys& keys, bool default_none) {
  if (keys.j().contains("sliding_window") && keys.j().at("sliding_window").is_null()) return 0;
  if (default_none && !keys.has("sliding_window")) return 0;
  return keys.positive("sliding_window", kDefaultWindow);
}

// The major version of transformers_version ("4.51.3": 4), or 0 when config.json does not say.
int transformers_major(const Keys& keys) {
  if (!keys.has("transformers_version") || !keys.at("transformers_version").is_string()) return 0;
  const std::string v = keys.at("transformers_version").get<std::string>();
  const size_t digits = v.find_first_not_of("0123456789");
  if (digits == 0 || digits > 3 || (digits != std::string::npos && v[digits] != '.')) return 0;
  return std::stoi(v.substr(0, digits));
}

std::vector<int64_t> per_layer(const Keys& keys, const Sliding& sliding, int64_t window) {
  if (!any(sliding)) return {};
  if (window == 0) keys.fail("sliding_window", "is null, but " + layer_list(sliding) + " slide");
  std::vector<int64_t> out;
  for (const bool s : sliding) out.push_back(s ? window : 0);
  return out;
}

// Where transformers 5.24 ignores layer_types, a layer_types that says otherwise is refused: the
// folder's author meant something that transformers does not compute either.
void check_ignored_layer_types(const Keys& keys, const Sliding& listed, const Sliding& built, const char* model) {
  if (!listed.empty() && listed != built)
    keys.fail("layer_types", std::string("slides ") + layer_list(listed) + ", but transformers' " + model +
                                 " ignores layer_types and slides " + layer_list(built) +
                                 "; remove layer_types or make it agree");
}

// Qwen2-MoE and Qwen3-MoE without layer_types: transformers 4 slid the layers from
// max_window_layers on (Qwen2's rule); transformers 5.24 slides Qwen2-MoE's odd-numbered layers
// below max_window_layers ((i + 1) % 2 and i < max_window_layers) and every Qwen3-MoE layer.
// The version written in config.json decides; where it is older or absent and the rules differ,
// the folder is refused naming both.
Sliding moe_window_rule(const Keys& keys, HfWindows rule, int64_t n_layer) {
  const int64_t first = keys.count("max_window_layers", 28);
  Sliding v4(static_cast<size_t>(n_layer)), v5(static_cast<size_t>(n_layer));
  for (int64_t i = 0; i < n_layer; ++i) {
    v4[static_cast<size_t>(i)] = i >= first;
    v5[static_cast<size_t>(i)] = rule == HfWindows::qwen3_moe || ((i + 1) % 2 != 0 && i < first);
  }
  if (transformers_major(keys) >= 5 || v4 == v5) return v5;
  const std::string written = keys.has("transformers_version") ? "transformers " + keys.at("transformers_version").dump()
                                                               : "no transformers_version";
  keys.fail("use_sliding_window",
            "is true without layer_types, and config.json names " + written + ": transformers 4 slid " +
                layer_list(v4) + " (from max_window_layers on), transformers 5.24 slides " + layer_list(v5) +
                "; Loom cannot tell which the weights were trained with; " +
                (rule == HfWindows::qwen3_moe
                     ? "if they were trained with transformers 5's rule, set transformers_version to that 5.x (Loom "
                       "does not compute transformers 4's for Qwen3-MoE, whose config has no layer_types)"
                     : "add layer_types listing the layers that slide, or set transformers_version to the 5.x "
                       "the weights were trained with"));
}

}  // namespace

// Per family, as transformers 5.24 builds the model that AutoModelForCausalLM loads:
//   Llama: none; sliding_attention in layer_types is refused (LlamaForCausalLM has no window).
//   Mistral: sliding_window (4096 when absent, none when null) on every layer; a config with
//     layer_types is loaded by AutoModelForCausalLM as Ministral, which slides the listed layers.
//   Mixtral: sliding_window (none when absent) on every layer; layer_types is ignored.
//   Qwen2, Qwen3: none unless use_sliding_window; then layer_types, else the layers from
//     max_window_layers (default 28) on (transformers 4 and 5 agree).
//   Qwen2-MoE: none unless use_sliding_window; then layer_types, else moe_window_rule.
//   Qwen3-MoE: none unless use_sliding_window; then every layer (moe_window_rule); layer_types
//     and max_window_layers are ignored.
std::vector<int64_t> sliding_windows(const Keys& keys, const HfFamily& family, int64_t n_layer) {
  const Sliding listed = listed_layer_types(keys, n_layer);
  const Sliding all(static_cast<size_t>(n_layer), true);
  switch (family.windows) {
    case HfWindows::mistral: {
      const int64_t window = window_of(keys, false);
      if (listed.empty()) return window > 0 ? per_layer(keys, all, window) : std::vector<int64_t>{};
      return per_layer(keys, listed, window);  // Ministral's layers; sliding ones need a width
    }
    case HfWindows::mixtral: {
      const int64_t window = window_of(keys, true);
      const Sliding built(static_cast<size_t>(n_layer), window > 0);
      check_ignored_layer_types(keys, listed, built, family.architecture);
      return per_layer(keys, built, window);
    }
    case HfWindows::qwen:
    case HfWindows::qwen2_moe:
    case HfWindows::qwen3_moe: break;
    case HfWindows::none:
      if (any(listed))
        keys.fail("layer_types", std::string("lists sliding_attention layers, which ") + family.architecture +
                                     " does not compute");
      return {};
  }
  if (!keys.flag("use_sliding_window", false)) {  // their configs drop sliding_window then
    // ...and a layer listed as sliding_attention fails in transformers 5.24 (no width, or 0)
    if (any(listed)) keys.fail("layer_types", "lists sliding_attention layers while use_sliding_window is false; set "
                                             "use_sliding_window to true, or list full_attention only");
    return {};
  }
  if (family.windows == HfWindows::qwen3_moe) {
    const int64_t window = window_of(keys, false);
    if (window == 0) return {};  // Qwen3MoeModel masks no window when sliding_window is null
    const Sliding built = moe_window_rule(keys, family.windows, n_layer);
    check_ignored_layer_types(keys, listed, built, family.architecture);
    return per_layer(keys, built, window);
  }
  if (!listed.empty()) return per_layer(keys, listed, window_of(keys, false));
  if (family.windows == HfWindows::qwen2_moe)
    return per_layer(keys, moe_window_rule(keys, family.windows, n_layer), window_of(keys, false));
  Sliding from_first(static_cast<size_t>(n_layer));
  const int64_t first = keys.count("max_window_layers", 28);
  for (int64_t i = 0; i < n_layer; ++i) from_first[static_cast<size_t>(i)] = i >= first;
  return per_layer(keys, from_first, window_of(keys, false));
}

}  // namespace loom_gpt
