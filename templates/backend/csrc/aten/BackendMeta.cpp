// Backend tensor metadata: named flags a device tensor carries besides its sizes and strides (a
// vendor's private memory format, for instance), as c10::BackendMeta on the tensor. Set and read
// through two operators, torch.ops.<package>.set_backend_meta(t, [names]) and
// get_backend_meta(t) -> [names] (no Python binding needed); torch.save writes them into the
// tensor's serialized metadata as plain keys, "<name>": true, as other backends do, and
// torch.load (or torch._C._set_tensor_metadata) sets them again from plain keys or
// "<device>.<name>" ones. "conj" and "neg" are torch's own keys, not names.
#include <ATen/core/Tensor.h>
#include "runtime/TorchCompat.h"
#include BACKEND_PICKLER_HEADER  // TensorBackendMetaRegistry
#include <torch/library.h>

#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/Aten.h"
#include "runtime/Runtime.h"

namespace BACKEND_NS {
namespace {

constexpr const char* kPrefix = BACKEND_DEVICE ".";

struct Flags final : c10::BackendMeta {
  std::set<std::string> names;

  explicit Flags(std::set<std::string> n) : names(std::move(n)) {}
  c10::intrusive_ptr<c10::BackendMeta> clone(
      const c10::intrusive_ptr<c10::BackendMeta>& /*ptr*/) const override {
    return c10::make_intrusive<Flags>(names);
  }
};

void check_device(const at::Tensor& t) {
  TORCH_CHECK(t.defined() && t.device().type() == kDeviceType,
              BACKEND_DEVICE ": backend metadata is for " BACKEND_DEVICE " tensors, got a ",
              t.defined() ? t.device().str() : std::string("undefined"), " tensor");
}

std::set<std::string> flags_of(const at::Tensor& t) {
  auto* meta = dynamic_cast<Flags*>(t.unsafeGetTensorImpl()->get_backend_meta());
  return meta == nullptr ? std::set<std::string>{} : meta->names;
}

void set_flags(const at::Tensor& t, std::set<std::string> names) {
  for (const auto& name : names) {
    TORCH_CHECK(!name.empty(), BACKEND_DEVICE ": backend metadata names must not be empty");
    TORCH_CHECK(name != "conj" && name != "neg", BACKEND_DEVICE ": backend metadata name '",
                name, "' is torch's own (a conjugate or negative view)");
  }
  t.unsafeGetTensorImpl()->set_backend_meta(c10::make_intrusive<Flags>(std::move(names)));
}

void set_backend_meta(const at::Tensor& self, std::vector<std::string> names) {
  check_device(self);
  set_flags(self, std::set<std::string>(names.begin(), names.end()));
}

std::vector<std::string> get_backend_meta(const at::Tensor& self) {
  check_device(self);
  const auto names = flags_of(self);
  return {names.begin(), names.end()};
}

void serialize(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  for (const auto& name : flags_of(t)) metadata[name] = true;
}

// torch has taken its own keys (conj, neg) out of `metadata` before: every key left is a flag,
// plain or with the device's prefix
void deserialize(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  std::set<std::string> names;
  const std::string prefix = kPrefix;
  for (const auto& [key, on] : metadata) {
    const std::string name = key.rfind(prefix, 0) == 0 ? key.substr(prefix.size()) : key;
    if (on && !name.empty()) names.insert(name);
  }
  metadata.clear();
  if (!names.empty()) set_flags(t, std::move(names));
}

// the operators' namespace is the package's name, shared with other units (a fragment)
const bool g_registered = [] {
  torch::jit::TensorBackendMetaRegistry(kDeviceType, &serialize, &deserialize);
  static auto* lib = new torch::Library(torch::Library::FRAGMENT, BACKEND_PACKAGE, std::nullopt,
                                        __FILE__, __LINE__);
  lib->def("set_backend_meta(Tensor self, str[] names) -> ()", &set_backend_meta);
  lib->def("get_backend_meta(Tensor self) -> str[]", &get_backend_meta);
  return true;
}();

}  // namespace

}  // namespace BACKEND_NS
