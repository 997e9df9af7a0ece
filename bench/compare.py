#!/usr/bin/env python3
"""compare.py -- vattn against torch scaled_dot_product_attention, same shapes, same run.

For every shape of issue 5 it runs
  * vattn through the vattn-bench binary (paged cache, shuffled blocks; --check against
    the CPU backend first, eager and CUDA-graph timings, JSON back through --json), and
  * torch SDPA with the FLASH_ATTENTION and CUDNN_ATTENTION backends on dense K/V
    (GQA through enable_gqa=True, or K/V expanded to all query heads when a backend
    refuses that; the bytes counted are the same unique K/V bytes either way),
timed the same way: CUDA events around every run after warm-up, median / p10 / p90
of --iters runs, inputs rotated over copies spanning >= 256 MB so consecutive runs
never hit in L2.  The copy ceiling (device-to-device copy, read + write bytes) and
the bf16 matrix rate (8192^3 GEMM) are measured here with torch, once per run;
vattn-bench measures its own copy ceiling in its own process as well.

Writes under --out: results.json (everything), table.md (the markdown table) and
decode_bandwidth.png (GB/s against context length; skipped with a message when
matplotlib is missing).  Prints the table last.

  python3 bench/compare.py --bench build-gpu-bench/bench/vattn-bench --out bench-out
  python3 bench/compare.py --smoke --device cpu --bench build/bench/vattn-bench   # no GPU
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

ROTATE_BYTES = 256e6


# ---- shapes --------------------------------------------------------------------------------
def shape(sid, workload, B, L, **kw):
    s = dict(id=sid, workload=workload, B=B, L=L, heads=32, kv_heads=8, head_size=128,
             block_size=16, dtype="bf16", kv_dtype="auto", causal=True, series=None,
             prefills=4, chunk=512, prefill_ctx=2048, decodes=128, decode_ctx=2048)
    s.update(kw)
    return s


def issue_shapes():
    out = []
    for B, L in [(1, 32768), (8, 8192), (32, 4096), (64, 2048), (128, 1024), (128, 4096), (256, 512)]:
        out.append(shape("decode-%dx%d" % (B, L), "decode", B, L, series="decode bf16 D128"))
    out.append(shape("decode-D64-32x4096", "decode", 32, 4096, head_size=64))
    out.append(shape("decode-D256-32x4096", "decode", 32, 4096, head_size=256))
    out.append(shape("decode-fp8-8x8192", "decode", 8, 8192, kv_dtype="fp8"))
    out.append(shape("decode-fp8-32x4096", "decode", 32, 4096, kv_dtype="fp8"))
    out.append(shape("decode-fp8-128x4096", "decode", 128, 4096, kv_dtype="fp8"))
    for B, L in [(16, 1024), (4, 4096), (1, 16384)]:
        out.append(shape("prefill-causal-%dx%d" % (B, L), "prefill", B, L))
    out.append(shape("mixed-4x512@2k+128dec@2k", "mixed", 0, 0))
    # The mixed batch's two parts alone (issue 5: mixed within 15% of their sum).
    out.append(shape("mixed-part-4x512@2k", "mixed", 0, 0, decodes=0))
    out.append(shape("mixed-part-128dec@2k", "mixed", 0, 0, prefills=0))
    out.append(shape("cache-write-64k", "cache-write", 64, 1024))
    # Prefill on an fp8 cache (last, so that a spent time budget skips these first).
    for B, L in [(16, 1024), (4, 4096)]:
        out.append(shape("prefill-fp8-causal-%dx%d" % (B, L), "prefill", B, L, kv_dtype="fp8"))
    # Prefill at head size 256 (Gemma-style heads; no issue target).
    for B, L in [(16, 1024), (4, 4096)]:
        out.append(shape("prefill-D256-causal-%dx%d" % (B, L), "prefill", B, L, head_size=256))
    # Prefill at head size 64 (no issue target).
    for B, L in [(16, 1024), (4, 4096)]:
        out.append(shape("prefill-D64-causal-%dx%d" % (B, L), "prefill", B, L, head_size=64))
    # Decode on one KV head, 8 query heads: an 8-KV-head model at tensor parallelism 8 (no issue
    # target; last, so that a spent time budget skips these first).
    for B, L in [(1, 32768), (1, 131072), (32, 4096)]:
        out.append(shape("decode-kv1-%dx%d" % (B, L), "decode", B, L, heads=8, kv_heads=1))
    return out


def smoke_shapes():
    """Tiny versions of every kind, for a CPU run of the whole pipeline."""
    small = dict(heads=8, kv_heads=2, head_size=64)
    out = []
    for B, L in [(1, 1024), (4, 256), (8, 128)]:
        out.append(shape("decode-%dx%d" % (B, L), "decode", B, L, series="decode bf16 D128", **small))
    out.append(shape("decode-fp8-4x256", "decode", 4, 256, kv_dtype="fp8", **small))
    out.append(shape("prefill-causal-2x128", "prefill", 2, 128, **small))
    out.append(shape("mixed-small", "mixed", 0, 0, prefills=2, chunk=32, prefill_ctx=64, decodes=4,
                     decode_ctx=128, **small))
    out.append(shape("cache-write-small", "cache-write", 8, 128, **small))
    return out


def shape_label(s):
    if s["workload"] == "mixed":
        return "%d prefill x %d @%d + %d decode @%d" % (s["prefills"], s["chunk"], s["prefill_ctx"],
                                                        s["decodes"], s["decode_ctx"])
    extra = []
    if (s["heads"], s["kv_heads"]) != (32, 8):
        extra.append("%d/%d heads" % (s["heads"], s["kv_heads"]))
    if s["head_size"] != 128:
        extra.append("D%d" % s["head_size"])
    if s["kv_dtype"] != "auto":
        extra.append("kv " + s["kv_dtype"])
    if s["dtype"] != "bf16":
        extra.append(s["dtype"])
    if s["workload"] == "prefill":
        extra.append("causal" if s["causal"] else "non-causal")
    if s["workload"] == "cache-write":
        return "%d tokens (%d x %d)%s" % (s["B"] * s["L"], s["B"], s["L"],
                                          (" " + " ".join(extra)) if extra else "")
    return "%d x %d%s" % (s["B"], s["L"], (" " + " ".join(extra)) if extra else "")


# ---- work (same formulas as vattn-bench) ---------------------------------------------------
ES = {"bf16": 2, "fp16": 2, "fp32": 4}


def requests_of(s):
    w = s["workload"]
    if w == "decode":
        return [(1, s["L"])] * s["B"]
    if w in ("prefill", "cache-write"):
        return [(s["L"], s["L"])] * s["B"]
    return [(1, s["decode_ctx"])] * s["decodes"] + [(s["chunk"], s["prefill_ctx"] + s["chunk"])] * s["prefills"]


def work_of(s):
    es = ES[s["dtype"]]
    kv_es = es if s["kv_dtype"] == "auto" else 1
    H, K, D = s["heads"], s["kv_heads"], s["head_size"]
    reqs = requests_of(s)
    T = sum(q for q, _ in reqs)
    keys = sum(k for _, k in reqs)
    if s["workload"] == "cache-write":
        return dict(bytes=T * K * D * 2 * (es + kv_es) + T * 8, flops=0.0)
    pairs = 0.0
    for q, seq in reqs:
        if s["workload"] == "prefill" and not s["causal"]:
            pairs += q * seq
        else:
            pairs += q * (seq - q) + q * (q + 1) / 2
    return dict(bytes=keys * K * D * 2 * kv_es + 2 * T * H * D * es, flops=4.0 * D * H * pairs)


def headline(s):
    """Which rate the table leads with: 'gbps' or 'tflops'."""
    return "tflops" if s["workload"] == "prefill" else "gbps"


# ---- statistics (no numpy needed) -------------------------------------------------------------
def quantile(sorted_v, q):
    if not sorted_v:
        return float("nan")
    pos = q * (len(sorted_v) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_v) - 1)
    return sorted_v[lo] + (sorted_v[hi] - sorted_v[lo]) * (pos - lo)


def stats_us(us):
    v = sorted(us)
    return dict(median_us=quantile(v, 0.5), p10_us=quantile(v, 0.1), p90_us=quantile(v, 0.9),
                mean_us=sum(v) / len(v), min_us=v[0], max_us=v[-1], runs=len(v))


def rated(st, work, copy_gbps, matrix_tflops):
    sec = st["median_us"] * 1e-6
    r = dict(st)
    r["gbps"] = work["bytes"] / sec / 1e9
    r["tflops"] = work["flops"] / sec / 1e12
    r["pct_of_copy"] = 100 * r["gbps"] / copy_gbps if copy_gbps else 0.0
    r["pct_of_matrix"] = 100 * r["tflops"] / matrix_tflops if matrix_tflops else 0.0
    return r


# ---- torch side ---------------------------------------------------------------------------------
class Torch:
    def __init__(self, iters, warmup, log):
        import torch  # noqa: F401  (import errors are reported by the caller)
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.torch, self.F, self.SDPBackend, self.sdpa_kernel = torch, F, SDPBackend, sdpa_kernel
        self.iters, self.warmup, self.log = iters, warmup, log
        self.dev = torch.device("cuda")
        props = torch.cuda.get_device_properties(0)
        self.device_name = props.name
        self.sms = props.multi_processor_count

    def dtype(self, name):
        t = self.torch
        return {"bf16": t.bfloat16, "fp16": t.float16, "fp32": t.float32}[name]

    def time(self, fns):
        """Per-run CUDA-event times (us) of fns[i % len(fns)], after warm-up."""
        torch = self.torch
        n = len(fns)
        for i in range(self.warmup + (n if n > 1 else 0)):
            fns[i % n]()
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(self.iters)]
        for i, (a, b) in enumerate(ev):
            a.record()
            fns[i % n]()
            b.record()
        torch.cuda.synchronize()
        return stats_us([a.elapsed_time(b) * 1e3 for a, b in ev])

    def copies_for(self, per_copy):
        return max(2, min(64, int(math.ceil(ROTATE_BYTES / max(per_copy, 1)))))

    def ceilings(self):
        torch = self.torch
        n = 1 << 30
        a = torch.randint(0, 255, (n,), dtype=torch.uint8, device=self.dev)
        b = torch.empty_like(a)
        fns = [lambda: b.copy_(a), lambda: a.copy_(b)]
        st = self.time_fixed(fns, 3, 20)
        copy_gbps = 2 * n / (st["median_us"] * 1e-6) / 1e9
        del a, b
        m = 8192
        x = torch.randn(m, m, device=self.dev, dtype=torch.bfloat16)
        y = torch.randn(m, m, device=self.dev, dtype=torch.bfloat16)
        st = self.time_fixed([lambda: x @ y], 3, 20)
        mm_tflops = 2.0 * m ** 3 / (st["median_us"] * 1e-6) / 1e12
        del x, y
        torch.cuda.empty_cache()
        return copy_gbps, mm_tflops

    def time_fixed(self, fns, warmup, iters):
        saved = (self.warmup, self.iters)
        self.warmup, self.iters = warmup, iters
        try:
            return self.time(fns)
        finally:
            self.warmup, self.iters = saved

    def sdpa(self, s, backend_name):
        """Times one SDPA backend on shape s; returns a result dict or dict(error=...)."""
        torch, F = self.torch, self.F
        backend = {"flash": self.SDPBackend.FLASH_ATTENTION, "cudnn": self.SDPBackend.CUDNN_ATTENTION}[backend_name]
        B, L, H, K, D = s["B"], s["L"], s["heads"], s["kv_heads"], s["head_size"]
        dt = self.dtype(s["dtype"])
        G = H // K
        lq = 1 if s["workload"] == "decode" else L
        causal = s["workload"] == "prefill" and s["causal"]
        es = torch.tensor([], dtype=dt).element_size()
        per_copy = B * (H * lq * D * 2 + K * L * D * 2) * es
        copies = self.copies_for(per_copy)
        note = []
        if s["kv_dtype"] != "auto":
            note.append("torch reads %s K/V (SDPA has no fp8 K/V)" % s["dtype"])
        inputs = []
        for _ in range(copies):
            q = torch.randn(B, H, lq, D, device=self.dev, dtype=dt)
            k = torch.randn(B, K, L, D, device=self.dev, dtype=dt)
            v = torch.randn(B, K, L, D, device=self.dev, dtype=dt)
            inputs.append((q, k, v))
        mode = "enable_gqa"
        try:
            with self.sdpa_kernel([backend]):
                q, k, v = inputs[0]
                F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=(G > 1))
                torch.cuda.synchronize()
        except Exception as e:  # backend refuses GQA (or the shape): expand K/V
            first_err = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
            if G == 1:
                return dict(error=first_err)
            mode = "expanded K/V"
            self.log("  torch %s: enable_gqa refused (%s); expanding K/V" % (backend_name, first_err))
            inputs = [(q, k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)) for q, k, v in inputs]
            try:
                with self.sdpa_kernel([backend]):
                    q, k, v = inputs[0]
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    torch.cuda.synchronize()
            except Exception as e2:
                msg = str(e2).strip().splitlines()[0][:160] if str(e2).strip() else type(e2).__name__
                return dict(error=msg)
        gqa = mode == "enable_gqa" and G > 1

        def mk(q, k, v):
            if gqa:
                return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        fns = [mk(*x) for x in inputs]
        with self.sdpa_kernel([backend]):
            st = self.time(fns)
        del inputs, fns
        torch.cuda.empty_cache()
        if mode != "enable_gqa":
            note.append(mode)
        st["mode"] = mode
        st["copies"] = copies
        st["note"] = "; ".join(note)
        return st

    def cache_write(self, s):
        """torch baseline of reshape_and_cache: index_copy_ of K and V into the flat paged cache."""
        torch = self.torch
        if s["kv_dtype"] != "auto":
            return dict(error="no fp8 baseline")
        B, L, K, D, bs = s["B"], s["L"], s["kv_heads"], s["head_size"], s["block_size"]
        dt = self.dtype(s["dtype"])
        T = B * L
        blocks_per_req = (L + bs - 1) // bs
        es = torch.tensor([], dtype=dt).element_size()
        per_copy = 2 * T * K * D * es * 2
        copies = self.copies_for(per_copy)
        nb = blocks_per_req * B * copies + 1
        cache = torch.randn(2, nb * bs, K, D, device=self.dev, dtype=dt)
        perm = torch.randperm(nb, device=self.dev)
        inputs = []
        offs = torch.arange(L, device=self.dev)
        for c in range(copies):
            blocks = perm[1 + c * B * blocks_per_req: 1 + (c + 1) * B * blocks_per_req].view(B, blocks_per_req)
            slots = (blocks[:, offs // bs] * bs + offs % bs).reshape(-1).contiguous()
            k = torch.randn(T, K, D, device=self.dev, dtype=dt)
            v = torch.randn(T, K, D, device=self.dev, dtype=dt)
            inputs.append((slots, k, v))

        def mk(slots, k, v):
            def f():
                cache[0].index_copy_(0, slots, k)
                cache[1].index_copy_(0, slots, v)
            return f

        st = self.time([mk(*x) for x in inputs])
        del inputs, cache
        torch.cuda.empty_cache()
        st["mode"] = "index_copy_ x2"
        st["copies"] = copies
        st["note"] = "torch index_copy_ of K and V into the flat cache"
        return st


# ---- vattn side --------------------------------------------------------------------------------
def run_vattn(args, s, matrix_tflops, log):
    with tempfile.TemporaryDirectory() as td:
        jpath = os.path.join(td, "r.json")
        cmd = [args.bench, "--device", args.device, "--workload", s["workload"],
               "--heads", str(s["heads"]), "--kv-heads", str(s["kv_heads"]),
               "--head-size", str(s["head_size"]), "--block-size", str(s["block_size"]),
               "--dtype", s["dtype"], "--kv-dtype", s["kv_dtype"],
               "--iters", str(args.iters), "--warmup", str(args.warmup),
               "--json", jpath, "--label", s["id"]]
        if s["workload"] == "mixed":
            cmd += ["--prefills", str(s["prefills"]), "--chunk", str(s["chunk"]),
                    "--prefill-ctx", str(s["prefill_ctx"]), "--decodes", str(s["decodes"]),
                    "--decode-ctx", str(s["decode_ctx"])]
        else:
            cmd += ["--batch", str(s["B"]), "--len", str(s["L"])]
        if s["workload"] == "prefill":
            cmd += ["--causal", "1" if s["causal"] else "0"]
        if not args.no_check:
            cmd.append("--check")
        if args.device == "cuda" and not args.no_graph and s["workload"] != "cache-write":
            cmd.append("--graph")
        if matrix_tflops:
            cmd += ["--matrix-tflops", "%.1f" % matrix_tflops]
        cmd += list(s.get("bench_args", ()))  # extra vattn-bench options of the shape
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        log("$ " + " ".join(cmd))
        t0 = time.time()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=args.timeout)
            out, rc = p.stdout, p.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout or ""
            if isinstance(out, bytes):
                out = out.decode("utf-8", "replace")
            rc = "timeout after %ds" % args.timeout
        log(out.rstrip())
        log("  (%.1f s, exit %s)" % (time.time() - t0, rc))
        res = None
        if os.path.exists(jpath):
            try:
                with open(jpath) as f:
                    res = json.load(f)
            except ValueError as e:
                res = dict(error="bad JSON from vattn-bench: %s" % e)
        if res is None:
            tail = [l for l in out.strip().splitlines() if l.strip()][-1:] or [""]
            res = dict(error="vattn-bench exit %s: %s" % (rc, tail[0][:200]))
        res["exit"] = rc
        return res


# ---- table, plot -------------------------------------------------------------------------------
def fmt_rate(r, kind):
    if kind == "tflops":
        return "%.0f TFLOP/s" % r["tflops"]
    return "%.0f GB/s" % r["gbps"]


def fmt_us(x):
    return "%.1f" % x if x < 1000 else "%.0f" % x


MARKS = ["†", "‡", "§", "¶", "#", "**"]


def table(rows, meta):
    L = []
    notes = []
    for r in rows:
        for t in (r.get("torch_flash"), r.get("torch_cudnn")):
            if t and t.get("note") and t["note"] not in notes:
                notes.append(t["note"])
    mark = {n: MARKS[i % len(MARKS)] for i, n in enumerate(notes)}
    mm = ("bf16 GEMM %.0f TFLOP/s (torch, 8192^3)" % meta["matrix_tflops"]) if meta.get("matrix_tflops") \
        else "no matrix rate measured"
    L.append("Device: %s | copy ceiling %.0f GB/s (%s) | %s | %s | torch %s | %d timed runs per cell "
             "after warm-up, median"
             % (meta.get("device", "?"), meta.get("copy_gbps") or 0, meta.get("copy_source", "?"), mm,
                meta.get("date", ""), meta.get("torch") or "n/a", meta.get("iters", 0)))
    L.append("")
    L.append("| workload | shape | vattn µs (graph µs) | vattn | % of ceiling | torch flash | torch cuDNN "
             "| vattn speed-up vs best torch |")
    L.append("|---|---|---|---|---|---|---|---|")
    for row in rows:
        s, v = row["shape"], row["vattn"]
        kind = headline(s)
        wl = s["workload"]
        if wl == "decode":
            wl = "decode %s%s" % (s["dtype"], "" if s["kv_dtype"] == "auto" else " / kv " + s["kv_dtype"])
        elif wl == "prefill" and s["kv_dtype"] != "auto":
            wl = "prefill / kv " + s["kv_dtype"]
        cells = [wl, shape_label(s)]
        best_torch = None
        vt = None
        if "error" in v:
            cells += ["error: " + v["error"].replace("|", "/"), "", ""]
        elif v.get("check", {}).get("ran") and not v["check"].get("pass"):
            cells += ["CHECK FAILED (rel L2 %.2g)" % v["check"].get("rel_l2", float("nan")), "", ""]
        elif "eager" not in v:
            cells += ["no timing", "", ""]
        else:
            e = v["eager"]
            vt = e["median_us"]
            g = v.get("graph")
            us = fmt_us(e["median_us"]) + (" (%s)" % fmt_us(g["median_us"]) if g else "")
            if kind == "tflops":
                mt = v["ceilings"].get("matrix_tflops") or 0
                pct = ("%.0f%% of %.0f TFLOP/s" % (e["pct_of_matrix"], mt)) if mt else "n/a (no matrix rate)"
            elif wl == "mixed":
                pct = "%.0f%% of floor" % e["pct_of_floor"]
            else:
                pct = "%.0f%% of copy" % e["pct_of_copy"]
                if v.get("read_ref"):  # vattn-bench's same-size read reference (CUDA only)
                    pct += " · %.0f%% of read" % v["read_ref"]["eager_pct"]
            rate = fmt_rate(e, kind)
            if wl == "mixed":
                rate += ", %.0f TFLOP/s" % e["tflops"]
            cells += [us, rate, pct]
        for key in ("torch_flash", "torch_cudnn"):
            t = row.get(key)
            if not t:
                cells.append("n/a")
            elif "error" in t:
                cells.append("n/a (%s)" % t["error"].replace("|", "/")[:60])
            else:
                c = "%s · %s µs" % (fmt_rate(t, kind), fmt_us(t["median_us"]))
                if t.get("note"):
                    c += " " + mark[t["note"]]
                cells.append(c)
                best_torch = t["median_us"] if best_torch is None else min(best_torch, t["median_us"])
        cells.append("%.2f×" % (best_torch / vt) if (best_torch and vt) else "")
        L.append("| " + " | ".join(cells) + " |")
    L.append("")
    L.append("vattn: paged KV cache (block %s, blocks randomly permuted), eager median µs with the "
             "CUDA-graph replay median in parentheses; rate and %% from the eager median; checked against "
             "the CPU backend before timing. Decode GB/s counts K+V of every context token + Q + O; "
             "prefill TFLOP/s counts 4·D·H·(visible causal pairs). Speed-up = best torch median / vattn "
             "eager median (both eager launches)." % "16"
             + (" % of read: the eager median against a plain streaming read of the same bytes, timed "
                "the same way in the same process (the reachable floor for small shapes)."
                if any((r.get("vattn") or {}).get("read_ref") for r in rows) else ""))
    for n in notes:
        L.append("%s %s." % (mark[n], n))
    # Mixed batch against the sum of its parts measured alone (same run).
    med = {}
    for row in rows:
        e = (row.get("vattn") or {}).get("eager")
        if e:
            med[row["shape"]["id"]] = e["median_us"]
    whole, parts = "mixed-4x512@2k+128dec@2k", ("mixed-part-4x512@2k", "mixed-part-128dec@2k")
    if whole in med and all(p in med for p in parts):
        tot = sum(med[p] for p in parts)
        L.append("")
        L.append("Mixed batch vs its parts alone (eager medians): %s µs vs %s + %s = %s µs, ratio %.2f."
                 % (fmt_us(med[whole]), fmt_us(med[parts[0]]), fmt_us(med[parts[1]]), fmt_us(tot),
                    med[whole] / tot))
    return "\n".join(L) + "\n"


def plot(rows, meta, path, log):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        log("plot skipped: matplotlib not available (%s)" % e)
        return False
    series = [r for r in rows if r["shape"].get("series")]
    if not series:
        log("plot skipped: no decode series")
        return False
    series.sort(key=lambda r: (r["shape"]["L"], r["shape"]["B"]))
    fig, ax = plt.subplots(figsize=(9, 5.5))
    lines = [("vattn (eager)", lambda r: r["vattn"].get("eager")),
             ("vattn (CUDA graph)", lambda r: r["vattn"].get("graph")),
             ("torch SDPA flash", lambda r: r.get("torch_flash")),
             ("torch SDPA cuDNN", lambda r: r.get("torch_cudnn"))]
    for name, get in lines:
        xs, ys = [], []
        for r in series:
            t = get(r)
            if not t or "error" in t or "gbps" not in t:
                continue
            if name.startswith("vattn") and not r["vattn"].get("check", {}).get("pass", True):
                continue
            xs.append(r["shape"]["L"])
            ys.append(t["gbps"])
        if xs:
            ax.plot(xs, ys, marker="o", label=name)
    for r in series:
        e = r["vattn"].get("eager")
        if e:
            ax.annotate("%dx%d" % (r["shape"]["B"], r["shape"]["L"]), (r["shape"]["L"], e["gbps"]),
                        textcoords="offset points", xytext=(4, 6), fontsize=7)
    if meta.get("copy_gbps"):
        ax.axhline(meta["copy_gbps"], color="gray", linestyle="--", linewidth=1,
                   label="device copy ceiling (%.0f GB/s)" % meta["copy_gbps"])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length L (tokens per request; points labelled B x L)")
    ax.set_ylabel("achieved bandwidth, GB/s (K+V+Q+O bytes / median time)")
    s0 = series[0]["shape"]
    ax.set_title("Decode, %s: %d q / %d kv heads, head %d, %s, block %d, paged (vattn) vs dense (torch)"
                 % (meta.get("device", ""), s0["heads"], s0["kv_heads"], s0["head_size"], s0["dtype"],
                    s0["block_size"]), fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# ---- main --------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="path of the vattn-bench binary")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"), help="output directory")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="vattn backend")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--only", default="", help="comma-separated substrings of shape ids to run")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (pipeline test, e.g. on the CPU)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-graph", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="CPU backend threads")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per vattn-bench call")
    ap.add_argument("--budget-s", type=float, default=0,
                    help="stop starting new shapes after this many seconds (0 = no limit)")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "bench.log"), "w")

    def log(msg):
        logf.write(msg + "\n")
        logf.flush()
        print(msg, file=sys.stderr, flush=True)

    shapes = smoke_shapes() if args.smoke else issue_shapes()
    if args.only:
        keys = [k for k in args.only.split(",") if k]
        shapes = [s for s in shapes if any(k in s["id"] for k in keys)]

    meta = dict(date=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), host=platform.node(),
                iters=args.iters, warmup=args.warmup, device=None, torch=None,
                copy_gbps=None, matrix_tflops=None, rotate_bytes=ROTATE_BYTES)
    T = None
    if not args.no_torch:
        try:
            import torch
            meta["torch"] = torch.__version__
            if not torch.cuda.is_available():
                raise RuntimeError("torch sees no CUDA device")
            T = Torch(args.iters, args.warmup, log)
            meta["device"] = T.device_name
            meta["copy_gbps"], meta["matrix_tflops"] = T.ceilings()
            meta["copy_source"] = "torch copy_ of 1 GiB, read+write"
            log("torch %s on %s: copy ceiling %.0f GB/s, bf16 GEMM %.0f TFLOP/s"
                % (torch.__version__, T.device_name, meta["copy_gbps"], meta["matrix_tflops"]))
        except Exception as e:  # noqa: BLE001
            log("torch side skipped: %s" % e)
            T = None

    rows = []
    t_start = time.time()
    for s in shapes:
        if args.budget_s and time.time() - t_start > args.budget_s:
            log("== %s skipped: time budget of %.0f s spent" % (s["id"], args.budget_s))
            rows.append(dict(shape=s, work=work_of(s), vattn=dict(error="skipped: time budget spent")))
            continue
        log("== %s (%s)" % (s["id"], shape_label(s)))
        row = dict(shape=s, work=work_of(s))
        if T is not None:
            T.torch.cuda.empty_cache()
        row["vattn"] = run_vattn(args, s, meta["matrix_tflops"], log)
        v = row["vattn"]
        if meta["device"] is None and "device" in v:
            meta["device"] = v["device"].get("name")
        if meta["copy_gbps"] is None and v.get("ceilings", {}).get("copy_gbps"):
            meta["copy_gbps"] = v["ceilings"]["copy_gbps"]
            meta["copy_source"] = "vattn-bench: " + v["ceilings"].get("copy_method", "")
        if "work" in v and abs(v["work"]["bytes"] - row["work"]["bytes"]) > 1e-6 * row["work"]["bytes"] + 1:
            log("  WARNING: byte counts differ: vattn-bench %g, compare.py %g" % (v["work"]["bytes"], row["work"]["bytes"]))
        if T is not None:
            cg, mt = meta["copy_gbps"], meta["matrix_tflops"]
            try:
                if s["workload"] in ("decode", "prefill"):
                    for name in ("flash", "cudnn"):
                        r = T.sdpa(s, name)
                        row["torch_" + name] = r if "error" in r else rated(r, row["work"], cg, mt)
                        log("  torch %s: %s" % (name, r.get("error") or "%.2f us" % r["median_us"]))
                elif s["workload"] == "cache-write":
                    r = T.cache_write(s)
                    row["torch_flash"] = r if "error" in r else rated(r, row["work"], cg, mt)
                    log("  torch index_copy_: %s" % (r.get("error") or "%.2f us" % r["median_us"]))
            except Exception as e:  # noqa: BLE001
                log("  torch failed: %s" % e)
                row["torch_error"] = str(e)
                try:
                    T.torch.cuda.empty_cache()
                except Exception:  # noqa: BLE001
                    pass
        rows.append(row)
    meta["elapsed_s"] = time.time() - t_start

    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    md = table(rows, meta)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(md)
    png = os.path.join(args.out, "decode_bandwidth.png")
    if plot(rows, meta, png, log):
        log("plot: %s" % png)
    log("results: %s, %s" % (os.path.join(args.out, "results.json"), os.path.join(args.out, "table.md")))
    logf.close()
    sys.stdout.write("\n" + md)
    bad = [r["shape"]["id"] for r in rows if "error" in r["vattn"] or
           (r["vattn"].get("check", {}).get("ran") and not r["vattn"]["check"].get("pass"))]
    if bad:
        print("\nvattn failed or did not check on: %s" % ", ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
