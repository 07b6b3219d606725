// `host export RUN_OR_CHECKPOINT --format hf --out DIR`: rebuilds the model a checkpoint was
// trained with (from the resolved manifest the checkpoint carries), loads its weights, and
// writes it as a Hugging Face folder (checkpoint/hf_export.hpp).
#include <spdlog/spdlog.h>
#include <iostream>

#include "base/failure.hpp"
#include "checkpoint/hf_export.hpp"
#include "cli/commands.hpp"
#include "cli/rebuilt_model.hpp"

namespace loom {

int command_export(const CommandLine& line) {
  if (!line.format.empty() && line.format != "hf")
    throw usage_failure("export: unknown --format \"" + line.format + "\"; supported: hf (see host export --help)");
  if (line.out.empty()) throw usage_failure("export: --out DIR is required: the new folder to write");
  HfExportOptions options;
  options.dtype = parse_export_dtype(line.dtype, "export --dtype");
  options.max_shard_bytes = parse_byte_size(line.max_shard_size, "export --max-shard-size");

  const auto rebuilt = rebuild_model(line.args.at(0), "export", /*allow_hf_folder=*/false);
  spdlog::info("exporting {} (step {}) as a Hugging Face folder", rebuilt->source.string(), rebuilt->step);
  const HfExportResult r = export_hf_folder(*rebuilt->model, line.out, options);
  std::cout << "wrote " << line.out << ": " << r.tensors << " tensors, " << r.bytes << " bytes in " << r.shards
            << (r.shards == 1 ? " file" : " shards") << ", " << r.copied_files << " tokenizer files\n"
            << "load it in Python with: AutoModelForCausalLM.from_pretrained(\"" << line.out << "\")\n";
  return 0;
}

}  // namespace loom
