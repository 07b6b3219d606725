#include "train/model_metrics.hpp"

#include <limits>

#include "base/failure.hpp"
#include "train/exact_auc.hpp"

namespace loom {

void ModelMetrics::add(const std::vector<ReportedMetric>& reported, const at::Tensor& units) {
  for (const ReportedMetric& m : reported) {
    const bool as_pairs = m.reduction == LOOM_METRIC_REDUCTION_ROC_AUC;
    if (as_pairs ? sums_.count(m.name) > 0 : pairs_.count(m.name) > 0)
      throw runtime_failure("model metric \"" + m.name + "\" was reported with two different reductions");
    if (as_pairs) {
      pairs_[m.name].push_back(m.value);
      continue;
    }
    auto [it, fresh] = sums_.try_emplace(m.name, Sum{m.reduction, {}, {}});
    Sum& sum = it->second;
    if (sum.reduction != m.reduction)
      throw runtime_failure("model metric \"" + m.name + "\" was reported with two different reductions");
    const at::Tensor weighted = m.reduction == LOOM_METRIC_REDUCTION_MEAN ? m.value * units.to(m.value.device()) : m.value;
    if (fresh) {
      sum.value = weighted.clone();
      if (m.reduction == LOOM_METRIC_REDUCTION_MEAN) sum.weight = units.to(m.value.device(), at::kDouble).clone();
    } else if (m.reduction == LOOM_METRIC_REDUCTION_MAX) {
      sum.value = at::maximum(sum.value, weighted);
    } else {
      sum.value += weighted;
      if (m.reduction == LOOM_METRIC_REDUCTION_MEAN) sum.weight += units.to(m.value.device(), at::kDouble);
    }
  }
}

void ModelMetrics::align_names(Communicator& comm, const at::Device& device) {
  std::string mine;  // one line per metric: its reduction and name
  for (const auto& [name, rows] : pairs_) mine += std::to_string(LOOM_METRIC_REDUCTION_ROC_AUC) + " " + name + "\n";
  for (const auto& [name, s] : sums_) mine += std::to_string(s.reduction) + " " + name + "\n";
  const auto on = at::TensorOptions().device(device).dtype(at::kDouble);
  for (const std::string& theirs : comm.allgather_bytes(mine)) {
    for (size_t pos = 0, end; pos < theirs.size(); pos = end + 1) {
      end = theirs.find('\n', pos);
      const std::string line = theirs.substr(pos, end - pos);
      const size_t space = line.find(' ');
      const auto reduction = static_cast<loom_metric_reduction>(std::stoi(line.substr(0, space)));
      const std::string name = line.substr(space + 1);
      if (reduction == LOOM_METRIC_REDUCTION_ROC_AUC) {
        if (!pairs_.count(name)) pairs_[name].push_back(at::zeros({0, 2}, on));
      } else if (!sums_.count(name)) {  // nothing seen: the reduction's identity
        const double identity = reduction == LOOM_METRIC_REDUCTION_MAX ? -std::numeric_limits<double>::infinity() : 0.0;
        sums_.emplace(name, Sum{reduction, at::full({}, identity, on),
                                reduction == LOOM_METRIC_REDUCTION_MEAN ? at::zeros({}, on) : at::Tensor()});
      }
    }
  }
}

MetricList ModelMetrics::finish(Communicator* comm, int64_t steps) {
  MetricList out;
  for (auto& [name, rows] : pairs_) {  // every rank's pairs, so the AUC is the whole window's
    at::Tensor all = at::cat(rows).to(at::kCPU);
    if (comm) all = comm->allgather_rows(all);
    out.emplace_back(name, exact_roc_auc(all));
  }
  pairs_.clear();
  if (sums_.empty()) return out;
  // Two vectors: what ranks add up, and what they take the largest of.
  std::vector<at::Tensor> added, largest;
  for (const auto& [name, s] : sums_) {
    if (s.reduction == LOOM_METRIC_REDUCTION_MAX) largest.push_back(s.value);
    else added.push_back(s.value);
    if (s.reduction == LOOM_METRIC_REDUCTION_MEAN) added.push_back(s.weight);
  }
  at::Tensor added_all = added.empty() ? at::zeros({0}, at::kDouble) : at::stack(added);
  at::Tensor largest_all = largest.empty() ? at::zeros({0}, at::kDouble) : at::stack(largest);
  if (comm) {
    if (added_all.numel() > 0) comm->allreduce_sum(added_all);
    if (largest_all.numel() > 0) comm->allreduce_max(largest_all);
  }
  const at::Tensor added_host = added_all.to(at::kCPU), largest_host = largest_all.to(at::kCPU);
  const double* a = added_host.data_ptr<double>();
  const double* l = largest_host.data_ptr<double>();
  for (const auto& [name, s] : sums_) {
    if (s.reduction == LOOM_METRIC_REDUCTION_MAX) {
      out.emplace_back(name, *l++);
    } else if (s.reduction == LOOM_METRIC_REDUCTION_SUM) {
      out.emplace_back(name, *a++ / static_cast<double>(std::max<int64_t>(steps, 1)));
    } else {
      const double value = *a++, weight = *a++;
      out.emplace_back(name, value / (weight != 0 ? weight : 1.0));
    }
  }
  sums_.clear();
  return out;
}

}  // namespace loom
