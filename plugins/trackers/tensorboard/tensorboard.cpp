// tensorboard.cpp: the `tensorboard` tracker. It writes real TensorBoard event files, so
// `tensorboard --logdir <run dir>/tensorboard` shows the run. Torch-free; only rank 0 writes.
//
// What goes in, per process, into a new file <run_dir>/<dir>/events.out.tfevents.<t>.<host>.<pid>.loom:
//   - the file_version record "brain.Event:2" (first record of every file);
//   - scalars: one Event per metric per log call. Tags are grouped for the dashboard: metric
//     "eval_<x>" becomes "eval/<x>", every other metric "<name>" becomes "train/<name>";
//   - text, tag "manifest": the resolved <run_dir>/manifest.toml as a fenced TOML block;
//   - hparams, tag "_hparams_/session_start_info": every flat manifest value ("optimizer.lr",
//     "trackers[1].use", "plugins.paths[0]") for the HParams dashboard (option hparams);
//   - notes from the host (tag "notes", text), attached to the next logged step.
// The manifest text and hparams go at step 0 when the folder holds no earlier event file;
// a later session of the same run (a resume) writes only the text, at its first step.
//
// Resume. TensorBoard reads a folder's files in name order, and when it meets a SessionLog
// START it discards every point it has read so far whose step >= that START's step (the purge
// in tensorboard/backend/event_processing/event_accumulator.py, active for file_version 2).
// resume(N) means the run continues with step N+1, so it writes START at step N+1: what the
// interrupted run logged after the checkpoint disappears, and step N itself, logged before
// the checkpoint was saved, stays. (A START at N would drop step N too.) A session that logs
// before any resume() call (a restart with no checkpoint) writes START at its first logged
// step instead; one that ends before either (a resume refused for a changed manifest) writes
// no START and supersedes nothing. File names sort in creation order (event_file.hpp), so
// the purge always applies to the older files.
#include <loom/tracker.hpp>

#include <toml++/toml.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "event_file.hpp"
#include "loom_tb_event.pb.h"
#include "loom_tb_hparams.pb.h"

namespace {

namespace fs = std::filesystem;
using loom::tb::Event;
using loom::tb::Summary;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string tag_for(const std::string& metric) {
  if (metric.rfind("eval_", 0) == 0 && metric.size() > 5) return "eval/" + metric.substr(5);
  return "train/" + metric;
}

Event event_at(int64_t step) {
  Event e;
  e.set_wall_time(now_seconds());
  e.set_step(step);
  return e;
}

Event scalar(int64_t step, const std::string& tag, double value) {
  Event e = event_at(step);
  Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  // TensorBoard keeps float32; a finite double beyond its range becomes +-inf (a plain cast
  // would be undefined behaviour).
  const float inf = std::numeric_limits<float>::infinity();
  const bool too_large = std::isfinite(value) && std::fabs(value) > double(std::numeric_limits<float>::max());
  v->set_simple_value(too_large ? (value > 0 ? inf : -inf) : static_cast<float>(value));
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("scalars");
  v->mutable_metadata()->set_data_class(loom::tb::DATA_CLASS_SCALAR);
  return e;
}

// A text summary: a DT_STRING scalar tensor under the "text" plugin (rendered as Markdown).
Event text(int64_t step, const std::string& tag, const std::string& markdown) {
  Event e = event_at(step);
  Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  v->mutable_metadata()->set_data_class(loom::tb::DATA_CLASS_TENSOR);
  v->mutable_tensor()->set_dtype(loom::tb::DT_STRING);
  v->mutable_tensor()->add_string_val(markdown);
  return e;
}

Event session_start(int64_t step) {
  Event e = event_at(step);
  e.mutable_session_log()->set_status(loom::tb::SessionLog::START);
  return e;
}

// Flattens a parsed manifest into hparams: tables join keys with '.', arrays index with [i].
void flatten(const toml::node& node, const std::string& key,
             google::protobuf::Map<std::string, google::protobuf::Value>& out) {
  if (const toml::table* t = node.as_table()) {
    for (auto&& [k, v] : *t) flatten(v, key.empty() ? std::string(k.str()) : key + "." + std::string(k.str()), out);
  } else if (const toml::array* a = node.as_array()) {
    for (size_t i = 0; i < a->size(); ++i) flatten(*a->get(i), key + "[" + std::to_string(i) + "]", out);
  } else if (auto b = node.value_exact<bool>()) {
    out[key].set_bool_value(*b);
  } else if (auto i = node.value_exact<int64_t>()) {
    out[key].set_number_value(static_cast<double>(*i));
  } else if (auto f = node.value_exact<double>()) {
    out[key].set_number_value(*f);
  } else if (auto s = node.value_exact<std::string>()) {
    out[key].set_string_value(*s);
  } else {  // dates and times: their TOML text
    std::ostringstream text;
    node.visit([&](auto&& n) { text << n; });
    out[key].set_string_value(text.str());
  }
}

Event hparams(const toml::table& manifest) {
  loom::tb::HParamsPluginData data;
  data.set_version(0);  // the hparams plugin's PLUGIN_DATA_VERSION
  loom::tb::SessionStartInfo* info = data.mutable_session_start_info();
  flatten(manifest, "", *info->mutable_hparams());
  info->set_start_time_secs(now_seconds());
  Event e = event_at(0);
  Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag("_hparams_/session_start_info");
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("hparams");
  v->mutable_metadata()->mutable_plugin_data()->set_content(data.SerializeAsString());
  v->mutable_metadata()->set_data_class(loom::tb::DATA_CLASS_TENSOR);
  v->mutable_tensor()->set_dtype(loom::tb::DT_FLOAT);  // an empty float vector: metadata only
  v->mutable_tensor()->mutable_tensor_shape()->add_dim()->set_size(0);
  return e;
}

bool has_event_files(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().find("tfevents") != std::string::npos) return true;
  return false;
}

class TensorBoard final : public loom::Tracker {
 public:
  static constexpr const char* name = "tensorboard";
  static constexpr const char* summary = "TensorBoard event files: scalars, the manifest as text, hparams.";
  static constexpr loom_option_spec options[] = {
      loom::option("dir", LOOM_OPTION_TYPE_STRING, "tensorboard",
                   "Folder for the event files; a relative path is inside the run directory."),
      loom::option("hparams", LOOM_OPTION_TYPE_BOOL, "true",
                   "Record the manifest's values for TensorBoard's HParams dashboard."),
  };

  TensorBoard(const loom::Config& c, const loom::Context& ctx) : enabled_(ctx.rank == 0) {
    if (!enabled_) return;
    fs::path dir = c.str("dir");
    if (dir.empty()) throw loom::Error("tensorboard: dir is empty; set it to a folder such as \"tensorboard\"");
    if (dir.is_relative()) dir = fs::path(ctx.run_dir) / dir;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw loom::Error("tensorboard: cannot create '" + dir.string() + "': " + ec.message());
    first_session_ = !has_event_files(dir);
    want_hparams_ = c.flag("hparams");
    manifest_path_ = (fs::path(ctx.run_dir) / "manifest.toml").string();
    file_ = std::make_unique<loom_tb::EventFile>(dir.string());
    Event version = event_at(0);
    version.set_file_version("brain.Event:2");
    std::string out;
    add(out, version);
    file_->append(out);
  }

  ~TensorBoard() override {
    if (!enabled_) return;
    try {  // leftover notes are kept; a first session that never logged still gets its manifest
      std::string out;
      if (!started_ && first_session_) header(0, out);  // no START: nothing is superseded
      if (started_ || first_session_) flush_notes(last_step_ > last_note_step_ ? last_step_ : last_note_step_ + 1, out);
      if (!out.empty()) file_->append(out);
    } catch (const std::exception& e) {
      loom::log(LOOM_LOG_LEVEL_WARN, "tensorboard", e.what());
    }
  }

  void log(int64_t step, const Metrics& metrics) override {
    if (!enabled_) return;
    std::string out;
    if (!started_) start(step, out);
    for (const loom::Metric& m : metrics)
      if (m.name != nullptr) add(out, scalar(step, tag_for(m.name), m.value));
    if (step > last_note_step_) flush_notes(step, out);
    file_->append(out);
    last_step_ = step;
  }

  void resume(int64_t step) override {
    if (!enabled_) return;
    std::string out;
    if (started_) add(out, session_start(step + 1));  // a rollback in the middle of a run
    else start(step + 1, out);
    file_->append(out);
    last_step_ = step;
    last_note_step_ = step;  // notes from here on go to steps after the resume
  }

  void note(const char* line) override {
    if (!enabled_ || line == nullptr) return;
    if (!notes_.empty()) notes_ += "\n\n";  // one Markdown paragraph per note
    notes_ += line;
  }

 private:
  static void add(std::string& out, const Event& event) { loom_tb::append_record(out, event.SerializeAsString()); }

  // The first records of this session after file_version: START at `step`, then the manifest.
  void start(int64_t step, std::string& out) {
    started_ = true;
    add(out, session_start(step));
    header(first_session_ ? 0 : step, out);
  }

  // The manifest as text at `step`; in the folder's first session also the hparams.
  void header(int64_t step, std::string& out) {
    std::ifstream in(manifest_path_, std::ios::binary);
    if (!in) {
      loom::log(LOOM_LOG_LEVEL_WARN, "tensorboard", manifest_path_ + " is missing: no manifest text or hparams");
      return;
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string manifest = buffer.str();
    if (!manifest.empty() && manifest.back() != '\n') manifest += '\n';
    add(out, text(step, "manifest", "```toml\n" + manifest + "```\n"));
    if (!first_session_ || !want_hparams_) return;
    try {
      add(out, hparams(toml::parse(manifest, manifest_path_)));
    } catch (const toml::parse_error& e) {
      loom::log(LOOM_LOG_LEVEL_WARN, "tensorboard",
                manifest_path_ + ": not valid TOML, no hparams written: " + std::string(e.description()));
    }
  }

  void flush_notes(int64_t step, std::string& out) {
    if (notes_.empty()) return;
    add(out, text(step, "notes", notes_));
    notes_.clear();
    last_note_step_ = step;
  }

  bool enabled_;
  bool first_session_ = true;  // no event file was in the folder before this one
  bool want_hparams_ = true;
  bool started_ = false;       // the START record and manifest are written
  std::string manifest_path_;
  std::unique_ptr<loom_tb::EventFile> file_;
  int64_t last_step_ = 0;
  int64_t last_note_step_ = -1;  // notes' steps only go up
  std::string notes_;            // pending, written at the next step
};

}  // namespace

LOOM_PLUGIN("tensorboard", "0.1.0", loom::component<TensorBoard>())
