#include "train/mapped_cuda_memory.hpp"

#include <algorithm>
#include <string>

#include "base/failure.hpp"

#ifdef LOOM_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>
#endif

namespace loom {

GranuleSpan granules_inside(int64_t begin, int64_t end, int64_t granule) {
  const int64_t first = (begin + granule - 1) / granule, last = end / granule;
  return {first, std::max(first, last)};
}

GranuleSpan granules_touching(int64_t begin, int64_t end, int64_t granule) {
  if (end <= begin) return {begin / granule, begin / granule};
  return {begin / granule, (end + granule - 1) / granule};
}

#ifdef LOOM_WITH_CUDA
namespace {

// The driver's virtual memory calls, found through the runtime (no link to libcuda, which a
// machine without a GPU lacks): the build needs only the toolkit's headers.
struct Driver {
  decltype(&cuGetErrorString) error_string;
  decltype(&cuMemGetAllocationGranularity) granularity;
  decltype(&cuMemAddressReserve) reserve;
  decltype(&cuMemAddressFree) free_addresses;
  decltype(&cuMemCreate) create;
  decltype(&cuMemRelease) release;
  decltype(&cuMemMap) map;
  decltype(&cuMemUnmap) unmap;
  decltype(&cuMemSetAccess) set_access;
};

template <typename F>
void find_entry(const char* name, F& fn) {
  void* found = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion(name, &found, 12000, cudaEnableDefault, &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess || !found)
    throw runtime_failure(std::string("[distributed] shard = \"parameters\" on CUDA: the CUDA driver has no ") + name +
                          " (its virtual memory calls need a CUDA 12 driver or newer); use shard = \"gradients\"");
  fn = reinterpret_cast<F>(found);
}

const Driver& driver() {
  static const Driver table = [] {
    Driver d{};
    find_entry("cuGetErrorString", d.error_string);
    find_entry("cuMemGetAllocationGranularity", d.granularity);
    find_entry("cuMemAddressReserve", d.reserve);
    find_entry("cuMemAddressFree", d.free_addresses);
    find_entry("cuMemCreate", d.create);
    find_entry("cuMemRelease", d.release);
    find_entry("cuMemMap", d.map);
    find_entry("cuMemUnmap", d.unmap);
    find_entry("cuMemSetAccess", d.set_access);
    return d;
  }();
  return table;
}

void check_driver(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const char* text = nullptr;
  driver().error_string(result, &text);
  throw runtime_failure(std::string("[distributed] shard = \"parameters\" on CUDA: ") + what + " failed (" +
                        (text ? text : "unknown driver error") + ")");
}

void check_runtime(cudaError_t result, const char* what) {
  if (result != cudaSuccess)
    throw runtime_failure(std::string("[distributed] shard = \"parameters\" on CUDA: ") + what + " failed (" +
                          cudaGetErrorString(result) + ")");
}

int64_t mapped_now = 0, mapped_peak = 0, reserved_now = 0;  // under registry_mutex

// One reserved address range and the granules mapped under it.
class Space {
 public:
  Space(int64_t bytes, c10::DeviceIndex device, bool zero_on_map, bool map_all)
      : device_(device), zero_on_map_(zero_on_map) {
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.location.id = device;
    access_.location = prop_.location;
    access_.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t granule = 0;
    check_driver(driver().granularity(&granule, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 "asking the driver's memory granularity");
    granule_ = static_cast<int64_t>(granule);
    const int64_t granules = std::max<int64_t>(1, (bytes + granule_ - 1) / granule_);
    check_driver(driver().reserve(&base_, static_cast<size_t>(granules * granule_), 0, 0, 0),
                 "reserving addresses for the flat parameters");
    handles_.assign(static_cast<size_t>(granules), 0);
    waiting_for_.assign(static_cast<size_t>(granules), 0);
    reserved_now += granules * granule_;
    if (map_all)
      for (int64_t g = 0; g < granules; ++g) map(g);
  }

  ~Space() {
    const c10::cuda::CUDAGuard on(device_);
    cudaDeviceSynchronize();  // nothing may still read what is unmapped; errors here cannot be reported
    for (Waiting& w : waiting_) cudaEventDestroy(w.done);
    for (size_t g = 0; g < handles_.size(); ++g)
      if (handles_[g]) {
        driver().unmap(address(static_cast<int64_t>(g)), static_cast<size_t>(granule_));
        driver().release(handles_[g]);
        mapped_now -= granule_;
      }
    for (CUmemGenericAllocationHandle h : spare_) driver().release(h);
    driver().free_addresses(base_, handles_.size() * static_cast<size_t>(granule_));
    reserved_now -= reserved();
  }

  Space(const Space&) = delete;
  Space& operator=(const Space&) = delete;

  CUdeviceptr base() const { return base_; }
  int64_t reserved() const { return static_cast<int64_t>(handles_.size()) * granule_; }

  void release(int64_t begin, int64_t end) {
    const c10::cuda::CUDAGuard on(device_);
    settle();
    const GranuleSpan span = granules_inside(begin, end, granule_);
    Waiting w{nullptr, {}, ++generation_};
    for (int64_t g = span.first; g < span.last; ++g)
      if (handles_[static_cast<size_t>(g)]) {
        waiting_for_[static_cast<size_t>(g)] = w.generation;
        w.granules.push_back(g);
      }
    if (w.granules.empty()) return;
    check_runtime(cudaEventCreateWithFlags(&w.done, cudaEventDisableTiming), "creating an event");
    check_runtime(cudaEventRecord(w.done, c10::cuda::getCurrentCUDAStream(device_).stream()), "recording an event");
    waiting_.push_back(std::move(w));
    while (static_cast<int>(waiting_.size()) > kReleasesInFlight) {
      check_runtime(cudaEventSynchronize(waiting_.front().done), "waiting for the GPU");
      unmap_oldest();
    }
  }

  void acquire(int64_t begin, int64_t end) {
    const c10::cuda::CUDAGuard on(device_);
    settle();
    const GranuleSpan span = granules_touching(begin, end, granule_);
    spare_cap_ = std::max(spare_cap_, static_cast<size_t>(span.count()));
    for (int64_t g = span.first; g < span.last; ++g) {
      waiting_for_[static_cast<size_t>(g)] = 0;  // still mapped: its release is called off
      if (!handles_[static_cast<size_t>(g)]) map(g);
    }
  }

 private:
  struct Waiting {
    cudaEvent_t done;
    std::vector<int64_t> granules;
    uint64_t generation;  // a granule is unmapped only if this is still the release it waits for
  };

  CUdeviceptr address(int64_t g) const { return base_ + static_cast<CUdeviceptr>(g * granule_); }

  void map(int64_t g) {
    CUmemGenericAllocationHandle handle = 0;
    if (!spare_.empty()) {
      handle = spare_.back();
      spare_.pop_back();
    } else {
      check_driver(driver().create(&handle, static_cast<size_t>(granule_), &prop_, 0),
                   "allocating device memory (cuMemCreate: the GPU may be out of memory)");
    }
    check_driver(driver().map(address(g), static_cast<size_t>(granule_), 0, handle, 0), "mapping memory");
    check_driver(driver().set_access(address(g), static_cast<size_t>(granule_), &access_, 1),
                 "granting access to mapped memory");
    if (zero_on_map_)  // ordered before anything later work on this stream writes or reads there
      check_runtime(cudaMemsetAsync(reinterpret_cast<void*>(address(g)), 0, static_cast<size_t>(granule_),
                                    c10::cuda::getCurrentCUDAStream(device_).stream()),
                    "zeroing mapped memory");
    handles_[static_cast<size_t>(g)] = handle;
    mapped_now += granule_;
    mapped_peak = std::max(mapped_peak, mapped_now);
  }

  void unmap(int64_t g) {
    CUmemGenericAllocationHandle& handle = handles_[static_cast<size_t>(g)];
    check_driver(driver().unmap(address(g), static_cast<size_t>(granule_)), "unmapping memory");
    if (spare_.size() < spare_cap_) spare_.push_back(handle);
    else check_driver(driver().release(handle), "giving memory back to the driver");
    handle = 0;
    mapped_now -= granule_;
  }

  // The oldest waiting release, whose work has finished.
  void unmap_oldest() {
    Waiting w = std::move(waiting_.front());
    waiting_.pop_front();
    for (int64_t g : w.granules)
      if (waiting_for_[static_cast<size_t>(g)] == w.generation && handles_[static_cast<size_t>(g)]) {
        waiting_for_[static_cast<size_t>(g)] = 0;
        unmap(g);
      }
    cudaEventDestroy(w.done);
  }

  // Unmaps what the releases whose work has finished wait to give back.
  void settle() {
    while (!waiting_.empty()) {
      const cudaError_t state = cudaEventQuery(waiting_.front().done);
      if (state == cudaErrorNotReady) return;
      check_runtime(state, "asking whether the GPU has finished with released memory");
      unmap_oldest();
    }
  }

  c10::DeviceIndex device_;
  bool zero_on_map_;
  CUdeviceptr base_ = 0;
  int64_t granule_ = 0;
  CUmemAllocationProp prop_{};
  CUmemAccessDesc access_{};
  std::vector<CUmemGenericAllocationHandle> handles_;  // per granule; 0: unmapped
  std::vector<uint64_t> waiting_for_;                  // per granule: the release it waits for; 0: none
  uint64_t generation_ = 0;
  std::deque<Waiting> waiting_;
  std::vector<CUmemGenericAllocationHandle> spare_;  // unmapped memory kept for the next mapping
  size_t spare_cap_ = 0;
};

std::mutex registry_mutex;
std::map<CUdeviceptr, std::unique_ptr<Space>>& registry() {
  static auto* spaces = new std::map<CUdeviceptr, std::unique_ptr<Space>>();  // outlives static tensors
  return *spaces;
}

// The space holding range, and range's byte offsets in it; null when none does.
Space* space_of(const at::Tensor& range, int64_t& begin, int64_t& end) {
  if (!range.is_cuda() || range.numel() == 0) return nullptr;
  const auto at = reinterpret_cast<CUdeviceptr>(range.data_ptr());
  auto it = registry().upper_bound(at);
  if (it == registry().begin()) return nullptr;
  --it;
  Space& space = *it->second;
  if (at + range.nbytes() > space.base() + static_cast<CUdeviceptr>(space.reserved())) return nullptr;
  begin = static_cast<int64_t>(at - space.base());
  end = begin + static_cast<int64_t>(range.nbytes());
  return &space;
}

void forget_space(void* base) {
  const std::lock_guard<std::mutex> lock(registry_mutex);
  registry().erase(reinterpret_cast<CUdeviceptr>(base));
}

}  // namespace

bool mapped_cuda_memory_built() { return true; }

namespace {
at::Tensor mapped_cuda_tensor(int64_t numel, at::ScalarType dtype, const at::Device& device, bool zero_on_map,
                              bool map_all) {
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  const c10::cuda::CUDAGuard on(index);
  const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  CUdeviceptr base = 0;
  {
    const std::lock_guard<std::mutex> lock(registry_mutex);
    auto space = std::make_unique<Space>(bytes, index, zero_on_map, map_all);
    base = space->base();
    registry()[base] = std::move(space);
  }
  return at::for_blob(reinterpret_cast<void*>(base), {numel})
      .options(at::TensorOptions().device(at::Device(at::kCUDA, index)).dtype(dtype))
      .deleter(forget_space)
      .make_tensor();
}
}  // namespace

at::Tensor mapped_cuda_zeros(int64_t numel, at::ScalarType dtype, const at::Device& device, bool zero_on_map) {
  at::Tensor out = mapped_cuda_tensor(numel, dtype, device, zero_on_map, /*map_all=*/true);
  out.zero_();
  return out;
}

at::Tensor mapped_cuda_reserved(int64_t numel, at::ScalarType dtype, const at::Device& device, bool zero_on_map) {
  return mapped_cuda_tensor(numel, dtype, device, zero_on_map, /*map_all=*/false);
}

namespace {
// Calls (space.*change)(begin, end) for the space holding range; false when none does.
bool change_mapping(const at::Tensor& range, void (Space::*change)(int64_t, int64_t)) {
  if (!range.is_cuda()) return false;  // before the lock: the CPU's gradient hooks ask every step
  const std::lock_guard<std::mutex> lock(registry_mutex);
  int64_t begin = 0, end = 0;
  Space* space = space_of(range, begin, end);
  if (space) (space->*change)(begin, end);
  return space != nullptr;
}
}  // namespace

bool release_mapped(const at::Tensor& range) { return change_mapping(range, &Space::release); }
bool acquire_mapped(const at::Tensor& range) { return change_mapping(range, &Space::acquire); }

int64_t mapped_cuda_bytes() {
  const std::lock_guard<std::mutex> lock(registry_mutex);
  return mapped_now;
}

int64_t peak_mapped_cuda_bytes() {
  const std::lock_guard<std::mutex> lock(registry_mutex);
  return mapped_peak;
}

int64_t reserved_cuda_bytes() {
  const std::lock_guard<std::mutex> lock(registry_mutex);
  return reserved_now;
}

#else  // a build without the CUDA runtime: nothing is ever mapped

bool mapped_cuda_memory_built() { return false; }
at::Tensor mapped_cuda_zeros(int64_t, at::ScalarType, const at::Device& device, bool) {
  throw usage_failure("[distributed] shard = \"parameters\" on " + device.str() +
                      ": this build has no CUDA runtime to map memory with; use shard = \"gradients\"");
}
at::Tensor mapped_cuda_reserved(int64_t numel, at::ScalarType dtype, const at::Device& device, bool zero_on_map) {
  return mapped_cuda_zeros(numel, dtype, device, zero_on_map);  // refuses, as above
}
bool release_mapped(const at::Tensor&) { return false; }
bool acquire_mapped(const at::Tensor&) { return false; }
int64_t mapped_cuda_bytes() { return 0; }
int64_t peak_mapped_cuda_bytes() { return 0; }
int64_t reserved_cuda_bytes() { return 0; }

#endif

}  // namespace loom
