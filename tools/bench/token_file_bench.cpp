// token_file_bench.cpp: read throughput and resident memory of the real `token_file` plugin.
// A benchmark, never a test: run it through tools/bench/token_file_bench.sh.
//
//   token_file_bench generate OUT.tok [--gb 1]
//       Writes a uint16 token file of about N GiB with pseudo-random ids below 50257 (streamed;
//       this process never holds more than a few MiB).
//   token_file_bench read PLUGIN.so FILE.tok [--batch-size 8] [--seq-len 256] [--vocab-size 0]
//                         [--batches N] [--consume TOKENS_PER_S]
//       Loads the plugin through its one C entry point, the way the host does, with a minimal
//       torch-free host table; creates the dataset, draws batches (one epoch unless --batches)
//       and frees them as the host would. Prints tokens/s, peak resident memory above the
//       baseline taken just before create, and tokens/s divided by --consume.
//
// Peak RSS: the baseline is VmRSS after loading the plugin; the kernel's high-water mark
// (VmHWM) is reset to it by writing 5 to /proc/self/clear_refs, so "peak" covers exactly
// create + reading.
#include <dlfcn.h>

#include <loom/abi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "standin_host.hpp"
#include "plugins/datasets/common/token_file_format.hpp"

// The registry, as this stand-in host defines it; status and config come from
// tests/support/standin_host.hpp.
struct loom_registry {
  const loom_component* dataset = nullptr;  // the token_file component once registered
};

namespace {

void log(loom_log_level, const char* source, const char* message) { std::fprintf(stderr, "  %s: %s\n", source, message); }
loom_status* registry_add_component(loom_registry* r, const loom_component* c) {
  if (c->kind == LOOM_KIND_DATASET && std::strcmp(c->name, "token_file") == 0) r->dataset = c;
  return nullptr;
}

const loom_host_api kHost = loom_standin::host_api(&log, &registry_add_component);

[[noreturn]] void die(const std::string& message, int code = 2) {
  std::fprintf(stderr, "token_file_bench: error: %s\n", message.c_str());
  std::exit(code);
}

// "VmRSS" / "VmHWM" from /proc/self/status, in kB.
long proc_status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field, 0) == 0 && line[std::strlen(field)] == ':') return std::stol(line.substr(std::strlen(field) + 1));
  return -1;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string flag(std::vector<std::string>& args, const std::string& name, const std::string& fallback) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == name) {
      std::string v = args[i + 1];
      args.erase(args.begin() + long(i), args.begin() + long(i) + 2);
      return v;
    }
  return fallback;
}

int generate(std::vector<std::string> args) {
  const double gib = std::stod(flag(args, "--gb", "1"));
  if (args.size() != 1) die("usage: token_file_bench generate OUT.tok [--gb N]");
  const uint64_t count = uint64_t(gib * double(uint64_t(1) << 30)) / 2;
  std::FILE* f = std::fopen(args[0].c_str(), "wb");
  if (!f) die(args[0] + ": cannot create", 1);
  loom::data::TokenFileHeader h;
  h.token_bytes = 2;
  h.token_count = count;
  const std::string head = loom::data::encode_token_file_header(h);
  std::fwrite(head.data(), 1, head.size(), f);
  std::vector<uint16_t> chunk(uint64_t(1) << 21);
  uint64_t x = 88172645463325252ull;  // xorshift64
  for (uint64_t done = 0; done < count;) {
    const uint64_t n = std::min<uint64_t>(chunk.size(), count - done);
    for (uint64_t i = 0; i < n; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      chunk[i] = uint16_t(x % 50257);
    }
    if (std::fwrite(chunk.data(), 2, n, f) != n) die(args[0] + ": write failed", 1);
    done += n;
  }
  if (std::fclose(f) != 0) die(args[0] + ": write failed", 1);
  std::printf("wrote %s: %llu uint16 tokens (%.2f GiB)\n", args[0].c_str(), (unsigned long long)count,
              double(32 + 2 * count) / double(uint64_t(1) << 30));
  return 0;
}

uint64_t token_count(const std::string& path) {
  unsigned char head[loom::data::kTokenFileHeaderBytes] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(head), sizeof head);
  in.seekg(0, std::ios::end);
  return loom::data::parse_token_file_header(head, uint64_t(in.tellg()), path).token_count;
}

int read(std::vector<std::string> args) {
  const std::string batch_size = flag(args, "--batch-size", "8"), seq_len = flag(args, "--seq-len", "256");
  const std::string vocab_size = flag(args, "--vocab-size", "0");
  const long long max_batches = std::stoll(flag(args, "--batches", "-1"));
  const double consume = std::stod(flag(args, "--consume", "0"));
  if (args.size() != 2) die("usage: token_file_bench read PLUGIN.so FILE.tok [options]; see the top of token_file_bench.cpp");

  void* lib = dlopen(args[0].c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) die(std::string("cannot load ") + args[0] + ": " + dlerror());
  auto init = reinterpret_cast<loom_plugin_init_fn>(dlsym(lib, LOOM_PLUGIN_ENTRY_SYMBOL));
  if (!init) die(args[0] + ": no " LOOM_PLUGIN_ENTRY_SYMBOL);
  const loom_plugin_info* info = init(&kHost);
  loom_registry registry;
  if (loom_status* s = info->register_components(&registry)) die(s->message);
  if (!registry.dataset) die(args[0] + ": registers no token_file dataset");
  loom_dataset_vtable vt{};
  std::memcpy(&vt, registry.dataset->vtable,
              std::min(sizeof vt, *static_cast<const size_t*>(registry.dataset->vtable)));

  loom_config config;
  config.values = {{"path", args[1]}, {"batch_size", batch_size}, {"seq_len", seq_len}, {"vocab_size", vocab_size}};
  const loom_context context = {sizeof(loom_context), "data", "/tmp", 0, 0, 1, "cpu", 0};

  // One epoch unless --batches: floor(floor((N - 1) / T) / B) batches on one rank.
  const uint64_t B = std::stoull(batch_size), T = std::stoull(seq_len);
  const uint64_t limit = max_batches >= 0 ? uint64_t(max_batches) : (token_count(args[1]) - 1) / T / B;

  const long baseline_kb = proc_status_kb("VmRSS");
  { std::ofstream("/proc/self/clear_refs") << "5"; }  // VmHWM := VmRSS
  const long reset_hwm_kb = proc_status_kb("VmHWM");

  auto started = std::chrono::steady_clock::now();
  loom_dataset* dataset = nullptr;
  if (loom_status* s = vt.create(&context, &config, &dataset)) die(s->message);
  const double create_s = seconds_since(started);

  uint64_t batches = 0, checksum = 0;
  started = std::chrono::steady_clock::now();
  while (batches < limit) {
    loom_batch batch{};
    batch.struct_size = sizeof batch;
    if (loom_status* s = vt.next(dataset, &batch)) die(s->message, 1);
    checksum += static_cast<const int64_t*>(batch.inputs->dl_tensor.data)[0];  // keep the read observable
    batch.inputs->deleter(batch.inputs);
    batch.targets->deleter(batch.targets);
    ++batches;
  }
  const double read_s = seconds_since(started);
  const long peak_kb = proc_status_kb("VmHWM");
  vt.destroy(dataset);

  const double tokens = double(batches * B * T);
  const double rate = tokens / read_s;
  std::printf("token_file read: %s\n", args[1].c_str());
  std::printf("  batches            %llu x (%llu, %llu)  (checksum %llu)\n", (unsigned long long)batches,
              (unsigned long long)B, (unsigned long long)T, (unsigned long long)checksum);
  std::printf("  create             %.3f s%s\n", create_s, vocab_size != "0" ? " (includes the vocab_size scan)" : "");
  std::printf("  read               %.3f s, %.3g tokens/s\n", read_s, rate);
  std::printf("  baseline RSS       %.1f MiB (HWM reset to %.1f MiB)\n", baseline_kb / 1024.0, reset_hwm_kb / 1024.0);
  std::printf("  peak RSS above it  %.1f MiB\n", (peak_kb - baseline_kb) / 1024.0);
  if (consume > 0)
    std::printf("  vs consumption     %.0fx the given %.3g tokens/s\n", rate / consume, consume);
  else
    std::printf("  vs consumption     (pass --consume TOKENS_PER_S, the tok/s the gpt example logs)\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf("usage: token_file_bench generate OUT.tok [--gb N]\n"
                "       token_file_bench read PLUGIN.so FILE.tok [--batch-size 8] [--seq-len 256]\n"
                "                        [--vocab-size 0] [--batches N] [--consume TOKENS_PER_S]\n");
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  try {
    if (command == "generate") return generate(args);
    if (command == "read") return read(args);
  } catch (const std::exception& e) {
    die(e.what());
  }
  die("unknown command " + command + "; see --help");
}
