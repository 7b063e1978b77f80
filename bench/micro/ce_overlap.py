"""Does a copy-engine transfer between two GPUs run beside a GEMM? (issue 20; the answer:
bench/results/2026-11-27-multi-gpu.md)

One process, GPUs 0 and 1. On GPU 0: the TP2 rank's fc2 GEMM ([8192, 2816] x [2816, 2048] bf16) on
one stream, and on a second stream a 32 MiB bf16 copy from GPU 1 into GPU 0 (a device-to-device
copy between GPUs, which CUDA runs on a copy engine over NVLink, no SMs), then the same copy
both ways at once (GPU 1 -> 0 and 0 -> 1, as a two-rank all-gather would move). CUDA-event means
of 50 iterations after 10 warm-up ones.
  python3 bench/micro/ce_overlap.py
"""
import torch

from event_timing import mean_us

ROWS, D, F = 8 * 1024, 2048, 2816


def timed(fn):
    def sync():  # both GPUs' work done
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
    return mean_us(fn, sync=sync)


def main():
    d0, d1 = torch.device("cuda:0"), torch.device("cuda:1")
    torch.cuda.set_device(0)
    a = torch.randn(ROWS, F, device=d0, dtype=torch.bfloat16)
    w = torch.randn(F, D, device=d0, dtype=torch.bfloat16)
    out = torch.empty(ROWS, D, device=d0, dtype=torch.bfloat16)
    src1 = torch.randn(ROWS, D, device=d1, dtype=torch.bfloat16)
    dst0 = torch.empty(ROWS, D, device=d0, dtype=torch.bfloat16)
    src0 = torch.randn(ROWS, D, device=d0, dtype=torch.bfloat16)
    dst1 = torch.empty(ROWS, D, device=d1, dtype=torch.bfloat16)
    main_s = torch.cuda.current_stream(0)
    side = torch.cuda.Stream(device=d0)
    other = torch.cuda.Stream(device=d1)

    def gemm():
        torch.matmul(a, w, out=out)

    def copy_in():
        side.wait_stream(main_s)
        with torch.cuda.stream(side):
            dst0.copy_(src1, non_blocking=True)
        main_s.wait_stream(side)

    def copy_both():
        side.wait_stream(main_s)
        other.wait_stream(main_s)
        with torch.cuda.stream(side):
            dst0.copy_(src1, non_blocking=True)
        with torch.cuda.stream(other):
            dst1.copy_(src0, non_blocking=True)
        main_s.wait_stream(side)
        main_s.wait_stream(other)

    def gemm_and(copy):
        def f():
            side.wait_stream(main_s)
            other.wait_stream(main_s)
            with torch.cuda.stream(side):
                dst0.copy_(src1, non_blocking=True)
            if copy == "both":
                with torch.cuda.stream(other):
                    dst1.copy_(src0, non_blocking=True)
            torch.matmul(a, w, out=out)
            main_s.wait_stream(side)
            main_s.wait_stream(other)
        return f

    print(f"peer access 0<->1: {torch.cuda.can_device_access_peer(0, 1)}")
    t_gemm = timed(gemm)
    t_in, t_both = timed(copy_in), timed(copy_both)
    t_gi, t_gb = timed(gemm_and("in")), timed(gemm_and("both"))
    mib = ROWS * D * 2 / 2**20
    print("| work | µs | note |")
    print("|---|---|---|")
    print(f"| fc2 GEMM alone | {t_gemm:.1f} | |")
    print(f"| copy {mib:.0f} MiB GPU 1 -> 0 alone | {t_in:.1f} | {ROWS * D * 2 / t_in / 1e3:.0f} GB/s |")
    print(f"| copies both ways alone | {t_both:.1f} | |")
    print(f"| GEMM + copy in | {t_gi:.1f} | copy hidden {100 * (t_gemm + t_in - t_gi) / t_in:.0f}% |")
    print(f"| GEMM + copies both ways | {t_gb:.1f} | copies hidden {100 * (t_gemm + t_both - t_gb) / t_both:.0f}% |")


if __name__ == "__main__":
    main()
