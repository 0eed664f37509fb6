"""A small GPT-style transformer block built from code (no downloaded weights), and the example of
running it on Tessera's tuned kernels: its shapes recorded from one forward pass, tuned, bundled,
and the block patched so every GEMM (bias and GELU fused), the causal attention come from the bundle.

    python examples/torch/gpt_block.py [--dim 256 --heads 4 --seq 128 --batch 2 --trials 8 --out DIR]

bench/torch_model_bench.py times the same block against eager torch and torch.compile.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """Pre-norm GPT-2 block: LayerNorm, fused QKV projection, causal attention, output projection,
    LayerNorm, MLP (4x, tanh GELU), residuals."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, c = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, h, c // h).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, c))
        return x + self.mlp(self.ln2(x))


def make(dim: int = 256, heads: int = 4, seed: int = 0) -> Block:
    torch.manual_seed(seed)
    return Block(dim, heads).eval()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--threads", type=int, default=-1, help="host kernels' threads (-1: all cores)")
    p.add_argument("--out", default="build/examples/torch_block")
    a = p.parse_args()
    import tessera.torch as tt

    os.makedirs(a.out, exist_ok=True)
    model = make(a.dim, a.heads)
    x = torch.randn(a.batch, a.seq, a.dim)
    with torch.no_grad():
        want = model(x)
    b = tt.tune_model(model, (x,), out=os.path.join(a.out, "bundle"), db=os.path.join(a.out, "tessera.db"),
                      trials=a.trials, threads=a.threads, min_time=0.02)
    tt.stats(reset=True)
    with torch.no_grad():
        got = model(x)
    err = (got - want).abs().max().item()
    for row in tt.stats():
        print(f"{row['op']:<10} {row['shape']:<28} {row['ran']:<8} {row['kernel'] or row['how']}")
    print(f"max |tessera - torch| = {err:.3g}")
    ok = err < 1e-3 and all(r["ran"] == "tessera" for r in tt.stats())
    print("gpt_block: ok" if ok else "gpt_block: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
