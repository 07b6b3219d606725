// `host export RUN_OR_CHECKPOINT --format hf|peft --out DIR`: rebuilds the model a checkpoint
// was trained with (from the resolved manifest the checkpoint carries), loads its weights, and
// writes it as a Hugging Face folder (checkpoint/hf_export.hpp; with LoRA adapters merged when
// --merge says so) or its adapters alone as a PEFT folder (checkpoint/peft_export.hpp).
#include <spdlog/spdlog.h>
#include <iostream>

#include "base/failure.hpp"
#include "checkpoint/hf_export.hpp"
#include "checkpoint/peft_export.hpp"
#include "cli/commands.hpp"
#include "cli/rebuilt_model.hpp"

namespace loom {

int command_export(const CommandLine& line) {
  const std::string format = line.format.empty() ? "hf" : line.format;
  if (format != "hf" && format != "peft")
    throw usage_failure("export: unknown --format \"" + format + "\"; supported: hf, peft (see host export --help)");
  if (line.out.empty()) throw usage_failure("export: --out DIR is required: the new folder to write");
  if (line.merge && format != "hf")
    throw usage_failure("export: --merge folds adapters into a Hugging Face folder; it goes with --format hf");
  const at::ScalarType dtype =
      parse_export_dtype(line.dtype.empty() ? (format == "peft" ? "fp32" : "bf16") : line.dtype, "export --dtype");
  const uint64_t max_shard_bytes = parse_byte_size(line.max_shard_size, "export --max-shard-size");

  const auto rebuilt = rebuild_model(line.args.at(0), "export", /*allow_hf_folder=*/false);
  if (format == "peft") {
    spdlog::info("exporting the LoRA adapters of {} (step {}) as a PEFT folder", rebuilt->source.string(), rebuilt->step);
    PeftExportOptions options;
    options.dtype = dtype;
    options.adapters = rebuilt->adapters;
    const PeftExportResult r = export_peft_folder(*rebuilt->model, line.out, options);
    std::cout << "wrote " << line.out << ": " << r.tensors << " adapter tensors, " << r.bytes << " bytes\n"
              << "load it in Python with: PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(\""
              << (r.base_model.empty() ? "BASE" : r.base_model) << "\"), \"" << line.out << "\")\n";
    return 0;
  }
  HfExportOptions options;
  options.dtype = dtype;
  options.max_shard_bytes = max_shard_bytes;
  options.merge_adapters = line.merge;
  options.adapter_scale = rebuilt->adapters.scale();
  spdlog::info("exporting {} (step {}) as a Hugging Face folder{}", rebuilt->source.string(), rebuilt->step,
               line.merge ? ", LoRA adapters merged" : "");
  const HfExportResult r = export_hf_folder(*rebuilt->model, line.out, options);
  std::cout << "wrote " << line.out << ": " << r.tensors << " tensors, " << r.bytes << " bytes in " << r.shards
            << (r.shards == 1 ? " file" : " shards") << ", " << r.copied_files << " tokenizer files\n"
            << "load it in Python with: AutoModelForCausalLM.from_pretrained(\"" << line.out << "\")\n";
  return 0;
}

}  // namespace loom
