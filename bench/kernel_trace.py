#!/usr/bin/env python3
"""Reads bench/kernel_trace.cpp's TSV, and drives torch SDPA decode loops to trace.

    python3 bench/kernel_trace.py report trace.tsv [--after sleep] [--skip N] [--last N]
        Per kernel name: how many, duration median / p10 / p90 (us), the gap from the previous
        kernel's end to this one's start (us; negative = overlap, e.g. programmatic dependent
        launch), and grid / threads / registers / shared memory / cluster / launch API.
        --after S keeps only the kernels after the last one whose name contains S (the spin
        kernel that `sdpa-decode` puts before its timed loop); --skip N drops N more; --last N
        keeps each name's last N kernels (vattn-bench's timed loop is its last --iters forwards).

    python3 bench/kernel_trace.py sdpa-decode B L [--backend cudnn|flash] [--iters N] [--bare]
                                              [--heads H] [--kv-heads K] [--head-size D]
        torch SDPA decode (bf16, 32 query / 8 KV heads and head size 128 unless given, dense K / V, two input
        copies used in turn): warm-up, a spin kernel (torch.cuda._sleep), then N launches, each
        between two CUDA events as bench/compare.py times them (--bare: no events).  Prints the
        events' median.  Run it under the injection library to trace it.

Needs a GPU and torch for sdpa-decode (the GPU machine); report runs anywhere.
"""
import argparse
import statistics
import sys


def report(args):
    rows = []
    with open(args.tsv) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            r = dict(zip(header, line.rstrip("\n").split("\t")))
            if len(r) == len(header):
                rows.append(r)
    rows.sort(key=lambda r: int(r["start_ns"]))
    if args.after:
        marks = [i for i, r in enumerate(rows) if args.after in r["name"].lower()]
        if marks:
            rows = rows[marks[-1] + 1:]
    rows = rows[args.skip:]
    if args.last:
        keep, seen = [], {}
        for r in reversed(rows):
            seen[r["name"]] = seen.get(r["name"], 0) + 1
            if seen[r["name"]] <= args.last:
                keep.append(r)
        rows = keep[::-1]
    if not rows:
        sys.exit("no kernels in %s (after the filters)" % args.tsv)
    groups = {}
    prev_end = None
    for r in rows:
        s, e = int(r["start_ns"]), int(r["end_ns"])
        g = groups.setdefault(r["name"][:100], dict(dur=[], gap=[], first=r))
        g["dur"].append((e - s) / 1e3)
        if prev_end is not None:
            g["gap"].append((s - prev_end) / 1e3)
        prev_end = e
    print("| kernel | n | duration median (p10-p90) us | gap before median (min-max) us | grid | threads | regs | smem | cluster | launch |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, g in groups.items():
        d, gap, r = sorted(g["dur"]), sorted(g["gap"]), g["first"]
        gs = "%.2f (%.2f-%.2f)" % (statistics.median(gap), gap[0], gap[-1]) if gap else "-"
        print("| %s | %d | %.2f (%.2f-%.2f) | %s | %s | %s | %s | %s | %s | %s |" % (
            name, len(d), statistics.median(d), d[len(d) // 10], d[(9 * len(d)) // 10], gs, r["grid"], r["threads"],
            r["regs"], r["smem"], r["cluster"], r["launch"]))
    span = (int(rows[-1]["end_ns"]) - int(rows[0]["start_ns"])) / 1e3
    print("\n%d kernels in %.1f us" % (len(rows), span))


def sdpa_decode(args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[args.backend]
    B, L, H, K, D = args.batch, args.len, args.heads, args.kv_heads, args.head_size
    ins = [(torch.randn(B, H, 1, D, device="cuda", dtype=torch.bfloat16),
            torch.randn(B, K, L, D, device="cuda", dtype=torch.bfloat16),
            torch.randn(B, K, L, D, device="cuda", dtype=torch.bfloat16)) for _ in range(2)]
    with sdpa_kernel([backend]):
        for i in range(10):
            F.scaled_dot_product_attention(*ins[i % 2], enable_gqa=True)
        torch.cuda.synchronize()
        torch.cuda._sleep(50_000_000)  # marks where the timed loop starts (report --after sleep)
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(args.iters)]
        for i, (a, b) in enumerate(ev):
            if not args.bare:
                a.record()
            F.scaled_dot_product_attention(*ins[i % 2], enable_gqa=True)
            if not args.bare:
                b.record()
        torch.cuda.synchronize()
    if not args.bare:
        t = sorted(a.elapsed_time(b) * 1e3 for a, b in ev)
        print("torch %s decode %dx%d (%d / %d heads, head size %d): events median %.1f us (n=%d)"
              % (args.backend, B, L, H, K, D, t[len(t) // 2], len(t)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report")
    r.add_argument("tsv")
    r.add_argument("--after", default="", type=str.lower)
    r.add_argument("--skip", type=int, default=0)
    r.add_argument("--last", type=int, default=0)
    s = sub.add_parser("sdpa-decode")
    s.add_argument("batch", type=int)
    s.add_argument("len", type=int)
    s.add_argument("--backend", choices=["cudnn", "flash"], default="cudnn")
    s.add_argument("--iters", type=int, default=60)
    s.add_argument("--bare", action="store_true")
    s.add_argument("--heads", type=int, default=32)
    s.add_argument("--kv-heads", type=int, default=8)
    s.add_argument("--head-size", type=int, default=128)
    args = ap.parse_args()
    if args.cmd == "report":
        if args.skip < 0 or args.last < 0:
            ap.error("--skip / --last: expected N >= 0, got %d / %d" % (args.skip, args.last))
        report(args)
    else:
        if min(args.batch, args.len, args.iters, args.heads, args.kv_heads, args.head_size) < 1:
            ap.error("sdpa-decode: B, L, --iters and the head counts / size must be >= 1")
        if args.heads % args.kv_heads:
            ap.error("sdpa-decode: --heads %d is not a multiple of --kv-heads %d" % (args.heads, args.kv_heads))
        sdpa_decode(args)


if __name__ == "__main__":
    main()
