"""How long one TP-sized all-reduce takes over NVLink, and how much of it a GEMM beside it hides.

Twin-side reference for bench/results/2026-11-27-multi-gpu.md (issue 20): PyTorch's NCCL (same
library family as the engine's), one process per GPU. For world sizes 2 and 4 (as many as there are GPUs):
  ar      all-reduce of a [rows, 2048] bf16 tensor (rows = 8 x 1024: the ~1B Llama at micro-batch 8)
  gemm    the fc2 GEMM of a TP rank, [rows, 5632 / tp] x [5632 / tp, 2048] bf16
  both    the two at once, the all-reduce on a high-priority side stream (as the engine runs them);
          also with the GEMM planned for fewer SMs (PyTorch's SM carve-out, cuBLASLt's SM-count target)
Times are CUDA-event means over 50 iterations after 10 warm-up ones, rank 0's.
  python3 bench/micro/nccl_overlap.py > nccl_overlap.md
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from event_timing import mean_us

ROWS, D, F = 8 * 1024, 2048, 5632


def timed(fn):
    def sync():  # every rank's work done, then the ranks lined up
        torch.cuda.synchronize()
        dist.barrier()
    return mean_us(fn, sync=sync)


def worker(rank, world, port, q):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.cuda.set_device(rank)
    # NCCL's own stream at high priority, as the engine's comm streams are.
    opts = dist.ProcessGroupNCCL.Options()
    opts.is_high_priority_stream = True
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            pg_options=opts)
    x = torch.randn(ROWS, D, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(ROWS, F // world, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(F // world, D, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(ROWS, D, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream(priority=-1)
    main = torch.cuda.current_stream()

    def ar():
        dist.all_reduce(x)

    def gemm():
        torch.matmul(a, w, out=out)

    def both():
        side.wait_stream(main)
        with torch.cuda.stream(side):
            dist.all_reduce(x)
        torch.matmul(a, w, out=out)
        main.wait_stream(side)

    t_ar, t_gemm, t_both = timed(ar), timed(gemm), timed(both)
    rows = [(world, 0, t_ar, t_gemm, t_both)]
    # cuBLASLt's SM-count target (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, which PyTorch sets from its
    # SM carve-out): the GEMM planned for the SMs the collective leaves it.
    carve = getattr(torch._C, "_set_sm_carveout_experimental", None)
    if carve is not None:
        for sms in (8, 16, 24, 32):
            carve(sms)
            rows.append((world, sms, t_ar, timed(gemm), timed(both)))
        carve(None)
    if rank == 0:
        q.put(rows)
    dist.barrier()
    dist.destroy_process_group()


def main():
    gpus = torch.cuda.device_count()
    print("| GPUs | GEMM's SM carve-out | all-reduce 32 MiB bf16 alone | bus bandwidth | fc2 GEMM alone | both at once | all-reduce hidden |")
    print("|---|---|---|---|---|---|---|")
    for world in (2, 4):
        if world > gpus:
            continue
        q = mp.get_context("spawn").SimpleQueue()
        mp.spawn(worker, args=(world, 29500 + world, q), nprocs=world, join=True)
        rows = q.get()
        base_gemm = rows[0][3]
        for w, sms, t_ar, t_gemm, t_both in rows:
            size = ROWS * D * 2
            busbw = size * 2 * (w - 1) / w / (t_ar * 1e-6) / 1e9
            hidden = (t_ar + base_gemm - t_both) / t_ar  # against the un-carved GEMM: what the pair gains
            print(f"| {w} | {sms or 'none'} | {t_ar:.1f} µs | {busbw:.0f} GB/s | {t_gemm:.1f} µs | {t_both:.1f} µs | "
                  f"{100 * hidden:.0f}% |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
