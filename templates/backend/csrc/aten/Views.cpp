// View operators on the device: a view shares its input's memory, whatever route the operator
// takes. An operator whose schema returns an alias of an argument (`Tensor(a) self -> Tensor(a)`:
// view_as_real, unfold, split, transpose, ...) or that is tagged inplace_view (transpose_,
// as_strided_, ...) and reaches one of the device's boxed kernels (the CPU fallback, a "cpu" or
// "vendor" route) runs here on meta tensors of the same sizes, strides, offset, dtype and storage
// size: the meta kernel works out the result's geometry without touching data, and the result is
// a tensor of the device over the input's own storage with that geometry (an in-place view
// operator gives its input that geometry). The CPU fallback would run the operator on a host copy
// and return a copy on a new storage, which later writes through the view never reach.
// Where the meta kernel returns a tensor on a storage of its own (reshape of a tensor that cannot
// be viewed, contiguous of a non-contiguous one, to() with another dtype), the operator is no view
// for those arguments: a composite one runs its decomposition on the device, any other runs
// where it is routed, as before.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "aten/Aten.h"
#include "runtime/Runtime.h"

namespace BACKEND_NS {

at::Tensor tensor_over(c10::Storage storage, c10::DispatchKeySet keys, const at::Tensor& like) {
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), keys, like.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(),
                                                  like.storage_offset());
  return t;
}

namespace {

const c10::DispatchKeySet kOurs(c10::DispatchKey::PrivateUse1);
const c10::DispatchKeySet kMeta(c10::DispatchKey::Meta);

struct ViewInfo {
  bool view = false;          // a return aliases an argument and writes nothing
  bool inplace_view = false;  // changes its first argument's geometry in place
  uint64_t aliased = 0;       // bit i: argument i is what a return aliases
};

// the alias sets an annotation names, a list's elements' included (`Tensor(a)[]`)
void sets_of(const c10::AliasInfo* info, std::unordered_set<c10::Symbol>& out) {
  if (info == nullptr) return;
  out.insert(info->beforeSets().begin(), info->beforeSets().end());
  for (const c10::AliasInfo& contained : info->containedTypes()) sets_of(&contained, out);
}

ViewInfo compute_view_info(const c10::OperatorHandle& op) {
  ViewInfo info;
  const c10::FunctionSchema& schema = op.schema();
  std::unordered_set<c10::Symbol> returned;
  for (const c10::Argument& r : schema.returns()) {
    if (r.alias_info() != nullptr && !r.alias_info()->isWrite()) sets_of(r.alias_info(), returned);
  }
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < args.size() && i < 64; ++i) {
    const c10::AliasInfo* a = args[i].alias_info();
    if (a == nullptr || a->isWrite()) continue;
    for (const c10::Symbol& s : a->beforeSets()) {
      if (returned.count(s) != 0) info.aliased |= uint64_t{1} << i;
    }
  }
  info.view = info.aliased != 0;
  info.inplace_view = op.hasTag(at::Tag::inplace_view) && !args.empty() &&
                      args[0].alias_info() != nullptr && args[0].alias_info()->isWrite();
  if (info.inplace_view) info.aliased |= 1;
  return info;
}

const ViewInfo& view_info(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const void*, ViewInfo> cache;  // references stay valid
  const void* key = &op.schema();
  const auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  return cache.emplace(key, compute_view_info(op)).first->second;
}

bool is_ours(const at::Tensor& t) { return t.defined() && t.device().type() == kDeviceType; }

// A device tensor, the meta tensor standing for it and that one's storage (an in-place operator
// may give the meta tensor another).
struct Stand {
  at::Tensor original;
  at::Tensor meta;
  c10::Storage storage;
};
using Stands = c10::SmallVector<Stand, 2>;

at::Tensor meta_of(const at::Tensor& t) {
  // resizable as the device's storages are (a resize is seen afterwards: no view then)
  c10::Storage storage(c10::Storage::use_byte_size_t(), t.storage().nbytes(),
                       c10::GetAllocator(c10::DeviceType::Meta), /*resizable=*/true);
  at::Tensor m = tensor_over(std::move(storage), kMeta, t);
  m._set_conj(t.is_conj());
  m._set_neg(t.is_neg());
  return m;
}

// The meta run's arguments: the device's tensors as meta tensors, but for an integral tensor no
// return aliases (a start, indices, sizes: values the operator reads), which goes to the host;
// the device as the meta device. False where the call is not one device's view: a tensor or a
// device argument of another device (to() across devices: a copy), or a tensor list of the
// device's tensors.
bool meta_arguments(const torch::jit::Stack& stack, std::size_t begin, const ViewInfo& info,
                    torch::jit::Stack& meta, Stands& stands) {
  c10::DeviceIndex device = -1;
  const auto same_device = [&](c10::DeviceIndex index) {
    if (device < 0) device = index;
    return device == index;
  };
  for (std::size_t i = begin; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    const std::size_t arg = i - begin;
    const bool aliased = arg < 64 && ((info.aliased >> arg) & 1) != 0;
    if (v.isTensor() && is_ours(v.toTensor())) {
      const at::Tensor& t = v.toTensor();
      if (!same_device(t.device().index())) return false;
      if (!aliased && c10::isIntegralType(t.scalar_type(), /*includeBool=*/true)) {
        meta.emplace_back(t.cpu());
        continue;
      }
      at::Tensor m = meta_of(t);
      c10::Storage storage = m.storage();
      stands.push_back(Stand{t, std::move(m), std::move(storage)});
      meta.emplace_back(stands.back().meta);
    } else if (v.isTensor() && v.toTensor().defined() &&
               !c10::isIntegralType(v.toTensor().scalar_type(), /*includeBool=*/true)) {
      return false;
    } else if (v.isDevice()) {
      if (v.toDevice().type() != kDeviceType ||
          !same_device(v.toDevice().has_index() ? v.toDevice().index() : current_device())) {
        return false;
      }
      meta.emplace_back(c10::Device(c10::DeviceType::Meta));
    } else if (v.isTensorList() || v.isOptionalTensorList()) {
      for (const c10::IValue& t : v.toListRef()) {
        if (t.isTensor() && is_ours(t.toTensor())) return false;
      }
      meta.push_back(v);
    } else {
      meta.push_back(v);
    }
  }
  return true;
}

const Stand* stand_for(const at::Tensor& r, const Stands& stands) {
  if (!r.defined() || !r.is_meta() || !r.has_storage()) return nullptr;
  for (const Stand& s : stands) {
    if (r.storage().is_alias_of(s.storage)) return &s;
  }
  return nullptr;
}

// A meta result as the device's tensor: the original where the meta kernel returned its input
// itself, else a tensor over the original's storage. Undefined where r aliases no input.
at::Tensor device_view(const at::Tensor& r, const Stands& stands) {
  const Stand* s = stand_for(r, stands);
  if (s == nullptr) return at::Tensor();
  if (r.unsafeGetTensorImpl() == s->meta.unsafeGetTensorImpl()) return s->original;
  at::Tensor t = tensor_over(s->original.storage(), kOurs, r);
  t._set_conj(r.is_conj());
  t._set_neg(r.is_neg());
  return t;
}

// The meta run's results as the device's; false where one is not a view of an input.
bool device_results(torch::jit::Stack& meta, const Stands& stands) {
  for (c10::IValue& v : meta) {
    if (v.isTensor()) {
      if (!v.toTensor().defined()) continue;
      at::Tensor t = device_view(v.toTensor(), stands);
      if (!t.defined()) return false;
      v = std::move(t);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& r : v.toTensorList()) {
        at::Tensor t = device_view(r, stands);
        if (!t.defined()) return false;
        out.push_back(std::move(t));
      }
      v = std::move(out);
    } else if (v.isOptionalTensorList()) {
      return false;
    }
  }
  return true;
}

// An in-place view operator ran on stands[0].meta: its input takes the new geometry over the
// storage the meta tensor now uses (its own, or another argument's for set_), where that storage
// kept its size (else the operator changed more than a view).
bool apply_inplace(torch::jit::Stack& meta, const Stands& stands) {
  const Stand& self = stands.front();
  const at::Tensor& m = self.meta;
  if (meta.size() != 1 || !meta[0].isTensor() ||
      meta[0].toTensor().unsafeGetTensorImpl() != m.unsafeGetTensorImpl()) {
    return false;
  }
  const Stand* over = stand_for(m, stands);
  if (over == nullptr || over->storage.nbytes() != over->original.storage().nbytes()) {
    return false;
  }
  c10::TensorImpl* impl = self.original.unsafeGetTensorImpl();
  if (!self.original.storage().is_alias_of(over->original.storage())) {
    impl->set_storage_keep_dtype(over->original.storage());
  }
  impl->set_sizes_and_strides(m.sizes(), m.strides(), m.storage_offset());
  meta[0] = self.original;
  return true;
}

// A composite view operator (reshape, contiguous, to, flatten: torch decomposes them into other
// operators) that is no view for these arguments runs its decomposition on the device's tensors,
// as it does unrouted: the CPU fallback moves tensors with to() itself (a routed to() would come
// back here without end), and where the vendor's kernels are the CPU's they cannot tell the host
// from the device (to("cpu") would answer with the device's tensor).
bool is_composite(const c10::OperatorHandle& op) {
  return op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
         !op.hasKernelForDispatchKey(c10::DispatchKey::CPU);
}

bool run_composite(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!is_composite(op)) return false;
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);  // the composite's entry
  return true;
}

bool as_view(const c10::OperatorHandle& op, const ViewInfo& info, torch::jit::Stack* stack) {
  const std::size_t nargs = op.schema().arguments().size();
  const std::size_t begin = stack->size() - nargs;
  torch::jit::Stack meta;
  meta.reserve(nargs);
  Stands stands;
  if (!meta_arguments(*stack, begin, info, meta, stands) || stands.empty()) return false;
  if (info.inplace_view && !stands.front().original.is_same((*stack)[begin].toTensor())) {
    return false;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(op.hasComputedKernelForDispatchKey(c10::DispatchKey::Meta),
                              BACKEND_DEVICE ": ", op.operator_name(),
                              " is a view operator without a meta kernel: its result could "
                              "not share its input's memory on the device");
  // straight to the meta kernel; what it calls dispatches as usual (a composite's autograd).
  // The meta device refuses some of what the device allows (named tensors before torch 2.7:
  // rename): a composite then runs its decomposition on the device; any other operator's
  // refusal is the caller's error
  try {
    op.redispatchBoxed(kMeta, &meta);
  } catch (const c10::Error&) {
    if (is_composite(op)) return false;
    throw;
  }
  if (!(info.inplace_view ? apply_inplace(meta, stands) : device_results(meta, stands))) {
    return false;  // no view for these arguments
  }
  torch::jit::drop(*stack, nargs);
  for (c10::IValue& v : meta) stack->push_back(std::move(v));
  return true;
}

}  // namespace

bool run_as_view(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const ViewInfo& info = view_info(op);
  if (!info.view && !info.inplace_view) return false;
  return as_view(op, info, stack) || run_composite(op, stack);
}

}  // namespace BACKEND_NS
