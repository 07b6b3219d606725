// safetensors_fuzz.cpp: the safetensors reader, formats/safetensors.hpp SafetensorsFile.
//
// The input is a whole .safetensors file. Documented refusal: loom::formats::FormatError. For
// a file that opens, what the header promises must hold: every tensor's byte range lies inside
// the file and equals its shape times its dtype's size, find() gives each tensor back by name,
// and every tensor byte is readable (each is read, so a bad range faults under ASan).
#include <cstdint>
#include <string>

#include "formats/format_error.hpp"
#include "fuzz_support.hpp"
#include "formats/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = loom_fuzz::scratch_dir() / "input.safetensors";
  loom_fuzz::write_file(path, data, size);
  loom_fuzz::expect_only<loom::formats::FormatError>("SafetensorsFile", [&] {
    const loom::formats::SafetensorsFile file(path.string());
    unsigned sum = 0;
    for (const loom::formats::TensorEntry& e : file.tensors()) {
      uint64_t bytes = 0;
      if (e.dtype == nullptr || !loom::formats::tensor_bytes(e.shape, e.dtype->bytes, &bytes) || e.end - e.begin != bytes)
        loom_fuzz::finding("tensor '" + e.name + "': its byte range does not match its shape and dtype");
      // The input is the file: its first 8 bytes give the header length, the data start after it.
      uint64_t header = 0;
      for (int i = 7; i >= 0; --i) header = (header << 8) | data[i];
      if (e.begin > e.end || e.end > size - 8 - header)
        loom_fuzz::finding("tensor '" + e.name + "': byte range past the end of the file");
      const unsigned char* begin = file.data(e);
      for (uint64_t i = 0; i < bytes; ++i) sum += begin[i];
      if (file.find(e.name) == nullptr || file.find(e.name)->begin != e.begin)
        loom_fuzz::finding("tensor '" + e.name + "' is listed but find() does not return it");
      file.release(e);
    }
    for (const auto& [key, value] : file.metadata()) sum += unsigned(key.size() + value.size());
    loom_fuzz::keep(sum);
  });
  return 0;
}
