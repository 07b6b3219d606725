// sft_config_test.cpp: configs/sft-qwen3.toml through the real host, as README "Fine-tune a
// Hugging Face model" runs it, on a tiny random Qwen3 folder (written by the independent
// reference, with the real Qwen3 tokenizer and chat template) and loom-sft-data's instruction
// set: the loss on the answers falls, the model reports how full its rows are, the run exports
// as a Hugging Face folder with the tokenizer files, and host generate answers from it in the
// template's format. The full example with its exact-match scores is tools/sft-example.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "generate_folders.hpp"
#include "logged_losses.hpp"

using namespace loom_test;
using nlohmann::json;

TEST_CASE("configs/sft-qwen3.toml fine-tunes a Qwen3 folder on instruction data; its export answers in the template's format") {
  const auto dir = tmp_dir("sft_config");
  const std::string model = model_folder("qwen3", /*positions=*/256), data = (dir / "data").string();
  const auto made = run_shell(std::string(LOOM_SFT_DATA_BIN) + " make --out " + data + " --train 400 --heldout 10");
  REQUIRE_MESSAGE(made.code == 0, made.err);
  const auto losses = train_losses(std::string(LOOM_SOURCE_DIR) + "/configs/sft-qwen3.toml", dir, "sft",
                                   "--set model.from=\"" + model + "\" --set data.tokenizer=\"" + model +
                                       "\" --set data.files=\"" + data + "/train.jsonl\" --set data.cache_dir=\"" +
                                       (dir / "cache").string() + "\" --set run.steps=40 --set checkpoint.every=40");
  REQUIRE(losses.size() == 4);
  CHECK(losses.back() < 0.7 * losses.front());  // the first is the mean of steps 1-10
  std::istringstream records(read_file(dir / "sft" / "metrics.jsonl"));
  std::string first;
  std::getline(records, first);
  const json record = json::parse(first);
  CHECK(record.at("nonpad_fraction").get<double>() > 0.9);  // packed rows
  CHECK(record.at("label_fraction").get<double>() > 0.1);

  const auto exported = run_host("export " + (dir / "sft").string() + " --out " + (dir / "hf").string() + " --dtype fp32");
  REQUIRE_MESSAGE(exported.code == 0, exported.err);
  CHECK(std::filesystem::exists(dir / "hf" / "tokenizer.json"));
  CHECK(json::parse(read_file(dir / "hf" / "config.json"))["architectures"][0] == "Qwen3ForCausalLM");
  const auto answer = run_host("generate " + (dir / "hf").string() + " --chat --prompt \"What is 3 plus 4?\" --max-new-tokens 8 --json");
  REQUIRE_MESSAGE(answer.code == 0, answer.err);
  // Forty steps teach the answer's frame: Qwen3's empty reasoning block comes first.
  CHECK(json::parse(answer.out)["text"].get<std::string>().rfind("<think>\n\n</think>\n\n", 0) == 0);
}

TEST_CASE("configs/lora-sft-qwen3.toml trains rank-8 adapters on the same workflow; merged and PEFT exports") {
  const auto dir = tmp_dir("lora_sft_config");
  const std::string model = model_folder("qwen3", /*positions=*/256), data = (dir / "data").string();
  const auto made = run_shell(std::string(LOOM_SFT_DATA_BIN) + " make --out " + data + " --train 400 --heldout 10");
  REQUIRE_MESSAGE(made.code == 0, made.err);
  const auto losses = train_losses(std::string(LOOM_SOURCE_DIR) + "/configs/lora-sft-qwen3.toml", dir, "lora",
                                   "--set model.from=\"" + model + "\" --set data.tokenizer=\"" + model +
                                       "\" --set data.files=\"" + data + "/train.jsonl\" --set data.cache_dir=\"" +
                                       (dir / "cache").string() + "\" --set run.steps=40 --set checkpoint.every=40");
  REQUIRE(losses.size() == 4);
  CHECK(losses.back() < 0.9 * losses.front());
  // The checkpoint holds the adapters, not the 151669-token embedding.
  CHECK(std::filesystem::file_size(dir / "lora" / "checkpoints" / "step-40" / "state.safetensors") < 2000000);

  const auto merged = run_host("export " + (dir / "lora").string() + " --merge --out " + (dir / "hf").string());
  REQUIRE_MESSAGE(merged.code == 0, merged.err);
  CHECK(std::filesystem::exists(dir / "hf" / "tokenizer.json"));
  const auto peft = run_host("export " + (dir / "lora").string() + " --format peft --out " + (dir / "peft").string());
  REQUIRE_MESSAGE(peft.code == 0, peft.err);
  const json config = json::parse(read_file(dir / "peft" / "adapter_config.json"));
  CHECK(config["r"] == 8);
  CHECK(config["base_model_name_or_path"] == model);
  const auto answer = run_host("generate " + (dir / "hf").string() + " --chat --prompt \"What is 3 plus 4?\" --max-new-tokens 4 --json");
  CHECK_MESSAGE(answer.code == 0, answer.err);
}
