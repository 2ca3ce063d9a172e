"""Device runtime behaviour that torch itself relies on: `tensor.data = other` across the CPU and
the device, and `module.to(device)` moving Parameters in place (as for CUDA)."""
import torch

from conftest import DEVICE


def test_data_assignment_across_cpu_and_device():
    on_device = torch.zeros(3, device=DEVICE)
    on_device.data = torch.ones(3)
    assert on_device.device.type == "cpu" and on_device.tolist() == [1.0, 1.0, 1.0]
    on_cpu = torch.zeros(2)
    on_cpu.data = torch.full((2,), 7.0, device=DEVICE)
    assert on_cpu.device.type == DEVICE and on_cpu.cpu().tolist() == [7.0, 7.0]


def test_has_compatible_shallow_copy_type_with_the_cpu():
    x = torch.zeros(1, device=DEVICE)
    assert torch._has_compatible_shallow_copy_type(x, torch.zeros(1))
    assert torch._has_compatible_shallow_copy_type(torch.zeros(1), x)
    assert not torch._has_compatible_shallow_copy_type(x, torch.zeros(1).to_sparse())


def test_module_to_device_keeps_parameter_objects_and_their_grads_work():
    model = torch.nn.Linear(4, 2)
    weight, bias = model.weight, model.bias
    model.to(DEVICE)
    assert model.weight is weight and model.bias is bias
    assert weight.device.type == DEVICE and isinstance(weight, torch.nn.Parameter)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # made after the move, as usual
    model(torch.randn(3, 4, device=DEVICE)).sum().backward()
    optimizer.step()
    assert weight.grad is not None and weight.grad.device.type == DEVICE
    model.to("cpu")
    assert model.weight is weight and weight.device.type == "cpu"
