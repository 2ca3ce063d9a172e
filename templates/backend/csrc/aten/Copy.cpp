// Copies: host <-> device and device <-> device with HAL copies. Dense tensors
// with matching layouts move as one block. With vendor kernels (BACKEND_VENDOR_KERNELS), other copies within the device
// (dtype changes, strided views) and copies to and from the vendor's own device tensors run the
// vendor's copy kernel where it runs on the device (Boxing.cpp: vendor_copy); other copies go
// through a host buffer, where torch's CPU copy does the conversion.
#include <ATen/EmptyTensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include "aten/Aten.h"
#include "runtime/DeviceTrace.h"
#include "runtime/Fork.h"
#include "runtime/Runtime.h"

namespace BACKEND_NS {
namespace {

bool on_device(const at::Tensor& t) { return t.device().type() == kDeviceType; }

// Bytes of storage t's elements cover, from its first element (strides are never negative).
std::size_t span_bytes(const at::Tensor& t) {
  int64_t extent = 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 0) return 0;
    extent += (t.size(d) - 1) * t.stride(d);
  }
  return static_cast<std::size_t>(extent) * t.itemsize();
}

void* first_byte(const at::Tensor& t) {
  return static_cast<char*>(t.storage().mutable_data()) + t.storage_offset() * t.itemsize();
}

// Layouts equal and without gaps: one contiguous block of bytes on both sides.
bool block_copyable(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.is_non_overlapping_and_dense();
}

// Waits for the copy unless it may finish on its own: an asynchronous copy from or into
// pinned host memory, which the host allocator then keeps until the stream gets there.
void finish(const c10::Stream& stream, const void* host, bool non_blocking) {
  if (non_blocking && host != nullptr && is_pinned(host)) {
    record_host_use(host, stream);
  } else {
    hal::stream_synchronize(native_stream(stream));
  }
}

// A host tensor with t's sizes and strides holding a copy of t's elements.
at::Tensor to_host(const at::Tensor& t) {
  const std::size_t bytes = span_bytes(t);
  at::Tensor buffer =
      at::detail::empty_cpu({static_cast<int64_t>(bytes / t.itemsize())}, t.scalar_type());
  if (bytes > 0) {
    DeviceScope scope(t.device().index());
    const c10::Stream stream = current_stream(t.device().index());
    hal::stream_synchronize(native_stream(stream));  // the blocking copy is not stream-ordered
    hal::memcpy(buffer.mutable_data_ptr(), bytes, first_byte(t), bytes,
                hal::CopyKind::DeviceToHost);
  }
  return buffer.as_strided(t.sizes(), t.strides(), 0);
}

// dst (device) = src (host, any dtype and layout, broadcastable)
void write_to_device(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  DeviceScope scope(dst.device().index());
  const c10::Stream stream = current_stream(dst.device().index());
  at::Tensor staged = src;
  if (!dst.is_non_overlapping_and_dense()) {
    staged = to_host(dst);  // a strided view: read, modify on the host, write the span back
    staged.copy_(src);
  } else if (!block_copyable(dst, src)) {
    staged = at::detail::empty_strided_cpu(dst.sizes(), dst.strides(), dst.scalar_type());
    staged.copy_(src);
  }
  const std::size_t bytes = span_bytes(dst);
  if (bytes == 0) return;
  hal::memcpy_async(first_byte(dst), bytes, first_byte(staged), bytes,
                    hal::CopyKind::HostToDevice, native_stream(stream));
  finish(stream, staged.is_same(src) ? first_byte(src) : nullptr, non_blocking);
}

}  // namespace

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), BACKEND_DEVICE ": copy of an undefined tensor");
  if (self.numel() == 0) return dst;
  check_not_forked();
  const bool src_dev = on_device(self);
  const bool dst_dev = on_device(dst);
  trace::Span span;  // the copy on torch.profiler's device timeline
  span.begin(src_dev && dst_dev ? trace::Kind::CopyDeviceToDevice
             : src_dev          ? trace::Kind::CopyDeviceToHost
                                : trace::Kind::CopyHostToDevice,
             nullptr, nullptr, (dst_dev ? dst : self).device().index());
  if (src_dev && dst_dev) {
    if (self.device() == dst.device() && block_copyable(self, dst)) {
      DeviceScope scope(dst.device().index());
      const std::size_t bytes = span_bytes(dst);
      hal::memcpy_async(first_byte(dst), bytes, first_byte(self), bytes,
                        hal::CopyKind::DeviceToDevice,
                        native_stream(current_stream(dst.device().index())));
#if BACKEND_VENDOR_KERNELS
    } else if (vendor_copy(self, dst, non_blocking)) {
#endif
    } else {
      write_to_device(dst, to_host(self), false);
    }
  } else if (src_dev) {
#if BACKEND_VENDOR_KERNELS
    if (!dst.device().is_cpu() && vendor_copy(self, dst, non_blocking)) return dst;
#endif
    TORCH_CHECK(dst.device().is_cpu(), BACKEND_DEVICE ": cannot copy to ", dst.device());
    if (block_copyable(self, dst)) {
      DeviceScope scope(self.device().index());
      const c10::Stream stream = current_stream(self.device().index());
      const std::size_t bytes = span_bytes(dst);
      hal::memcpy_async(first_byte(dst), bytes, first_byte(self), bytes,
                        hal::CopyKind::DeviceToHost, native_stream(stream));
      finish(stream, first_byte(dst), non_blocking);
    } else {
      const_cast<at::Tensor&>(dst).copy_(to_host(self));
    }
  } else {
#if BACKEND_VENDOR_KERNELS
    if (!self.device().is_cpu() && vendor_copy(self, dst, non_blocking)) return dst;
#endif
    TORCH_CHECK(self.device().is_cpu(), BACKEND_DEVICE ": cannot copy from ", self.device());
    write_to_device(dst, self, non_blocking);
  }
  return dst;
}

// item(): the element copied in stream order into a pinned block of the host allocator (the
// copy goes straight there, as torch.cuda's item() does), no host tensor of the device's layout.
at::Scalar local_scalar_dense(const at::Tensor& self) {
  const std::size_t bytes = self.itemsize();
  trace::Span span;
  span.begin(trace::Kind::CopyDeviceToHost, nullptr, nullptr, self.device().index());
  const c10::DataPtr host = host_allocator()->allocate(bytes);
  DeviceScope scope(self.device().index());
  const hal::Stream stream = native_stream(current_stream(self.device().index()));
  hal::memcpy_async(host.get(), bytes, first_byte(self), bytes, hal::CopyKind::DeviceToHost,
                    stream);
  hal::stream_synchronize(stream);
  return at::from_blob(host.get(), {}, self.options().device(c10::kCPU)).item();
}

}  // namespace BACKEND_NS
