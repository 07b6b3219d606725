// sqlite.cpp: the `sqlite` tracker. Every run writes into one SQLite database (by default
// runs.sqlite in run.dir, shared by every run there), so runs can be queried and compared
// with SQL:
//
//   SELECT run, step, value FROM run_metrics WHERE metric = 'loss' ORDER BY run, step;
//
// Torch-free; only rank 0 writes. Several processes may write the same database at once:
// WAL mode, a busy timeout and whole-transaction retries on SQLITE_BUSY keep it consistent.
//
// Schema (version 2; PRAGMA application_id = 0x4C4F4F4D "LOOM", PRAGMA user_version = 2; a
// version 1 database is upgraded in place, its old runs getting a NULL status):
//
//   runs(id INTEGER PRIMARY KEY,
//        run_dir TEXT NOT NULL UNIQUE,  -- absolute run directory: identifies the run, so a
//                                       -- resumed run reuses its row
//        name TEXT NOT NULL,            -- run.name (the run directory's last component)
//        config TEXT,                   -- resolved manifest (TOML) of the latest start; may be NULL
//        world_size INTEGER NOT NULL,
//        total_steps INTEGER NOT NULL,  -- run.steps of the latest start
//        hostname TEXT,
//        started_at REAL NOT NULL,      -- Unix seconds of the first start
//        updated_at REAL NOT NULL,      -- Unix seconds of the latest start or log
//        starts INTEGER NOT NULL,       -- processes that have run it: 1 + resumes/restarts
//        status TEXT,                   -- 'running', 'finished', 'interrupted' (a signal; it
//                                       -- resumes) or 'failed'; a killed process leaves 'running'
//        ended_at REAL,                 -- Unix seconds the latest start ended; NULL while running
//        end_message TEXT)              -- why it failed; NULL otherwise
//   params(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
//          key TEXT NOT NULL,           -- the resolved manifest flattened: "optimizer.lr",
//                                       -- "run.steps", "trackers.0.use"
//          value,                       -- INTEGER, REAL or TEXT as in the manifest (bools 0/1,
//                                       -- arrays of values as TOML text)
//          PRIMARY KEY (run_id, key)) WITHOUT ROWID
//   VIEW run_params(run, run_id, key, value)                           -- params joined to names
//   metrics(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
//           step INTEGER NOT NULL,      -- optimizer steps completed
//           name TEXT NOT NULL,         -- "loss", "lr", "grad_norm", "tokens_per_s", ...
//           value REAL,                 -- NULL for NaN (SQLite has no NaN); +-inf kept
//           wall_time REAL NOT NULL,    -- Unix seconds when logged
//           PRIMARY KEY (run_id, step, name)) WITHOUT ROWID
//   notes(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
//         wall_time REAL NOT NULL, step INTEGER, text TEXT NOT NULL)  -- append-only event log
//   VIEW run_metrics(run, run_id, step, metric, value, wall_time)      -- metrics joined to names
//
//   SELECT run, value FROM run_params WHERE key = 'optimizer.lr';     -- hyperparameters by SQL
//
// Resume: resume(N) deletes this run's metrics with step > N (the interrupted run's future).
// Independently, the first log of a process at step S supersedes any rows at steps >= S, so a
// run restarted without a checkpoint never leaves duplicated or backward steps either.
#include <loom/tracker.hpp>

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <toml++/toml.h>

namespace fs = std::filesystem;

namespace {

constexpr int kSchemaVersion = 2;
constexpr int kApplicationId = 0x4C4F4F4D;  // "LOOM"

constexpr const char* kSchema = R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  run_dir TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  config TEXT,
  world_size INTEGER NOT NULL,
  total_steps INTEGER NOT NULL,
  hostname TEXT,
  started_at REAL NOT NULL,
  updated_at REAL NOT NULL,
  starts INTEGER NOT NULL DEFAULT 1,
  status TEXT,
  ended_at REAL,
  end_message TEXT
);
CREATE TABLE metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  name TEXT NOT NULL,
  value REAL,
  wall_time REAL NOT NULL,
  PRIMARY KEY (run_id, step, name)
) WITHOUT ROWID;
CREATE TABLE notes (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  wall_time REAL NOT NULL,
  step INTEGER,
  text TEXT NOT NULL
);
CREATE INDEX notes_by_run ON notes(run_id, wall_time);
CREATE VIEW run_metrics AS
  SELECT runs.name AS run, metrics.run_id AS run_id, metrics.step AS step, metrics.name AS metric,
         metrics.value AS value, metrics.wall_time AS wall_time
  FROM metrics JOIN runs ON runs.id = metrics.run_id;
)sql";

// What version 2 added; a version 1 database gets it by upgrade, a new one with the schema.
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE params (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value,
  PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE VIEW run_params AS
  SELECT runs.name AS run, params.run_id AS run_id, params.key AS key, params.value AS value
  FROM params JOIN runs ON runs.id = params.run_id;
)sql";
constexpr const char* kUpgradeV1 = R"sql(
ALTER TABLE runs ADD COLUMN status TEXT;
ALTER TABLE runs ADD COLUMN ended_at REAL;
ALTER TABLE runs ADD COLUMN end_message TEXT;
)sql";

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// SQLite gave SQLITE_BUSY or SQLITE_LOCKED: the whole transaction is worth retrying.
struct Busy {};

// One connection. Every call either succeeds or throws loom::Error naming the database file,
// or Busy when another writer holds the lock past the busy timeout.
class Database {
 public:
  Database(const std::string& path, int busy_timeout_ms) : path_(path), busy_timeout_ms_(busy_timeout_ms) {
    const int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    if (rc != SQLITE_OK) {
      const std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close(db_);
      throw loom::Error("sqlite: cannot open '" + path + "': " + why);
    }
    sqlite3_busy_timeout(db_, busy_timeout_ms);
    sqlite3_extended_result_codes(db_, 1);
  }
  ~Database() { sqlite3_close_v2(db_); }
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }

  // A prepared statement, finalized when it goes out of scope.
  class Statement {
   public:
    Statement(Database& db, const char* sql) : db_(db) {
      db.check(sqlite3_prepare_v2(db.db_, sql, -1, &stmt_, nullptr), sql);
    }
    ~Statement() { sqlite3_finalize(stmt_); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
    Statement& bind(int i, int64_t v) { return bound(sqlite3_bind_int64(stmt_, i, v)); }
    Statement& bind(int i, double v) { return bound(sqlite3_bind_double(stmt_, i, v)); }  // NaN -> NULL
    Statement& bind(int i, const std::string& v) {
      return bound(sqlite3_bind_text(stmt_, i, v.data(), int(v.size()), SQLITE_TRANSIENT));
    }
    Statement& bind_null(int i) { return bound(sqlite3_bind_null(stmt_, i)); }
    // Steps once: true while a row is available.
    bool step() {
      const int rc = sqlite3_step(stmt_);
      if (rc == SQLITE_ROW) return true;
      if (rc != SQLITE_DONE) db_.check(rc, sqlite3_sql(stmt_));
      return false;
    }
    void run() {
      while (step()) {
      }
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
    int64_t integer(int column) const { return sqlite3_column_int64(stmt_, column); }
    std::string text(int column) const {
      const unsigned char* t = sqlite3_column_text(stmt_, column);
      return t ? reinterpret_cast<const char*>(t) : "";
    }

   private:
    Statement& bound(int rc) {
      db_.check(rc, sqlite3_sql(stmt_));
      return *this;
    }
    Database& db_;
    sqlite3_stmt* stmt_ = nullptr;
  };

  void exec(const char* sql) {
    char* message = nullptr;
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &message);
    const std::string why = message ? message : "";
    sqlite3_free(message);
    if (rc != SQLITE_OK) check(rc, sql, why);
  }

  int64_t pragma_int(const char* sql) {
    Statement s(*this, sql);
    return s.step() ? s.integer(0) : 0;
  }

  // Runs body(), retrying it while another writer holds the lock past the busy timeout or WAL
  // recovery is in progress: with backoff, for up to twice the busy timeout in all.
  template <class Fn>
  void retrying(const char* what, Fn&& body) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2 * busy_timeout_ms_ + 100);
    auto backoff = std::chrono::milliseconds(1);
    for (;;) {
      try {
        body();
        return;
      } catch (const Busy&) {
        if (std::chrono::steady_clock::now() >= deadline)
          throw loom::Error("sqlite: '" + path_ + "' stayed locked by another writer for more than " +
                                std::to_string(busy_timeout_ms_) + " ms while trying to " + what +
                                "; raise busy_timeout_ms",
                            LOOM_STATUS_CODE_INTERNAL);
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
      }
    }
  }

  // Runs body() between BEGIN IMMEDIATE and COMMIT, retried whole (see retrying). IMMEDIATE
  // takes the write lock up front, waiting out the busy timeout, so a transaction never fails
  // half-way on a lock upgrade; any failure rolls everything back. begin = "BEGIN" makes a
  // read transaction: its statements all see one snapshot, whatever other writers commit.
  template <class Fn>
  void transaction(const char* what, Fn&& body, const char* begin = "BEGIN IMMEDIATE") {
    retrying(what, [&] {
      try {
        exec(begin);
        body();
        exec("COMMIT");
      } catch (...) {
        rollback();
        throw;
      }
    });
  }

 private:
  void rollback() {
    if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

  void check(int rc, const char* sql, const std::string& detail = "") {
    if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return;
    const int primary = rc & 0xff;
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) throw Busy{};
    std::string why = detail.empty() ? sqlite3_errmsg(db_) : detail;
    throw loom::Error("sqlite: '" + path_ + "': " + why + " (" + sqlite3_errstr(rc) + ") in: " + sql,
                      LOOM_STATUS_CODE_INTERNAL);
  }

  std::string path_;
  int busy_timeout_ms_;
  sqlite3* db_ = nullptr;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string hostname() {
  char buf[256] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? buf : "";
}

class Sqlite final : public loom::Tracker {
 public:
  static constexpr const char* name = "sqlite";
  static constexpr const char* summary = "Runs, resolved configs and metrics in one shared SQLite database.";
  static constexpr loom_option_spec options[] = {
      loom::option("path", LOOM_OPTION_TYPE_STRING, "../runs.sqlite",
                   "Database file; relative to the run directory, so the default is runs.sqlite in run.dir."),
      loom::option("busy_timeout_ms", LOOM_OPTION_TYPE_INT, "5000",
                   "How long to wait for another writer's lock before retrying, in milliseconds."),
  };

  Sqlite(const loom::Config& c, const loom::Context& ctx) {
    if (ctx.rank != 0) return;  // only rank 0 writes
    const int64_t timeout = c.i64("busy_timeout_ms");
    if (timeout < 0 || timeout > 3600 * 1000)
      throw loom::Error("sqlite: busy_timeout_ms must be between 0 and 3600000, got " + std::to_string(timeout));
    const std::string option = c.str("path");
    if (option.empty()) throw loom::Error("sqlite: path is empty; set it to a file such as \"../runs.sqlite\"");
    const fs::path run_dir = fs::weakly_canonical(fs::absolute(ctx.run_dir));
    const fs::path path = (run_dir / option).lexically_normal();  // an absolute option replaces run_dir
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    db_ = std::make_unique<Database>(path.string(), int(timeout));
    open_schema();
    register_run(run_dir, ctx);
  }

  void log(int64_t step, const Metrics& metrics) override {
    if (!db_) return;
    const double wall = now_seconds();
    db_->transaction("log metrics", [&] {
      if (!logged_) {  // this process's history supersedes whatever was logged from here on
        Database::Statement drop(*db_, "DELETE FROM metrics WHERE run_id = ?1 AND step >= ?2");
        drop.bind(1, run_id_).bind(2, step).run();
      }
      Database::Statement insert(*db_,
                                 "INSERT OR REPLACE INTO metrics(run_id, step, name, value, wall_time) "
                                 "VALUES (?1, ?2, ?3, ?4, ?5)");
      for (const loom::Metric& m : metrics) {
        if (m.name == nullptr) continue;
        insert.bind(1, run_id_).bind(2, step).bind(3, std::string(m.name)).bind(4, m.value).bind(5, wall).run();
      }
      Database::Statement touch(*db_, "UPDATE runs SET updated_at = ?2 WHERE id = ?1");
      touch.bind(1, run_id_).bind(2, wall).run();
    });
    logged_ = true;
    last_step_ = step;
  }

  void note(const char* text) override {
    if (!db_ || text == nullptr) return;
    db_->transaction("add a note", [&] {
      Database::Statement insert(*db_, "INSERT INTO notes(run_id, wall_time, step, text) VALUES (?1, ?2, ?3, ?4)");
      insert.bind(1, run_id_).bind(2, now_seconds());
      if (last_step_ >= 0) insert.bind(3, last_step_);
      else insert.bind_null(3);
      insert.bind(4, std::string(text)).run();
    });
  }

  void resume(int64_t step) override {
    if (!db_) return;
    db_->transaction("drop metrics past the resumed step", [&] {
      Database::Statement drop(*db_, "DELETE FROM metrics WHERE run_id = ?1 AND step > ?2");
      drop.bind(1, run_id_).bind(2, step).run();
    });
    logged_ = true;  // resume() already dropped exactly what is stale
    last_step_ = step;
  }

 private:
  // Checks the file is empty or ours (and not newer), then switches to WAL and creates the
  // schema. A file holding anything else is refused before it is changed in any way.
  void open_schema() {
    // One snapshot: read statement by statement, a schema another run commits in between
    // would look like a half-made database that is not ours.
    db_->transaction("read the schema version", [&] { check_identity(); }, "BEGIN");
    std::string mode;
    db_->retrying("enable WAL mode", [&] {  // needs a moment without other writers
      Database::Statement wal(*db_, "PRAGMA journal_mode = WAL");
      mode = wal.step() ? wal.text(0) : "";
    });
    if (mode != "wal")
      loom::log(LOOM_LOG_LEVEL_WARN, "sqlite",
                db_->path() + ": WAL mode unavailable (journal_mode " + mode +
                    "); writes stay safe but concurrent runs wait on each other");
    db_->exec("PRAGMA synchronous = NORMAL");  // safe in WAL: a crash loses at most the last commits
    db_->exec("PRAGMA foreign_keys = ON");
    db_->transaction("create the schema", [&] {
      const bool empty = check_identity();
      const int64_t version = db_->pragma_int("PRAGMA user_version");
      if (!empty && version == kSchemaVersion) return;
      if (empty) db_->exec(kSchema);
      else db_->exec(kUpgradeV1);  // check_identity let through only versions 1 and 2
      db_->exec(kSchemaV2);
      db_->exec(("PRAGMA application_id = " + std::to_string(kApplicationId)).c_str());
      db_->exec(("PRAGMA user_version = " + std::to_string(kSchemaVersion)).c_str());
    });
  }

  // True when the database is empty (needs the schema); false when it is ours; throws otherwise.
  bool check_identity() {
    const int64_t app = db_->pragma_int("PRAGMA application_id");
    const int64_t version = db_->pragma_int("PRAGMA user_version");
    const int64_t tables = db_->pragma_int("SELECT count(*) FROM sqlite_master");
    if (app == 0 && version == 0 && tables == 0) return true;
    if (app != kApplicationId)
      throw loom::Error("sqlite: '" + db_->path() +
                        "' is not a Loom metrics database (it holds other data); set the sqlite tracker's "
                        "path to a new file");
    if (version > kSchemaVersion)
      throw loom::Error("sqlite: '" + db_->path() + "' has schema version " + std::to_string(version) +
                        ", newer than this plugin's " + std::to_string(kSchemaVersion) +
                        "; use a newer sqlite tracker or another path");
    return false;
  }

  // Inserts the run's row, or reuses the row of the same run directory (a resumed run).
  void register_run(const fs::path& run_dir, const loom::Context& ctx) {
    const fs::path manifest = run_dir / "manifest.toml";
    const bool has_config = fs::exists(manifest);
    const std::string config = has_config ? read_text(manifest) : "";
    const double now = now_seconds();
    db_->transaction("register the run", [&] {
      Database::Statement upsert(
          *db_,
          "INSERT INTO runs(run_dir, name, config, world_size, total_steps, hostname, started_at, updated_at, status) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, 'running') "
          "ON CONFLICT(run_dir) DO UPDATE SET name = excluded.name, config = excluded.config, "
          "world_size = excluded.world_size, total_steps = excluded.total_steps, hostname = excluded.hostname, "
          "updated_at = excluded.updated_at, starts = starts + 1, status = 'running', ended_at = NULL, "
          "end_message = NULL");
      upsert.bind(1, run_dir.string()).bind(2, run_dir.filename().string());
      if (has_config) upsert.bind(3, config);
      else upsert.bind_null(3);
      upsert.bind(4, int64_t(ctx.world_size)).bind(5, ctx.total_steps).bind(6, hostname()).bind(7, now).run();
      Database::Statement id(*db_, "SELECT id FROM runs WHERE run_dir = ?1");
      id.bind(1, run_dir.string());
      if (!id.step()) throw loom::Error("sqlite: '" + db_->path() + "': the run's row vanished", LOOM_STATUS_CODE_INTERNAL);
      run_id_ = id.integer(0);
      Database::Statement clear(*db_, "DELETE FROM params WHERE run_id = ?1");
      clear.bind(1, run_id_).run();
      if (has_config) store_params(config);
    });
  }

  // The resolved manifest as one row per leaf value, so hyperparameters are plain SQL.
  void store_params(const std::string& config) {
    toml::table root;
    try {
      root = toml::parse(config);
    } catch (const toml::parse_error&) {
      return;  // not the host's TOML: the config text column still has it
    }
    Database::Statement insert(*db_, "INSERT OR REPLACE INTO params(run_id, key, value) VALUES (?1, ?2, ?3)");
    const auto store = [&](const std::string& key, const toml::node& value) {
      insert.bind(1, run_id_).bind(2, key);
      if (auto i = value.value_exact<int64_t>()) insert.bind(3, *i);
      else if (auto d = value.value_exact<double>()) insert.bind(3, *d);
      else if (auto b = value.value_exact<bool>()) insert.bind(3, int64_t(*b));
      else if (auto t = value.value_exact<std::string>()) insert.bind(3, *t);
      else {
        std::ostringstream text;
        text << toml::toml_formatter(value);  // arrays of values, dates
        insert.bind(3, text.str());
      }
      insert.run();
    };
    // Iterative walk (a config is shallow, but nothing here recurses on input).
    std::vector<std::pair<std::string, const toml::node*>> todo = {{"", &root}};
    while (!todo.empty()) {
      const auto [prefix, node] = todo.back();
      todo.pop_back();
      const std::string dot = prefix.empty() ? "" : prefix + ".";
      if (const toml::table* t = node->as_table()) {
        for (const auto& [k, v] : *t) todo.emplace_back(dot + std::string(k.str()), &v);
      } else if (const toml::array* a = node->as_array(); a && a->is_array_of_tables()) {
        for (size_t i = 0; i < a->size(); ++i) todo.emplace_back(dot + std::to_string(i), a->get(i));
      } else {
        store(prefix, *node);
      }
    }
  }

  void finish(loom_run_outcome outcome, int64_t, const std::string& message) override {
    if (!db_) return;
    const char* status = outcome == LOOM_RUN_FINISHED      ? "finished"
                         : outcome == LOOM_RUN_INTERRUPTED ? "interrupted"
                                                           : "failed";
    const double now = now_seconds();
    db_->transaction("record how the run ended", [&] {
      Database::Statement end(*db_,
                              "UPDATE runs SET status = ?2, ended_at = ?3, updated_at = ?3, end_message = ?4 WHERE id = ?1");
      end.bind(1, run_id_).bind(2, std::string(status)).bind(3, now);
      if (message.empty()) end.bind_null(4);
      else end.bind(4, message);
      end.run();
    });
  }

  std::unique_ptr<Database> db_;  // null on ranks other than 0
  int64_t run_id_ = 0;
  bool logged_ = false;     // this process has logged (or resumed): earlier rows are settled
  int64_t last_step_ = -1;  // for notes; -1 before any log or resume
};

}  // namespace

LOOM_PLUGIN("sqlite", "0.1.0", loom::component<Sqlite>())
