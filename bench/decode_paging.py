#!/usr/bin/env python3
"""What the paged cache's block order costs decode, next to torch cuDNN, in one run.

For each of issue 5's seven decode shapes (bf16, 32 query / 8 KV heads, head size 128, block 16)
it times vattn-bench with shuffled cache blocks (the benchmark's default: blocks drawn from a
random permutation) and with sequential ones (each request's blocks contiguous, as dense K / V
is), the plain read of the same bytes that vattn-bench times alongside, and torch SDPA's cuDNN
backend on dense K / V.  Every vattn run is checked against the CPU backend first (--check).
Prints a markdown table of eager medians in microseconds.

    python3 bench/decode_paging.py build-gpu-bench/bench/vattn-bench [--rounds 2] [--shapes 64x2048,66x2048]

Needs a GPU and torch (the GPU machine); runs both sides through compare.py.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

SHAPES = [(1, 32768), (8, 8192), (32, 4096), (64, 2048), (128, 1024), (128, 4096), (256, 512)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench", help="path of the vattn-bench binary")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--shapes", default="", help="BxL,BxL,... instead of issue 5's seven shapes")
    args = ap.parse_args()
    shapes = SHAPES
    if args.shapes:
        try:
            shapes = [tuple(int(x) for x in t.lower().split("x")) for t in args.shapes.split(",")]
        except ValueError:
            ap.error("--shapes: expected BxL,BxL,... (e.g. 64x2048,66x2048), got %r" % args.shapes)
        if any(len(t) != 2 or min(t) < 1 for t in shapes):
            ap.error("--shapes: each entry is BxL with B, L >= 1, got %r" % args.shapes)
    # compare.run_vattn's options: CUDA, checked, eager only.
    run = argparse.Namespace(bench=args.bench, device="cuda", iters=args.iters, warmup=10, no_check=False,
                             no_graph=True, threads=0, timeout=120)
    torch = compare.Torch(args.iters, 10, lambda msg: None)

    def vattn(s, order):
        r = compare.run_vattn(run, dict(s, bench_args=["--block-order", order]), 0, lambda msg: None)
        if "eager" not in r or not (r.get("check") or {}).get("pass"):
            sys.exit("vattn-bench --block-order %s on %s: %s" % (order, s["id"], r.get("error", "check failed")))
        return r["eager"]["median_us"], (r.get("read_ref") or {}).get("median_us", float("nan"))

    print("| shape | round | vattn shuffled | vattn sequential | same-size read | torch cuDNN (dense) |")
    print("|---|---|---|---|---|---|")
    for rnd in range(1, args.rounds + 1):
        for B, L in shapes:
            s = compare.shape("decode-%dx%d" % (B, L), "decode", B, L)
            shuffled, read = vattn(s, "shuffled")
            sequential, _ = vattn(s, "sequential")
            cudnn = torch.sdpa(s, "cudnn").get("median_us", float("nan"))
            print("| %dx%d | %d | %.1f | %.1f | %.1f | %.1f |" % (B, L, rnd, shuffled, sequential, read, cudnn),
                  flush=True)


if __name__ == "__main__":
    main()
