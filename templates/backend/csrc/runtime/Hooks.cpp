// PrivateUse1HooksInterface and generators.
#include "runtime/Config.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/VariableHooksInterface.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#if BACKEND_VENDOR_KEY_CUDA
#include <ATen/detail/CUDAHooksInterface.h>
#endif
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "runtime/Api.h"
#include "runtime/Random.h"
#include "runtime/Runtime.h"
#include "runtime/TorchCompat.h"
#if BACKEND_GENERATOR_REGISTRY
#include <ATen/core/GeneratorForPrivateuseone.h>
#endif

namespace BACKEND_NS {
namespace {

class GeneratorImpl final : public c10::GeneratorImpl {
 public:
  static constexpr uint64_t kBlock = at::MERSENNE_STATE_N;
  static constexpr uint64_t kMaxBlocks = uint64_t{1} << 20;
  static constexpr uint64_t kMaxOffset = kMaxBlocks * kBlock;

  explicit GeneratorImpl(c10::DeviceIndex device)
      : c10::GeneratorImpl(c10::Device(kDeviceType, device),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        cpu_(at::make_generator<at::CPUGeneratorImpl>()) {}

  static c10::DeviceType device_type() { return kDeviceType; }

  // the CPU kernels lock the CPU generator's mutex; so do these
  void set_current_seed(uint64_t seed) override {
    std::lock_guard<std::mutex> lock(inner()->mutex_);
    inner()->set_current_seed(seed);
  }
  uint64_t current_seed() const override { return inner()->current_seed(); }
  uint64_t seed() override {
    std::lock_guard<std::mutex> lock(inner()->mutex_);
    return inner()->seed();
  }
  // The offset: how many 32-bit numbers the engine has drawn since it was seeded (the role of
  // torch.cuda's Philox offset): after manual_seed(s), set_offset(o) resumes the sequence where
  // get_offset() returned o. The offset is the whole position: no normal sample (Box-Muller's
  // second) is carried from one operator to the next (cpu_for_next_op), so randn replays by
  // offset as rand does. Both replay the seed's sequence, so offsets are bounded: at most
  // kMaxOffset.
  void set_offset(uint64_t offset) override {
    TORCH_CHECK(offset <= kMaxOffset, BACKEND_DEVICE ": generator offset ", offset,
                " is out of range (at most ", kMaxOffset, ": the offset is replayed from the seed)");
    std::lock_guard<std::mutex> lock(inner()->mutex_);
    at::mt19937 engine(cpu_impl()->current_seed());
    for (uint64_t i = 0; i < offset; ++i) (void)engine();
    cpu_impl()->set_engine(engine);
    cpu_impl()->set_next_float_normal_sample(std::nullopt);
    cpu_impl()->set_next_double_normal_sample(std::nullopt);
  }
  uint64_t get_offset() const override {
    std::lock_guard<std::mutex> lock(inner()->mutex_);
    return engine_offset(cpu_impl()->engine());
  }
  void set_state(const c10::TensorImpl& state) override {
    std::lock_guard<std::mutex> lock(inner()->mutex_);
    inner()->set_state(state);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    std::lock_guard<std::mutex> lock(inner()->mutex_);
    return inner()->get_state();
  }
  // The CPU generator the next random operator draws from, without a normal sample cached
  // by an earlier operator (as torch.cuda's Philox: the offset says where the sequence is).
  const at::Generator& cpu_for_next_op() const {
    std::lock_guard<std::mutex> lock(inner()->mutex_);
    cpu_impl()->set_next_float_normal_sample(std::nullopt);
    cpu_impl()->set_next_double_normal_sample(std::nullopt);
    return cpu_;
  }

 private:
  GeneratorImpl* clone_impl() const override {
    auto* copy = new GeneratorImpl(device().index());
    copy->cpu_ = cpu_.clone();
    return copy;
  }

  c10::GeneratorImpl* inner() const { return cpu_.unsafeGetGeneratorImpl(); }
  at::CPUGeneratorImpl* cpu_impl() const { return static_cast<at::CPUGeneratorImpl*>(inner()); }

  // Draws since seeding, found by replaying the seed's sequence one state block (624 numbers)
  // at a time; a state that no draw from the seed reaches (set_state) is an error.
  static uint64_t engine_offset(const at::mt19937& now) {
    const at::mt19937_data_pod target = now.data();
    at::mt19937 replay(target.seed_);
    if (target.next_ == 0 && replay.data().state_ == target.state_) return 0;
    (void)replay();  // the first draw makes the first block
    for (uint64_t block = 0; block < kMaxBlocks; ++block) {
      if (replay.data().state_ == target.state_) return block * kBlock + target.next_;
      for (uint64_t i = 0; i < kBlock; ++i) (void)replay();
    }
    TORCH_CHECK(false, BACKEND_DEVICE ": the generator's state is not reached from its seed "
                "within ", kMaxBlocks * kBlock, " draws (set by set_state?): no offset");
  }

  at::Generator cpu_;
};

std::vector<at::Generator>& default_generators() {
  static std::vector<at::Generator> gens;
  static std::once_flag once;
  std::call_once(once, [] {
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      gens.push_back(at::make_generator<GeneratorImpl>(d));
      gens.back().set_current_seed(c10::detail::getNonDeterministicRandom());
    }
  });
  return gens;
}

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device(device);
  return default_generators()[static_cast<size_t>(device)];
}

bool is_device_generator(const at::Generator& generator) {
  return generator.defined() && generator.device().type() == kDeviceType;
}

at::Generator cpu_generator(const at::Generator& device_generator) {
  return at::check_generator<GeneratorImpl>(device_generator)->cpu_for_next_op();
}

void resize_storage(const c10::Storage& storage, std::size_t new_nbytes) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), BACKEND_DEVICE ": trying to resize storage that is not resizable");
  const std::size_t old_nbytes = impl->nbytes();
  if (new_nbytes == old_nbytes) return;
  c10::DeviceIndex device = storage.device().index();
  DeviceScope scope(device);
  c10::DataPtr fresh = device_allocator()->allocate(new_nbytes);
  const std::size_t keep = std::min(old_nbytes, new_nbytes);
  if (keep > 0 && impl->data() != nullptr) {
    hal::memcpy_async(fresh.get(), new_nbytes, impl->data(), keep, hal::CopyKind::DeviceToDevice,
                      native_stream(current_stream(device)));
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(new_nbytes);
}

namespace {

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device(device);
  return at::make_generator<GeneratorImpl>(device);
}

#if BACKEND_GENERATOR_REGISTRY
REGISTER_GENERATOR_PRIVATEUSE1(new_generator)
#endif

struct Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const BACKEND_HOOKS_AVAILABILITY_OVERRIDE { return true; }
  bool isAvailable() const BACKEND_HOOKS_AVAILABILITY_OVERRIDE { return device_count() > 0; }
  void init() const override { (void)device_count(); }
  bool hasPrimaryContext(c10::DeviceIndex device) const override {
    return device >= 0 && device < device_count();
  }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const auto old = current_device();
    set_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  bool isPinnedPtr(const void* data) const override {
    if (is_pinned(data)) return true;
#if BACKEND_VENDOR_KEY_CUDA
    // With CUDA built into torch, empty(pin_memory=True) takes torch's CUDA pinned allocator;
    // that memory is page-locked for this device too.
    const auto& cuda = at::detail::getCUDAHooks();
    return cuda.hasCUDA() && cuda.isPinnedPtr(data);
#else
    return false;
#endif
  }
  at::Allocator* getPinnedMemoryAllocator() const override { return host_allocator(); }
  at::Device getDeviceFromPtr(void* data) const override {
    const auto device = device_of(data);
    TORCH_CHECK(device >= 0, BACKEND_DEVICE ": pointer was not allocated by " BACKEND_PACKAGE);
    return at::Device(kDeviceType, device);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return new_generator(device);
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage(storage, newsize);
  }
};

// Autograd of an operator the device runs with no derivative of its own (a route gives a
// composite operator a device kernel): torch's "autograd not implemented" fallback, which newer
// torch releases register for AutogradPrivateUse1 themselves and older ones leave to the backend
// (probed: registered here only where torch has none).
void autograd_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                       torch::jit::Stack* stack) {
  if (!at::impl::HasVariableHooks()) {
    op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
    return;
  }
  at::impl::GetVariableHooks()->basic_autograd_not_implemented_fallback(op, keys, stack);
}

const bool registered = [] {
  at::RegisterPrivateUse1HooksInterface(new Hooks());
  constexpr auto kAutograd = c10::DispatchKey::AutogradPrivateUse1;
  if (!c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(kAutograd)) {
    static auto* lib = new torch::Library(torch::Library::IMPL, "_", kAutograd, __FILE__, __LINE__);
    lib->fallback(torch::CppFunction::makeFromBoxedFunction<&autograd_fallback>());
  }
  return true;
}();

}  // namespace

namespace api {

namespace {
c10::GeneratorImpl* generator_of(int device) {
  return default_generator(device_arg(device, true)).unsafeGetGeneratorImpl();
}
}  // namespace

void manual_seed(int device, uint64_t seed) { generator_of(device)->set_current_seed(seed); }

uint64_t seed(int device) { return generator_of(device)->seed(); }

uint64_t initial_seed(int device) { return generator_of(device)->current_seed(); }

std::string get_rng_state(int device) {
  const at::Tensor state(generator_of(device)->get_state());
  return std::string(static_cast<const char*>(state.const_data_ptr()),
                     static_cast<std::size_t>(state.nbytes()));
}

void set_rng_state(int device, const std::string& bytes) {
  at::Tensor state = at::detail::empty_cpu({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(state.mutable_data_ptr(), bytes.data(), bytes.size());
  generator_of(device)->set_state(*state.unsafeGetTensorImpl());
}

uint64_t get_offset(int device) { return generator_of(device)->get_offset(); }

void set_offset(int device, uint64_t offset) { generator_of(device)->set_offset(offset); }

void seal_storage(std::uintptr_t storage_impl) {
  auto* impl = reinterpret_cast<c10::StorageImpl*>(storage_impl);
  TORCH_CHECK(impl != nullptr && impl->device_type() == kDeviceType,
              BACKEND_DEVICE ": seal_storage expects a " BACKEND_DEVICE " storage");
  impl->set_resizable(false);
}

}  // namespace api
}  // namespace BACKEND_NS
