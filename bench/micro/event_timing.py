"""CUDA-event timing shared by the PyTorch probes in bench/ (nccl_overlap, ce_overlap, concurrency_probe)."""
import torch


def mean_us(fn, iters=50, warm=10, sync=torch.cuda.synchronize):
    """Mean µs of fn() over `iters` calls after `warm` warm-up calls, between two CUDA events on the
    current stream; `sync` completes all outstanding work (and may also line up ranks or devices)."""
    for _ in range(warm):
        fn()
    sync()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    sync()
    return start.elapsed_time(end) * 1000.0 / iters
