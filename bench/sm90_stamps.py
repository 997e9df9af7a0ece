#!/usr/bin/env python3
"""sm90_stamps.py -- where a unit's time goes in attention_sm90_kernel (a dev tool).

`apply TREE` edits a copy of the sources (never the checkout you commit from) so that,
built with -DVATTN_XP_STAMPS, the Hopper prefill kernel (16-bit caches) stamps clock64()
at fixed points of every unit, in lane 0 of consumer warps 0 and 4 (one per warpgroup)
and of the producer's first warp, for the first 64 units of CTAs 0 .. 131, and the host
launch writes the stamps of one launch to a file:

    VATTN_XP_DUMP=stamps.bin [VATTN_XP_DUMP_AT=40] vattn-bench --workload prefill ...

`check SRC` only checks that every edit still finds its anchor in SRC (a ctest runs it,
so the tool follows the kernel).  `report FILE...` prints, per file, the cycles per unit and warpgroup in each phase
(totals and medians by the unit's tile count) and the producer's waits.  The stamps
themselves cost 8-10% (H100, 16x1024: 341-345 against 315 us) and make ptxas spill a
few registers, so read shares, not absolute times.  Needs numpy for `report`.

The edits anchor on exact lines of the kernel; when the kernel changed, `apply` stops
and names the anchor it could not find.  File layout: int32 CTA count, then
int32 [132 CTAs][3 roles: warpgroup 0, 1, producer][64 units][16 slots].
"""
import sys

STAMP_DEFS = """#ifdef VATTN_XP_STAMPS
// DEV ONLY (bench/sm90_stamps.py): per CTA, role, unit: 16 ints.
static __device__ int g_xp_stamps[132][3][64][16];
#define XP_NOW() static_cast<int>(clock64() - xp_t0)
#else
#define XP_NOW() 0
#endif
"""

# (anchor, replacement) pairs for kernels/attention_sm90.cuh; each anchor must occur once.
# Consumer slots: 0 unit start, 1 setup done, 2 first S landed, 3 first softmax done,
# 4 key loop done, 5..8 in-loop waits (tile, turn, S, P V), 9 next Q landed, 10 next
# tile landed, 11 boundary turn taken, 12 last P V landed, 13 epilogue done, 14 row
# statistics done, 15 tiles.  Producer slots: 0 unit start, 1 ring step done, 2 tiles,
# 3 first tile issued, 4 / 5 around issue_q, 6 wait for free stages, 7 unit end.
KERNEL_EDITS = [
    ("// One unit's record in the CTA's ring", STAMP_DEFS + "// One unit's record in the CTA's ring"),
    ("""  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int bs = p.block_size;""",
     """  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
#ifdef VATTN_XP_STAMPS
  const long long xp_t0 = clock64();
  const bool xp_lane0 = (tid == 0 || tid == 128 || tid == 256) && blockIdx.x < 132;
  int *const xp_base = &g_xp_stamps[blockIdx.x < 132 ? blockIdx.x : 0][tid >> 7][0][0];
#define XP_SET(u, i, v) do { if (xp_lane0 && (u) < 64) xp_base[(u) * 16 + (i)] = (v); } while (0)
#else
#define XP_SET(u, i, v) do { } while (0)
#endif
  const int bs = p.block_size;"""),
    ("""#pragma unroll 1
      for (int u = 0;; ++u) {
        if constexpr (S::kSched) {
          if (tid == S::kConsumers) mbar_arrive(bar_started(u));
        } else if (u > 0) {
          if (warp == kRingWarp && lane < 8) ring_step(u);
          named_barrier_sync(1, S::kProducers);  // the ring's new slots
        }
        const int nt = ring[u % kUnitRing].ntiles;
        if (nt == 0) {
          issue_q_at_end(u);
          break;
        }
#pragma unroll 1
        for (int t = 0; t < nt; ++t) {
          mbar_wait(bar_empty(st), ph ^ 1);""",
     """      int xp_we = 0;
#pragma unroll 1
      for (int u = 0;; ++u) {
        XP_SET(u, 0, XP_NOW());
        if constexpr (S::kSched) {
          if (tid == S::kConsumers) mbar_arrive(bar_started(u));
        } else if (u > 0) {
          if (warp == kRingWarp && lane < 8) ring_step(u);
          named_barrier_sync(1, S::kProducers);  // the ring's new slots
        }
        XP_SET(u, 1, XP_NOW());
        const int nt = ring[u % kUnitRing].ntiles;
        XP_SET(u, 2, nt);
        if (nt == 0) {
          issue_q_at_end(u);
          break;
        }
        xp_we = 0;
#pragma unroll 1
        for (int t = 0; t < nt; ++t) {
          const int xa = XP_NOW();
          mbar_wait(bar_empty(st), ph ^ 1);
          xp_we += XP_NOW() - xa;
          if (t == 0) XP_SET(u, 3, XP_NOW());"""),
    ("""          if (t == 0) issue_q_in_unit(u);
        }
      }
    }
    cp_async_wait_all();""",
     """          if (t == 0 && (QB == 2 || u > 0)) {
            XP_SET(u, 4, XP_NOW());
            issue_q_in_unit(u);
            XP_SET(u, 5, XP_NOW());
          }
        }
        XP_SET(u, 6, xp_we);
        XP_SET(u, 7, XP_NOW());
      }
    }
    cp_async_wait_all();"""),
    ("""  for (int u = 0; any; ++u) {  // (left at the break below, after the last unit)
    const UnitSlot &us = ring[u % kUnitRing];""",
     """  for (int u = 0; any; ++u) {  // (left at the break below, after the last unit)
    XP_SET(u, 0, XP_NOW());
    const UnitSlot &us = ring[u % kUnitRing];"""),
    ("""      wgmma_wait<0>();  // S of the first tile (issued before the unit started)
      wgmma_fence_regs(s);""",
     """      XP_SET(u, 1, XP_NOW());
      wgmma_wait<0>();  // S of the first tile (issued before the unit started)
      wgmma_fence_regs(s);
      XP_SET(u, 2, XP_NOW());
      XP_SET(u, 15, ntiles);"""),
    ("""      pack_p();
      advance();
#pragma unroll 1
      for (int t = 1; t < ntiles; ++t) {
        wait_tile(t >= fence_from);
        wgmma_fence_regs(o);
        wgmma_fence_regs(pa);
        turn_sync();
        wgmma_fence();""",
     """      pack_p();
      advance();
      XP_SET(u, 3, XP_NOW());
      int xw_tile = 0, xw_turn = 0, xw_s = 0, xw_pv = 0;
#pragma unroll 1
      for (int t = 1; t < ntiles; ++t) {
        int xa = XP_NOW();
        wait_tile(t >= fence_from);
        int xb = XP_NOW();
        xw_tile += xb - xa;
        wgmma_fence_regs(o);
        wgmma_fence_regs(pa);
        turn_sync();
        xa = XP_NOW();
        xw_turn += xa - xb;
        wgmma_fence();"""),
    # The in-loop S / P V waits are stamped in the S-first order (head sizes
    # 64 and 128); the head-size-256 branch (P V first) is left unstamped.
    ("""          issue_s(g);
          issue_pv(prev, t == 1);  // under this tile's softmax
          turn_arrive();
          wgmma_wait<1>();""",
     """          issue_s(g);
          issue_pv(prev, t == 1);  // under this tile's softmax
          turn_arrive();
          xb = XP_NOW();
          wgmma_wait<1>();
          xw_s += XP_NOW() - xb;"""),
    ("""          rescale = softmax_tile(t, alpha);
          wgmma_wait<0>();  // P V of the previous tile landed: O, pa and its stage are free""",
     """          rescale = softmax_tile(t, alpha);
          const int xc = XP_NOW();
          wgmma_wait<0>();  // P V of the previous tile landed: O, pa and its stage are free
          xw_pv += XP_NOW() - xc;"""),
    ("""      const UnitSlot &nx = unit_slot(u + 1);
      more = nx.ntiles != 0;
      if (more) wait_tile(nx.fence_from == 0);""",
     """      XP_SET(u, 4, XP_NOW());
      XP_SET(u, 5, xw_tile);
      XP_SET(u, 6, xw_turn);
      XP_SET(u, 7, xw_s);
      XP_SET(u, 8, xw_pv);
      const UnitSlot &nx = unit_slot(u + 1);
      XP_SET(u, 9, XP_NOW());
      more = nx.ntiles != 0;
      if (more) wait_tile(nx.fence_from == 0);
      XP_SET(u, 10, XP_NOW());"""),
    ("""      turn_sync();
      wgmma_fence();
      issue_pv_last(prev, ntiles == 1, w_last);
      issue_s(more ? g : prev);
      turn_arrive();
      wgmma_wait<1>();  // P V landed (the S product is still running)
      wgmma_fence_regs(o);""",
     """      turn_sync();
      XP_SET(u, 11, XP_NOW());
      wgmma_fence();
      issue_pv_last(prev, ntiles == 1, w_last);
      issue_s(more ? g : prev);
      turn_arrive();
      wgmma_wait<1>();  // P V landed (the S product is still running)
      wgmma_fence_regs(o);
      XP_SET(u, 12, XP_NOW());"""),
    ("""            store_lse(p, head[i], rq.q_start + (rc.qpos[i] - qpos0), lse);
        }""",
     """            store_lse(p, head[i], rq.q_start + (rc.qpos[i] - qpos0), lse);
        }
        XP_SET(u, 14, XP_NOW());"""),
    ("""    if (it.merge != 0)
      merge_split_tile<T, HS>""",
     """    XP_SET(u, 13, XP_NOW());
    if (it.merge != 0)
      merge_split_tile<T, HS>"""),
]

DISPATCH_EDITS = [
    ("""      attention_sm90_kernel<T, CACHE, HS><<<ctas, Sh::kThreads, Sh::smem_bytes(), s>>>(p, maps);
      return cudaGetLastError();""",
     """      attention_sm90_kernel<T, CACHE, HS><<<ctas, Sh::kThreads, Sh::smem_bytes(), s>>>(p, maps);
#ifdef VATTN_XP_STAMPS
      {  // DEV ONLY (bench/sm90_stamps.py): launch VATTN_XP_DUMP_AT's stamps to VATTN_XP_DUMP.
        static int n_launch = 0;
        const char *path = getenv("VATTN_XP_DUMP");
        const int at = getenv("VATTN_XP_DUMP_AT") ? atoi(getenv("VATTN_XP_DUMP_AT")) : 40;
        if (path && ++n_launch == at) {
          cudaStreamSynchronize(s);
          static int buf[132 * 3 * 64 * 16];
          cudaMemcpyFromSymbol(buf, g_xp_stamps, sizeof(buf));
          if (FILE *f = fopen(path, "wb")) {
            fwrite(&ctas, 4, 1, f);
            fwrite(buf, sizeof(buf), 1, f);
            fclose(f);
          }
        }
      }
#endif
      return cudaGetLastError();"""),
    ('#include "attention_sm90.cuh"', '#include "attention_sm90.cuh"\n#include <cstdio>\n#include <cstdlib>'),
]


def apply(tree, write=True):
    for rel, edits in (("kernels/attention_sm90.cuh", KERNEL_EDITS), ("kernels/attention_dispatch.cuh", DISPATCH_EDITS)):
        path = f"{tree}/{rel}"
        src = open(path).read()
        for anchor, new in edits:
            n = src.count(anchor)
            if n != 1:
                sys.exit(f"{rel}: anchor found {n} times (the kernel changed?):\n{anchor}")
            src = src.replace(anchor, new)
        if write:
            open(path, "w").write(src)
    if write:
        print(f"stamps applied to {tree}; build it with -DCMAKE_CUDA_FLAGS=-DVATTN_XP_STAMPS")
    else:
        print(f"every anchor found once in {tree}")


def units_of(a, c):
    """Units stamped in CTA c: those with a tile count in the producer's slot 2."""
    nu = 0
    while nu < 64 and a[c, 2, nu, 2] > 0:
        nu += 1
    return nu


def report(path):
    import numpy as np

    raw = np.fromfile(path, dtype=np.int32)
    ctas = int(raw[0])
    a = raw[1:].reshape(132, 3, 64, 16)[:ctas]
    rows = []
    for c in range(ctas):
        nu = units_of(a, c)
        for w in range(2):
            for u in range(nu):
                x = a[c, w, u]
                end = a[c, w, u + 1, 0] if u + 1 < nu else x[13]
                rows.append(dict(
                    nt=int(x[15]), setup=x[1] - x[0], s0_wait=x[2] - x[1], softmax0=x[3] - x[2],
                    key_loop=x[4] - x[3], loop_wait_tile=x[5], loop_wait_turn=x[6], loop_wait_s=x[7],
                    loop_wait_pv=x[8], wait_next_q=x[9] - x[4], wait_next_tile=x[10] - x[9],
                    wait_turn=x[11] - x[10], wait_last_pv=x[12] - x[11], row_stats=x[14] - x[12],
                    stores=x[13] - x[14], tail=end - x[13], total=end - x[0]))
    keys = [k for k in rows[0] if k != "nt"]
    tot = {k: float(np.sum([r[k] for r in rows])) for k in keys}
    tiles = sum(r["nt"] for r in rows)
    print(f"== {path}: {ctas} CTAs, {len(rows) // 2 / ctas:.1f} units per CTA, {tiles / len(rows):.2f} tiles per unit,"
          f" {tot['total'] / tiles:.0f} cycles per tile")
    print("phase (loop_* are inside key_loop)      share   cycles per unit")
    for k in keys:
        print(f"  {k:16s} {100 * tot[k] / tot['total']:6.1f}%  {tot[k] / len(rows):8.0f}")
    print("medians by tiles per unit: tiles units total setup softmax0 key_loop wait_last_pv row_stats stores tail")
    for nt in sorted({r["nt"] for r in rows}):
        sel = [r for r in rows if r["nt"] == nt]
        med = lambda k: float(np.median([r[k] for r in sel]))
        print(f"  {nt:3d} {len(sel):5d} " + " ".join(f"{med(k):7.0f}" for k in
              ("total", "setup", "softmax0", "key_loop", "wait_last_pv", "row_stats", "stores", "tail")))
    # The two warpgroups' boundary windows (key loop done -> next unit's first softmax
    # done): how much they overlap, and how far warpgroup 1 trails warpgroup 0.
    ov, lag = [], []
    for c in range(ctas):
        nu = units_of(a, c)
        for u in range(nu - 1):
            w = [(a[c, g, u, 4], a[c, g, u + 1, 3]) for g in range(2)]
            inter = max(0, min(w[0][1], w[1][1]) - max(w[0][0], w[1][0]))
            ov.append(inter / max(w[0][1] - w[0][0], w[1][1] - w[1][0], 1))
            lag.append(w[1][0] - w[0][0])
    if ov:
        print("boundary windows of the two warpgroups: overlap median %.2f (p10 %.2f), warpgroup 1 enters %.0f"
              " cycles after warpgroup 0 (median)" % (np.median(ov), np.percentile(ov, 10), np.median(lag)))
    prod = np.array([[a[c, 2, u, 1] - a[c, 2, u, 0], a[c, 2, u, 5] - a[c, 2, u, 4], a[c, 2, u, 6],
                      a[c, 2, u, 7] - a[c, 2, u, 0]]
                     for c in range(ctas) for u in range(units_of(a, c))])
    print("producer medians per unit: ring step %.0f, issue_q %.0f, waits for free stages %.0f, unit %.0f"
          % tuple(np.median(prod, axis=0)))


def main():
    if len(sys.argv) >= 3 and sys.argv[1] in ("apply", "check"):
        apply(sys.argv[2], write=sys.argv[1] == "apply")
    elif len(sys.argv) >= 3 and sys.argv[1] == "report":
        for p in sys.argv[2:]:
            report(p)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
