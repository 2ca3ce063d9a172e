"""Device runtime behaviour that torch itself relies on: `tensor.data = other` across the CPU and
the device, `module.to(device)` moving Parameters in place (as for CUDA), device properties and
capability, init(), and a forked child's clear error."""
import os
import subprocess
import sys

import pytest
import torch

from conftest import DEVICE, pkg, run_python


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


def test_device_properties_and_capability():
    module = getattr(torch, DEVICE)
    props = module.get_device_properties(0)
    assert props.index == 0 and props.name == f"{DEVICE}:0"
    assert props.total_memory == module.mem_get_info(0)[1] > 0
    assert module.get_device_capability() == (props.major, props.minor)
    assert module.get_device_capability(f"{DEVICE}:0") == module.get_device_capability(0)
    with pytest.raises(ValueError, match="invalid device ordinal"):
        module.get_device_properties(module.device_count())
    with pytest.raises(ValueError, match=f"expected a {DEVICE} device"):
        module.get_device_capability("cpu")
    module.init()
    assert not module._is_in_bad_fork()


FORKED_CHILD = """
import os, sys, torch
torch.ones(2, device="{device}").sum().item()  # the parent uses the device
pid = os.fork()
if pid == 0:
    errors = []
    m = getattr(torch, "{device}")
    for touch in (lambda: torch.ones(2, device="{device}"),
                  lambda: torch.zeros(2).to("{device}"),
                  lambda: m.synchronize(),
                  lambda: m.init(),
                  lambda: m.set_device(0),
                  lambda: m.current_stream(),
                  lambda: m.Stream(),
                  lambda: m.Event().record(),
                  lambda: m.mem_get_info(),
                  lambda: m.get_device_properties(0)):
        try:
            touch()
            errors.append("no error")
        except RuntimeError as e:
            errors.append(str(e).splitlines()[0])
    print("bad fork:", getattr(torch, "{device}")._is_in_bad_fork())
    print("\\n".join(errors), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent still works:", torch.ones(2, device="{device}").sum().item())
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_gets_a_clear_error_not_a_hang():
    p = subprocess.run([sys.executable, "-c", FORKED_CHILD.format(device=DEVICE)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "bad fork: True"
    for line in lines[1:-1]:  # torch.cuda's words, with the device's name, at every use
        assert line == (f"Cannot re-initialize {DEVICE} in forked subprocess. To use {DEVICE} "
                        "with multiprocessing, you must use the 'spawn' start method"), lines
    assert len(lines) == 12 and lines[-1] == "parent still works: 2.0", lines


COUNTED_THEN_POOL = """
import multiprocessing, torch
module = getattr(torch, "{device}")
print("available:", module.is_available(), module.device_count())  # the parent only counts


def work(i):
    x = torch.full((4,), float(i), device="{device}")
    with module.device(i % module.device_count()):
        y = torch.ones(4, device="{device}") * i
    s = module.Stream()
    with module.stream(s):
        z = x + y.to(x.device)
    s.synchronize()
    return z.sum().item(), module._is_in_bad_fork()


with multiprocessing.get_context("fork").Pool(2) as pool:
    print(pool.map(work, [1, 2, 3]))
print("parent:", torch.ones(3, device="{device}").sum().item())
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_pool_forked_after_counting_devices_uses_the_device():
    """A parent that only counted devices (is_available) forks a Pool (the default start method
    on Linux); its children use the device. The timeout turns a hang into a failure."""
    try:
        p = subprocess.run([sys.executable, "-c", COUNTED_THEN_POOL.format(device=DEVICE)],
                           capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("a forked child hung on the device")
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.splitlines()
    assert lines[0] == f"available: True {pkg.device.device_count()}"
    assert lines[1] == "[(8.0, False), (16.0, False), (24.0, False)]"
    assert lines[2] == "parent: 3.0"


def test_a_child_forked_before_the_device_was_used_may_use_it():
    code = FORKED_CHILD.replace('torch.ones(2, device="{device}").sum().item()  #', "#")
    p = subprocess.run([sys.executable, "-c", code.format(device=DEVICE)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[:2] == ["bad fork: False", "no error"]


def test_importing_and_counting_devices_leaves_the_runtime_uninitialised_where_probed():
    """Where the profile counts devices without the runtime (CUDA: NVML, as torch.cuda), the
    runtime stays uninitialised until the device is used, so the process may still fork; else
    counting initialises it. Either way the count is the runtime's."""
    p = run_python(f"""
        import torch
        from {pkg.__name__} import _C
        module = getattr(torch, "{DEVICE}")
        count = module.device_count()
        available = module.is_available()
        print(count, available, _C.runtime_initialized())
        torch.ones(1, device="{DEVICE}")
        print(_C.runtime_initialized(), _C.device_count())
        """)
    assert p.returncode == 0, p.stderr
    count = pkg.device.device_count()
    assert p.stdout.splitlines() == [f"{count} {count > 0} {not pkg._config.DEVICE_COUNT_PROBE}",
                                     f"True {count}"]


@pytest.mark.skipif(not hasattr(torch.accelerator, "get_device_capability"),
                    reason="no torch.accelerator.get_device_capability in this torch (from 2.10)")
def test_accelerator_device_capability_lists_the_dtypes_of_the_device():
    """torch.accelerator.get_device_capability (the device guard's getDeviceCapability): every
    dtype but the sub-byte quantized ones, which the device refuses (test_quantized.py)."""
    assert torch.accelerator.current_accelerator().type == DEVICE
    dtypes = torch.accelerator.get_device_capability(f"{DEVICE}:0")["supported_dtypes"]
    assert dtypes == torch.accelerator.get_device_capability()["supported_dtypes"]
    assert {torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool} <= dtypes
    assert {torch.qint8, torch.quint8, torch.qint32} <= dtypes
    assert not dtypes & {torch.quint4x2, torch.quint2x4}
    for dtype in (torch.float16, torch.bfloat16, torch.int64, torch.bool):
        assert torch.ones(2, dtype=dtype, device=DEVICE).float().cpu().tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.accelerator.get_device_capability(pkg.device.device_count())


EXIT_WHILE_WAITING = """
import threading, time, torch
module = getattr(torch, "{device}")
host = torch.ones(32 << 20, dtype=torch.float32).pin_memory()
dst = torch.empty(host.shape, device="{device}")
for _ in range(10):
    dst.copy_(host, non_blocking=True)  # queued on the default stream
copied = module.Event()
copied.record()
entered = threading.Event()


def wait_for_the_device():
    entered.set()
    module.synchronize()  # the GIL is released until the copies are done


class AtFinalization:
    def __del__(self, sleep=time.sleep, copied=copied):
        while not copied.query():  # the interpreter is finalizing
            sleep(0.01)
        sleep(0.5)  # the GIL is free: the waiting thread takes it back and is ended by Python


threading.Thread(target=wait_for_the_device, daemon=True).start()
entered.wait()
time.sleep(0.2)
keeper = AtFinalization()
print("exiting", flush=True)
"""


def test_a_thread_waiting_on_the_device_at_exit_does_not_abort_the_process():
    """A daemon thread in synchronize() while the interpreter finalizes: Python ends it when it
    takes the GIL back (a forced unwind), which must not become std::terminate."""
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", EXIT_WHILE_WAITING.format(device=DEVICE)],
                       capture_output=True, text=True, timeout=300)
    assert "terminate called" not in p.stderr, p.stderr[-2000:]
    assert p.returncode == 0 and p.stdout == "exiting\n", (p.returncode, p.stderr[-2000:])
