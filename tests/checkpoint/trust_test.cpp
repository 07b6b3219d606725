// A checkpoint folder is a trust boundary (issue 21): a folder someone hands over must not make
// the host read outside it, hang, or load nonsense quietly. Each damaged or hostile folder is
// tried three ways through the real host: `checkpoint inspect`, an explicit resume and
// `resume = "auto"` (which must skip it and resume from the older, intact checkpoint).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "run_host.hpp"
#include "formats/safetensors.hpp"

namespace fs = std::filesystem;
using loom_test::contains;
using loom_test::run_host;

namespace {

std::string manifest_for(const fs::path& dir) {
  const fs::path path = dir / "m.toml";
  std::ofstream(path) << "[run]\nname = \"r\"\ndir = \"" << dir.string()
                      << "\"\nsteps = 20\nlog_every = 5\nthreads = 1\npeak_flops = 1e9\n"
                         "[model]\nuse = \"mlp_lm\"\nn_embd = 16\ncontext = 2\nhidden = 32\n"
                         "[data]\nuse = \"synthetic\"\nbatch_size = 4\nseq_len = 16\n"
                         "[optimizer]\nuse = \"adamw\"\nlr = 0.01\n"
                         "[checkpoint]\nevery = 10\nkeep = 10\n";
  return path.string();
}

// One finished run with step-10 and step-20, made once and copied for every case.
const fs::path& pristine_run() {
  static const fs::path dir = [] {
    const fs::path d = loom_test::tmp_dir("ckpt-trust-pristine");
    const auto r = run_host("run " + manifest_for(d));
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return d;
  }();
  return dir;
}

struct Case {
  fs::path dir, step20, step10;
  std::string manifest;
};

Case fresh_case(const std::string& name) {
  Case c;
  c.dir = loom_test::tmp_dir("ckpt-trust-" + name);
  fs::copy(pristine_run() / "r", c.dir / "r", fs::copy_options::recursive);
  c.manifest = manifest_for(c.dir);
  c.step20 = c.dir / "r" / "checkpoints" / "step-20";
  c.step10 = c.dir / "r" / "checkpoints" / "step-10";
  return c;
}

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(loom_test::read_file(p)); }
void write_json(const fs::path& p, const nlohmann::json& j) { std::ofstream(p, std::ios::trunc) << j.dump(2); }

// Recomputes every listed file's size and checksum, as an attacker who edits a file would.
void reindex(const fs::path& step) {
  nlohmann::json index = read_json(step / "index.json");
  for (auto& file : index["files"]) {
    const std::string bytes = loom_test::read_file(step / file["path"].get<std::string>());
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH64(bytes.data(), bytes.size(), 0)));
    file["bytes"] = bytes.size();
    file["xxh64"] = hex;
  }
  write_json(step / "index.json", index);
}

// Rewrites step's state.safetensors through `edit` (tensor bytes by name, and the metadata
// JSON the host stored under "loom"), then re-indexes it so only the content is wrong.
void edit_state(const fs::path& step, const std::function<void(std::map<std::string, std::string>&, nlohmann::json&)>& edit) {
  const std::string path = (step / "state.safetensors").string();
  std::map<std::string, std::string> bytes;
  std::vector<loom::formats::OutgoingTensor> out;
  nlohmann::json meta;
  {
    const loom::formats::SafetensorsFile file(path);
    for (const auto& e : file.tensors())
      bytes[e.name] = std::string(reinterpret_cast<const char*>(file.data(e)), e.end - e.begin);
    meta = nlohmann::json::parse(file.metadata().at("loom"));
    edit(bytes, meta);
    for (const auto& e : file.tensors()) out.push_back({e.name, e.dtype, e.shape, bytes.at(e.name).data()});
  }
  loom::formats::write_safetensors(path, out, {{"format", "pt"}, {"loom", meta.dump()}});
  reindex(step);
}

// The three ways in. An explicit resume and inspect must refuse (exit 2) naming `phrase`;
// resume = auto must skip the folder and resume from step-10.
void expect_refused_everywhere(const Case& c, const fs::path& bad, const std::string& phrase) {
  const auto inspect = run_host("checkpoint inspect " + bad.string());
  const std::string said = inspect.out + inspect.err;
  CHECK_MESSAGE(inspect.code == 2, said);
  CHECK_MESSAGE(contains(said, phrase), said);

  const auto explicit_resume = run_host("run " + c.manifest + " --set run.steps=30 --set checkpoint.resume=" + bad.string());
  CHECK_MESSAGE(explicit_resume.code == 2, explicit_resume.err);
  CHECK_MESSAGE(contains(explicit_resume.err, phrase), explicit_resume.err);

  const auto automatic = run_host("run " + c.manifest + " --set run.steps=30");
  CHECK_MESSAGE(automatic.code == 0, automatic.err);
  CHECK_MESSAGE(contains(automatic.err, "skipping " + bad.string()), automatic.err);
  CHECK_MESSAGE(contains(automatic.err, "resumed from " + c.step10.string() + " at step 10"), automatic.err);
}

void add_index_entry(const fs::path& step, const std::string& name) {
  nlohmann::json index = read_json(step / "index.json");
  index["files"].push_back({{"path", name}, {"bytes", 0}, {"xxh64", "ef46db3751d8e999"}});
  write_json(step / "index.json", index);
}

}  // namespace

TEST_CASE("checkpoint trust: nothing outside the folder is read") {
  SUBCASE("an index entry with ..") {
    const Case c = fresh_case("dotdot");
    add_index_entry(c.step20, "../../../../../../etc/hostname");
    expect_refused_everywhere(c, c.step20, "not a plain path inside the checkpoint folder");
  }
  SUBCASE("an index entry with an absolute path") {
    const Case c = fresh_case("absolute");
    add_index_entry(c.step20, "/etc/hostname");
    expect_refused_everywhere(c, c.step20, "not a plain path inside the checkpoint folder");
  }
  SUBCASE("a state file that is a symbolic link to an identical copy elsewhere (its checksum matches)") {
    const Case c = fresh_case("file-link");
    const fs::path elsewhere = c.dir / "elsewhere.safetensors";
    fs::rename(c.step20 / "state.safetensors", elsewhere);
    fs::create_symlink(elsewhere, c.step20 / "state.safetensors");
    expect_refused_everywhere(c, c.step20, "symbolic link");
  }
  SUBCASE("a step folder that is a symbolic link to a valid checkpoint elsewhere") {
    const Case c = fresh_case("folder-link");
    const fs::path elsewhere = c.dir / "elsewhere-step-20";
    fs::rename(c.step20, elsewhere);
    fs::create_symlink(elsewhere, c.step20);
    expect_refused_everywhere(c, c.step20, "symbolic link");
  }
}

TEST_CASE("checkpoint trust: FIFOs and devices are refused at once, never read (no hang)") {
  SUBCASE("a FIFO next to the files") {
    const Case c = fresh_case("fifo-extra");
    REQUIRE(::mkfifo((c.step20 / "pipe").c_str(), 0600) == 0);
    expect_refused_everywhere(c, c.step20, "pipe is not a regular file");
  }
  SUBCASE("the state file replaced by a FIFO") {
    const Case c = fresh_case("fifo-state");
    fs::remove(c.step20 / "state.safetensors");
    REQUIRE(::mkfifo((c.step20 / "state.safetensors").c_str(), 0600) == 0);
    expect_refused_everywhere(c, c.step20, "state.safetensors is not a regular file");
  }
  SUBCASE("the state file a link to /dev/zero") {
    const Case c = fresh_case("dev-zero");
    fs::remove(c.step20 / "state.safetensors");
    fs::create_symlink("/dev/zero", c.step20 / "state.safetensors");
    expect_refused_everywhere(c, c.step20, "symbolic link");
  }
  SUBCASE("index.json itself a FIFO") {
    const Case c = fresh_case("fifo-index");
    fs::remove(c.step20 / "index.json");
    REQUIRE(::mkfifo((c.step20 / "index.json").c_str(), 0600) == 0);
    expect_refused_everywhere(c, c.step20, "index.json is not a regular file");
  }
}

TEST_CASE("checkpoint trust: what the index and metadata claim must be sane") {
  // One index field set to `value`; the refusal must say `phrase`.
  const auto index_field = [](const std::string& name, const char* field, const nlohmann::json& value,
                              const std::string& phrase) {
    const Case c = fresh_case(name);
    nlohmann::json index = read_json(c.step20 / "index.json");
    index[field] = value;
    write_json(c.step20 / "index.json", index);
    expect_refused_everywhere(c, c.step20, phrase);
  };
  SUBCASE("an index format version from the future") { index_field("future-index", "version", 7, "index version 7"); }
  SUBCASE("an index step that disagrees with the folder") {
    index_field("index-step", "step", 30, "the index says step 30 but the folder is step-20");
  }
  SUBCASE("a negative step in the index") { index_field("index-negative", "step", -5, "not a count"); }
  SUBCASE("a file in the folder that the index does not list") {
    const Case c = fresh_case("unlisted");
    std::ofstream(c.step20 / "extra.bin") << "not part of the save";
    expect_refused_everywhere(c, c.step20, "extra.bin is in the folder but not in its index");
  }
  SUBCASE("a metadata step that disagrees with the folder (checksums recomputed)") {
    const Case c = fresh_case("meta-step");
    edit_state(c.step20, [](auto&, nlohmann::json& meta) { meta["step"] = 999; });
    const auto r = run_host("run " + c.manifest + " --set run.steps=30 --set checkpoint.resume=" + c.step20.string());
    CHECK(r.code == 2);
    CHECK_MESSAGE(contains(r.err, "it says step 999 but its folder is step-20"), r.err);
  }
  SUBCASE("a negative token count in the metadata") {
    const Case c = fresh_case("meta-tokens");
    edit_state(c.step20, [](auto&, nlohmann::json& meta) { meta["tokens"] = -1; });
    const auto r = run_host("run " + c.manifest + " --set run.steps=30 --set checkpoint.resume=" + c.step20.string());
    CHECK(r.code == 2);
    CHECK_MESSAGE(contains(r.err, "token count -1 is out of range"), r.err);
  }
}

TEST_CASE("checkpoint trust: non-finite weights are refused unless allow_nonfinite, and inspect reports them") {
  const Case c = fresh_case("nonfinite");
  std::string poisoned;
  edit_state(c.step20, [&](std::map<std::string, std::string>& bytes, nlohmann::json&) {
    for (auto& [name, data] : bytes)
      if (name.rfind("model/", 0) == 0 && poisoned.empty()) {
        poisoned = name;
        const float values[2] = {std::nanf(""), INFINITY};
        std::memcpy(data.data(), values, sizeof values);
      }
  });
  REQUIRE(!poisoned.empty());
  const auto inspect = run_host("checkpoint inspect " + c.step20.string());
  CHECK(inspect.code == 0);  // a valid checkpoint: inspect shows what is in it
  CHECK_MESSAGE(contains(inspect.out, "NaN or infinite values in 1 tensors"), inspect.out);
  CHECK_MESSAGE(contains(inspect.out, poisoned + " (2 of "), inspect.out);

  const std::string resume = "run " + c.manifest + " --set run.steps=21 --set checkpoint.resume=" + c.step20.string();
  const auto refused = run_host(resume);
  CHECK(refused.code == 2);
  CHECK_MESSAGE(contains(refused.err, "NaN or infinite values in " + poisoned + " (2 of "), refused.err);
  CHECK_MESSAGE(contains(refused.err, "allow_nonfinite = true"), refused.err);

  const auto allowed = run_host(resume + " --set checkpoint.allow_nonfinite=true");
  CHECK_MESSAGE(contains(allowed.err, "resumed from " + c.step20.string()), allowed.err);
}

TEST_CASE("checkpoint trust: tensors nothing restores are an error unless allow_unclaimed, which names them") {
  const Case c = fresh_case("unclaimed");
  // The model of the run that wrote it, with one tensor more than this run restores.
  {
    const std::string path = (c.step20 / "state.safetensors").string();
    std::vector<loom::formats::OutgoingTensor> out;
    const loom::formats::SafetensorsFile file(path);
    for (const auto& e : file.tensors())
      out.push_back({e.name, e.dtype, e.shape, file.data(e)});
    const float extra[3] = {1, 2, 3};
    out.push_back({"optimizer/lazy_momentum.0", loom::formats::dtype_named("F32"), {3}, extra});
    const std::string tmp = path + ".new";
    loom::formats::write_safetensors(tmp, out, file.metadata());
    fs::rename(tmp, path);
  }
  reindex(c.step20);
  const std::string resume = "run " + c.manifest + " --set run.steps=21 --set checkpoint.resume=" + c.step20.string();
  const auto refused = run_host(resume);
  CHECK(refused.code == 2);
  CHECK_MESSAGE(contains(refused.err, "nothing in this run restores: optimizer/lazy_momentum.0"), refused.err);
  const auto allowed = run_host(resume + " --set checkpoint.allow_unclaimed=true");
  CHECK_MESSAGE(allowed.code == 0, allowed.err);
  CHECK_MESSAGE(contains(allowed.err, "not restored: optimizer/lazy_momentum.0"), allowed.err);
}
