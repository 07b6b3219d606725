// loom/plugin.hpp: header-only C++ helpers shared by every plugin kind. A plugin author writes
// one class per component (deriving from loom::Model, loom::Tracker, ...) and ends the file with
//
//   LOOM_PLUGIN("my_plugin", "0.1.0", loom::component<MyTracker>())
//
// Every callback the helpers generate runs inside loom::guard, so no C++ exception ever
// crosses the C ABI; it becomes a host-created loom_status instead.
#pragma once

#include <loom/abi.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace loom {

namespace detail {
inline const loom_host_api* g_host = nullptr;  // set once by loom_plugin_init; static
}  // namespace detail

inline const loom_host_api& host() { return *detail::g_host; }

// An error a plugin throws; the guard turns it into a status with this code.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, loom_status_code code = LOOM_STATUS_CODE_INVALID_ARGUMENT)
      : std::runtime_error(message), code_(code) {}
  loom_status_code code() const { return code_; }

 private:
  loom_status_code code_;
};

// Runs fn and returns NULL, or the exception it threw as a status. Never throws.
template <class Fn>
loom_status* guard(Fn&& fn) noexcept {
  try {
    fn();
    return nullptr;
  } catch (const Error& e) {
    return host().status_create(e.code(), e.what());
  } catch (const std::exception& e) {
    return host().status_create(LOOM_STATUS_CODE_INTERNAL, e.what());
  } catch (...) {
    return host().status_create(LOOM_STATUS_CODE_INTERNAL, "unknown C++ exception");
  }
}

// Throws the status a host call returned, after freeing it.
inline void check(loom_status* status) {
  if (status == nullptr) return;
  Error error(host().status_get_message(status), host().status_get_code(status));
  host().status_destroy(status);
  throw error;
}

inline void log(loom_log_level level, const std::string& source, const std::string& message) {
  host().log(level, source.c_str(), message.c_str());
}

// Copies a struct the other side filled, keeping only the prefix both sides know; fields the
// sender did not have stay zero.
template <class T>
T read_in(const T* in) {
  T copy;
  std::memset(&copy, 0, sizeof(T));
  std::memcpy(&copy, in, std::min(in->struct_size, sizeof(T)));
  copy.struct_size = sizeof(T);
  return copy;
}

// Fills a struct the host sized, writing only the prefix both sides know.
template <class T>
void write_out(T* out, T value) {
  const size_t size = std::min(out->struct_size, sizeof(T));
  value.struct_size = out->struct_size;
  std::memcpy(out, &value, size);
}

// A component's resolved options (validated, defaults filled in by the host).
class Config {
 public:
  explicit Config(const loom_config* config) : config_(config) {}
  int64_t i64(const char* key) const {
    int64_t v = 0;
    check(host().config_get_int(config_, key, &v));
    return v;
  }
  double f64(const char* key) const {
    double v = 0;
    check(host().config_get_float(config_, key, &v));
    return v;
  }
  bool flag(const char* key) const {
    int32_t v = 0;
    check(host().config_get_bool(config_, key, &v));
    return v != 0;
  }
  std::string str(const char* key) const {
    const char* v = nullptr;
    check(host().config_get_string(config_, key, &v));
    return v;
  }
  bool has(const char* key) const { return host().config_has(config_, key) != 0; }

 private:
  const loom_config* config_;  // borrowed for the create call
};

// (ABI 1.8) The manifest's [lora] adapters (loom_adapter_spec); no targets: none asked for.
struct AdapterSpec {
  std::vector<std::string> targets;
  int64_t rank = 0;
  double alpha = 0, dropout = 0;

  // PEFT's rule: a module is targeted when its name equals a target or ends with "." + target.
  bool targets_module(const std::string& module) const {
    for (const std::string& t : targets) {
      if (module == t) return true;
      if (module.size() > t.size() && module.compare(module.size() - t.size(), t.size(), t) == 0 &&
          module[module.size() - t.size() - 1] == '.')
        return true;
    }
    return false;
  }
  double scale() const { return rank > 0 ? alpha / static_cast<double>(rank) : 0.0; }
};

// Where an instance runs; strings copied so the instance may keep them.
struct Context {
  std::string slot, run_dir, device;
  uint64_t seed = 0;
  int32_t rank = 0, world_size = 1;
  int64_t total_steps = 0;
  AdapterSpec adapters;  // models only (ABI 1.8)
  // Models only (ABI 1.10): this rank's place in its tensor-parallel group; size 1 without.
  int32_t tensor_parallel_rank = 0, tensor_parallel_size = 1;
  // Models only (ABI 1.11): this rank's place in its sequence-parallel group; size 1 without.
  int32_t sequence_parallel_rank = 0, sequence_parallel_size = 1;
  // Models only (ABI 1.12): this rank's place in its expert-parallel group; size 1 without.
  int32_t expert_parallel_rank = 0, expert_parallel_size = 1;
  // Models only (ABI 1.14): this rank's place among the ranks splitting sparse tables by rows.
  int32_t sparse_shard_rank = 0, sparse_shard_size = 1;
  // Models only (ABI 1.16): this rank's place in its context-parallel group; size 1 without.
  int32_t context_parallel_rank = 0, context_parallel_size = 1;
  // Models only (ABI 1.17): this rank's pipeline stage; size 1 without.
  int32_t pipeline_parallel_rank = 0, pipeline_parallel_size = 1;

  explicit Context(const loom_context* in) {
    const loom_context c = read_in(in);
    slot = c.slot ? c.slot : "";
    run_dir = c.run_dir ? c.run_dir : "";
    device = c.device ? c.device : "cpu";
    seed = c.seed;
    rank = c.rank;
    world_size = c.world_size > 0 ? c.world_size : 1;
    total_steps = c.total_steps;
    if (c.tensor_parallel_size > 1) {  // 0 from a host older than 1.10 (read_in)
      tensor_parallel_rank = c.tensor_parallel_rank;
      tensor_parallel_size = c.tensor_parallel_size;
    }
    if (c.sequence_parallel_size > 1) {  // 0 from a host older than 1.11 (read_in)
      sequence_parallel_rank = c.sequence_parallel_rank;
      sequence_parallel_size = c.sequence_parallel_size;
    }
    if (c.expert_parallel_size > 1) {  // 0 from a host older than 1.12 (read_in)
      expert_parallel_rank = c.expert_parallel_rank;
      expert_parallel_size = c.expert_parallel_size;
    }
    if (c.context_parallel_size > 1) {  // 0 from a host older than 1.16 (read_in)
      context_parallel_rank = c.context_parallel_rank;
      context_parallel_size = c.context_parallel_size;
    }
    if (c.pipeline_parallel_size > 1) {  // 0 from a host older than 1.17 (read_in)
      pipeline_parallel_rank = c.pipeline_parallel_rank;
      pipeline_parallel_size = c.pipeline_parallel_size;
    }
    if (c.sparse_shard_size > 1) {  // 0 from a host older than 1.14 (read_in)
      sparse_shard_rank = c.sparse_shard_rank;
      sparse_shard_size = c.sparse_shard_size;
    }
    if (c.adapters != nullptr) {  // zero when the host is older than 1.8 (read_in)
      const loom_adapter_spec a = read_in(c.adapters);
      for (size_t i = 0; i < a.target_count && a.targets != nullptr; ++i)
        if (a.targets[i] != nullptr) adapters.targets.emplace_back(a.targets[i]);
      adapters.rank = a.rank;
      adapters.alpha = a.alpha;
      adapters.dropout = a.dropout;
    }
  }
};

// Option declarations, usable in `static constexpr loom_option_spec options[] = {...}`.
constexpr loom_option_spec option(const char* name, loom_option_type type, const char* default_value,
                                  const char* doc) {
  return loom_option_spec{sizeof(loom_option_spec), name, type, default_value, 0, doc};
}
constexpr loom_option_spec required_option(const char* name, loom_option_type type, const char* doc) {
  return loom_option_spec{sizeof(loom_option_spec), name, type, nullptr, 1, doc};
}

namespace detail {
template <class T, class = void>
struct options_of {
  static const loom_option_spec* data() { return nullptr; }
  static size_t count() { return 0; }
};
template <class T>
struct options_of<T, std::void_t<decltype(T::options)>> {
  static const loom_option_spec* data() { return T::options; }
  static size_t count() { return std::extent_v<decltype(T::options)>; }
};

// The generic create callback: constructs T from (Config, Context, extra...).
template <class Base, class T, class Handle, class... Extra>
loom_status* create(const loom_context* context, const loom_config* config, Handle** out,
                    Extra&&... extra) noexcept {
  *out = nullptr;
  return guard([&] {
    Base* instance = new T(Config(config), Context(context), std::forward<Extra>(extra)...);
    *out = reinterpret_cast<Handle*>(instance);
  });
}

template <class Base, class Handle>
void destroy(Handle* handle) noexcept {
  delete reinterpret_cast<Base*>(handle);  // delete of nullptr is a no-op
}

template <class Base, class Handle>
Base& self(Handle* handle) {
  return *reinterpret_cast<Base*>(handle);
}
template <class Base, class Handle>
const Base& self(const Handle* handle) {
  return *reinterpret_cast<const Base*>(handle);
}

// The state_save / state_load callbacks of every kind that keeps byte state in checkpoints
// (Base provides save_state() and load_state(const std::string&)).
template <class Base, class Handle>
loom_status* save_state(Handle* h, const loom_byte_writer* w) {
  return guard([&] {
    const std::string state = self<Base>(h).save_state();
    check(w->write(w->user, state.data(), state.size()));
  });
}
template <class Base, class Handle>
loom_status* load_state(Handle* h, const void* data, size_t size) {
  return guard([&] { self<Base>(h).load_state(std::string(static_cast<const char*>(data), size)); });
}

// Whether component class T overrides a virtual member of its kind's base, itself or through
// a class between it and the base. The helpers install an optional callback only when the
// class overrides what backs it, so a vtable never claims what the class does not do.
// <member>_pointer<T>::type is decltype(&T::member): a member T merely inherits has the
// pointer type of the base's own member, because the pointer names the class that declares
// it. Where T's member cannot be named from here (declared private or protected below the
// base, whose members are public), type is void, which also counts as an override.
#define LOOM_DETAIL_MEMBER_POINTER(member)                                        \
  template <class T, class = void>                                                \
  struct member##_pointer {                                                       \
    using type = void;                                                            \
  };                                                                              \
  template <class T>                                                              \
  struct member##_pointer<T, std::void_t<decltype(&T::member)>> {                 \
    using type = decltype(&T::member);                                            \
  };
template <class Pointer, class Inherited>
inline constexpr bool overridden = !std::is_same_v<Pointer, Inherited>;

LOOM_DETAIL_MEMBER_POINTER(save_state)
LOOM_DETAIL_MEMBER_POINTER(load_state)

// The vtable's state callbacks for component T of kind Base: both when T overrides
// save_state() and load_state(), NULL when it overrides neither (the host then keeps nothing
// for it in checkpoints).
template <class T, class Base, class Handle>
struct state_callbacks {
  static constexpr bool saves =
      overridden<typename save_state_pointer<T>::type, std::string (Base::*)() const>;
  static constexpr bool loads =
      overridden<typename load_state_pointer<T>::type, void (Base::*)(const std::string&)>;
  static_assert(saves == loads,
                "a Loom component overrides only one of save_state() and load_state(): override both "
                "(its state is kept in checkpoints) or neither (it keeps no state)");
  static constexpr loom_status* (*save)(Handle*, const loom_byte_writer*) =
      saves ? &detail::save_state<Base, Handle> : nullptr;
  static constexpr loom_status* (*load)(Handle*, const void*, size_t) =
      loads ? &detail::load_state<Base, Handle> : nullptr;
};

inline std::vector<const loom_component*>& registered() {
  static std::vector<const loom_component*> components;
  return components;
}

inline loom_status* register_all(loom_registry* registry) {
  for (const loom_component* c : registered())
    if (loom_status* s = host().registry_add_component(registry, c)) return s;
  return nullptr;
}

inline const loom_plugin_info* plugin_init(const loom_host_api* api, const char* name,
                                           const char* version, const char* fingerprint,
                                           std::initializer_list<const loom_component*> list) noexcept {
  detail::g_host = api;
  static const loom_plugin_info info = {sizeof(loom_plugin_info), LOOM_ABI_MAJOR, LOOM_ABI_MINOR,
                                        name, version, fingerprint, &register_all};
  try {
    registered().assign(list.begin(), list.end());
  } catch (...) {
    registered().clear();  // out of memory: register nothing rather than crash the host
  }
  return &info;
}
}  // namespace detail

// Describes component T (a class deriving from one kind's base) to the host. T provides
// `static constexpr const char* name`, `summary`, and optionally `options[]`.
template <class T>
const loom_component* component() {
  static const loom_component c = {sizeof(loom_component),
                                   T::kind,
                                   T::name,
                                   T::summary,
                                   detail::options_of<T>::data(),
                                   detail::options_of<T>::count(),
                                   T::template vtable<T>()};
  return &c;
}

}  // namespace loom

// torch.hpp redefines this to the build fingerprint; torch-free plugins report none.
#ifndef LOOM_PLUGIN_FINGERPRINT
#define LOOM_PLUGIN_FINGERPRINT nullptr
#endif

// Exports the plugin's single entry symbol and registers the listed components.
#define LOOM_PLUGIN(NAME, VERSION, ...)                                                   \
  extern "C" LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h) { \
    return ::loom::detail::plugin_init(h, NAME, VERSION, LOOM_PLUGIN_FINGERPRINT,          \
                                       {__VA_ARGS__});                                    \
  }
