// exact_auc.hpp: the area under the ROC curve of (score, label) pairs, computed exactly over
// all of them (the Mann-Whitney U statistic: the probability that a random positive scores
// above a random negative, tied scores counting one half), for LOOM_METRIC_REDUCTION_ROC_AUC.
#pragma once

#include <ATen/ATen.h>

namespace loom {

// pairs: float [N, 2] of (score, label), label 0 or 1 (any nonzero label counts as 1).
// NaN when the pairs hold no positive or no negative. O(N log N).
double exact_roc_auc(const at::Tensor& pairs);

}  // namespace loom
