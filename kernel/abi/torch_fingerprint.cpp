// The host's torch build fingerprint, from the very macro plugins compile (loom/torch.hpp).
#include <loom/torch.hpp>

#include "abi/host_api.hpp"

namespace loom {
const char* host_torch_fingerprint() { return LOOM_TORCH_FINGERPRINT; }
}  // namespace loom
