"""The caching device allocator counts what it hands out, caches freed blocks and reports OOM."""
import pytest
import torch

from conftest import DEVICE, pkg

dev = pkg.device
MB = 1 << 20


def test_allocations_are_counted_and_freed_blocks_cached():
    dev.empty_cache()
    base_alloc, base_reserved = dev.memory_allocated(), dev.memory_reserved()
    stats = dev.memory_stats()
    x = torch.empty(3 * MB, dtype=torch.uint8, device=DEVICE)
    assert dev.memory_allocated() - base_alloc >= 3 * MB
    assert dev.memory_reserved() >= dev.memory_allocated()
    after = dev.memory_stats()
    assert after["allocation.all.current"] == stats["allocation.all.current"] + 1
    assert after["num_device_alloc"] == stats["num_device_alloc"] + 1
    del x
    assert dev.memory_allocated() == base_alloc
    assert dev.memory_reserved() > base_reserved  # cached, not given back
    y = torch.empty(3 * MB, dtype=torch.uint8, device=DEVICE)  # served from the cache
    assert dev.memory_stats()["num_device_alloc"] == after["num_device_alloc"]
    del y
    dev.empty_cache()
    assert dev.memory_reserved() == base_reserved
    assert dev.memory_stats()["num_device_free"] > after["num_device_free"]


def test_small_and_large_pools_are_counted_apart():
    before = dev.memory_stats()
    a = torch.empty(100, dtype=torch.uint8, device=DEVICE)
    b = torch.empty(4 * MB, dtype=torch.uint8, device=DEVICE)
    s = dev.memory_stats()
    assert s["allocation.small_pool.current"] == before["allocation.small_pool.current"] + 1
    assert s["allocation.large_pool.current"] == before["allocation.large_pool.current"] + 1
    del a, b


def test_peak_statistics_reset():
    dev.reset_peak_memory_stats()
    base = dev.max_memory_allocated()
    x = torch.empty(8 * MB, dtype=torch.uint8, device=DEVICE)
    peak = dev.max_memory_allocated()
    assert peak >= base + 8 * MB
    del x
    assert dev.max_memory_allocated() == peak
    dev.reset_peak_memory_stats()
    assert dev.max_memory_allocated() == dev.memory_allocated()
    dev.reset_accumulated_memory_stats()
    assert dev.memory_stats()["allocation.all.allocated"] == 0


def test_memory_info_and_out_of_memory():
    free, total = dev.mem_get_info()
    assert 0 < free <= total
    ooms = dev.memory_stats()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        torch.empty(total + MB, dtype=torch.uint8, device=DEVICE)
    assert dev.memory_stats()["num_ooms"] == ooms + 1


@pytest.mark.skipif(not hasattr(torch.accelerator, "memory_allocated"),
                    reason="no torch.accelerator memory statistics in this torch (2.9 adds them)")
def test_torch_accelerator_sees_the_same_allocator():
    if torch.accelerator.current_accelerator().type != DEVICE:
        pytest.skip("another accelerator is torch's current one")
    x = torch.empty(MB, dtype=torch.uint8, device=DEVICE)
    assert torch.accelerator.memory_allocated(0) == dev.memory_allocated(0)
    assert torch.accelerator.memory_stats(0)["allocated_bytes.all.current"] == dev.memory_allocated(0)
    del x
