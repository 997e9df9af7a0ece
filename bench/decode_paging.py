#!/usr/bin/env python3
"""What the paged cache's block order costs decode, next to torch cuDNN, in one run.

For each of issue 5's seven decode shapes (bf16, 32 query / 8 KV heads, head size 128, block 16)
it times vattn-bench with shuffled cache blocks (the benchmark's default: blocks drawn from a
random permutation) and with sequential ones (each request's blocks contiguous, as dense K / V
is), the plain read of the same bytes that vattn-bench times alongside, and torch SDPA's cuDNN
backend on dense K / V.  Prints a markdown table of eager medians in microseconds.

    python3 bench/decode_paging.py build-gpu-bench/bench/vattn-bench [--rounds 2]

Needs a GPU and torch (the GPU machine); uses compare.py's torch timing.
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

SHAPES = [(1, 32768), (8, 8192), (32, 4096), (64, 2048), (128, 1024), (128, 4096), (256, 512)]


def vattn(bench, B, L, order, iters):
    """(eager median, same-size read median) in us from one vattn-bench run."""
    cmd = [bench, "--workload", "decode", "--batch", str(B), "--len", str(L), "--iters", str(iters),
           "--block-order", order]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=120).stdout
    eager = re.search(r"^eager\s+median\s+([0-9.]+)", out, re.M)
    read = re.search(r"^read\s+median\s+([0-9.]+)", out, re.M)
    if not eager:
        sys.exit("vattn-bench failed: %s\n%s" % (" ".join(cmd), out[-2000:]))
    return float(eager.group(1)), float(read.group(1)) if read else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench", help="path of the vattn-bench binary")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=100)
    args = ap.parse_args()
    torch = compare.Torch(args.iters, 10, lambda msg: None)
    print("| shape | round | vattn shuffled | vattn sequential | same-size read | torch cuDNN (dense) |")
    print("|---|---|---|---|---|---|")
    for rnd in range(1, args.rounds + 1):
        for B, L in SHAPES:
            shuffled, read = vattn(args.bench, B, L, "shuffled", args.iters)
            sequential, _ = vattn(args.bench, B, L, "sequential", args.iters)
            cudnn = torch.sdpa(compare.shape("decode-%dx%d" % (B, L), "decode", B, L), "cudnn")
            print("| %dx%d | %d | %.1f | %.1f | %.1f | %.1f |" % (
                B, L, rnd, shuffled, sequential, read, cudnn.get("median_us", float("nan"))), flush=True)


if __name__ == "__main__":
    main()
