// A plugin author's whole path with nothing but an installed Loom (issue 8): install this build
// to a fresh prefix; build sdk/template out of tree against it (a copy outside the source tree,
// CMAKE_PREFIX_PATH = the prefix, no package registry) and check that its build refers to
// nothing in the Loom source or build tree; run the INSTALLED host with the template's
// plugins; and build what tools/new-plugin makes for every kind it supports.
//
// The test cases share one install and one template build (made by whichever case needs them
// first) and run in file order.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "run_host.hpp"

namespace fs = std::filesystem;
using loom_test::contains;
using loom_test::read_file;

namespace {

// A fixed folder (not a random one), so ccache serves reruns.
const fs::path& root() {
  static const fs::path dir = loom_test::tmp_dir("sdk_install");
  return dir;
}
fs::path prefix() { return root() / "prefix"; }
fs::path installed_host() { return prefix() / "bin" / "host"; }

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

// Nothing from the caller's environment may point the build at the tree.
const std::string kCleanEnv = "env -u CMAKE_PREFIX_PATH -u Loom_DIR -u LOOM_PLUGIN_PATH ";

loom_test::Result shell(const std::string& command) { return loom_test::run_shell(kCleanEnv + command); }

loom_test::Result must(const std::string& command) {
  auto r = shell(command);
  REQUIRE_MESSAGE(r.code == 0, command << "\nexit " << r.code << "\n" << r.out << r.err);
  return r;
}

// `cmake --install <this build> --prefix <root>/prefix`, once.
void install_once() {
  static bool done = false;
  if (done) return;
  must(std::string(LOOM_CMAKE) + " --install " + q(LOOM_BUILD_DIR) + " --prefix " + q(prefix()));
  done = true;
}

// Configures and builds the project in src against the prefix alone, with `cmake` (the CMake of
// Loom's build unless given) and `env` (VAR=value ... set for both steps).
void build_against_prefix(const fs::path& src, const fs::path& build, const std::string& cmake = LOOM_CMAKE,
                          const std::string& env = "") {
  install_once();
  std::string launcher;
  if (!std::string(LOOM_TEST_CCACHE).empty())
    launcher = std::string(" -DCMAKE_C_COMPILER_LAUNCHER=") + LOOM_TEST_CCACHE +
               " -DCMAKE_CXX_COMPILER_LAUNCHER=" + LOOM_TEST_CCACHE;
  must(env + " " + cmake + " -S " + q(src) + " -B " + q(build) + " -DCMAKE_PREFIX_PATH=" + q(prefix()) +
       " -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON" + launcher);
  must(env + " " + cmake + " --build " + q(build) + " -j 2");
}

// The template, copied out of the source tree and built against the prefix, once.
const fs::path& template_src() {
  static const fs::path dir = [] {
    const fs::path to = root() / "template";
    fs::create_directories(to);
    for (const auto& e : fs::directory_iterator(fs::path(LOOM_SOURCE_DIR) / "sdk" / "template"))
      if (e.is_regular_file()) fs::copy_file(e.path(), to / e.path().filename(), fs::copy_options::overwrite_existing);
    return to;
  }();
  return dir;
}
const fs::path& template_build() {
  static bool built = false;
  static const fs::path dir = root() / "template-build";
  if (!built) {
    build_against_prefix(template_src(), dir);
    built = true;
  }
  return dir;
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

// A project built against the prefix must not mention the Loom source or build tree anywhere
// in its cache or compile commands (the test's own folder aside, which may live in the build
// tree, and the host's LibTorch, which tools/dev installs into .venv/ beside the sources), and
// must have found Loom in the prefix with the prefix's include folder.
void check_only_prefix(const fs::path& build) {
  const std::string cache = read_file(build / "CMakeCache.txt");
  CHECK(contains(cache, "Loom_DIR:PATH=" + (prefix() / "lib" / "cmake" / "Loom").string() + "\n"));
  const std::string commands = read_file(build / "compile_commands.json");
  const auto entries = nlohmann::json::parse(commands);
  REQUIRE(!entries.empty());
  for (const auto& entry : entries)
    CHECK_MESSAGE(contains(entry.at("command").get<std::string>(), (prefix() / "include").string()),
                  entry.at("command").get<std::string>());
  for (std::string text : {cache, commands}) {
    replace_all(text, root().string(), "<test folder>");
    replace_all(text, fs::path(LOOM_PYTHON).parent_path().parent_path().string(), "<the host's LibTorch>");
    CHECK_MESSAGE(!contains(text, LOOM_SOURCE_DIR), "the out-of-tree build refers to the source tree " LOOM_SOURCE_DIR);
    CHECK_MESSAGE(!contains(text, LOOM_BUILD_DIR), "the out-of-tree build refers to the build tree " LOOM_BUILD_DIR);
  }
}

// Symbols a plugin exports and libraries it needs.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}
std::vector<std::string> exported(const fs::path& so) {
  return lines_of(must("nm -D --defined-only --format=just-symbols " + q(so)).out);
}
bool needs_libtorch(const fs::path& so) {
  const std::string dynamic = must("readelf -d " + q(so)).out;
  return contains(dynamic, "libtorch") || contains(dynamic, "libc10");
}

nlohmann::json plugins_json(const std::string& plugin_path) {
  const auto r = must("LOOM_PLUGIN_PATH=" + plugin_path + " " + q(installed_host()) + " plugins --json");
  return nlohmann::json::parse(r.out);
}

// The loaded plugin named `name` in `host plugins --json`, or null.
nlohmann::json plugin_named(const nlohmann::json& listing, const std::string& name) {
  for (const auto& p : listing.at("plugins"))
    if (p.at("name") == name) return p;
  return nullptr;
}

std::set<std::string> so_names(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".so") names.insert(e.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("install lays out the host, every shipped plugin and no test plugin, the headers and the package") {
  install_once();
  const fs::path p = prefix();
  for (const char* exe : {"bin/host", "bin/loom-tokenize", "bin/loom-new-plugin"}) {
    CHECK_MESSAGE(fs::is_regular_file(p / exe), exe);
    CHECK_MESSAGE((fs::status(p / exe).permissions() & fs::perms::owner_exec) != fs::perms::none, exe);
  }
  // Exactly the plugins the build ships (its plugin folder); test plugins live elsewhere.
  const auto shipped = so_names(LOOM_PLUGIN_DIR);
  CHECK(shipped.count("jsonl.so") == 1);
  CHECK(so_names(p / "lib" / "loom" / "plugins") == shipped);
  if (fs::exists(LOOM_TEST_PLUGIN_DIR))
    for (const auto& e : fs::recursive_directory_iterator(LOOM_TEST_PLUGIN_DIR))
      if (e.path().extension() == ".so")
        CHECK_MESSAGE(!fs::exists(p / "lib" / "loom" / "plugins" / e.path().filename()), e.path().string());
  for (const auto& e : fs::directory_iterator(fs::path(LOOM_SOURCE_DIR) / "sdk" / "include" / "loom"))
    CHECK_MESSAGE(fs::is_regular_file(p / "include" / "loom" / e.path().filename()), e.path().string());
  for (const char* f : {"LoomConfig.cmake", "LoomConfigVersion.cmake", "LoomTargets.cmake", "LoomPlugin.cmake", "plugin.map"})
    CHECK_MESSAGE(fs::is_regular_file(p / "lib" / "cmake" / "Loom" / f), f);
  CHECK(fs::is_regular_file(p / "share" / "loom" / "template" / "example_tracker.c"));
  CHECK(fs::is_regular_file(p / "share" / "loom" / "README.md"));
}

TEST_CASE("every relative link in the installed docs resolves inside the install") {
  install_once();
  const fs::path docs = prefix() / "share" / "loom";
  int links = 0;
  for (const auto& e : fs::recursive_directory_iterator(docs)) {
    if (e.path().extension() != ".md") continue;
    const std::string text = read_file(e.path());
    // Markdown links "](target)": skip web links and anchors within the page.
    for (size_t at = text.find("]("); at != std::string::npos; at = text.find("](", at + 2)) {
      const size_t end = text.find(')', at);
      if (end == std::string::npos) break;
      std::string target = text.substr(at + 2, end - at - 2);
      target = target.substr(0, target.find('#'));
      if (target.empty() || target.rfind("http", 0) == 0) continue;
      ++links;
      const std::string link = e.path().string() + " links " + target;
      CHECK_MESSAGE(fs::exists(e.path().parent_path() / target), link);
    }
  }
  CHECK(links >= 5);  // the guide's links to abi.md and the template's to the guide
  CHECK(fs::is_regular_file(docs / "abi.md"));
}

TEST_CASE("the installed host finds its own plugins beside it, wherever the prefix is") {
  install_once();
  const auto listing = plugins_json("");
  const fs::path default_dir = prefix() / "bin" / ".." / "lib" / "loom" / "plugins";
  bool found = false;
  for (const auto& d : listing.at("search_path"))
    found |= d.at("origin") == "default" && fs::equivalent(d.at("path").get<std::string>(), default_dir);
  CHECK_MESSAGE(found, listing.at("search_path").dump());
  for (const char* name : {"adamw", "synthetic", "jsonl"}) {
    const auto p = plugin_named(listing, name);
    REQUIRE_MESSAGE(!p.is_null(), name);
    CHECK(!p.contains("error"));
  }
}

TEST_CASE("sdk/template builds out of tree from the prefix alone, with the ABI's flags") {
  const fs::path build = template_build();
  check_only_prefix(build);
  for (const char* name : {"example_tracker", "example_hook", "example_model"}) {
    const fs::path so = build / (std::string(name) + ".so");
    REQUIRE_MESSAGE(fs::is_regular_file(so), so.string());
    CHECK_MESSAGE(exported(so) == std::vector<std::string>{"loom_plugin_init"}, name);
    CHECK_MESSAGE(needs_libtorch(so) == (std::string(name) == "example_model"), name);
  }
}

// A second LibTorch where CMake and the linker look first: a CMake package that stops any
// configure using it, and libtorch.so / libc10.so / libtorch_cpu.so that define no LibTorch
// symbol (so a plugin linked to them fails to link, and readelf would name their folder).
const fs::path& decoy_libtorch() {
  static const fs::path dir = [] {
    const fs::path to = root() / "decoy-libtorch";
    fs::create_directories(to / "lib");
    fs::create_directories(to / "share" / "cmake" / "Torch");
    std::ofstream(to / "share" / "cmake" / "Torch" / "TorchConfig.cmake")
        << "message(FATAL_ERROR \"the decoy LibTorch's CMake package was used\")\n";
    std::ofstream(to / "share" / "cmake" / "Torch" / "TorchConfigVersion.cmake")
        << "set(PACKAGE_VERSION \"2.11.0\")\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n";
    std::ofstream(to / "decoy.c") << "int loom_decoy_libtorch;\n";
    for (const char* lib : {"libtorch.so", "libc10.so", "libtorch_cpu.so"})
      must("cc -shared -fPIC -o " + q(to / "lib" / lib) + " " + q(to / "decoy.c"));
    return to;
  }();
  return dir;
}

// The variables through which a build machine's own LibTorch would reach a plugin project.
std::string decoy_env() {
  const fs::path d = decoy_libtorch();
  return "CMAKE_PREFIX_PATH=" + q(d) + " Torch_DIR=" + q(d / "share" / "cmake" / "Torch") +
         " CMAKE_LIBRARY_PATH=" + q(d / "lib") + " LIBRARY_PATH=" + q(d / "lib");
}

// The system's CMake (Debian 12: 3.25, from tools/dev's packages), not Loom's own (4.x).
const char* const kSystemCMake = "/usr/bin/cmake";

TEST_CASE("the template builds with the system's CMake and ignores a second LibTorch on the search paths") {
  REQUIRE_MESSAGE(fs::is_regular_file(kSystemCMake), "tools/dev installs Debian's cmake package");
  MESSAGE("system CMake: " << must(std::string(kSystemCMake) + " --version").out.substr(0, 40));
  const fs::path build = root() / "template-build-system-cmake";
  build_against_prefix(template_src(), build, kSystemCMake, decoy_env());
  check_only_prefix(build);
  const fs::path so = build / "example_model.so";
  const std::string link = read_file(build / "CMakeFiles" / "example_model.dir" / "link.txt");
  const std::string host_torch = read_file(prefix() / "lib" / "cmake" / "Loom" / "LoomHostTorch.cmake");
  CHECK_MESSAGE(contains(link, "/lib/libtorch_cpu.so"), link);
  CHECK_MESSAGE(!contains(link, decoy_libtorch().string()), link);
  CHECK_MESSAGE(!contains(must("readelf -d " + q(so)).out, decoy_libtorch().string()), so.string());
  CHECK(!contains(read_file(build / "CMakeCache.txt"), "decoy LibTorch's CMake package was used"));
  // The host loads all three, the torch-linked one with its own fingerprint.
  const auto listing = plugins_json(q(build));
  for (const char* name : {"example_tracker", "example_hook", "example_model"}) {
    const auto p = plugin_named(listing, name);
    REQUIRE_MESSAGE(!p.is_null(), name << " missing from " << listing.dump());
    CHECK_MESSAGE(!p.contains("error"), p.dump());
  }
  CHECK(plugin_named(listing, "example_model").at("torch") == listing.at("host_torch"));
}

TEST_CASE("an optimizer written as sdk/README.md says (only <loom/optimizer.hpp>, at::NoGradGuard) builds and trains") {
  const fs::path src = root() / "sign_descent";
  fs::create_directories(src);
  for (const char* f : {"CMakeLists.txt", "sign_descent.cpp"})
    fs::copy_file(fs::path(LOOM_SOURCE_DIR) / "tests" / "sdk_install" / "sign_descent" / f, src / f,
                  fs::copy_options::overwrite_existing);
  build_against_prefix(src, src / "build", kSystemCMake);
  check_only_prefix(src / "build");
  const std::string path = q(src / "build") + ":" + q(template_build());
  const fs::path runs = root() / "runs-sign-descent";
  const auto r = must("LOOM_PLUGIN_PATH=" + path + " " + q(installed_host()) + " run " +
                      q(template_src() / "template.toml") + " --set run.dir=\"" + runs.string() +
                      "\" --set optimizer.use=\"sign_descent\" --set optimizer.lr=0.05");
  const auto lines = lines_of(read_file(runs / "template" / "example_tracker.tsv"));
  REQUIRE(lines.size() == 7);
  double first = 0, last = 0;
  long long step = 0;
  std::istringstream(lines[1]) >> step >> first;
  std::istringstream(lines.back()) >> step >> last;
  CHECK(first > 4.0);
  CHECK_MESSAGE(last < 0.5 * first, "sign_descent losses: " << first << " -> " << last);
}

TEST_CASE("the installed host lists, describes and trains with the template's plugins") {
  const std::string path = q(template_build());
  const auto listing = plugins_json(path);
  const std::string host_torch = listing.at("host_torch");
  for (const char* name : {"example_tracker", "example_hook", "example_model"}) {
    const auto p = plugin_named(listing, name);
    REQUIRE_MESSAGE(!p.is_null(), name << " missing from " << listing.dump());
    CHECK_MESSAGE(!p.contains("error"), p.dump());
    CHECK(p.at("torch") == (std::string(name) == "example_model" ? host_torch : "torch-free"));
    REQUIRE(p.at("components").size() == 1);
    CHECK(p.at("components")[0].at("name") == name);
  }
  const auto text = must("LOOM_PLUGIN_PATH=" + path + " " + q(installed_host()) + " plugins").out;
  CHECK(contains(text, "example_model"));
  CHECK(contains(must("LOOM_PLUGIN_PATH=" + path + " " + q(installed_host()) + " describe example_hook").out,
                 "stop_below"));

  const fs::path runs = root() / "runs";
  const auto r = must("LOOM_PLUGIN_PATH=" + path + " " + q(installed_host()) + " run " +
                      q(template_src() / "template.toml") + " --set run.dir=\"" + runs.string() + "\"");
  CHECK_MESSAGE(contains(r.err, "example_hook: best loss"), r.err);
  // The C tracker's file: a header, then "step<TAB>loss" every log_every (10) of 60 steps.
  const auto lines = lines_of(read_file(runs / "template" / "example_tracker.tsv"));
  REQUIRE(lines.size() == 7);
  CHECK(lines[0] == "step\tloss");
  std::vector<double> losses;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::istringstream in(lines[i]);
    long long step = 0;
    double loss = 0;
    in >> step >> loss;
    CHECK(step == static_cast<long long>(10 * i));
    losses.push_back(loss);
  }
  CHECK(losses.front() > 4.0);  // about ln(256) = 5.5 at the start
  CHECK(losses.back() < 0.5 * losses.front());
}

TEST_CASE("tools/new-plugin makes a project for every kind that builds against the prefix and runs") {
  const fs::path tool = fs::path(LOOM_SOURCE_DIR) / "tools" / "new-plugin";
  const fs::path dir = root() / "new";
  std::string plugin_path;
  for (const std::string kind : {"tracker", "hook", "model"}) {
    const fs::path project = dir / ("my_" + kind);
    must(q(tool) + " " + kind + " my_" + kind + " " + q(project));
    CHECK(fs::is_regular_file(project / "CMakeLists.txt"));
    build_against_prefix(project, project / "build");
    check_only_prefix(project / "build");
    CHECK(fs::is_regular_file(project / "build" / ("my_" + kind + ".so")));
    plugin_path += (plugin_path.empty() ? "" : ":") + (project / "build").string();
  }
  const auto listing = plugins_json(q(plugin_path));
  for (const std::string name : {"my_tracker", "my_hook", "my_model"}) {
    const auto p = plugin_named(listing, name);
    REQUIRE_MESSAGE(!p.is_null(), name);
    CHECK(!p.contains("error"));
    CHECK(p.at("components")[0].at("name") == name);
  }
  // All three together in one short run.
  const fs::path manifest = dir / "new.toml";
  std::ofstream(manifest) << "[run]\nname = \"new\"\nsteps = 4\nlog_every = 2\ndir = \"" << (dir / "runs").string()
                          << "\"\n[model]\nuse = \"my_model\"\n[data]\nuse = \"synthetic\"\n"
                             "[optimizer]\nuse = \"adamw\"\n[[trackers]]\nuse = \"my_tracker\"\n"
                             "[[hooks]]\nuse = \"my_hook\"\n";
  const auto r = must("LOOM_PLUGIN_PATH=" + q(plugin_path) + " " + q(installed_host()) + " run " + q(manifest));
  CHECK(contains(r.err, "my_hook: best loss"));
  CHECK(lines_of(read_file(dir / "runs" / "new" / "my_tracker.tsv")).size() == 3);
}

TEST_CASE("tools/new-plugin: help, unsupported kinds, bad names and used folders") {
  const std::string tool = q(fs::path(LOOM_SOURCE_DIR) / "tools" / "new-plugin");
  const fs::path dir = root() / "new-errors";
  fs::create_directories(dir / "used");
  std::ofstream(dir / "used" / "file") << "x";
  const auto help = shell(tool + " --help");
  CHECK(help.code == 0);
  CHECK(contains(help.out, "tracker"));
  CHECK(contains(help.out, "model"));
  for (const std::string args : {"dataset my_data " + q(dir / "a"), "widget w " + q(dir / "b"),
                                 "hook Bad-Name " + q(dir / "c"), "hook ok_name " + q(dir / "used"), std::string("hook")}) {
    const auto r = shell(tool + " " + args);
    CHECK_MESSAGE(r.code == 2, args);
    CHECK_MESSAGE(loom_test::line_count(r.err) == 1, args << ": " << r.err);
    CHECK_MESSAGE(contains(r.err, "new-plugin: "), args);
  }
  CHECK(!fs::exists(dir / "a"));
  CHECK(!fs::exists(dir / "c"));
}

TEST_CASE("the installed loom-new-plugin works from the prefix alone, like tools/new-plugin") {
  install_once();
  const fs::path dir = root() / "new-installed";
  must(q(prefix() / "bin" / "loom-new-plugin") + " hook same_hook " + q(dir / "installed"));
  must(q(fs::path(LOOM_SOURCE_DIR) / "tools" / "new-plugin") + " hook same_hook " + q(dir / "source"));
  for (const char* f : {"same_hook.cpp", "CMakeLists.txt"})
    CHECK_MESSAGE(read_file(dir / "installed" / f) == read_file(dir / "source" / f), f);
}
