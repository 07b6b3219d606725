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
//
// A sparse optimizer (ABI 1.7, named in [sparse_optimizer]) derives from loom::SparseOptimizer
// instead: it gets the model's sparse tables and, each step, the rows they touched.
#pragma once

#include <string>
#include <type_traits>
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
    std::vector<int64_t> shape;  // the whole parameter's, also when partial
    uint32_t flags = 0;          // LOOM_PARAM_FLAG_*; LOOM_PARAM_FLAG_PARTIAL: a slice edge cut it
  };
  struct Group {
    at::Tensor params;  // shares the host's flat buffer: update in place
    at::Tensor grads;   // shares the host's flat gradient buffer
    std::vector<Segment> segments;
  };
  using Groups = std::vector<Group>;

  static constexpr loom_kind kind = LOOM_KIND_OPTIMIZER;
  // A class whose update needs whole parameters (a per-tensor norm) declares
  //   static constexpr uint64_t requirements = LOOM_OPTIMIZER_NEEDS_WHOLE_TENSORS;
  // and the host then refuses [distributed] shard for it instead of handing it slices; one
  // whose update is elementwise declares LOOM_OPTIMIZER_ELEMENTWISE (ABI 1.21, step_range).
  static constexpr uint64_t requirements = 0;
  template <class T>
  static const void* vtable();

  explicit Optimizer(Groups groups) : groups_(std::move(groups)) {}
  virtual ~Optimizer() = default;
  // lr: this step's learning rate; step: 1-based optimizer step number.
  virtual void step(double lr, int64_t step) = 0;
  // (ABI 1.21) A class whose update is elementwise (each element reads only itself, lr and
  // step: AdamW, SGD) declares requirements = LOOM_OPTIMIZER_ELEMENTWISE and overrides this:
  // the same update over elements [begin, end) of groups_[group] only, bit for bit what step
  // gives them. The host may then update a group piece by piece (optimizer offload overlaps
  // each piece's copies with the next's update); it checks the bounds first.
  virtual void step_range(double lr, int64_t step, size_t group, int64_t begin, int64_t end) {
    (void)lr, (void)step, (void)group, (void)begin, (void)end;
    throw Error("this optimizer declares LOOM_OPTIMIZER_ELEMENTWISE but does not override step_range");
  }

 protected:
  // 1 where weight decay applies, 0 over segments flagged LOOM_PARAM_FLAG_NO_DECAY.
  static at::Tensor decay_mask(const Group& g) {
    at::Tensor mask = at::ones_like(g.params);
    for (const auto& s : g.segments)
      if (s.flags & LOOM_PARAM_FLAG_NO_DECAY) mask.narrow(0, s.offset, s.numel).zero_();
    return mask;
  }
  // Exposes a state tensor for checkpoints; name must stay stable across versions. It must
  // hold the same values on every rank of a sharded run (a step count).
  void add_state(std::string name, at::Tensor t) { state_.push_back({std::move(name), std::move(t), -1}); }
  // State that follows groups_[group].params element for element (Adam's moments): checkpoints
  // shard it with the group and reshard it when the world size changes.
  void add_elementwise_state(std::string name, size_t group, at::Tensor t) {
    state_.push_back({std::move(name), std::move(t), static_cast<int64_t>(group)});
  }
  Groups groups_;

 private:
  struct State {
    std::string name;
    at::Tensor tensor;
    int64_t elementwise_group;
  };
  std::vector<State> state_;
  template <class T>
  friend struct OptimizerGlue;
};

// (ABI 1.7) For [sparse_optimizer]: updates only the rows each step touched of the model's
// tables flagged LOOM_PARAM_FLAG_SPARSE_ROWS, keeping the rows it was not given bit-identical.
// The constructor takes (const Config&, const Context&, Tables). Per-row state goes to
// add_row_state (ABI 1.14), any other state to add_state (the same on every rank).
class SparseOptimizer : public Optimizer {
 public:
  struct Table {
    std::string name;
    at::Tensor weight;  // [rows, dim], the model's own tensor: update rows in place
  };
  using Tables = std::vector<Table>;
  struct RowGrad {
    size_t table;       // index into tables_
    at::Tensor rows;    // int64 [n], unique, ascending
    at::Tensor values;  // [n, dim], summed over micro-batches and ranks, normalized and clipped
  };
  explicit SparseOptimizer(Tables tables) : Optimizer({}), tables_(std::move(tables)) {
    if (tables_.empty())
      throw Error("a sparse optimizer updates the model's sparse tables: name it in [sparse_optimizer], not "
                  "[optimizer]");
  }
  // `rows` holds no entries in grads for a table whose rows no rank touched; with row-sharded
  // tables an entry may have no rows when only other ranks touched the table this step.
  virtual void sparse_step(double lr, int64_t step, const std::vector<RowGrad>& grads) = 0;
  // The host never calls the dense step of a [sparse_optimizer].
  void step(double, int64_t) final { throw Error("a sparse optimizer has no dense step"); }

 protected:
  Tables tables_;

  // (ABI 1.14) State whose dim 0 follows table `table`'s rows (an accumulator, moments): with
  // row-sharded tables each rank holds it for its rows, and checkpoints put the rows of every
  // rank together (one process's layout) and cut them apart again at resume, at any rank count.
  // Declared through loom_state_tensor.elementwise_group = table. A host older than 1.14
  // reads it as whole-tensor state, as add_state declares it.
  void add_row_state(std::string name, size_t table, at::Tensor t) {
    add_elementwise_state(std::move(name), table, std::move(t));
  }
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
      Optimizer* instance = nullptr;
      if constexpr (std::is_base_of_v<SparseOptimizer, T>) instance = new T(Config(cfg), Context(c), read_tables(g));
      else instance = new T(Config(cfg), Context(c), read_groups(g));
      *out = reinterpret_cast<loom_optimizer*>(instance);
    });
  }
  static SparseOptimizer::Tables read_tables(const loom_param_groups* in) {
    SparseOptimizer::Tables tables;
    const loom_param_groups all = read_in(in);  // a host before 1.7: no tables
    for (size_t t = 0; t < all.sparse_table_count; ++t) {
      const loom_sparse_table table = read_in(all.sparse_tables[t]);
      tables.push_back({table.name, tensor(table.weight)});
    }
    return tables;
  }
  static loom_status* sparse_step(loom_optimizer* o, const loom_sparse_step_args* in) {
    return guard([&] {
      const loom_sparse_step_args args = read_in(in);
      std::vector<SparseOptimizer::RowGrad> grads;
      for (size_t i = 0; i < args.grad_count; ++i) {
        const loom_sparse_grad g = read_in(args.grads[i]);
        grads.push_back({g.table, tensor(g.rows), tensor(g.values)});
      }
      static_cast<SparseOptimizer&>(detail::self<Optimizer>(o)).sparse_step(args.lr, args.step, grads);
    });
  }
  static loom_status* step(loom_optimizer* o, const loom_optimizer_step_args* in) {
    return guard([&] {
      const loom_optimizer_step_args args = read_in(in);  // a host before 1.21: no range
      Optimizer& self = detail::self<Optimizer>(o);
      if (args.range_end <= args.range_begin) return self.step(args.lr, args.step);
      if (!(T::requirements & LOOM_OPTIMIZER_ELEMENTWISE))
        throw Error("the host asked to update one piece of a group, but this optimizer does not declare "
                    "LOOM_OPTIMIZER_ELEMENTWISE");
      if (args.range_group >= self.groups_.size() || args.range_begin < 0 ||
          args.range_end > self.groups_[args.range_group].params.numel())
        throw Error("the host asked to update elements [" + std::to_string(args.range_begin) + ", " +
                    std::to_string(args.range_end) + ") of group " + std::to_string(args.range_group) +
                    ", which it does not hold");
      self.step_range(args.lr, args.step, args.range_group, args.range_begin, args.range_end);
    });
  }
  static size_t state_count(const loom_optimizer* o) { return detail::self<Optimizer>(o).state_.size(); }
  static loom_status* state_get(loom_optimizer* o, size_t i, loom_state_tensor* out) {
    return guard([&] {
      auto& s = detail::self<Optimizer>(o).state_.at(i);
      loom_state_tensor view{};
      view.struct_size = sizeof(view);
      view.name = s.name.c_str();
      view.tensor = handle(s.tensor);
      view.elementwise_group = s.elementwise_group;
      write_out(out, view);
    });
  }
};

template <class T>
const void* Optimizer::vtable() {
  static const loom_optimizer_vtable vt = [] {
    loom_optimizer_vtable v{};
    v.struct_size = sizeof(loom_optimizer_vtable);
    v.create = &OptimizerGlue<T>::create;
    v.destroy = &detail::destroy<Optimizer, loom_optimizer>;
    v.step = &OptimizerGlue<T>::step;
    v.state_count = &OptimizerGlue<T>::state_count;
    v.state_get = &OptimizerGlue<T>::state_get;
    v.requirements = T::requirements;
    if constexpr (std::is_base_of_v<SparseOptimizer, T>) v.sparse_step = &OptimizerGlue<T>::sparse_step;
    return v;
  }();
  return &vt;
}

}  // namespace loom
