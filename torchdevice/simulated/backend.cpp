// The simulated devices' backend: what torch's C++ asks of a PrivateUse1 backend.
//
// Built at first use by torchdevice/simulated/backend.py (torch's cpp_extension, the machine's C++ compiler) and
// loaded as the library of the `torchdevice_sim` ops; where it cannot be built, no simulated target runs (the runtime
// takes the cpu target and says why). It gives the device:
// - hooks (PrivateUse1HooksInterface): built and available, one generator per device, a pinned-memory allocator for
//   the host (DDP's reducer pins its map of used parameters for a device that is not the CPU), the device of a pointer,
//   storage resizing, device counting and the current device;
// - a device guard (DeviceGuardImplInterface): the current device per thread, one stream per device, events that
//   are complete when recorded (every kernel has finished when it returns);
// - memory: the host's, per device, counted while it lives as the profile counts it (`configure`: on a GPU by CUDA's
//   caching allocator, caching_allocator.h, holding a device's memory to its card's and raising CUDA's
//   out-of-memory error past it; on the Mac byte for byte), made by `empty_strided` or wrapped around a host
//   tensor's storage (`wrap`, no copy), and given to C++ code that allocates for the device itself (SetAllocator);
// - on a GPU, CUDA's refusal of the device in a process forked after its parent used it;
// - `set_data`: `param.data = tensor` between the host and the device, as torch allows it between the host and
//   MPS (its check knows torch's own backends, not PrivateUse1).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_set>
#include <vector>
#ifndef _WIN32
#include <pthread.h>
#endif

#include "caching_allocator.h"

namespace {

const c10::DeviceType kDevice = c10::DeviceType::PrivateUse1;
constexpr int kMaxDevices = 16;

// One device's memory counted block by block (the Mac's, bounded by the host's): live and peak bytes, and those its
// cache reserves.
struct Memory {
  std::atomic<int64_t> live{0}, peak{0}, reserved{0}, peak_reserved{0}, allocations{0}, frees{0};
};

std::array<Memory, kMaxDevices> memory;
int64_t granularity = 1;           // blocks are rounded up to a multiple of it
int64_t segment = 1;               // the cache reserves memory by segments of this size
std::string shown_type = "device";  // what the program calls the device ("cuda", "mps")
std::mutex memory_mutex;
bool caching = false;  // the devices' memory is CUDA's caching allocator's (a GPU's), not counted byte for byte
cuda_caching::Settings settings;
std::array<cuda_caching::Device, kMaxDevices> gpus;

int64_t rounded(int64_t nbytes) { return (nbytes + granularity - 1) / granularity * granularity; }

void raise_peak(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load();
  while (value > seen && !peak.compare_exchange_weak(seen, value)) {
  }
}

// A process forked after its parent used the GPU cannot use it: CUDA refuses it at the child's first use of the
// device, here its first allocation on it (where the devices refuse forks: `configure`).
bool refuses_fork = false;
bool bad_fork = false;

void forked_child() {
  bad_fork = refuses_fork &&
             (std::any_of(memory.begin(), memory.end(), [](const Memory& m) { return m.allocations.load() > 0; }) ||
              std::any_of(gpus.begin(), gpus.end(), [](const cuda_caching::Device& d) { return d.num_device_alloc > 0; }));
}

// `torch._C._cuda_attach_out_of_memory_observer`'s observers: called with the device, the segment's size, the memory
// the process may use and the memory free, before CUDA's out-of-memory error is raised.
using OomObserver = void (*)(int64_t, int64_t, int64_t, int64_t);
std::vector<OomObserver> oom_observers;

// An allocation as it was counted: its bytes, and its block of CUDA's allocator (null where counted byte for byte).
struct Counted {
  int64_t bytes;
  cuda_caching::Block* block;
};

// Count `nbytes` of new memory on `index`; on a GPU, refused past its card's memory as CUDA's allocator refuses it.
Counted count_in(c10::DeviceIndex index, int64_t nbytes) {
  TORCH_CHECK(!bad_fork, "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must "
              "use the 'spawn' start method");
  if (caching) {  // (set by configure, before any allocation of an installation)
    if (nbytes == 0) {
      return {0, nullptr};  // CUDA's allocator gives no block to an empty tensor
    }
    auto context = settings.history.context(1);  // before the lock: gathering Python's frames takes the GIL
    cuda_caching::OutOfMemory oom;
    cuda_caching::Block* block = nullptr;
    std::vector<OomObserver> observers;
    {
      std::lock_guard<std::mutex> lock(memory_mutex);
      block = gpus[index].malloc(settings, nbytes, context, oom);
      if (block == nullptr) {
        observers = oom_observers;
      }
    }
    if (block == nullptr) {  // CUDA's observers are called without its lock (they may take a snapshot), then it raises
      for (auto observer : observers) {
        observer(index, oom.alloc_size, oom.allowed, oom.free);
      }
      TORCH_CHECK_WITH(OutOfMemoryError, false, oom.message);
    }
    return {block->size, block};
  }
  auto& m = memory[index];  // counted byte for byte: atomics, no lock
  nbytes = rounded(nbytes);
  int64_t live = m.live += nbytes;
  m.allocations++;
  raise_peak(m.peak, live);
  int64_t needed = (live + segment - 1) / segment * segment;
  raise_peak(m.reserved, needed);
  raise_peak(m.peak_reserved, needed);
  return {nbytes, nullptr};
}

void count_out(c10::DeviceIndex index, const Counted& counted) {
  if (counted.block != nullptr) {
    auto context = settings.history.context(3);
    std::lock_guard<std::mutex> lock(memory_mutex);
    gpus[index].free(settings, counted.block, context);
    return;
  }
  memory[index].live -= counted.bytes;
  memory[index].frees++;
}

struct Block {
  void* data;
  Counted counted;
  c10::DeviceIndex index;
};

void free_block(void* ctx) {
  auto* block = static_cast<Block*>(ctx);
  count_out(block->index, block->counted);
  c10::free_cpu(block->data);
  delete block;
}

c10::DeviceIndex current_device();

// Device memory: host memory, counted while it lives; one allocator per device, and one for the current device.
struct DeviceAllocator final : c10::Allocator {
  c10::DeviceIndex index = -1;  // -1: the current device
  c10::DataPtr allocate(size_t nbytes) override {
    auto device = index < 0 ? current_device() : index;
    auto counted = count_in(device, static_cast<int64_t>(nbytes));
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    return {data, new Block{data, counted, device}, &free_block, c10::Device(kDevice, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

DeviceAllocator device_allocator;
std::array<DeviceAllocator, kMaxDevices> allocators;

DeviceAllocator* allocator_of(std::optional<c10::Device> device) {
  return device && device->has_index() ? &allocators[device->index()] : &device_allocator;
}

// Pinned host memory: the host's, remembered as pinned while it lives.
std::mutex pinned_mutex;
std::unordered_set<const void*> pinned;

void free_pinned(void* data) {
  {
    std::lock_guard<std::mutex> lock(pinned_mutex);
    pinned.erase(data);
  }
  c10::free_cpu(data);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (data) {
      std::lock_guard<std::mutex> lock(pinned_mutex);
      pinned.insert(data);
    }
    return {data, data, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

PinnedAllocator pinned_allocator;

struct Hooks final : at::PrivateUse1HooksInterface {
  std::vector<at::Generator> generators;
  c10::DeviceIndex devices = 1;
  thread_local static c10::DeviceIndex current;

  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return devices; }
  void setCurrentDevice(c10::DeviceIndex device) const override { current = device; }
  c10::DeviceIndex getCurrentDevice() const override { return current; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    auto previous = current;
    current = device;
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }
  bool isPinnedPtr(const void* data) const override {
    std::lock_guard<std::mutex> lock(pinned_mutex);
    return pinned.count(data) > 0;
  }
  at::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator; }
  at::Device getDeviceFromPtr(void*) const override { return {kDevice, current}; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    auto index = device < 0 ? current : device;
    TORCH_CHECK(index < devices, "Invalid device index ", index);
    return generators[index];
  }
  at::Generator getNewGenerator(c10::DeviceIndex) const override {
    return at::make_generator<at::CPUGeneratorImpl>(c10::detail::getNonDeterministicRandom());
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
    auto grown = allocators[storage.device().index()].allocate(newsize);
    auto kept = std::min(storage.nbytes(), newsize);
    if (kept > 0) {
      std::memcpy(grown.get(), storage.data(), kept);
    }
    storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(grown));
    storage.unsafeGetStorageImpl()->set_nbytes(newsize);
  }
};

thread_local c10::DeviceIndex Hooks::current = 0;
Hooks* hooks = nullptr;

c10::DeviceIndex current_device() { return hooks ? hooks->getCurrentDevice() : 0; }

// The device guard: the current device is the hooks' (per thread); one stream per device, as MPS has, and events
// complete when recorded, every kernel having finished when it returns.
struct Guard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDevice; }
  c10::Device exchangeDevice(c10::Device device) const override {
    return {kDevice, hooks->exchangeDevice(device.index())};
  }
  c10::Device getDevice() const override { return {kDevice, hooks->getCurrentDevice()}; }
  void setDevice(c10::Device device) const override { hooks->setCurrentDevice(device.index()); }
  void uncheckedSetDevice(c10::Device device) const noexcept override { hooks->setCurrentDevice(device.index()); }
  c10::Stream getStream(c10::Device device) const override { return c10::Stream(c10::Stream::DEFAULT, device); }
  c10::Stream getDefaultStream(c10::Device device) const override { return getStream(device); }
  c10::Stream getNewStream(c10::Device device, int) const override { return getStream(device); }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool) const override { return getStream(device); }
  c10::Stream exchangeStream(c10::Stream stream) const override { return stream; }
  c10::DeviceIndex deviceCount() const noexcept override { return hooks->deviceCount(); }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

// Register the hooks, the device guard and the allocator (once per process) for as many devices as `generators`
// (the devices' default generators, the Python ones).
void register_backend(const c10::List<std::optional<at::Generator>>& generators) {
  TORCH_CHECK(hooks == nullptr, "torchdevice: the simulated backend is registered already");
  TORCH_CHECK(generators.size() <= kMaxDevices, "torchdevice: at most ", kMaxDevices, " simulated devices");
  hooks = new Hooks();
  for (size_t i = 0; i < generators.size(); i++) {
    std::optional<at::Generator> generator = generators.get(i);
    TORCH_CHECK(generator.has_value(), "torchdevice: a device without a generator");
    hooks->generators.push_back(*generator);
  }
  for (int i = 0; i < kMaxDevices; i++) {
    allocators[i].index = static_cast<c10::DeviceIndex>(i);
  }
  at::RegisterPrivateUse1HooksInterface(hooks);
  static c10::impl::DeviceGuardImplRegistrar guard(kDevice, new Guard());
  c10::SetAllocator(kDevice, &device_allocator);
#ifndef _WIN32
  pthread_atfork(nullptr, nullptr, &forked_child);
#endif
}

at::Tensor make(c10::Storage storage, const at::Tensor& like) {
  auto made = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                       like.dtype());
  made.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  return made;
}

struct Held {
  c10::Storage host;
  Counted counted;
  c10::DeviceIndex index;
};

void release_held(void* ctx) {
  auto* held = static_cast<Held*>(ctx);
  count_out(held->index, held->counted);
  delete held;
}

// Device memory of device `index` that is host storage `host`'s (counted, and keeping it alive).
c10::DataPtr held(const c10::Storage& host, c10::DeviceIndex index) {
  auto counted = count_in(index, static_cast<int64_t>(host.nbytes()));
  auto* kept = new Held{host, counted, index};
  return {const_cast<void*>(host.data()), kept, &release_held, c10::Device(kDevice, index)};
}

// A device tensor of device `index` (-1: the current one) over host tensor `host`'s memory (its sizes, strides,
// offset and dtype), which keeps it alive.
at::Tensor wrap(const at::Tensor& host, int64_t index) {
  const auto& storage = host.storage();
  auto device = static_cast<c10::DeviceIndex>(index < 0 ? current_device() : index);
  return make(c10::Storage(c10::Storage::use_byte_size_t(), storage.nbytes(), held(storage, device),
                           &allocators[device], true),
              host);
}

// Device tensor `self`'s storage from now on in host tensor `host`'s memory (as many bytes; the host's shared memory,
// which other processes map as CUDA's IPC maps a GPU's), its bytes copied there.
void adopt(const at::Tensor& self, const at::Tensor& host) {
  auto storage = self.storage();
  const auto& shared = host.storage();
  TORCH_CHECK(shared.nbytes() == storage.nbytes(), "torchdevice: adopt needs ", storage.nbytes(), " bytes");
  if (storage.nbytes() > 0) {
    std::memcpy(shared.mutable_data(), storage.data(), storage.nbytes());
  }
  auto* impl = storage.unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(c10::DataPtr(nullptr, storage.device()));  // the device's memory freed, counted out
  impl->set_data_ptr_noswap(held(shared, storage.device().index()));
}

// The host memory device tensor `self`'s storage is (a uint8 host tensor over it), where it was wrapped around host
// memory (`wrap`, `adopt`); undefined where the device allocated it.
at::Tensor held_host(const at::Tensor& self) {
  const auto& data = self.storage().data_ptr();
  if (data.get_deleter() != &release_held) {
    return {};
  }
  c10::Storage host = static_cast<Held*>(data.get_context())->host;
  auto nbytes = static_cast<int64_t>(host.nbytes());
  auto bytes = at::detail::make_tensor<c10::TensorImpl>(std::move(host), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                        caffe2::TypeMeta::Make<uint8_t>());
  bytes.unsafeGetTensorImpl()->set_sizes_contiguous({nbytes});
  return bytes;
}

// -- The device's kernels in C++: the CPU's, on host views of the device's memory ---------------------------------
//
// A host view is a CPU tensor over a device tensor's memory: one host storage per device storage of a call, so that
// the CPU's kernel sees what aliases what, each holding its device storage while it lives. The CPU's kernel computes
// the call as it computes it for host tensors; then what it did becomes the device's: storages it grew (an `out=`
// tensor resized, an in-place op that grows its tensor) are adopted by their device storages, device tensors take
// the sizes their host views were given, the arguments it returns are the caller's own tensors, views of the call's
// host storages are device views of the device storages, new host memory is wrapped (no copy). Before computing,
// the call is refused as the device refuses it: float64 and complex128 where the device has none, a host tensor that
// is not a scalar mixed with device tensors, and, where the device's kernel wrapper checks its tensors' devices first
// (CUDA's, `RegisterCUDA.cpp`), a tensor not on the first one's device, in the wrapper's words. Registered
// (`use_kernels`) for the overloads the Python side chose: those whose refusals are no more than these.

struct HostView final : c10::TensorImpl {
  HostView(c10::Storage storage, caffe2::TypeMeta dtype)
      : c10::TensorImpl(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), dtype) {}
};

struct Refusals {
  bool wide = false;
  std::string wide_message;
};

Refusals refusals;
std::unique_ptr<torch::Library> kernels;

// A kernel wrapper's device check (c10::impl::check_and_update_common_device): its name and the positions and names
// of the arguments it checks, in its order.
struct DeviceCheck {
  std::string wrapper;
  std::vector<std::pair<size_t, std::string>> arguments;
};
// By operator, found by its schema (one per registered operator: no name built per call); `cudnn_check`:
// `cudnn_convolution`'s, which a GPU's convolution meets after its own check.
std::unordered_map<const c10::FunctionSchema*, DeviceCheck> device_checks;
const DeviceCheck* cudnn_check = nullptr;

std::string device_name(const c10::Device& device) {
  return device.type() == kDevice ? shown_type + ":" + std::to_string(device.index()) : device.str();
}

// A wrapper's check of a call's arguments (c10::impl::check_and_update_common_device): the first defined tensor's
// device is the one every other must be on (c10's common_device_check_failure words).
void check_devices(const DeviceCheck& check_of, const torch::jit::Stack& stack, size_t first) {
  std::optional<c10::Device> common;
  auto check = [&](const at::Tensor& t, const std::string& name) {
    if (!t.defined()) {
      return;
    }
    if (!common) {
      common = t.device();
    } else if (*common != t.device()) {
      TORCH_CHECK(false, "Expected all tensors to be on the same device, but got ", name, " is on ",
                  device_name(t.device()), ", different from other tensors on ", device_name(*common),
                  " (when checking argument in method ", check_of.wrapper, ")");
    }
  };
  for (const auto& [position, name] : check_of.arguments) {
    const c10::IValue& value = stack[first + position];
    if (value.isTensor()) {
      check(value.toTensor(), name);
    } else if (value.isList()) {
      for (const c10::IValue& item : value.toListRef()) {
        if (item.isTensor()) {
          check(item.toTensor(), name);
        }
      }
    }
  }
}

// What a tensor's type is called in torch's C++ messages (`CUDAFloatType`: the device type's name in capitals, as
// c10 names its backends; torch's Python names it `torch.cuda.FloatTensor` in the message the program reads).
std::string type_name(const at::Tensor& t) {
  std::string backend = t.device().type() != kDevice ? "cpu" : shown_type;
  std::transform(backend.begin(), backend.end(), backend.begin(), [](unsigned char c) { return std::toupper(c); });
  return backend + c10::toString(t.scalar_type()) + "Type";
}

// A convolution's own check of its input's and parameters' types (Convolution.cpp's
// check_input_same_type_as_parameters), for the backend a GPU's convolution takes: cuDNN's for an input on the
// device (then cuDNN's kernel wrapper's device check), oneDNN's (MKLDNN's) for a float input on the host.
void check_convolution(const torch::jit::Stack& stack, size_t first) {
  const at::Tensor& input = stack[first].toTensor();
  const at::Tensor& weight = stack[first + 1].toTensor();
  at::Tensor bias = stack[first + 2].isTensor() ? stack[first + 2].toTensor() : at::Tensor();
  auto same = [&input](const at::Tensor& t) { return input.options().type_equal(t.options()); };
  if (input.device().type() == kDevice && at::globalContext().userEnabledCuDNN()) {
    TORCH_CHECK(same(weight), "Input type (", type_name(input), ") and weight type (", type_name(weight),
                ") should be the same");
    TORCH_CHECK(!bias.defined() || same(bias), "Input type (", type_name(input), ") and bias type (",
                type_name(bias), ") should be the same");
    if (cudnn_check != nullptr) {
      check_devices(*cudnn_check, stack, first);
    }
  } else if (input.device().is_cpu() && input.scalar_type() == c10::kFloat &&
             at::globalContext().userEnabledMkldnn()) {
    TORCH_CHECK(same(weight), "Input type (", type_name(input), ") and weight type (", type_name(weight),
                ") should be the same or input should be a MKLDNN tensor and weight is a dense tensor");
    TORCH_CHECK(!bias.defined() || same(bias), "Input type (", type_name(input), ") and bias type (",
                type_name(bias), ") should be the same or input should be a MKLDNN tensor and bias is a dense tensor");
  }
}

// The device's kernel wrapper's check of `op`, where it has one.
void check_devices(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t first) {
  if (device_checks.empty()) {
    return;
  }
  auto found = device_checks.find(&op.schema());
  if (found != device_checks.end()) {
    check_devices(found->second, stack, first);
  }
}

// `convolution` on a GPU: its own check (`check_convolution`), then its CompositeExplicitAutograd kernel (the CPU's
// too), which calls the backend's ops.
void convolution(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  check_convolution(*stack, stack->size() - op.schema().arguments().size());
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

bool is_wide(c10::ScalarType type) { return type == c10::kDouble || type == c10::kComplexDouble; }

void release_storage(void* ctx) { delete static_cast<c10::Storage*>(ctx); }

at::Tensor device_view(const c10::Storage& storage, const at::Tensor& like) {
  auto made = make(storage, like);
  made.unsafeGetTensorImpl()->_set_conj(like.is_conj());
  made.unsafeGetTensorImpl()->_set_neg(like.is_neg());
  return made;
}

struct Call {
  std::unordered_map<c10::TensorImpl*, at::Tensor> views;         // device tensor -> its host view
  std::unordered_map<c10::TensorImpl*, at::Tensor> owners;        // host view -> the device tensor
  std::unordered_map<c10::StorageImpl*, c10::Storage> host_of;    // device storage -> its host storage
  std::unordered_map<c10::StorageImpl*, c10::Storage> device_of;  // host storage -> the device storage
  bool host_array = false, wide = false;
  c10::DeviceIndex index = -1, other = -1;  // the first device tensor's device, and another device's among them

  c10::Storage host_storage(const c10::Storage& storage) {
    auto found = host_of.find(storage.unsafeGetStorageImpl());
    if (found != host_of.end()) {
      return found->second;
    }
    c10::DataPtr data(storage.mutable_data(), new c10::Storage(storage), &release_storage,
                      c10::Device(c10::DeviceType::CPU));
    c10::Storage host(c10::Storage::use_byte_size_t(), storage.nbytes(), std::move(data), c10::GetCPUAllocator(), true);
    host_of.emplace(storage.unsafeGetStorageImpl(), host);
    device_of.emplace(host.unsafeGetStorageImpl(), storage);
    return host;
  }

  at::Tensor to_host(const at::Tensor& t) {
    if (!t.defined()) {
      return t;
    }
    auto* impl = t.unsafeGetTensorImpl();
    if (refusals.wide && is_wide(t.scalar_type()) && !impl->is_wrapped_number()) {
      wide = true;
    }
    if (t.device().type() != kDevice) {
      host_array = host_array || t.dim() > 0;
      return t;
    }
    auto at = t.device().index();
    if (index < 0) {
      index = at;
    } else if (at != index && other < 0) {
      other = at;
    }
    auto found = views.find(impl);
    if (found != views.end()) {
      return found->second;
    }
    auto view = c10::make_intrusive<HostView>(host_storage(t.storage()), t.dtype());
    view->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    view->_set_conj(t.is_conj());
    view->_set_neg(t.is_neg());
    at::Tensor host(std::move(view));
    views.emplace(impl, host);
    owners.emplace(host.unsafeGetTensorImpl(), t);
    return host;
  }

  at::Tensor to_device(const at::Tensor& h) {
    if (!h.defined()) {
      return h;
    }
    auto found = owners.find(h.unsafeGetTensorImpl());
    if (found != owners.end()) {
      return found->second;
    }
    TORCH_CHECK_NOT_IMPLEMENTED(h.layout() == c10::kStrided, "torchdevice: a ", h.layout(),
                                " result of the simulated device's C++ kernel");
    if (h.device().type() != c10::DeviceType::CPU) {
      return h;
    }
    auto storage = device_of.find(h.storage().unsafeGetStorageImpl());
    if (storage != device_of.end()) {
      return device_view(storage->second, h);
    }
    at::Tensor resolved = h.is_conj() ? h.resolve_conj() : h;
    return wrap(resolved.is_neg() ? resolved.resolve_neg() : resolved, index);
  }

  // What the kernel did to the host storages and views, done to the device's.
  void sync() {
    for (auto& [host_impl, storage] : device_of) {
      if (host_impl->data() != storage.data() || host_impl->nbytes() != storage.nbytes()) {  // grown by the kernel
        auto* impl = storage.unsafeGetStorageImpl();
        impl->set_data_ptr_noswap(held(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(host_impl)),
                                       storage.device().index()));
        impl->set_nbytes(host_impl->nbytes());
      }
    }
    for (auto& [view_impl, owner] : owners) {
      auto* impl = owner.unsafeGetTensorImpl();
      if (impl->sizes() != view_impl->sizes() || impl->strides() != view_impl->strides() ||
          impl->storage_offset() != view_impl->storage_offset()) {
        impl->set_sizes_and_strides(view_impl->sizes(), view_impl->strides(), view_impl->storage_offset());
      }
      impl->_set_conj(view_impl->is_conj());  // a kernel may flip them (linalg_lu_solve's out= with left=False)
      impl->_set_neg(view_impl->is_neg());
    }
  }
};

c10::IValue mapped(const c10::IValue& value, const std::function<at::Tensor(const at::Tensor&)>& fn) {
  if (value.isTensor()) {
    return fn(value.toTensor());
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : value.toTensorList()) {
      out.push_back(fn(t));
    }
    return out;
  }
  if (value.isList() && value.toList().elementType()->kind() == c10::TypeKind::OptionalType) {
    auto list = value.toList();
    if (list.elementType()->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType) {
      c10::List<std::optional<at::Tensor>> out;
      for (size_t i = 0; i < list.size(); i++) {
        c10::IValue item = list.get(i);
        out.push_back(item.isNone() ? std::optional<at::Tensor>() : std::optional<at::Tensor>(fn(item.toTensor())));
      }
      return out;
    }
  }
  return value;
}

bool is_a(const c10::TypePtr& type, c10::TypeKind kind) {
  return type->kind() == kind ||
         (type->kind() == c10::TypeKind::OptionalType && type->castRaw<c10::OptionalType>()->getElementType()->kind() == kind);
}

// The in-place overload `X_` to run for an `X.out` call on the stack whose `out=` is its `self`: how the composite code
// of `X_` (addr_) calls it, where the CPU's kernel sees one tensor (`&result == &self`) and checks it as `X_` does;
// boxed, the two are two tensors to it.
std::optional<c10::OperatorHandle> in_place_of_out(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                                   size_t first) {
  const auto& schema = op.schema();
  const auto& arguments = schema.arguments();
  if (schema.overload_name() != "out" || arguments.size() < 2 || arguments.back().name() != "out") {
    return std::nullopt;
  }
  const c10::IValue& self = stack[first];
  const c10::IValue& out = stack[first + arguments.size() - 1];
  if (!self.isTensor() || !out.isTensor() ||
      self.toTensor().unsafeGetTensorImpl() != out.toTensor().unsafeGetTensorImpl()) {
    return std::nullopt;
  }
  auto twin = c10::Dispatcher::singleton().findOp({schema.name() + "_", ""});
  if (!twin || twin->schema().arguments().size() != arguments.size() - 1) {
    return std::nullopt;
  }
  for (size_t i = 0; i + 1 < arguments.size(); i++) {
    if (twin->schema().arguments()[i].name() != arguments[i].name()) {
      return std::nullopt;
    }
  }
  return twin;
}

// Placed: whether a host tensor that is not a scalar, or tensors of two devices, are refused; Checked: whether the call is
// refused at all (copies are not: the device holds what it holds); Indexed: `index`'s indices on the host or on the
// indexed tensor's device only (TensorAdvancedIndexing.cpp's check_indices_on_cpu_or_selfdevice).
template <bool Placed, bool Checked = true, bool Indexed = false>
void kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  auto first = stack->size() - arguments.size();
  if (Checked) {
    check_devices(op, *stack, first);
  }
  c10::Device self = Indexed ? (*stack)[first].toTensor().device() : c10::Device(c10::DeviceType::CPU);
  Call call;
  auto to_host = [&call](const at::Tensor& t) { return call.to_host(t); };
  int64_t generator = -1;
  for (size_t i = 0; i < arguments.size(); i++) {
    c10::IValue& value = (*stack)[first + i];
    const auto& type = arguments[i].real_type();
    if (value.isNone()) {
      if (is_a(type, c10::TypeKind::GeneratorType)) {
        generator = static_cast<int64_t>(i);
      }
      continue;
    }
    if (refusals.wide && value.isInt() && is_a(type, c10::TypeKind::ScalarTypeType)) {
      call.wide = call.wide || is_wide(static_cast<c10::ScalarType>(value.toInt()));
    }
    value = mapped(value, to_host);
  }
  if (generator >= 0) {  // the device's own, as its kernels draw from
    (*stack)[first + generator] = hooks->getDefaultGenerator(call.index);
  }
  TORCH_CHECK_TYPE(!(Checked && call.wide), refusals.wide_message);
  if (Placed && call.index >= 0 && (call.host_array || call.other >= 0)) {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", shown_type,
                ":", static_cast<int>(call.index), " and ",
                call.other >= 0 ? shown_type + ":" + std::to_string(call.other) : std::string("cpu"), "!");
  }
  if (Indexed && (self.type() == kDevice ? call.other >= 0 : call.index >= 0)) {
    TORCH_CHECK(false, "indices should be either on cpu or on the same device as the indexed tensor (",
                self.type() == kDevice ? shown_type + ":" + std::to_string(self.index()) : std::string("cpu"), ")");
  }
  auto in_place = in_place_of_out(op, *stack, first);
  if (in_place) {
    stack->pop_back();  // its out=, which is its self
    in_place->redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  } else {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  }
  call.sync();
  auto results = op.schema().returns().size();
  auto to_device = [&call](const at::Tensor& t) { return call.to_device(t); };
  for (size_t i = stack->size() - results; i < stack->size(); i++) {
    (*stack)[i] = mapped((*stack)[i], to_device);
  }
}

// The CPU's kernel on the device's tensors as they are: views of a storage, which torch writes for any device.
void as_they_are(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

c10::ScalarType new_dtype(std::optional<c10::ScalarType> dtype) {
  auto type = dtype.value_or(c10::typeMetaToScalarType(c10::get_default_dtype()));
  TORCH_CHECK_TYPE(!(refusals.wide && is_wide(type)), refusals.wide_message);
  return type;
}

// New device memory, as the device allocates it (refusing the dtypes it has none of).
at::Tensor device_empty(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout>,
                        std::optional<c10::Device> device, std::optional<bool>,
                        std::optional<c10::MemoryFormat> format) {
  auto layout = format.value_or(c10::MemoryFormat::Contiguous);
  return at::detail::empty_generic(size, allocator_of(device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   new_dtype(dtype),
                                   layout == c10::MemoryFormat::Preserve ? c10::MemoryFormat::Contiguous : layout);
}

at::Tensor device_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                                std::optional<c10::Layout>, std::optional<c10::Device> device, std::optional<bool>) {
  return at::detail::empty_strided_generic(size, stride, allocator_of(device),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), new_dtype(dtype));
}

// Register the C++ kernel for `ops` and `host_arguments` (aten overload names; the latter take host tensors with
// device tensors), the CPU's for `views`, copies and allocation, with the device's refusals and its kernel wrappers'
// device checks (`checks`: "aten::mm|wrapper_CUDA_mm|0:self|1:mat2"); until `release_kernels`.
void use_kernels(c10::List<std::string> ops, c10::List<std::string> host_arguments, c10::List<std::string> views,
                 bool wide, std::string wide_message, c10::List<std::string> checks) {
  TORCH_CHECK(hooks != nullptr, "torchdevice: register the simulated backend first");
  refusals = Refusals{wide, std::move(wide_message)};
  device_checks.clear();
  cudnn_check = nullptr;
  for (const std::string& row : checks) {
    std::vector<std::string> parts;
    std::stringstream fields(row);
    for (std::string part; std::getline(fields, part, '|');) {
      parts.push_back(part);
    }
    TORCH_CHECK(parts.size() >= 2, "torchdevice: a device check is 'op|wrapper|position:name...', not ", row);
    auto dot = parts[0].find('.');
    auto op = c10::Dispatcher::singleton().findOp(
        {parts[0].substr(0, dot), dot == std::string::npos ? "" : parts[0].substr(dot + 1)});
    if (!op) {
      continue;
    }
    DeviceCheck& check = device_checks[&op->schema()];
    if (parts[0] == "aten::cudnn_convolution") {
      cudnn_check = &check;
    }
    check.wrapper = parts[1];
    for (size_t i = 2; i < parts.size(); i++) {
      auto colon = parts[i].find(':');
      check.arguments.emplace_back(std::stoul(parts[i].substr(0, colon)), parts[i].substr(colon + 1));
    }
  }
  kernels = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
                                             __LINE__);
  for (const std::string& name : ops) {
    kernels->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&kernel<true>>());
  }
  for (const std::string& name : host_arguments) {
    kernels->impl(name.c_str(), name.rfind("index.", 0) == 0
                                    ? torch::CppFunction::makeFromBoxedFunction<&kernel<false, true, true>>()
                                    : torch::CppFunction::makeFromBoxedFunction<&kernel<false>>());
  }
  for (const std::string& name : views) {
    kernels->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&as_they_are>());
  }
  if (!device_checks.empty()) {  // a GPU's: its convolutions check their input's and parameters' types first
    kernels->impl("convolution", torch::CppFunction::makeFromBoxedFunction<&convolution>());
  }
  kernels->impl("copy_", torch::CppFunction::makeFromBoxedFunction<&kernel<false, false>>());
  kernels->impl("empty.memory_format", TORCH_FN(device_empty));
  kernels->impl("empty_strided", TORCH_FN(device_empty_strided));
}

void release_kernels() {
  kernels.reset();
  device_checks.clear();
  cudnn_check = nullptr;
}

// New device memory of device `index` (-1: the current one) for a tensor of `size` and `stride`.
at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype, int64_t index) {
  return at::detail::empty_strided_generic(size, stride, index < 0 ? &device_allocator : &allocators[index],
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
}

// What the devices are: how many, what the program calls them, how their memory is counted (`gpu`: by CUDA's
// caching allocator, each holding its capacity in bytes; else blocks rounded up to `granularity` bytes, reserved by
// `segment`s), whether a process forked after its parent used them is refused them (`fork_refused`).
void configure(int64_t devices, std::string shown, int64_t block, int64_t reserve, bool gpu, bool fork_refused,
               c10::List<int64_t> capacities) {
  TORCH_CHECK(hooks != nullptr, "torchdevice: register the simulated backend first");
  TORCH_CHECK(devices >= 1 && devices <= static_cast<int64_t>(hooks->generators.size()), "torchdevice: ", devices,
              " simulated devices; at most ", hooks->generators.size());
  hooks->devices = static_cast<c10::DeviceIndex>(devices);
  shown_type = std::move(shown);
  refuses_fork = fork_refused;
  granularity = std::max<int64_t>(block, 1);
  segment = std::max<int64_t>(reserve, 1);
  std::lock_guard<std::mutex> lock(memory_mutex);
  caching = gpu;
  for (size_t i = 0; i < kMaxDevices; i++) {  // counted anew: what is live stays, reserved by the new segments
    auto& m = memory[i];
    m.peak = m.live.load();
    m.reserved = (m.live.load() + segment - 1) / segment * segment;
    m.peak_reserved = m.reserved.load();
    gpus[i].index = static_cast<int>(i);
    gpus[i].capacity = i < capacities.size() ? capacities.get(i) : 0;
    if (gpus[i].next_address == 0) {  // where a GPU's first segment is, as a driver maps them (never reused here)
      gpus[i].next_address = (int64_t{0x7f00} << 32) + (static_cast<int64_t>(i) << 36);
    }
    gpus[i].release_cached(settings);  // a new installation's allocator: what is live stays, its peaks from there
    gpus[i].reset_peaks();
    gpus[i].reset_accumulated();
  }
}

// CUDA's allocator settings (PYTORCH_ALLOC_CONF, parsed as torch parses it): max_split_size (-1: unlimited),
// max_non_split_rounding_size, large_segment_size, roundup_power2_divisions per interval,
// garbage_collection_threshold; `error`: torch's words for a bad settings string, raised at the first allocation.
void configure_caching(int64_t max_split, int64_t max_non_split_rounding, int64_t large_segment,
                       c10::List<int64_t> divisions, double gc, std::string error) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  settings.error = std::move(error);
  settings.max_split_size = max_split < 0 ? cuda_caching::kUnlimited : max_split;
  settings.max_non_split_rounding = max_non_split_rounding;
  settings.large_segment_size = large_segment;
  for (size_t i = 0; i < settings.divisions.size(); i++) {
    settings.divisions[i] = i < divisions.size() ? divisions.get(i) : 0;
  }
  settings.gc_threshold = gc;
}

// Device `index`'s counters: live, peak, reserved, peak reserved bytes, allocations, frees.
std::vector<int64_t> memory_stats(int64_t index) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  if (caching) {
    const auto& gpu = gpus.at(index);
    const auto &allocated = gpu.allocated_bytes.of[0], &reserved = gpu.reserved_bytes.of[0];
    return {allocated.current, allocated.peak, reserved.current, reserved.peak, gpu.allocation.of[0].allocated,
            gpu.allocation.of[0].freed};
  }
  const auto& m = memory.at(index);
  return {m.live.load(), m.peak.load(), m.reserved.load(), m.peak_reserved.load(), m.allocations.load(),
          m.frees.load()};
}

// Device `index`'s statistics as CUDA's allocator keeps them (cuda_caching::Device::stats).
std::vector<int64_t> allocator_stats(int64_t index) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  return gpus.at(index).stats(settings);
}

// Python's frames where the allocator acts (as torch's own snapshot gathers them for CUDA's: Python and TorchScript).
cuda_caching::Context gather_python() { return torch::CapturedTraceback::gather(true, true, false); }

// `torch.cuda.memory._record_memory_history`, for every device, with torch's checks of its options: `enabled` None
// (off), "state" (the blocks' contexts) or "all" (and the trace of the last `max_entries` actions); `context` when
// frames are gathered; `stacks` "python" or "all" (C++ frames are not gathered: the simulation's are not a GPU's).
void record_history(std::optional<std::string> enabled, std::optional<std::string> context, std::string stacks,
                    int64_t max_entries, bool clear_history, std::vector<std::string> skip_actions) {
  TORCH_CHECK(!enabled || *enabled == "state" || *enabled == "all", "expected state to be 'state', 'all', or None");
  TORCH_CHECK(!context || *context == "state" || *context == "alloc" || *context == "all",
              "expected context to be 'state', 'alloc', 'all', or None");
  TORCH_CHECK(stacks == "python" || stacks == "all", "expected stacks to be 'python', or 'all'");
  static const std::array<const char*, cuda_caching::kActions> names{
      "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom"};
  std::lock_guard<std::mutex> lock(memory_mutex);
  auto& h = settings.history;
  h.enabled = enabled.has_value();
  h.max_entries = enabled && *enabled == "all" ? static_cast<size_t>(std::max<int64_t>(max_entries, 1)) : 1;
  h.when = !context ? 0 : *context == "state" ? 1 : *context == "alloc" ? 2 : 3;
  for (size_t i = 0; i < names.size(); i++) {
    h.skip[i] = std::find(skip_actions.begin(), skip_actions.end(), names[i]) != skip_actions.end();
  }
  h.gather = &gather_python;
  for (auto& gpu : gpus) {
    if (!h.enabled || clear_history || gpu.trace.size() > h.max_entries) {
      gpu.clear_trace();
    }
  }
}

// Device `index`'s segments and their blocks, and its trace (cuda_caching::Device::snapshot, trace_rows), their
// contexts as tracebacks (each: its frames' count, then their indices) of frames (each: file, function, line).
std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, std::vector<std::string>>
allocator_snapshot(int64_t index) {
  std::vector<cuda_caching::Context> contexts;
  std::vector<int64_t> segments, trace;
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    segments = gpus.at(index).snapshot(contexts);
    trace = gpus.at(index).trace_rows(contexts);
  }
  std::vector<torch::CapturedTraceback*> captured;
  for (const auto& context : contexts) {
    captured.push_back(static_cast<torch::CapturedTraceback*>(context.get()));  // all gathered by gather_python
  }
  auto symbolized = torch::symbolize(captured);
  std::vector<int64_t> tracebacks;
  for (const auto& frames : symbolized.tracebacks) {
    tracebacks.push_back(static_cast<int64_t>(frames.size()));
    tracebacks.insert(tracebacks.end(), frames.begin(), frames.end());
  }
  std::vector<std::string> frames;
  for (const auto& frame : symbolized.all_frames) {
    frames.insert(frames.end(), {frame.filename, frame.funcname, std::to_string(frame.lineno)});
  }
  return {segments, trace, tracebacks, frames};
}

// Peaks start again from what is live and reserved now (`torch.cuda.reset_peak_memory_stats`).
void reset_peaks(int64_t index) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  gpus.at(index).reset_peaks();
  auto& m = memory.at(index);
  m.peak = m.live.load();
  m.peak_reserved = m.reserved.load();
}

// `torch.cuda.reset_accumulated_memory_stats`.
void reset_accumulated(int64_t index) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  gpus.at(index).reset_accumulated();
}

// `torch.cuda.set_per_process_memory_fraction`: the process may reserve that share of the card's memory.
void set_memory_fraction(int64_t index, double fraction) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  auto& gpu = gpus.at(index);
  gpu.allowed = static_cast<int64_t>(fraction * static_cast<double>(gpu.capacity));
  gpu.set_fraction = fraction < 1.0;  // the whole card: no limit
}

// The cache gives back what no block uses (`torch.cuda.empty_cache`): on a GPU its free segments; counted block by
// block, the segments of the live bytes stay reserved.
void empty_cache(int64_t index) {
  auto context = settings.history.context(3);
  std::lock_guard<std::mutex> lock(memory_mutex);
  if (caching) {
    gpus.at(index).release_cached(settings, context);
    return;
  }
  auto& m = memory.at(index);
  m.reserved = (m.live.load() + segment - 1) / segment * segment;
}

// `self.data = data` without torch's check that the two are of one backend: what VariableHooks::set_data does.
void set_data(const at::Tensor& self, const at::Tensor& data) {
  auto* meta = torch::autograd::impl::get_autograd_meta(self);
  if (meta) {
    std::lock_guard<std::mutex> lock(meta->mutex_);
    auto prior = meta->grad_accumulator_.lock();
    if (prior && (!data.options().type_equal(self.options()) || prior->input_metadata(0).device() != data.device())) {
      meta->grad_accumulator_.reset();
    }
  }
  self.unsafeGetTensorImpl()->shallow_copy_from(data.getIntrusivePtr());
}

}  // namespace

// An out-of-memory observer (a C function: the Python side's ctypes callback, which takes the GIL itself).
extern "C" void torchdevice_sim_attach_oom_observer(OomObserver observer) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  oom_observers.push_back(observer);
}

// The observers gone (the installation's end).
extern "C" void torchdevice_sim_detach_oom_observers() {
  std::lock_guard<std::mutex> lock(memory_mutex);
  oom_observers.clear();
}

TORCH_LIBRARY(torchdevice_sim, m) {
  m.def("register_backend(Generator?[] generators) -> ()", &register_backend);
  m.def("configure(int devices, str shown, int block, int reserve, bool gpu, bool fork_refused, int[] capacities) -> ()",
        &configure);
  m.def("configure_caching(int max_split, int max_non_split_rounding, int large_segment, int[] divisions, float gc, "
        "str error) -> ()",
        &configure_caching);
  m.def("allocator_stats(int index) -> int[]", &allocator_stats);
  m.def("allocator_snapshot(int index) -> (int[], int[], int[], str[])", &allocator_snapshot);
  m.def("record_history(str? enabled, str? context, str stacks, int max_entries, bool clear_history, "
        "str[] skip_actions) -> ()",
        &record_history);
  m.def("reset_accumulated(int index) -> ()", &reset_accumulated);
  m.def("set_memory_fraction(int index, float fraction) -> ()", &set_memory_fraction);
  m.def("wrap(Tensor host, int index=-1) -> Tensor", &wrap);
  m.def("empty_strided(int[] size, int[] stride, ScalarType dtype, int index=-1) -> Tensor", &empty_strided);
  m.def("set_data(Tensor(a!) self, Tensor data) -> ()", &set_data);
  m.def("adopt(Tensor(a!) self, Tensor host) -> ()", &adopt);
  m.def("held_host(Tensor self) -> Tensor", &held_host);
  m.def("memory_stats(int index) -> int[]", &memory_stats);
  m.def("reset_peaks(int index) -> ()", &reset_peaks);
  m.def("empty_cache(int index) -> ()", &empty_cache);
  m.def("use_kernels(str[] ops, str[] host_arguments, str[] views, bool wide, str wide_message, str[] checks) -> ()",
        &use_kernels);
  m.def("release_kernels() -> ()", &release_kernels);
}
