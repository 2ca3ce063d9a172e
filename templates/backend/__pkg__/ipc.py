"""Device tensors shared between processes. torch.multiprocessing (a Queue, a Process's
arguments, a Pool) sends a tensor of the device as a handle to its memory from the runtime's IPC
calls (the profile's runtime.calls.ipc_*; the simulator shares the memory file of its device),
as torch sends CUDA tensors; the receiving process opens the handle
and works on the same memory, so a change made there is seen here. As with CUDA, the sender
keeps the tensor alive while another process uses it, and a received tensor is not sent on.
Every other object is reduced by torch's own reducers."""
from __future__ import annotations

from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions as _torch_reductions

from ._config import DEVICE, PACKAGE


def _ops():
    return getattr(torch.ops, PACKAGE)


def rebuild_device_tensor(cls, handle: str, nbytes: int, device: int, at: int,
                          dtype: torch.dtype, size: tuple, stride: tuple, offset: int,
                          requires_grad: bool):
    """The receiving side: the sender's memory opened here, viewed as the sent tensor (its
    storage `at` bytes into the shared allocation)."""
    raw = _ops()._ipc_open(handle, nbytes, device, at)
    t = torch.empty(0, dtype=dtype, device=raw.device)
    t.set_(raw.untyped_storage(), offset, size, stride)
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(requires_grad)


def _reduce_tensor(tensor: torch.Tensor):
    if tensor.device.type != DEVICE or tensor.layout != torch.strided:
        return _torch_reductions.reduce_tensor(tensor)
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, "
                           "since autograd does not support crossing process boundaries. If you "
                           "just want to transfer the data, call detach() on the tensor before "
                           "serializing (e.g., putting it on the queue).")
    handle, nbytes, device, at = _ops()._ipc_handle(tensor)
    return (rebuild_device_tensor,
            (type(tensor), handle, nbytes, device, at, tensor.dtype, tuple(tensor.size()),
             tuple(tensor.stride()), tensor.storage_offset(), tensor.requires_grad))


def _reduce_storage(storage):
    if storage.device.type == DEVICE:
        raise RuntimeError(f"Cannot pickle {DEVICE} storage; try pickling a {DEVICE} tensor "
                           "instead")
    return _torch_reductions.reduce_storage(storage)


def register() -> None:
    """After torch.multiprocessing's own reducers (torch imports it before loading backends)."""
    for cls in {torch.Tensor, torch.nn.Parameter, *torch._tensor_classes}:
        ForkingPickler.register(cls, _reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, _reduce_storage)
