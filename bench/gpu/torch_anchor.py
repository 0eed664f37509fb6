#!/usr/bin/env python3
"""Times the device anchors of issue 13 with torch on the attached GPU, the way Tessera's device
measurer times its kernels (CUDA events around the op only, an L2 flush by writing 2x the L2
between runs, median of repeats): torch.matmul f16 4096^3, F.scaled_dot_product_attention f16
(B1 H16 S4096 D128 causal) and the eager bias+GELU of an 8192^2 f16 tensor. Prints one JSON line
per anchor; exits 0 with a note when torch or a GPU is absent (the column is then skipped)."""
import json
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print(json.dumps({"skipped": "torch is not installed here"}))
    sys.exit(0)
if not torch.cuda.is_available():
    print(json.dumps({"skipped": "no CUDA device"}))
    sys.exit(0)


def bench(fn, min_time_s=0.5, min_runs=10):
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    fn()  # warm-up
    torch.cuda.synchronize()
    times, total = [], 0.0
    while total < min_time_s * 1e3 or len(times) < min_runs:
        flush.zero_()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
        total += times[-1]
    times.sort()
    return times[len(times) // 2] * 1e3  # us


def main():
    dev = torch.cuda.get_device_name(0)
    a = torch.randn(4096, 4096, dtype=torch.float16, device="cuda")
    b = torch.randn(4096, 4096, dtype=torch.float16, device="cuda")
    us = bench(lambda: torch.matmul(a, b))
    print(json.dumps({"anchor": "torch.matmul f16 4096^3", "device": dev, "median_us": us,
                      "tflops": 2 * 4096**3 / us * 1e-6}))
    q = torch.randn(1, 16, 4096, 128, dtype=torch.float16, device="cuda")
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    us = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    flops = 4 * 16 * 4096 * 4096 * 128 / 2
    print(json.dumps({"anchor": "F.scaled_dot_product_attention f16 H16 S4096 D128 causal", "device": dev,
                      "median_us": us, "tflops": flops / us * 1e-6}))
    x = torch.randn(8192, 8192, dtype=torch.float16, device="cuda")
    bias = torch.randn(8192, dtype=torch.float16, device="cuda")
    us = bench(lambda: F.gelu(x + bias, approximate="tanh"))
    print(json.dumps({"anchor": "eager gelu(x + b) f16 8192^2", "device": dev, "median_us": us,
                      "tbps": (2 * 8192 * 8192 * 2 + 8192 * 2) / us * 1e-6}))


if __name__ == "__main__":
    main()
