// hf_import_bench: how fast hf_causal_lm reads a Hugging Face folder, and how much memory it
// needs, against reading the same bytes with `cat` (tools/bench/hf_import drives it).
//   hf_import_bench generate DIR LAYERS   writes a BF16 Llama (width 2048, MLP 5632, vocab
//                                         32000) in two shards with an index
//   hf_import_bench import DIR            builds the model as the host does; prints JSON
// Peak RSS is this process's (getrusage), so generate and import run as separate processes.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "abi/compute_components.hpp"
#include "abi/plugin_loader.hpp"
#include "abi/registry.hpp"
#include "config/options.hpp"
#include "formats/hf_folder.hpp"
#include "formats/safetensors.hpp"

namespace {

constexpr int64_t kWidth = 2048, kMlp = 5632, kVocab = 32000, kHeads = 16, kKvHeads = 4;

int generate(const std::string& dir, int64_t layers) {
  std::filesystem::create_directories(dir);
  const nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
                                 {"vocab_size", kVocab}, {"hidden_size", kWidth}, {"intermediate_size", kMlp},
                                 {"num_hidden_layers", layers}, {"num_attention_heads", kHeads},
                                 {"num_key_value_heads", kKvHeads}, {"max_position_embeddings", 4096},
                                 {"rms_norm_eps", 1e-5}, {"torch_dtype", "bfloat16"}};
  std::ofstream(dir + "/config.json") << config.dump(2);
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {{"model.embed_tokens.weight", {kVocab, kWidth}}};
  const int64_t kv = kWidth / kHeads * kKvHeads;
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (auto [n, s] : std::vector<std::pair<const char*, std::vector<int64_t>>>{
             {"self_attn.q_proj.weight", {kWidth, kWidth}}, {"self_attn.k_proj.weight", {kv, kWidth}},
             {"self_attn.v_proj.weight", {kv, kWidth}},     {"self_attn.o_proj.weight", {kWidth, kWidth}},
             {"mlp.gate_proj.weight", {kMlp, kWidth}},      {"mlp.up_proj.weight", {kMlp, kWidth}},
             {"mlp.down_proj.weight", {kWidth, kMlp}},      {"input_layernorm.weight", {kWidth}},
             {"post_attention_layernorm.weight", {kWidth}}})
      shapes.emplace_back(p + n, s);
  }
  shapes.emplace_back("model.norm.weight", std::vector<int64_t>{kWidth});
  shapes.emplace_back("lm_head.weight", std::vector<int64_t>{kVocab, kWidth});
  int64_t largest = 0;
  for (const auto& [n, s] : shapes) {
    int64_t e = 1;
    for (int64_t d : s) e *= d;
    largest = std::max(largest, e);
  }
  const std::vector<uint16_t> ones(size_t(largest), 0x3f80);  // bf16 1.0: the values do not matter here
  nlohmann::json map = nlohmann::json::object();
  const size_t half = shapes.size() / 2;
  for (int shard = 0; shard < 2; ++shard) {
    const std::string name = "model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors";
    std::vector<loom::formats::OutgoingTensor> out;
    for (size_t i = shard == 0 ? 0 : half; i < (shard == 0 ? half : shapes.size()); ++i) {
      out.push_back({shapes[i].first, loom::formats::dtype_named("BF16"), shapes[i].second, ones.data()});
      map[shapes[i].first] = name;
    }
    loom::formats::write_safetensors(dir + "/" + name, out, {{"format", "pt"}});
  }
  std::ofstream(dir + "/model.safetensors.index.json") << nlohmann::json{{"metadata", nlohmann::json::object()},
                                                                          {"weight_map", map}}.dump();
  return 0;
}

int import(const std::string& dir) {
  loom::Registry registry;
  loom::load_plugins(registry, {{LOOM_PLUGIN_DIR, "LOOM_PLUGIN_DIR"}}, /*keep_going=*/true);
  const loom::Component* c = registry.lookup(LOOM_KIND_MODEL, "hf_causal_lm");
  if (c == nullptr) throw std::runtime_error("no hf_causal_lm in " LOOM_PLUGIN_DIR);
  const toml::table options{{"from", dir}, {"seq_len", 16}};
  loom::SlotConfig slot{"model", c, {}};
  slot.config.values = loom::resolve_options(options, c->options, "[model] hf_causal_lm", "bench", {"use"});
  const loom::RunContext run{dir, "cpu", 0, 0, 1, 1};
  const auto start = std::chrono::steady_clock::now();
  loom::ModelInstance model(slot, run);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t param_bytes = 0;
  for (const loom::ModelParam& p : model.params()) param_bytes += p.tensor->nbytes();
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const loom::formats::HfWeights weights(dir);
  std::cout << nlohmann::json{{"seconds", seconds},
                              {"peak_rss_bytes", uint64_t(usage.ru_maxrss) * 1024},
                              {"model_bytes_fp32", param_bytes},
                              {"file_bytes", weights.total_bytes()}}
                   .dump()
            << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 4 && std::strcmp(argv[1], "generate") == 0) return generate(argv[2], std::stoll(argv[3]));
    if (argc == 3 && std::strcmp(argv[1], "import") == 0) return import(argv[2]);
    std::cerr << "usage: hf_import_bench generate DIR LAYERS | import DIR\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
