"""Do kernels and copies on different streams of one GPU run at the same time on this machine?

torch.cuda._sleep(cycles) is a one-thread kernel that spins for a number of clock cycles: two of
them on two streams take the time of one if the GPU runs them side by side, twice that if it
runs them one after the other. The same for a spinning kernel beside a 32 MiB device-to-device
copy (a copy engine's work) and beside a peer copy from GPU 1 (when there is a second GPU).
CUDA-event means of 20 iterations after 5 warm-up ones.
  python3 bench/micro/concurrency_probe.py
"""
import torch

from event_timing import mean_us

CYCLES = 2_000_000  # about 1 ms at H100 clocks


def timed(fn):
    return mean_us(fn, iters=20, warm=5)


def main():
    main_s = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    big = torch.empty(16 * 2**20, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(big)
    peer = torch.empty_like(big, device="cuda:1") if torch.cuda.device_count() > 1 else None

    def on_side(work):
        def f():
            side.wait_stream(main_s)
            with torch.cuda.stream(side):
                work()
            torch.cuda._sleep(CYCLES)
            main_s.wait_stream(side)
        return f

    rows = [("one spin kernel", timed(lambda: torch.cuda._sleep(CYCLES))),
            ("two spin kernels, two streams", timed(on_side(lambda: torch.cuda._sleep(CYCLES)))),
            ("32 MiB copy alone", timed(lambda: dst.copy_(big))),
            ("spin kernel + 32 MiB copy on the other stream", timed(on_side(lambda: dst.copy_(big))))]
    if peer is not None:
        rows += [("32 MiB peer copy from GPU 1 alone", timed(lambda: dst.copy_(peer, non_blocking=True))),
                 ("spin kernel + peer copy on the other stream", timed(on_side(lambda: dst.copy_(peer, non_blocking=True))))]
    print("| work | µs |")
    print("|---|---|")
    for name, t in rows:
        print(f"| {name} | {t:.1f} |")


if __name__ == "__main__":
    main()
