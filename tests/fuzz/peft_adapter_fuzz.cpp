// peft_adapter_fuzz.cpp: the PEFT adapter folder reader, formats/peft_adapter.hpp
// (read_peft_lora_config, peft_tensors over the safetensors file).
//
// The input is a folder in one file: 4 bytes little-endian N, then N bytes of
// adapter_config.json, then adapter_model.safetensors (whatever is left). Documented refusal:
// loom::formats::FormatError. For a folder that opens: r and lora_alpha are in range, every
// tensor name had the prefix and maps back to its own entry, and every tensor byte is readable.
#include <cmath>
#include <cstdint>
#include <string>

#include "formats/files.hpp"
#include "formats/format_error.hpp"
#include "fuzz_support.hpp"
#include "formats/peft_adapter.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint32_t n = uint32_t(data[0]) | uint32_t(data[1]) << 8 | uint32_t(data[2]) << 16 | uint32_t(data[3]) << 24;
  if (n > size - 4) return 0;
  const auto dir = loom_fuzz::scratch_dir() / "adapter";
  std::filesystem::create_directories(dir);
  loom_fuzz::write_file(dir / loom::formats::kPeftConfig, data + 4, n);
  loom_fuzz::write_file(dir / loom::formats::kPeftWeights, data + 4 + n, size - 4 - n);
  loom_fuzz::expect_only<loom::formats::FormatError>("read_peft_lora_config", [&] {
    const loom::formats::PeftLoraConfig c = loom::formats::read_peft_lora_config(dir.string());
    if (c.r < 1 || c.r > 65536 || !(c.lora_alpha > 0) || !std::isfinite(c.lora_alpha))
      loom_fuzz::finding("accepted r " + std::to_string(c.r) + " or lora_alpha " + std::to_string(c.lora_alpha));
  });
  loom_fuzz::expect_only<loom::formats::FormatError>("peft_tensors", [&] {
    const loom::formats::SafetensorsFile file((dir / loom::formats::kPeftWeights).string());
    unsigned sum = 0;
    for (const auto& [name, entry] : loom::formats::peft_tensors(file)) {
      if (std::string(loom::formats::kPeftKeyPrefix) + name != entry->name || file.find(entry->name) != entry)
        loom_fuzz::finding("tensor '" + entry->name + "' maps to '" + name + "'");
      const unsigned char* begin = file.data(*entry);
      for (uint64_t i = 0; i < entry->end - entry->begin; ++i) sum += begin[i];
    }
    loom_fuzz::keep(sum);
  });
  return 0;
}
