# Owns the torch anchor of the benches (run with bench/.venv/bin/python by gemm_bench and
# attention_bench): times torch.matmul or scaled_dot_product_attention on the CPU with the given
# dtype and thread count and prints one line per problem, "<problem> <fastest seconds>".
# Timing as the benches do it: warm-up, then calls for >= 0.75 s, fastest call.
import argparse
import time

import torch


def fastest(fn, seconds=0.75):
    fn()
    best, start = float("inf"), time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("op", choices=["matmul", "sdpa"])
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--sizes", default="", help="matmul: n,n,... (n^3)")
    p.add_argument("--shapes", default="", help="sdpa: H:S:D:causal,... (batch 1)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
    g = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        if a.op == "matmul":
            for n in [int(x) for x in a.sizes.split(",") if x]:
                x = (torch.rand(n, n, generator=g) * 2 - 1).to(dt)
                y = (torch.rand(n, n, generator=g) * 2 - 1).to(dt)
                print(n, fastest(lambda: torch.matmul(x, y)), flush=True)
        else:
            import torch.nn.functional as F
            for s in [x for x in a.shapes.split(",") if x]:
                h, seq, d, causal = s.split(":")
                shape = (1, int(h), int(seq), int(d))
                q, k, v = [(torch.rand(*shape, generator=g) * 2 - 1).to(dt) for _ in range(3)]
                c = causal == "1"
                print(s, fastest(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=c)), flush=True)


if __name__ == "__main__":
    main()
