// bad_folder_test.cpp: a Hugging Face folder from someone else is untrusted. Every way it can
// be broken (truncated, shards missing or outside the folder, overlapping offsets, wrong
// dtypes, architectures and rope types Loom does not implement, a FIFO in place of a file)
// ends the run with exit 2 and one "error: " line naming the file and the problem: never a
// crash, never a hang.
#include "torch_doctest.hpp"  // before any torch or doctest header
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "run_host.hpp"
#include "tiny_folder.hpp"

namespace fs = std::filesystem;
using namespace loom_test;

namespace {

// Trains one step of hf_causal_lm from `folder` (extra: more [model] lines).
Result run_from(const fs::path& folder, const std::string& extra = "") {
  const fs::path dir = folder.parent_path();
  const fs::path manifest = dir / (folder.filename().string() + ".toml");
  std::ofstream(manifest) << "[run]\nname = \"" << folder.filename().string() << "\"\ndir = \"" << (dir / "runs").string()
                          << "\"\nsteps = 1\n[model]\nuse = \"hf_causal_lm\"\nfrom = \"" << folder.string()
                          << "\"\nseq_len = 16\n" << extra
                          << "[data]\nuse = \"synthetic\"\nbatch_size = 2\nseq_len = 16\nvocab_size = 64\n"
                             "[optimizer]\nuse = \"sgd\"\n[[trackers]]\nuse = \"console\"\n";
  return run_shell("timeout 60 " + std::string(LOOM_HOST_BIN) + " run " + manifest.string());
}

// Exit 2, and the last line on stderr is the error, containing every part.
void refused(const Result& r, const std::vector<std::string>& parts) {
  CAPTURE(r.err);
  CHECK(r.code == 2);
  std::string last = r.err.substr(0, r.err.size() - (r.err.empty() ? 0 : 1));
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  CHECK(last.rfind("error: ", 0) == 0);
  for (const std::string& part : parts) CHECK_MESSAGE(contains(last, part), part);
}

std::string bytes_of(const fs::path& path) { return read_file(path); }
void put_bytes(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A safetensors file whose header says exactly `header` (padding is the caller's business).
std::string raw_safetensors(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((header.size() >> (8 * i)) & 0xFF);
  return out + header + std::string(data_bytes, '\0');
}

}  // namespace

TEST_CASE("a valid folder, single file or sharded, trains") {
  const fs::path root = tmp_dir("hf_bad");
  CHECK(run_from(write_tiny_llama(root / "single")).code == 0);
  CHECK(run_from(write_tiny_llama(root / "sharded", 3)).code == 0);
}

TEST_CASE("broken weights files are one-line errors with exit 2") {
  const fs::path root = tmp_dir("hf_bad_weights");
  SUBCASE("a truncated file") {
    const fs::path f = write_tiny_llama(root / "truncated");
    const std::string bytes = bytes_of(f / "model.safetensors");
    put_bytes(f / "model.safetensors", bytes.substr(0, bytes.size() / 2));
    refused(run_from(f), {"hf_causal_lm", "model.safetensors", "truncated"});
  }
  SUBCASE("a truncated shard") {
    const fs::path f = write_tiny_llama(root / "truncated_shard", 2);
    const std::string bytes = bytes_of(f / "model-00002-of-00002.safetensors");
    put_bytes(f / "model-00002-of-00002.safetensors", bytes.substr(0, 100));
    refused(run_from(f), {"model-00002-of-00002.safetensors", "not a valid safetensors file"});
  }
  SUBCASE("a shard the index names is missing") {
    const fs::path f = write_tiny_llama(root / "missing_shard", 3);
    fs::remove(f / "model-00002-of-00003.safetensors");
    refused(run_from(f), {"model-00002-of-00003.safetensors", "download the missing shard"});
  }
  SUBCASE("the index names a file outside the folder") {
    const fs::path f = write_tiny_llama(root / "escape", 2);
    put_bytes(root / "outside.safetensors", bytes_of(f / "model-00001-of-00002.safetensors"));
    std::string index = bytes_of(f / "model.safetensors.index.json");
    for (size_t at; (at = index.find("model-00001-of-00002.safetensors")) != std::string::npos;)
      index.replace(at, 32, "../outside.safetensors");
    put_bytes(f / "model.safetensors.index.json", index);
    refused(run_from(f), {"../outside.safetensors", "not a plain file name"});
  }
  SUBCASE("a tensor the index places in a shard that lacks it") {
    const fs::path f = write_tiny_llama(root / "stale_index", 2);
    std::string index = bytes_of(f / "model.safetensors.index.json");
    const size_t at = index.find("\"model.norm.weight\": \"model-00002");
    REQUIRE(at != std::string::npos);
    index.replace(index.find("model-00002", at), 11, "model-00001");
    put_bytes(f / "model.safetensors.index.json", index);
    refused(run_from(f), {"model.norm.weight", "does not hold it"});
  }
  SUBCASE("header offsets that overlap") {
    const fs::path f = write_tiny_llama(root / "overlap");
    put_bytes(f / "model.safetensors",
              raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              12));
    refused(run_from(f), {"overlaps"});
  }
  SUBCASE("header offsets past the end of the file") {
    const fs::path f = write_tiny_llama(root / "past_end");
    put_bytes(f / "model.safetensors",
              raw_safetensors(R"({"a":{"dtype":"F32","shape":[1000],"data_offsets":[0,4000]}})", 16));
    refused(run_from(f), {"ends at byte 4000", "truncated"});
  }
  SUBCASE("a header length beyond the file") {
    const fs::path f = write_tiny_llama(root / "huge_header");
    put_bytes(f / "model.safetensors", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10));
    refused(run_from(f), {"header length"});
  }
  SUBCASE("a dtype the model cannot take") {
    const fs::path f = write_tiny_llama(root / "int_weights");
    auto tensors = tiny_llama_tensors();
    std::vector<loom::formats::OutgoingTensor> out;
    std::vector<at::Tensor> keep;
    for (auto& [name, t] : tensors) {
      keep.push_back(name == "model.norm.weight" ? t.to(at::kLong) : t);
      out.push_back({name, loom::formats::dtype_named(name == "model.norm.weight" ? "I64" : "F32"),
                     t.sizes().vec(), keep.back().data_ptr()});
    }
    loom::formats::write_safetensors((f / "model.safetensors").string(), out, {});
    refused(run_from(f), {"1 mismatched", "model.norm.weight", "Long"});
  }
  SUBCASE("a FIFO in place of the weights never blocks") {
    const fs::path f = write_tiny_llama(root / "fifo");
    fs::remove(f / "model.safetensors");
    REQUIRE(::mkfifo((f / "model.safetensors").c_str(), 0644) == 0);
    refused(run_from(f), {"not a regular file"});
  }
}

TEST_CASE("strict loading lists what does not fit; strict = false loads the rest") {
  const fs::path root = tmp_dir("hf_bad_strict");
  const fs::path f = write_tiny_llama(root / "partial");
  auto tensors = tiny_llama_tensors();
  tensors.erase(tensors.begin() + 1);                         // model.layers.0.self_attn.q_proj.weight
  tensors.emplace_back("extra.weight", at::zeros({3}));       // unexpected
  write_tensors(f / "model.safetensors", tensors);
  refused(run_from(f), {"1 missing (model.layers.0.self_attn.q_proj.weight)", "1 unexpected (extra.weight)",
                        "strict = false"});
  CHECK(run_from(f, "strict = false\n").code == 0);
}

TEST_CASE("config.json that Loom cannot honour is refused by key") {
  const fs::path root = tmp_dir("hf_bad_config");
  const auto with = [&](const std::string& name, const nlohmann::json& changes) {
    const fs::path f = write_tiny_llama(root / name);
    nlohmann::json config = tiny_llama_config();
    config.merge_patch(changes);
    write_json_file(f / "config.json", config);
    return f;
  };
  refused(run_from(with("arch", {{"architectures", {"FalconForCausalLM"}}})),
          {"config.json", "\"architectures\"", "FalconForCausalLM", "LlamaForCausalLM"});
  refused(run_from(with("longrope", {{"rope_scaling", {{"rope_type", "longrope"}, {"factor", 4.0}}}})),
          {"\"rope_scaling\"", "longrope", "does not implement"});
  refused(run_from(with("longrope5", {{"rope_parameters", {{"rope_type", "longrope"}, {"rope_theta", 1e4}, {"factor", 4.0}}}})),
          {"\"rope_parameters\"", "longrope", "does not implement"});
  // transformers 5's spelling: a field Loom does not read, or two thetas that disagree.
  refused(run_from(with("partial", {{"rope_parameters",
                                     {{"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}}}})),
          {"\"rope_parameters\"", "partial_rotary_factor", "does not implement"});
  refused(run_from(with("no_theta", {{"rope_parameters", {{"rope_type", "default"}}}})),
          {"\"rope_parameters\"", "has no rope_theta"});
  refused(run_from(with("two_thetas", {{"rope_theta", 10000.0}, {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 5e5}}}})),
          {"\"rope_theta\"", "disagrees"});
  refused(run_from(with("layer_kind", {{"layer_types", {"full_attention", "chunked_attention"}}})),
          {"\"layer_types\"", "chunked_attention"});
  refused(run_from(with("sliding_layer", {{"layer_types", {"full_attention", "sliding_attention"}}, {"sliding_window", 4}})),
          {"\"layer_types\"", "sliding_attention", "LlamaForCausalLM"});
  refused(run_from(with("layer_count", {{"layer_types", {"full_attention"}}})), {"\"layer_types\"", "one attention kind per layer"});
  refused(run_from(with("act", {{"hidden_act", "gelu"}})), {"\"hidden_act\"", "gelu"});
  refused(run_from(with("pad", {{"pad_token_id", 100000}})), {"\"pad_token_id\"", "not a row of the"});
  // Issue 49: tied by the config, yet the weights hold a head of their own (transformers keeps it).
  refused(run_from(with("tied_stored_head", {{"tie_word_embeddings", true}})),
          {"tie_word_embeddings", "lm_head.weight that differs from model.embed_tokens.weight"});
  refused(run_from(with("pad_text", {{"pad_token_id", "<pad>"}})), {"\"pad_token_id\"", "not a row of the"});
  refused(run_from(with("heads", {{"num_attention_heads", -4}})), {"\"num_attention_heads\"", "positive integer"});
  refused(run_from(with("long", {{"max_position_embeddings", 8}})), {"seq_len 16", "max_position_embeddings"});
  {  // a stored head equal to the embedding is the tied head itself, as many Hub files carry it
    const fs::path f = write_tiny_llama(root / "tied_equal_head");
    auto tensors = tiny_llama_tensors();
    tensors.back().second = tensors.front().second.clone();  // lm_head.weight := model.embed_tokens.weight
    write_tensors(f / "model.safetensors", tensors);
    nlohmann::json config = tiny_llama_config();
    config["tie_word_embeddings"] = true;
    write_json_file(f / "config.json", config);
    const auto r = run_from(f);
    CHECK_MESSAGE(r.code == 0, r.err);
  }
  const fs::path none = write_tiny_llama(root / "no_config");
  fs::remove(none / "config.json");
  refused(run_from(none), {"config.json", "Hugging Face model folder"});
  const fs::path garbage = write_tiny_llama(root / "garbage_config");
  put_bytes(garbage / "config.json", "{\"architectures\": [\n  \"LlamaForCausalLM\",,\n");
  refused(run_from(garbage), {"config.json", "line 2", "not valid JSON"});
}

// Issue 35: a config.json key that hf_causal_lm neither reads nor knows to be harmless is
// refused by name (quantization_config would change every weight); strict = false loads anyway
// and warns; the keys transformers itself writes (save_pretrained, transformers5_test) pass.
TEST_CASE("a config.json key that could change the model is refused by name, or warned about with strict = false") {
  const fs::path root = tmp_dir("hf_unknown_key");
  const fs::path folder = write_tiny_llama(root / "quantized");
  nlohmann::json config = tiny_llama_config();
  config["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}};
  config["torch_dtype"] = "float32";  // harmless: listed
  write_json_file(folder / "config.json", config);
  refused(run_from(folder), {"config.json", "\"quantization_config\"", "hf_causal_lm", "strict = false"});
  const auto r = run_from(folder, "strict = false\n");
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(contains(r.err, "\"quantization_config\" is a key hf_causal_lm neither reads"));
  CHECK(contains(r.err, "ignored (strict = false)"));
}
