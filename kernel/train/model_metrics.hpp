// model_metrics.hpp: the metrics a model reports per micro-batch (ABI 1.2), combined over the
// micro-batches of each step, the ranks and the steps of a log window by their declared
// reduction. Values stay on the device until a log step reads them all at once.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "abi/compute_components.hpp"
#include "abi/observer_components.hpp"
#include "dist/communicator.hpp"

namespace loom {

class ModelMetrics {
 public:
  // One micro-batch's reports; units: its loss-carrying units (the weight of a MEAN).
  void add(const std::vector<ReportedMetric>& reported, const at::Tensor& units);
  // At a log step: reduces over the ranks (comm may be null), reads every value with one copy
  // to the host, and starts a new window. steps: the optimizer steps in the window.
  MetricList finish(Communicator* comm, int64_t steps);
  // Before finish, when ranks may have seen different metrics (pipeline stages: only the last
  // computes the loss and reports): every rank of comm adds the metrics it lacks as having seen
  // nothing (values on `device`), so that all reduce the same ones. One exchange of names.
  void align_names(Communicator& comm, const at::Device& device);
  bool empty() const { return sums_.empty() && pairs_.empty(); }

 private:
  struct Sum {
    loom_metric_reduction reduction;
    at::Tensor value;   // SUM: sum; MEAN: sum of value * units; MAX: max
    at::Tensor weight;  // MEAN: sum of units
  };
  std::map<std::string, Sum> sums_;  // by name, so every rank reduces them in the same order
  std::map<std::string, std::vector<at::Tensor>> pairs_;  // ROC AUC: every (score, label) row of the window
};

}  // namespace loom
