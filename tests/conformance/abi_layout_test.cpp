// abi_layout_test.cpp: rule 3's layout half. Every boundary struct starts with struct_size,
// a C99 compiler and this C++17 compiler agree on every size and offset, and the frozen
// offsets equal what the headers' LOOM_ABI_OFFSET static asserts claim. The last test reads
// the headers themselves, so the list in abi_layout.h cannot drift from the asserts.
#include <doctest/doctest.h>

#include <cstddef>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "abi_layout.h"

namespace {

struct Offset {
  std::string name;  // "loom_plugin_info.name"
  size_t cpp, slot;
};

std::vector<Offset> cpp_offsets() {
#define LOOM_ENTRY(T, field, slot) {#T "." #field, offsetof(T, field), slot},
  return {LOOM_ABI_FROZEN_OFFSETS(LOOM_ENTRY)};
#undef LOOM_ENTRY
}

}  // namespace

TEST_CASE("every boundary struct starts with struct_size, the same in C99 and C++") {
  struct Entry {
    const char* name;
    size_t size, struct_size_at;
  };
#define LOOM_ENTRY(T) {#T, sizeof(T), offsetof(T, struct_size)},
  const std::vector<Entry> cpp = {LOOM_ABI_STRUCTS(LOOM_ENTRY)};
#undef LOOM_ENTRY
  REQUIRE(cpp.size() == 42);
  for (size_t i = 0; i < cpp.size(); ++i) {
    CAPTURE(cpp[i].name);
    CHECK(cpp[i].struct_size_at == 0);
    CHECK(loom_c_struct_size_field[i] == 0);
    CHECK(loom_c_struct_sizes[i] == cpp[i].size);
  }
}

TEST_CASE("frozen offsets match the static asserts, in C99 and C++") {
  REQUIRE(sizeof(void*) == 8);  // the asserted slots are LP64 slots
  const auto offsets = cpp_offsets();
  for (size_t i = 0; i < offsets.size(); ++i) {
    CAPTURE(offsets[i].name);
    CHECK(offsets[i].cpp == offsets[i].slot * 8);
    CHECK(loom_c_frozen_offsets[i] == offsets[i].cpp);
  }
  // A few spelled out, so a wrong list above cannot hide a moved field.
  CHECK(offsetof(loom_plugin_info, abi_major) == 8);
  CHECK(offsetof(loom_plugin_info, register_components) == 40);
  CHECK(offsetof(loom_host_api, config_has) == 96);
  CHECK(offsetof(loom_component, options) == 32);
  CHECK(offsetof(loom_tracker_vtable, note) == 32);
  CHECK(sizeof(loom_tracker_vtable) == 72);  // ABI 1.6 appended finish
  CHECK(offsetof(loom_control, request_eval) == 20);
  CHECK(sizeof(loom_option_spec) == 48);
  CHECK(sizeof(loom_model_vtable) == 112);     // ABI 1.15 appended attributes
  CHECK(sizeof(loom_model_forward_args) == 104);  // ABI 1.17 appended layer_begin .. hidden_out
  CHECK(sizeof(loom_model_attributes) == 24);  // struct_size, sequence_, expert_, (1.16) context_ and (1.17) pipeline_
  CHECK(sizeof(loom_host_api) == 136);         // ABI 1.19 appended param_write
  CHECK(sizeof(loom_param_created_args) == 24);
  CHECK(sizeof(loom_param_write_args) == 32);
  CHECK(sizeof(loom_dataset_info_args) == 24);  // ABI 1.20 appended resumes_other_world_size
  CHECK(sizeof(loom_optimizer_step_args) == 48);  // ABI 1.21 appended range_group .. range_end
}

TEST_CASE("the offset list covers exactly the headers' LOOM_ABI_OFFSET asserts") {
  std::set<std::string> listed;
  for (const auto& o : cpp_offsets()) listed.insert(o.name + "@" + std::to_string(o.slot));

  std::set<std::string> asserted;
  const std::regex pattern(R"(LOOM_ABI_OFFSET\((\w+),\s*(\w+),\s*(\d+)\);)");
  for (const char* header : {"core.h", "model.h", "dataset.h", "optimizer.h", "schedule.h", "checkpoint.h",
                             "tracker.h", "hook.h"}) {
    std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/sdk/include/loom/" + header);
    REQUIRE_MESSAGE(in.good(), header);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (std::sregex_iterator it(s.begin(), s.end(), pattern), end; it != end; ++it)
      asserted.insert((*it)[1].str() + "." + (*it)[2].str() + "@" + (*it)[3].str());
  }
  CHECK(asserted.size() >= 30);
  CHECK(asserted == listed);
}
