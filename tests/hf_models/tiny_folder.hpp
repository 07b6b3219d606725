// tiny_folder.hpp: a tiny Llama in Hugging Face layout, written in C++ for the tests that
// break it on purpose (bad_folder_test, fuzz_test). The reference tests use folders written by
// the independent Python writer (hf_reference.py) instead.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "formats/safetensors.hpp"

namespace loom_test {

// vocab 64, width 32, 2 layers, 4 heads sharing 2 key/value heads, MLP 48.
inline nlohmann::json tiny_llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 64},
          {"hidden_size", 32}, {"intermediate_size", 48}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0}, {"hidden_act", "silu"}, {"tie_word_embeddings", false}};
}

inline std::vector<std::pair<std::string, at::Tensor>> tiny_llama_tensors() {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const auto r = [&](std::vector<int64_t> shape) { return at::normal(0.0, 0.2, shape, gen); };
  std::vector<std::pair<std::string, at::Tensor>> out = {{"model.embed_tokens.weight", r({64, 32})}};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    out.emplace_back(p + "self_attn.q_proj.weight", r({32, 32}));
    out.emplace_back(p + "self_attn.k_proj.weight", r({16, 32}));
    out.emplace_back(p + "self_attn.v_proj.weight", r({16, 32}));
    out.emplace_back(p + "self_attn.o_proj.weight", r({32, 32}));
    out.emplace_back(p + "mlp.gate_proj.weight", r({48, 32}));
    out.emplace_back(p + "mlp.up_proj.weight", r({48, 32}));
    out.emplace_back(p + "mlp.down_proj.weight", r({32, 48}));
    out.emplace_back(p + "input_layernorm.weight", 1.0 + r({32}));
    out.emplace_back(p + "post_attention_layernorm.weight", 1.0 + r({32}));
  }
  out.emplace_back("model.norm.weight", 1.0 + r({32}));
  out.emplace_back("lm_head.weight", r({64, 32}));
  return out;
}

inline void write_json_file(const std::filesystem::path& path, const nlohmann::json& j) {
  std::ofstream(path) << j.dump(2);
}

inline void write_tensors(const std::filesystem::path& path,
                          const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  std::vector<loom::formats::OutgoingTensor> out;
  for (const auto& [name, t] : tensors)
    out.push_back({name, loom::formats::dtype_named("F32"), t.sizes().vec(), t.data_ptr()});
  loom::formats::write_safetensors(path.string(), out, {{"format", "pt"}});
}

// The folder with its weights in `shards` files (1: model.safetensors; more: an index).
inline std::filesystem::path write_tiny_llama(const std::filesystem::path& dir, int shards = 1) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  write_json_file(dir / "config.json", tiny_llama_config());
  const auto tensors = tiny_llama_tensors();
  if (shards == 1) {
    write_tensors(dir / "model.safetensors", tensors);
    return dir;
  }
  nlohmann::json map = nlohmann::json::object();
  const size_t per = (tensors.size() + size_t(shards) - 1) / size_t(shards);
  for (int s = 0; s < shards; ++s) {
    const std::string name = "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    std::vector<std::pair<std::string, at::Tensor>> part;
    for (size_t i = size_t(s) * per; i < std::min(tensors.size(), size_t(s + 1) * per); ++i) {
      part.push_back(tensors[i]);
      map[tensors[i].first] = name;
    }
    write_tensors(dir / name, part);
  }
  write_json_file(dir / "model.safetensors.index.json", {{"metadata", {{"total_size", 0}}}, {"weight_map", map}});
  return dir;
}

}  // namespace loom_test
