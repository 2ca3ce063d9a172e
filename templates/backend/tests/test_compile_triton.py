"""Inductor's Triton kernels on the device (compile: kernels: triton): the device's name has the
vendor's Triton compiler through the package's triton.backends entry point, and compiled
kernels run on the device's current stream."""
import torch
from torch._dynamo.device_interface import get_interface_for_device

from conftest import DEVICE, pkg


def test_triton_kernels_run_on_the_devices_current_stream():
    """The device's name has the vendor's Triton compiler (the package's triton.backends entry
    point) while the vendor's driver stays Triton's active one; a compiled function launches on
    the stream current when it runs (a side stream here), and its result is right."""
    import triton.backends
    from triton.runtime import driver

    pkg.compile.register()  # (what the first torch.compile does)
    assert DEVICE in triton.backends.backends
    assert not triton.backends.backends[DEVICE].driver.is_active()
    assert type(driver.active) is not triton.backends.backends[DEVICE].driver
    fn = torch.compile(lambda a, b: (a * b + 1.0).relu().sum(dim=1))
    a, b = (torch.randn(64, 300, device=DEVICE) for _ in range(2))
    side = pkg.device.Stream()
    iface = get_interface_for_device(DEVICE)
    side.wait_stream(pkg.device.current_stream())
    with pkg.device.stream(side):
        assert iface.get_raw_stream(0) == pkg._C.native_stream(0) != 0
        out = fn(a, b)
    side.synchronize()
    torch.testing.assert_close(out.cpu(), (a.cpu() * b.cpu() + 1.0).relu().sum(dim=1),
                               rtol=1e-5, atol=1e-4)
