"""Device indices: every entry point that takes one refuses an index that names no device
("<device>: invalid device ordinal: device index N is out of range (M device(s)
available)": what torch.cuda says, "invalid device ordinal", "out of range"), never truncates it to another
device, and leaves the current device as it was."""
import random

import pytest
import torch

from conftest import DEVICE, pkg

dev = pkg.device
COUNT = dev.device_count()
INVALID = (rf"{DEVICE}: invalid device ordinal: device index -?\d+ is out of range "
           rf"\(\d+ device\(s\) available\)")

# beyond the device count, below -1, and values whose low bits name a device (2**32 + 1 is
# device 1 when truncated to 32 bits, 2**40 is device 0)
BAD = [COUNT, COUNT + 1, 127, 128, 255, 256, 2**31 - 1, 2**32, 2**32 + 1, 2**40, 2**40 + 1,
       2**63 - 1, -2, -3, -7, -128, -2**31, -2**40]

CALLS = {
    "set_device": lambda i: dev.set_device(i),
    "device": lambda i: dev.device(i).__enter__(),
    "synchronize": lambda i: dev.synchronize(i),
    "memory_allocated": lambda i: dev.memory_allocated(i),
    "memory_stats": lambda i: dev.memory_stats(i),
    "reset_peak_memory_stats": lambda i: dev.reset_peak_memory_stats(i),
    "mem_get_info": lambda i: dev.mem_get_info(i),
    "current_stream": lambda i: dev.current_stream(i),
    "Stream": lambda i: dev.Stream(i),
    "Event": lambda i: dev.Event(device=i),
    "get_rng_state": lambda i: dev.get_rng_state(i),
    "get_offset": lambda i: dev.get_offset(i),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("index", BAD)
def test_an_index_naming_no_device_is_refused(call, index):
    before = dev.current_device()
    with pytest.raises(RuntimeError, match=INVALID) as e:
        CALLS[call](index)
    assert f"device index {index} is out of range" in str(e.value)
    assert dev.current_device() == before


@pytest.mark.parametrize("index", [COUNT, 9, 100])
def test_device_strings_and_generators_naming_no_device_are_refused(index):
    where = f"{DEVICE}:{index}"
    with pytest.raises(RuntimeError, match=INVALID):
        torch.Generator(device=where)
    with pytest.raises(RuntimeError, match=INVALID):
        dev.synchronize(where)
    with pytest.raises(RuntimeError, match=INVALID):
        dev.Event(device=torch.device(where))


def test_set_device_selects_exactly_the_device_named_or_refuses():
    """Over indices from every range (seeded): a valid index becomes current, -1 changes
    nothing, any other is refused and changes nothing."""
    rng = random.Random(26)
    indices = list(range(-3, COUNT + 3)) + BAD + [rng.randrange(-2**64, 2**64) for _ in range(200)]
    for index in indices:
        before = dev.current_device()
        if 0 <= index < COUNT or index == -1:
            dev.set_device(index)
            assert dev.current_device() == (index if index >= 0 else before)
        else:
            with pytest.raises((RuntimeError, OverflowError)):
                dev.set_device(index)
            assert dev.current_device() == before


def test_valid_indices_still_work():
    for index in range(COUNT):
        dev.synchronize(index)
        assert dev.memory_allocated(index) >= 0
        event = dev.Event(device=index)
        event.record(dev.current_stream(index))
        assert event.device.index == index
        assert torch.Generator(device=f"{DEVICE}:{index}").device.index == index
    dev.synchronize(-1)  # the current device, as torch.cuda
