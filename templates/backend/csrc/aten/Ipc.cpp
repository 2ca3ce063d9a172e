// Device tensors shared between processes (PKG/ipc.py, torch.multiprocessing): the handle of a
// tensor's storage from the runtime's IPC calls, and a storage over that handle opened in
// another process. Two operators, torch.ops.<package>._ipc_handle(t) -> (handle, nbytes,
// device, offset) and _ipc_open(handle, nbytes, device, offset) -> a uint8 tensor over the
// opened memory. The handle is the allocation's that holds the storage (a runtime's handle names
// an allocation's start: CUDA maps the whole allocation, whatever pointer into it was given):
// the device allocator's block, or, for memory another allocator made (a vendor result the
// device adopted), the allocation the runtime names (hal::allocation_start). offset is the
// storage's place in that allocation. The handle travels as hex text. A process maps an
// allocation once, as torch does for CUDA: the storages over one handle share the mapping,
// closed with the last of them (on the device it was opened for).
// Copied by tdev scaffold as it is: a plain source; the package's names come from runtime/Config.h.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/StorageImpl.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "runtime/HAL.h"
#include "runtime/Runtime.h"

namespace BACKEND_NS {
namespace {

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string from_hex(const std::string& text) {
  auto value = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    TORCH_CHECK(false, BACKEND_DEVICE ": an IPC handle is hex text, got '", c, "'");
  };
  TORCH_CHECK(text.size() % 2 == 0 && text.size() <= 1024,
              BACKEND_DEVICE ": an IPC handle of ", text.size(), " hex digits");
  std::string out(text.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<char>(value(text[2 * i]) * 16 + value(text[2 * i + 1]));
  }
  return out;
}

// The handles this process opened, by device and handle: the mapping and how many storages use it.
struct Opened {
  void* base;
  int users;
};
struct OpenedKey {  // a storage's deleter context
  std::string key;
  c10::DeviceIndex device;
};
std::mutex g_opened_mutex;
auto* g_opened = new std::unordered_map<std::string, Opened>();  // never freed (exit order)

void* open_shared(const OpenedKey& opened, const std::string& handle) {
  std::lock_guard<std::mutex> lock(g_opened_mutex);
  auto it = g_opened->find(opened.key);
  if (it != g_opened->end()) {
    ++it->second.users;
    return it->second.base;
  }
  void* base = hal::ipc_open_handle(handle);
  g_opened->emplace(opened.key, Opened{base, 1});
  return base;
}

// A storage's deleter: the mapping is closed with its last storage, on its device.
void close_opened(void* context) {
  std::unique_ptr<OpenedKey> opened(static_cast<OpenedKey*>(context));
  void* base = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_opened_mutex);
    auto it = g_opened->find(opened->key);
    if (it == g_opened->end() || --it->second.users > 0) return;
    base = it->second.base;
    g_opened->erase(it);
  }
  try {
    DeviceScope scope(opened->device);  // the runtime closes in the current device's context
    hal::ipc_close_handle(base);
  } catch (...) {  // a deleter must not throw; the mapping stays until the process exits
  }
}

std::tuple<std::string, int64_t, int64_t, int64_t> ipc_handle(const at::Tensor& self) {
  TORCH_CHECK(self.defined() && self.device().type() == kDeviceType,
              BACKEND_DEVICE ": _ipc_handle takes a " BACKEND_DEVICE " tensor");
  TORCH_CHECK(hal::ipc_supported(), BACKEND_DEVICE ": the runtime has no IPC calls (the "
              "profile declares none): device tensors cannot be shared between processes");
  const c10::Storage& storage = self.storage();
  void* base = storage.mutable_data();
  const c10::DeviceIndex device = self.device().index();
  TORCH_CHECK(base != nullptr, BACKEND_DEVICE ": an empty tensor has no memory to share");
  TORCH_CHECK(storage.data_ptr().get_deleter() != &close_opened,
              BACKEND_DEVICE ": a tensor received from another process is not sent on (as with "
              "CUDA): send it from the process that allocated it");
  DeviceScope scope(device);
  const void* start =
      device_of(base) == device ? block_start(base) : hal::allocation_start(base);
  TORCH_CHECK(start != nullptr,
              BACKEND_DEVICE ": this tensor's memory was made by another allocator, and the "
              "runtime names no allocation holding it (the profile's runtime.allocation_range "
              "is absent, its library did not load, or its lookup failed): it cannot be shared");
  const int64_t offset = static_cast<const char*>(base) - static_cast<const char*>(start);
  device_synchronize(device);  // what is queued on the tensor is done before another reads it
  return {to_hex(hal::ipc_get_handle(const_cast<void*>(start))),
          static_cast<int64_t>(storage.nbytes()), device, offset};
}

at::Tensor ipc_open(const std::string& handle, int64_t nbytes, int64_t device, int64_t offset) {
  const c10::DeviceIndex index = device_arg(device);
  TORCH_CHECK(nbytes > 0 && offset >= 0, BACKEND_DEVICE ": _ipc_open of ", nbytes,
              " bytes at offset ", offset);
  DeviceScope scope(index);
  const std::string bytes = from_hex(handle);
  auto key = std::make_unique<OpenedKey>(OpenedKey{std::to_string(index) + ":" + bytes, index});
  void* opened = open_shared(*key, bytes);
  const c10::Device where(kDeviceType, index);
  c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), static_cast<std::size_t>(nbytes),
      c10::DataPtr(static_cast<char*>(opened) + offset, key.release(), &close_opened, where),
      nullptr, /*resizable=*/false));
  at::Tensor out = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(where));
  return out.set_(storage, 0, {nbytes}, {1});
}

// the operators' namespace is the package's name, shared with other units (a fragment)
const bool g_registered = [] {
  static auto* lib = new torch::Library(torch::Library::FRAGMENT, BACKEND_PACKAGE, std::nullopt,
                                        __FILE__, __LINE__);
  lib->def("_ipc_handle(Tensor self) -> (str, int, int, int)", &ipc_handle);
  lib->def("_ipc_open(str handle, int nbytes, int device, int offset) -> Tensor", &ipc_open);
  return true;
}();

}  // namespace
}  // namespace BACKEND_NS
