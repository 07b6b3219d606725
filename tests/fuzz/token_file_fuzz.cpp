// token_file_fuzz.cpp: the Loom token file reader, plugins/datasets/common/token_file_format.hpp
// parse_token_file_header, and the `token_file` dataset built on it, driven through its C
// vtable as the host drives it (plugins/datasets/token_file/token_file.cpp is compiled into this
// program; tests/support/standin_host.hpp is the host side).
//
// The input is a token file. It is parsed, then opened as a dataset under two configurations
// (with and without the vocab_size scan and epoch reports); a dataset that opens draws batches
// and round-trips its state. The input is also offered as a saved state to a dataset over a
// valid file. Documented refusals: a DataError from the parser; a status with code
// INVALID_ARGUMENT from the plugin (anything else, such as INTERNAL from an unexpected C++
// exception, is a finding).
#include <loom/abi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "plugins/datasets/common/data_error.hpp"
#include "fuzz_support.hpp"
#include "linked_dataset.hpp"
#include "plugins/datasets/common/token_file_format.hpp"

namespace {

const loom_dataset_vtable& vtable() {
  static const loom_dataset_vtable vt = loom_fuzz::linked_dataset_vtable("token_file");
  return vt;
}

// A status the plugin returned: INVALID_ARGUMENT is a documented refusal (true: go on without
// the result), anything else a finding.
bool refused(loom_status* status, const char* call) {
  if (status == nullptr) return false;
  const loom_status_code code = status->code;
  const std::string message = status->message;
  loom_standin::status_destroy(status);
  if (code != LOOM_STATUS_CODE_INVALID_ARGUMENT)
    loom_fuzz::finding(std::string("token_file ") + call + " returned status code " + std::to_string(int(code)) +
                       " (only INVALID_ARGUMENT is a refusal): " + message);
  return true;
}

struct Dataset {
  loom_dataset* handle = nullptr;
  ~Dataset() { vtable().destroy(handle); }
};

// Opens path with these options into d; false when the plugin refuses them.
bool open(Dataset& d, const std::string& path, const char* batch_size, const char* seq_len, const char* vocab_size,
          const char* report_epochs) {
  loom_config config;
  config.values = {{"path", path},
                   {"batch_size", batch_size},
                   {"seq_len", seq_len},
                   {"vocab_size", vocab_size},
                   {"report_epochs", report_epochs}};
  const std::string run_dir = loom_fuzz::scratch_dir().string();
  const loom_context context = {sizeof(loom_context), "data", run_dir.c_str(), 7, 0, 1, "cpu", 10};
  return !refused(vtable().create(&context, &config, &d.handle), "create");
}

loom_status* collect(void* user, const void* data, size_t size) {
  static_cast<std::string*>(user)->append(static_cast<const char*>(data), size);
  return nullptr;
}

std::string save(Dataset& d) {
  std::string state;
  const loom_byte_writer writer = {sizeof(loom_byte_writer), &state, &collect};
  if (refused(vtable().state_save(d.handle, &writer), "state_save")) loom_fuzz::finding("state_save refused");
  return state;
}

// Draws up to n batches; checks each is int64 (B, T) and frees it as the host does.
void draw(Dataset& d, int n, int64_t B, int64_t T) {
  for (int i = 0; i < n; ++i) {
    loom_batch batch{};
    batch.struct_size = sizeof batch;
    if (refused(vtable().next(d.handle, &batch), "next")) return;
    if (batch.end_of_epoch) continue;
    for (DLManagedTensor* t : {batch.inputs, batch.targets}) {
      if (t == nullptr || t->dl_tensor.ndim != 2 || t->dl_tensor.shape[0] != B || t->dl_tensor.shape[1] != T)
        loom_fuzz::finding("token_file next() returned a batch that is not int64 (B, T)");
      t->deleter(t);
    }
  }
}

void exercise(const std::string& path, const char* batch_size, int64_t B, const char* seq_len, int64_t T,
              const char* vocab_size, const char* report_epochs) {
  Dataset d;
  if (!open(d, path, batch_size, seq_len, vocab_size, report_epochs)) return;
  draw(d, 3, B, T);
  const std::string state = save(d);
  if (refused(vtable().state_load(d.handle, state.data(), state.size()), "state_load"))
    loom_fuzz::finding("token_file refused the state it saved itself");
  draw(d, 1, B, T);
}

const std::string& valid_file() {
  static const std::string path = [] {
    loom::data::TokenFileHeader h;
    h.token_bytes = 2;
    h.token_count = 64;
    std::string bytes = loom::data::encode_token_file_header(h);
    for (uint64_t i = 0; i < h.token_count; ++i) loom::data::append_le<uint16_t>(bytes, uint16_t(i * 7 % 50));
    const auto p = loom_fuzz::scratch_dir() / "valid.tok";
    loom_fuzz::write_file(p, bytes.data(), bytes.size());
    return p.string();
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = (loom_fuzz::scratch_dir() / "input.tok").string();
  loom_fuzz::write_file(path, data, size);

  loom_fuzz::expect_only<loom::data::DataError>("parse_token_file_header", [&] {
    unsigned char head[loom::data::kTokenFileHeaderBytes] = {};
    std::memcpy(head, data, std::min(size, sizeof head));
    const loom::data::TokenFileHeader h = loom::data::parse_token_file_header(head, size, path);
    if (loom::data::kTokenFileHeaderBytes + h.token_count * h.token_bytes != size)
      loom_fuzz::finding("parse_token_file_header accepted a token count that does not match the file size");
  });

  exercise(path, "2", 2, "3", 3, "0", "false");
  exercise(path, "1", 1, "1", 1, "300", "true");

  // The input as a saved dataset state (a checkpoint from elsewhere).
  Dataset d;
  if (!open(d, valid_file(), "2", "2", "0", "true")) loom_fuzz::finding("the valid token file was refused");
  if (!refused(vtable().state_load(d.handle, data, size), "state_load")) draw(d, 2, 2, 2);
  return 0;
}
