// loom/optimizer.hpp: derive from loom::Optimizer to write an optimizer component. The host
// hands over flat parameter and gradient buffers (one Group per dtype and device) plus the
// segment table, so an update is a few ops over whole buffers.
//
//   struct Sgd final : loom::Optimizer {
//     static constexpr const char* name = "sgd";
//     static constexpr const char* summary = "Plain gradient descent.";
//     Sgd(const loom::Config&, const loom::Context&, Groups g) : Optimizer(std::move(g)) {}
//     void step(double lr, int64_t) override {
//       for (auto& g : groups_) g.params.add_(g.grads, -lr);
//     }
//   };
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <loom/plugin.hpp>
#include <loom/torch.hpp>

namespace loom {

class Optimizer {
 public:
  struct Segment {
    std::string name;
    int64_t offset = 0, numel = 0;
    std::vector<int64_t> shape;
    uint32_t flags = 0;
  };
  struct Group {
    at::Tensor params;  // shares the host's flat buffer: update in place
    at::Tensor grads;   // shares the host's flat gradient buffer
    std::vector<Segment> segments;
  };
  using Groups = std::vector<Group>;

  static constexpr loom_kind kind = LOOM_KIND_OPTIMIZER;
  template <class T>
  static const void* vtable();

  explicit Optimizer(Groups groups) : groups_(std::move(groups)) {}
  virtual ~Optimizer() = default;
  // lr: this step's learning rate; step: 1-based optimizer step number.
  virtual void step(double lr, int64_t step) = 0;

 protected:
  // 1 where weight decay applies, 0 over segments flagged LOOM_PARAM_FLAG_NO_DECAY.
  static at::Tensor decay_mask(const Group& g) {
    at::Tensor mask = at::ones_like(g.params);
    for (const auto& s : g.segments)
      if (s.flags & LOOM_PARAM_FLAG_NO_DECAY) mask.narrow(0, s.offset, s.numel).zero_();
    return mask;
  }
  // Exposes a state tensor for checkpoints; name must stay stable across versions.
  void add_state(std::string name, at::Tensor t) { state_.emplace_back(std::move(name), std::move(t)); }
  Groups groups_;

 private:
  std::vector<std::pair<std::string, at::Tensor>> state_;
  template <class T>
  friend struct OptimizerGlue;
};

template <class T>
struct OptimizerGlue {
  static Optimizer::Groups read_groups(const loom_param_groups* in) {
    Optimizer::Groups groups;
    const loom_param_groups all = read_in(in);
    for (size_t g = 0; g < all.group_count; ++g) {
      const loom_param_group group = read_in(all.groups[g]);
      Optimizer::Group out{tensor(group.params), tensor(group.grads), {}};
      for (size_t s = 0; s < group.segment_count; ++s) {
        const loom_param_segment seg = read_in(group.segments[s]);
        out.segments.push_back({seg.name, seg.offset, seg.numel,
                                std::vector<int64_t>(seg.shape, seg.shape + seg.ndim), seg.flags});
      }
      groups.push_back(std::move(out));
    }
    return groups;
  }
  static loom_status* create(const loom_context* c, const loom_config* cfg, const loom_param_groups* g,
                             loom_optimizer** out) {
    *out = nullptr;
    return guard([&] {
      Optimizer* instance = new T(Config(cfg), Context(c), read_groups(g));
      *out = reinterpret_cast<loom_optimizer*>(instance);
    });
  }
  static loom_status* step(loom_optimizer* o, const loom_optimizer_step_args* in) {
    return guard([&] {
      const loom_optimizer_step_args args = read_in(in);
      detail::self<Optimizer>(o).step(args.lr, args.step);
    });
  }
  static size_t state_count(const loom_optimizer* o) { return detail::self<Optimizer>(o).state_.size(); }
  static loom_status* state_get(loom_optimizer* o, size_t i, loom_state_tensor* out) {
    return guard([&] {
      auto& s = detail::self<Optimizer>(o).state_.at(i);
      write_out(out, loom_state_tensor{sizeof(loom_state_tensor), s.first.c_str(), handle(s.second)});
    });
  }
};

template <class T>
const void* Optimizer::vtable() {
  static const loom_optimizer_vtable vt = {
      sizeof(loom_optimizer_vtable),      &OptimizerGlue<T>::create,
      &detail::destroy<Optimizer, loom_optimizer>, &OptimizerGlue<T>::step,
      &OptimizerGlue<T>::state_count,     &OptimizerGlue<T>::state_get};
  return &vt;
}

}  // namespace loom
