// The host's own manifest tables ([run], [checkpoint], [[trackers]], [eval_data],
// [distributed]): each option is declared once, bound to the settings field it fills, and its
// documented default is what a manifest that leaves it out gets.
#include <doctest/doctest.h>

#include <toml++/toml.h>

#include <algorithm>

#include "base/failure.hpp"
#include "config/host_tables.hpp"
#include "config/options.hpp"

using namespace loom;

namespace {

// Resolves `text` as the body of one host table, the way config/plan.cpp does.
template <class Settings>
Settings resolve(const HostTable<Settings>& table, const std::string& text) {
  const toml::table parsed = toml::parse(std::string_view(text), std::string_view("m.toml"));
  auto values = resolve_options(parsed, table.specs(), table.title, "test", {});
  Settings out;
  table.take(values, &parsed, out);
  CHECK(values.empty());  // every value went to a field
  return out;
}

template <class Settings>
std::string failure_of(const HostTable<Settings>& table, const std::string& text) {
  try {
    resolve(table, text);
  } catch (const Failure& f) {
    CHECK(f.code() == ExitCode::usage);
    return f.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an empty table resolves to the documented defaults, and they are the structs' initializers") {
  const RunSettings run = resolve(run_table(), "");
  CHECK(run.clip_grad_norm == 1.0);  // documented as 1.0; the struct once said 0.0
  CHECK(run.steps == 100);
  CHECK(run.name == "run");
  CHECK(run.precision == Precision::fp32);
  for (const HostTableDoc& doc : host_table_docs()) {
    CAPTURE(doc.name);
    for (const OptionSpec& spec : doc.options) {
      CAPTURE(spec.name);
      REQUIRE(spec.default_text.has_value());
      CHECK_FALSE(spec.required);
      CHECK_FALSE(spec.doc.empty());
      CHECK_NOTHROW(parse_default(spec));  // `host describe` shows a value of the declared type
    }
  }
  const auto run_defaults = run_table().specs();
  const auto clip = std::find_if(run_defaults.begin(), run_defaults.end(),
                                 [](const OptionSpec& s) { return s.name == "clip_grad_norm"; });
  REQUIRE(clip != run_defaults.end());
  CHECK(*clip->default_text == "1.0");
  const DistributedSettings distributed = resolve(distributed_table(), "");
  CHECK(distributed.backend == "auto");
  CHECK(distributed.bucket_mb == 25.0);
  CHECK(resolve(eval_data_table(), "").max_batches == 50);
  CHECK(resolve(tracker_table(), "").required == false);
  CHECK(resolve(checkpoint_table(), "").keep == 3);
}

TEST_CASE("values reach their fields, with the key's position in each rule's message") {
  const RunSettings run = resolve(run_table(), "steps = 7\nprecision = \"bf16\"\ndevice = \"cpu\"\nseed = 5");
  CHECK(run.steps == 7);
  CHECK(run.precision == Precision::bf16);
  CHECK(run.device == "cpu");
  CHECK(run.device_at == "m.toml:3:10");
  CHECK(run.seed == 5);
  CHECK(failure_of(run_table(), "log_every = 1\nsteps = 0") == "m.toml:2:9: [run] steps must be at least 1");
  CHECK(failure_of(run_table(), "clip_grad_norm = -1.0") == "m.toml:1:18: [run] clip_grad_norm must be >= 0");
  CHECK(failure_of(run_table(), "name = \"a/b\"") ==
        "m.toml:1:8: [run] name must be one folder name: not empty, \".\" or \"..\", no '/', '\\' or control "
        "characters, at most 255 bytes");
  CHECK(failure_of(run_table(), "precision = \"fp16\"").find("is not a precision") != std::string::npos);
  CHECK(failure_of(distributed_table(), "backend = \"mpi\"") ==
        "m.toml:1:11: [distributed] backend must be \"auto\", \"gloo\" or \"nccl\"");
  CHECK(failure_of(distributed_table(), "timeout_s = 0") == "m.toml:1:13: [distributed] timeout_s must be > 0.0");
  CHECK(failure_of(checkpoint_table(), "keep = 0") == "m.toml:1:8: [checkpoint] keep must be at least 1");
}
