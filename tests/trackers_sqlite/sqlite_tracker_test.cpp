// The sqlite tracker through the real host binary: the run's row, its resolved config and every
// metric equal what metrics.jsonl holds; the run's status and hyperparameters are plain SQL; four hosts writing one database at once leave it
// intact and complete; a resume from an older checkpoint leaves every step once, in order; a
// file that is not a Loom database is refused with a clear message.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "run_host.hpp"
#include "small_run.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;
using loom_test::run_shell;

namespace {

const std::string kSqlite = "[[trackers]]\nuse = \"sqlite\"\n";

// A read-only connection; query() returns every row with each column as text (NULL -> "NULL").
class Db {
 public:
  explicit Db(const fs::path& path) {
    REQUIRE_MESSAGE(fs::exists(path), path.string());
    REQUIRE(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  }
  ~Db() { sqlite3_close(db_); }
  std::vector<std::vector<std::string>> query(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    REQUIRE_MESSAGE(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) == SQLITE_OK, sqlite3_errmsg(db_));
    std::vector<std::vector<std::string>> rows;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int i = 0; i < sqlite3_column_count(s); ++i) {
        const auto* t = sqlite3_column_text(s, i);
        row.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
      }
      rows.push_back(row);
    }
    CHECK_MESSAGE(rc == SQLITE_DONE, sqlite3_errmsg(db_));
    sqlite3_finalize(s);
    return rows;
  }
  std::string one(const std::string& sql) {
    const auto rows = query(sql);
    REQUIRE_MESSAGE(rows.size() == 1, sql);
    return rows[0].at(0);
  }
  // (step, name) -> value of one run, read as doubles (exactly what was bound).
  std::map<std::pair<int64_t, std::string>, double> metrics(const std::string& run_name) {
    sqlite3_stmt* s = nullptr;
    const std::string sql =
        "SELECT step, metric, value FROM run_metrics WHERE run = ?1 AND value IS NOT NULL ORDER BY step, metric";
    REQUIRE(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) == SQLITE_OK);
    sqlite3_bind_text(s, 1, run_name.c_str(), -1, SQLITE_TRANSIENT);
    std::map<std::pair<int64_t, std::string>, double> out;
    while (sqlite3_step(s) == SQLITE_ROW)
      out[{sqlite3_column_int64(s, 0), reinterpret_cast<const char*>(sqlite3_column_text(s, 1))}] =
          sqlite3_column_double(s, 2);
    sqlite3_finalize(s);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

// Every finite metric of metrics.jsonl, keyed like Db::metrics.
std::map<std::pair<int64_t, std::string>, double> jsonl_metrics(const fs::path& file) {
  std::map<std::pair<int64_t, std::string>, double> out;
  std::istringstream lines(loom_test::read_file(file));
  for (std::string line; std::getline(lines, line);) {
    const auto record = nlohmann::json::parse(line);
    const int64_t step = record.at("step");
    for (const auto& [key, value] : record.items())
      if (key != "step" && value.is_number()) out[{step, key}] = value.get<double>();
  }
  return out;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

TEST_CASE("sqlite: the run's row, its resolved config and every metric equal metrics.jsonl") {
  const fs::path dir = loom_test::tmp_dir("sqlite-rows");
  const auto r = run_host("run " + loom_test::small_manifest(dir, "r", 20, 3, kSqlite));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const fs::path run_dir = fs::weakly_canonical(dir / "r");

  Db db(dir / "runs.sqlite");  // default path: runs.sqlite in run.dir, next to the run
  CHECK(db.one("PRAGMA journal_mode") == "wal");
  CHECK(db.one("PRAGMA user_version") == "2");
  CHECK(db.one("PRAGMA application_id") == std::to_string(0x4C4F4F4D));
  const auto runs = db.query("SELECT id, name, run_dir, config, world_size, total_steps, starts FROM runs");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0][1] == "r");
  CHECK(runs[0][2] == run_dir.string());
  CHECK(runs[0][3] == loom_test::read_file(run_dir / "manifest.toml"));
  CHECK(runs[0][4] == "1");
  CHECK(runs[0][5] == "20");
  CHECK(runs[0][6] == "1");

  const auto expected = jsonl_metrics(run_dir / "metrics.jsonl");
  REQUIRE(expected.size() > 7 * 5);  // steps 3, 6, ..., 18, 20; loss, lr, grad_norm, ...
  CHECK(db.metrics("r") == expected);
  CHECK(db.one("SELECT count(*) FROM metrics") == std::to_string(expected.size()));
  CHECK(db.one("SELECT group_concat(step) FROM (SELECT DISTINCT step FROM metrics ORDER BY step)") ==
        "3,6,9,12,15,18,20");
}

TEST_CASE("sqlite: four hosts writing one database at once leave it intact and every run complete") {
  const fs::path dir = loom_test::tmp_dir("sqlite-concurrent");
  const fs::path db_path = dir / "shared.sqlite";
  const std::string manifest =
      loom_test::small_manifest(dir, "unused", 150, 1, kSqlite + "path = \"" + db_path.string() + "\"\n");
  std::string script;
  for (int i = 0; i < 4; ++i)
    script += "(" + std::string(LOOM_HOST_BIN) + " run " + manifest + " --set run.name=c" + std::to_string(i) +
              " >" + (dir / ("c" + std::to_string(i) + ".log")).string() + " 2>&1; echo $? >" +
              (dir / ("c" + std::to_string(i) + ".rc")).string() + ") & ";
  run_shell("sh -c '" + script + "wait'");

  Db db(db_path);
  CHECK(db.one("PRAGMA integrity_check") == "ok");
  CHECK(db.one("SELECT count(*) FROM runs") == "4");
  std::vector<std::pair<double, double>> spans;  // each run's first and last write
  for (int i = 0; i < 4; ++i) {
    const std::string name = "c" + std::to_string(i);
    CAPTURE(name);
    const std::string log = loom_test::read_file(dir / (name + ".log"));
    CHECK_MESSAGE(loom_test::read_file(dir / (name + ".rc")) == "0\n", log);
    CHECK_MESSAGE(!loom_test::contains(log, "warn"), log);  // no warning: no write was lost
    const auto expected = jsonl_metrics(dir / name / "metrics.jsonl");
    REQUIRE(expected.size() >= 150 * 5);
    CHECK(db.metrics(name) == expected);
    CHECK(db.one("SELECT count(DISTINCT step) FROM run_metrics WHERE run = " + quoted(name)) == "150");
    const auto span = db.query("SELECT min(wall_time), max(wall_time) FROM run_metrics WHERE run = " + quoted(name));
    spans.emplace_back(std::stod(span[0][0]), std::stod(span[0][1]));
  }
  // The writers really overlapped in time, so the locking was exercised.
  int overlapping = 0;
  for (size_t a = 0; a < spans.size(); ++a)
    for (size_t b = a + 1; b < spans.size(); ++b)
      overlapping += spans[a].first < spans[b].second && spans[b].first < spans[a].second;
  CHECK(overlapping > 0);
}

TEST_CASE("sqlite: resuming from an older checkpoint drops the interrupted run's later steps") {
  // The first run logs every 3 steps (3, 6, ..., 18, 20) and checkpoints at 10 and 20. The
  // second resumes from step 10 and logs every 5: 15 and 20. Rows for 12 and 18 came from a
  // history that no longer exists; resume(10) must drop them, so steps stay unique and rising.
  const fs::path dir = loom_test::tmp_dir("sqlite-resume");
  const std::string manifest = loom_test::small_manifest(
      dir, "r", 20, 3, kSqlite + "[checkpoint]\nuse = \"safetensors\"\nevery = 10\nkeep = 10\n");
  const auto first = run_host("run " + manifest);
  REQUIRE_MESSAGE(first.code == 0, first.err);
  const fs::path step10 = dir / "r" / "checkpoints" / "step-10";
  REQUIRE(fs::exists(step10));
  const auto second = run_host("run " + manifest + " --set checkpoint.resume=\"" + step10.string() +
                               "\" --set run.log_every=5");
  REQUIRE_MESSAGE(second.code == 0, second.err);

  Db db(dir / "runs.sqlite");
  CHECK(db.one("SELECT count(*) FROM runs") == "1");  // the resumed run reuses its row
  CHECK(db.one("SELECT starts FROM runs") == "2");
  CHECK(db.one("SELECT group_concat(step) FROM (SELECT step FROM metrics WHERE name = 'loss' ORDER BY step)") ==
        "3,6,9,15,20");
  // Wall time rises with the step: the kept rows of the first run come before the second's.
  const auto rows = db.query("SELECT step, wall_time FROM metrics WHERE name = 'loss' ORDER BY step");
  for (size_t i = 1; i < rows.size(); ++i) CHECK(std::stod(rows[i][1]) >= std::stod(rows[i - 1][1]));
  CHECK(db.one("SELECT count(*) FROM notes WHERE text LIKE 'resumed from %step-10%'") == "1");
}

TEST_CASE("sqlite: a file that is not a Loom database is refused with a message naming it") {
  const fs::path dir = loom_test::tmp_dir("sqlite-foreign");
  const fs::path foreign = dir / "other.sqlite";
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(foreign.c_str(), &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  const auto r = run_host("run " + loom_test::small_manifest(dir, "r", 5, 1,
                                                             kSqlite + "path = \"" + foreign.string() + "\"\n"));
  CHECK(loom_test::contains(r.err, foreign.string() + "' is not a Loom metrics database"));
  Db db(foreign);
  CHECK(db.one("SELECT group_concat(name) FROM sqlite_master") == "t");  // left untouched
  CHECK(db.one("SELECT x FROM t") == "1");
}

TEST_CASE("sqlite: every run's status, end time and hyperparameters are plain SQL (finished, failed, interrupted)") {
  const fs::path dir = loom_test::tmp_dir("sqlite-status");
  const auto ok = run_host("run " + loom_test::small_manifest(dir, "ok", 6, 3, kSqlite));
  REQUIRE_MESSAGE(ok.code == 0, ok.err);
  const auto diverged = run_host("run " + loom_test::small_manifest(dir, "diverged", 6, 3, kSqlite, "d.toml") +
                                 " --set optimizer.lr=1e30");
  REQUIRE(diverged.code == 1);
  // SIGTERM at the first step: the run saves and stops early, interrupted (and resumable).
  const std::string slow = loom_test::small_manifest(dir, "stopped", 100000, 3, kSqlite + "[checkpoint]\n", "s.toml");
  run_shell("sh -c '" + std::string(LOOM_HOST_BIN) + " run " + slow + " & pid=$!; for i in $(seq 1 600); do [ -s " +
            (dir / "stopped" / "metrics.jsonl").string() + " ] && break; sleep 0.05; done; kill -TERM $pid; wait $pid'");

  Db db(dir / "runs.sqlite");
  CHECK(db.one("SELECT status FROM runs WHERE name = 'ok'") == "finished");
  CHECK(db.one("SELECT ended_at >= started_at AND end_message IS NULL FROM runs WHERE name = 'ok'") == "1");
  CHECK(db.one("SELECT status FROM runs WHERE name = 'diverged'") == "failed");
  CHECK(db.one("SELECT end_message LIKE '%training diverged%' FROM runs WHERE name = 'diverged'") == "1");
  CHECK(db.one("SELECT status FROM runs WHERE name = 'stopped'") == "interrupted");
  // Hyperparameters, typed as the manifest has them.
  CHECK(db.one("SELECT value FROM run_params WHERE run = 'ok' AND key = 'optimizer.lr'") == "0.01");
  CHECK(db.one("SELECT typeof(value) FROM run_params WHERE run = 'ok' AND key = 'optimizer.lr'") == "real");
  CHECK(db.one("SELECT value FROM run_params WHERE run = 'diverged' AND key = 'optimizer.lr'") == "1.0e+30");
  CHECK(db.one("SELECT typeof(value) FROM run_params WHERE run = 'ok' AND key = 'run.steps'") == "integer");
  CHECK(db.one("SELECT value FROM run_params WHERE run = 'ok' AND key = 'trackers.1.use'") == "sqlite");
  CHECK(db.one("SELECT count(*) FROM runs WHERE ended_at IS NULL") == "0");
}

TEST_CASE("sqlite: a version 1 database is upgraded in place, its rows kept") {
  const fs::path dir = loom_test::tmp_dir("sqlite-upgrade");
  const fs::path path = dir / "runs.sqlite";
  {
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    // Version 1's schema, as the tracker wrote it before status and params.
    const char* v1 =
        "CREATE TABLE runs (id INTEGER PRIMARY KEY, run_dir TEXT NOT NULL UNIQUE, name TEXT NOT NULL, config TEXT, "
        "world_size INTEGER NOT NULL, total_steps INTEGER NOT NULL, hostname TEXT, started_at REAL NOT NULL, "
        "updated_at REAL NOT NULL, starts INTEGER NOT NULL DEFAULT 1);"
        "CREATE TABLE metrics (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL, "
        "name TEXT NOT NULL, value REAL, wall_time REAL NOT NULL, PRIMARY KEY (run_id, step, name)) WITHOUT ROWID;"
        "CREATE TABLE notes (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, wall_time REAL NOT NULL, "
        "step INTEGER, text TEXT NOT NULL);"
        "CREATE INDEX notes_by_run ON notes(run_id, wall_time);"
        "CREATE VIEW run_metrics AS SELECT runs.name AS run, metrics.run_id AS run_id, metrics.step AS step, "
        "metrics.name AS metric, metrics.value AS value, metrics.wall_time AS wall_time FROM metrics JOIN runs ON "
        "runs.id = metrics.run_id;"
        "INSERT INTO runs(run_dir, name, world_size, total_steps, started_at, updated_at) VALUES ('/old', 'old', 1, 5, 1, 2);"
        "PRAGMA application_id = 1280266061; PRAGMA user_version = 1;";
    REQUIRE(sqlite3_exec(raw, v1, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
  }
  const auto r = run_host("run " + loom_test::small_manifest(dir, "new", 3, 3, kSqlite));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  Db db(path);
  CHECK(db.one("PRAGMA user_version") == "2");
  CHECK(db.one("SELECT status FROM runs WHERE name = 'old'") == "NULL");  // unknown: written before statuses
  CHECK(db.one("SELECT status FROM runs WHERE name = 'new'") == "finished");
  CHECK(db.one("SELECT count(*) FROM run_params WHERE run = 'new'") != "0");
}
