// The simulated devices' backend in C++: what torch's C++ asks of a PrivateUse1 backend that Python cannot answer.
//
// Built at first use by torchdevice/simulated/backend.py (torch's cpp_extension, the machine's C++ compiler) and
// loaded as the library of the `torchdevice_sim` ops; where it cannot be built, the Python backend stands in
// (torchdevice/simulated/device.py says what it lacks). It gives the device:
// - hooks (PrivateUse1HooksInterface): built and available, one generator per device, a pinned-memory allocator for
//   the host (DDP's reducer pins its map of used parameters for a device that is not the CPU), the device of a pointer,
//   storage resizing, device counting and the current device;
// - memory: the host's, counted while it lives (`allocated`), made by `empty_strided` or wrapped around a host
//   tensor's storage (`wrap`, no copy), and given to C++ code that allocates for the device itself (SetAllocator);
// - `set_data`: `param.data = tensor` between the host and the device, as torch allows it between the host and
//   MPS (its check knows torch's own backends, not PrivateUse1).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace {

const c10::DeviceType kDevice = c10::DeviceType::PrivateUse1;
std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> peak_bytes{0};

void count(int64_t n) {
  int64_t now = live_bytes += n;
  int64_t peak = peak_bytes.load();
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
}

struct Block {
  void* data;
  size_t nbytes;
};

void free_block(void* ctx) {
  auto* block = static_cast<Block*>(ctx);
  count(-static_cast<int64_t>(block->nbytes));
  c10::free_cpu(block->data);
  delete block;
}

// Device memory: host memory, counted while it lives.
struct DeviceAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    count(static_cast<int64_t>(nbytes));
    return {data, new Block{data, nbytes}, &free_block, c10::Device(kDevice, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

DeviceAllocator device_allocator;

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
  thread_local static c10::DeviceIndex current;

  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(generators.size()); }
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
    TORCH_CHECK(index < static_cast<c10::DeviceIndex>(generators.size()), "Invalid device index ", index);
    return generators[index];
  }
  at::Generator getNewGenerator(c10::DeviceIndex) const override {
    return at::make_generator<at::CPUGeneratorImpl>(c10::detail::getNonDeterministicRandom());
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
    auto grown = device_allocator.allocate(newsize);
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

// Register the hooks and the allocator (once per process); the device's default generators are the Python ones.
void register_backend(const c10::List<std::optional<at::Generator>>& generators) {
  TORCH_CHECK(hooks == nullptr, "torchdevice: the simulated backend is registered already");
  hooks = new Hooks();
  for (size_t i = 0; i < generators.size(); i++) {
    std::optional<at::Generator> generator = generators.get(i);
    TORCH_CHECK(generator.has_value(), "torchdevice: a device without a generator");
    hooks->generators.push_back(*generator);
  }
  at::RegisterPrivateUse1HooksInterface(hooks);
  c10::SetAllocator(kDevice, &device_allocator);
}

at::Tensor make(c10::Storage storage, const at::Tensor& like) {
  auto made = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                       like.dtype());
  made.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  return made;
}

struct Held {
  c10::Storage host;
  int64_t nbytes;
};

void release_held(void* ctx) {
  auto* held = static_cast<Held*>(ctx);
  count(-held->nbytes);
  delete held;
}

// A device tensor over host tensor `host`'s memory (its sizes, strides, offset and dtype), which keeps it alive.
at::Tensor wrap(const at::Tensor& host) {
  const auto& storage = host.storage();
  auto nbytes = static_cast<int64_t>(storage.nbytes());
  auto* held = new Held{storage, nbytes};
  count(nbytes);
  c10::DataPtr data(const_cast<void*>(storage.data()), held, &release_held,
                    c10::Device(kDevice, hooks ? hooks->getCurrentDevice() : 0));
  return make(c10::Storage(c10::Storage::use_byte_size_t(), nbytes, std::move(data), &device_allocator, false), host);
}

// New device memory for a tensor of `size` and `stride`.
at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype) {
  return at::detail::empty_strided_generic(size, stride, &device_allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
}

// New contiguous device memory for a tensor of `size`.
at::Tensor empty(c10::IntArrayRef size, c10::ScalarType dtype) {
  return at::detail::empty_generic(size, &device_allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype,
                                   std::nullopt);
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

int64_t allocated() { return live_bytes.load(); }
int64_t peak() { return peak_bytes.load(); }
void reset_peak() { peak_bytes.store(live_bytes.load()); }

}  // namespace

TORCH_LIBRARY(torchdevice_sim, m) {
  m.def("register_backend(Generator?[] generators) -> ()", &register_backend);
  m.def("wrap(Tensor host) -> Tensor", &wrap);
  m.def("empty_strided(int[] size, int[] stride, ScalarType dtype) -> Tensor", &empty_strided);
  m.def("empty(int[] size, ScalarType dtype) -> Tensor", &empty);
  m.def("set_data(Tensor(a!) self, Tensor data) -> ()", &set_data);
  m.def("allocated() -> int", &allocated);
  m.def("peak() -> int", &peak);
  m.def("reset_peak() -> ()", &reset_peak);
}
