// model_attributes.cpp: models that say they handle sequence, or expert, parallelism (and, in
// today's build only, one that says it handles context parallelism, ABI 1.16), built
// twice (tests/conformance/CMakeLists.txt): as today's SDK registers them (ABI 1.15: the
// `attributes` callback), and, with LOOM_TEST_ABI_1_14, as a plugin built for ABI 1.14 looks to
// today's host: a model vtable that ends at expert_parallel, saying what each instance handles
// through the 1.11 and 1.12 callbacks, in a plugin whose info says 1.14. The host must read
// both the same (model_attributes_test).
#include <loom/model.hpp>
#include <loom/torch.hpp>

#include <cstddef>

namespace {

// A one-parameter model; only what it says it handles matters here.
#ifdef LOOM_TEST_ABI_1_14
#define ABI_NAME(what) "abi_1_14_" what "_model"
#else
#define ABI_NAME(what) "abi_1_15_" what "_model"
#endif

template <bool kSequence, bool kExperts, bool kContext = false>
class Capable final : public loom::Model {
 public:
  static constexpr const char* name = kSequence ? ABI_NAME("sequence") : kExperts ? ABI_NAME("expert") : ABI_NAME("context");
  static constexpr const char* summary = "Conformance: a model that says what it handles.";
  Capable(const loom::Config&, const loom::Context& ctx) {
    w_ = add_param("w", at::zeros({4}, at::Device(ctx.device)));
  }
  at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor&) override {
    return (w_.sum() * inputs.numel()).to(at::kFloat);
  }
  bool sequence_parallel() const override { return kSequence; }
  bool expert_parallel() const override { return kExperts; }
  bool context_parallel() const override { return kContext; }

 private:
  at::Tensor w_;
};

#ifdef LOOM_TEST_ABI_1_14
template <class T, int32_t kSequence, int32_t kExperts>
const loom_component* as_abi_1_14() {
  static const loom_model_vtable vt = [] {
    loom_model_vtable v = *static_cast<const loom_model_vtable*>(loom::component<T>()->vtable);
    v.struct_size = offsetof(loom_model_vtable, attributes);  // 1.14's sizeof
    v.sequence_parallel = [](const loom_model*) -> int32_t { return kSequence; };
    v.expert_parallel = [](const loom_model*) -> int32_t { return kExperts; };
    v.attributes = nullptr;  // past struct_size: the host must not read it
    return v;
  }();
  static const loom_component c = [] {
    loom_component out = *loom::component<T>();
    out.vtable = &vt;
    return out;
  }();
  return &c;
}
#endif

}  // namespace

#ifdef LOOM_TEST_ABI_1_14
extern "C" LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h) {
  const loom_plugin_info* today = loom::detail::plugin_init(
      h, "abi_1_14_model", "0.1.0", LOOM_PLUGIN_FINGERPRINT,
      {as_abi_1_14<Capable<true, false>, 1, 0>(), as_abi_1_14<Capable<false, true>, 0, 1>()});
  static loom_plugin_info info = *today;
  info.abi_minor = 14;
  return &info;
}
#else
LOOM_PLUGIN("abi_1_15_model", "0.1.0", loom::component<Capable<true, false>>(), loom::component<Capable<false, true>>(),
            loom::component<Capable<false, false, true>>())
#endif
