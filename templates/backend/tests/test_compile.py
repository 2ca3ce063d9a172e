"""torch.compile on the device ({pkg}/compile.py): registered when first needed (importing the
package does not import torch._dynamo), dynamo then knows the device, the device's own backend
and inductor (every operator left to the device's ATen kernels) give eager's results, forward
and backward."""
import re

import pytest
import torch
import torch.nn as nn
from torch._dynamo.device_interface import get_interface_for_device
from torch._inductor.codegen.common import get_scheduling_for_device, init_backend_registration

from conftest import DEVICE, pkg, run_python


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))


def _run(model: nn.Module, x: torch.Tensor):
    out = model(x)
    out.square().sum().backward()
    return out.detach().cpu(), [p.grad.cpu() for p in model.parameters()]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_dynamo_has_the_devices_interface_once_inductor_registers_its_backends():
    init_backend_registration()  # what inductor does before it lowers a graph
    assert get_scheduling_for_device(DEVICE) is pkg.compile.inductor_classes()["Scheduling"]
    iface = get_interface_for_device(DEVICE)
    assert iface.device_count() == pkg.device.device_count()
    assert iface.current_device() == pkg.device.current_device()
    assert iface.is_available()
    assert iface.is_triton_capable() == pkg.compile.triton_kernels()


@pytest.mark.parametrize("how", [{"backend": DEVICE},
                                 {"options": {"fallback_by_default": True}}],
                         ids=["device_backend", "inductor_aten"])
def test_compiled_model_equals_eager(how):
    if "options" in how and not pkg.compile.has_fallback_by_default():
        pytest.skip(f"no inductor fallback_by_default in this torch ({torch.__version__})")
    x = torch.randn(5, 8, device=DEVICE)
    eager_model, compiled_model = _model().to(DEVICE), _model().to(DEVICE)
    ref, ref_grads = _run(eager_model, x)
    compiled = torch.compile(compiled_model, **how)
    out, grads = _run(compiled, x)
    torch.testing.assert_close(out, ref)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)
    again = compiled(x + 1).detach().cpu()  # the same graph, new values
    torch.testing.assert_close(again, eager_model(x + 1).detach().cpu())



def test_import_leaves_dynamo_alone_and_a_fresh_process_compiles_both_ways():
    """`import torch` loads the package without torch._dynamo; the backend named after the
    device (the torch_dynamo_backends entry point) and inductor (the device module's classes)
    then register the rest when first used."""
    p = run_python(f"""
        import sys
        import torch
        print("torch._dynamo" in sys.modules, "torch._inductor" in sys.modules)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).to("{DEVICE}")
        x = torch.randn(3, 8, device="{DEVICE}")
        ref = model(x)
        by_name = torch.compile(model, backend="{DEVICE}")(x)
        torch._dynamo.reset()
        same = lambda a: torch.allclose(a.cpu(), ref.cpu(), rtol=1e-5, atol=1e-6)
        if hasattr(torch._inductor.config, "fallback_by_default"):
            by_inductor = torch.compile(model, options=dict(fallback_by_default=True))(x)
            print(same(by_name), same(by_inductor))
        else:  # (older torch: inductor cannot leave every operator to ATen)
            print(same(by_name))
        """)
    assert p.returncode == 0, p.stderr
    both = "True True" if pkg.compile.has_fallback_by_default() else "True"
    assert p.stdout.splitlines() == ["False False", both]


def _transformer() -> nn.Module:
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                      batch_first=True)


def test_default_compile_of_a_small_transformer_equals_eager():
    """Plain torch.compile(model): with the profile's kernels (compile: kernels: triton, or cpp:
    C++ kernels run on the host's view of its memory), inductor fuses and compiles kernels for
    the device; forward and grads equal eager's within inductor's tolerances, and a second call
    of the same shapes is not compiled again. Without a kernel code generator (kernels: none, or
    triton without Triton installed), plain torch.compile fails with a message naming the two
    ways that run."""
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch._inductor.utils import run_and_get_code

    x = torch.randn(2, 5, 16, device=DEVICE)
    eager_model, compiled_model = _transformer().to(DEVICE), _transformer().to(DEVICE)
    if pkg._config.COMPILE_KERNELS != "cpp" and not pkg.compile.triton_kernels():
        with pytest.raises(Exception, match=f"backend={DEVICE!r}"):
            torch.compile(compiled_model)(x)
        return
    ref, ref_grads = _run(eager_model, x)
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(compiled_model, backend=counter)
    (out, grads), code = run_and_get_code(_run, compiled, x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)
    generated = "\n".join(code)
    if pkg._config.COMPILE_KERNELS == "triton":  # fused Triton kernels, on the device's stream
        assert re.search(r"triton_(poi|red|per)_fused\w*\.run\(", generated)
        assert f"from {pkg.__name__}._C import native_stream as get_raw_stream" in generated
    else:  # fused C++ kernels ran on the device
        assert "run_host_kernel(cpp_fused_" in generated
    assert counter.frame_count == 1
    again = compiled(x + 1).detach().cpu()  # the same shapes: no new compile
    torch.testing.assert_close(again, eager_model(x + 1).detach().cpu(), rtol=1e-4, atol=1e-5)
    assert counter.frame_count == 1


def test_host_view_is_the_device_memory_not_a_copy():
    t = torch.arange(12.0, device=DEVICE).reshape(3, 4)[:, 1:3]
    if pkg._config.COMPILE_KERNELS != "cpp":  # a runtime without a host view says so
        with pytest.raises(RuntimeError, match="gives the host no view of device memory"):
            pkg.compile.host_view(t)
        return
    view = pkg.compile.host_view(t)
    assert view.device.type == "cpu" and view.shape == t.shape and view.stride() == t.stride()
    pkg.device.synchronize()
    torch.testing.assert_close(view, t.cpu())
    view[1, 0] = -1.0  # a write on the host lands in the device's memory
    assert t.cpu()[1, 0].item() == -1.0

