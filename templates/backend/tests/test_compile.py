"""torch.compile on the device ({pkg}/compile.py): registered when first needed (importing the
package does not import torch._dynamo), dynamo then knows the device, the device's own backend
and inductor (every operator left to the device's ATen kernels) give eager's results, forward
and backward."""
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
    assert iface.is_available() and not iface.is_triton_capable()


@pytest.mark.parametrize("how", [{"backend": DEVICE},
                                 {"options": {"fallback_by_default": True}}],
                         ids=["device_backend", "inductor_aten"])
def test_compiled_model_equals_eager(how):
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
        by_inductor = torch.compile(model, options=dict(fallback_by_default=True))(x)
        same = lambda a: torch.allclose(a.cpu(), ref.cpu(), rtol=1e-5, atol=1e-6)
        print(same(by_name), same(by_inductor))
        """)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["False False", "True True"]
