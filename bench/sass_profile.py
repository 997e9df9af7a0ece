#!/usr/bin/env python3
"""sass_profile.py -- read a kernel's SASS and its Nsight Compute stall samples (a dev tool).

    sass_profile.py loops FILE.sass [--min N]
        FILE.sass: `cuobjdump -sass x.cubin` (or nvdisasm) text of one or more kernels.
        One line per loop (a backward branch and the code from its target to it) that holds a
        wgmma (HGMMA) or at least N instructions (default 300): its offsets, its instruction
        count and how many of them are HGMMA, STL, LDL, BAR, LDS, LDG / LDGSTS and SYNCS (mbarrier
        waits). A spill in a key loop shows as STL / LDL there (docs/benchmarks.md, session 35).
    sass_profile.py stalls FILE.csv[.gz] [--top N] [--range LO-HI ...]
        FILE: `ncu --import R.ncu-rep --page source --csv --print-source sass` of one kernel
        (gzip or not). Prints the total of "Warp Stall Sampling (All Samples)", the N (default
        25) instructions with the most samples (offset from the kernel's first instruction, as
        cuobjdump numbers them; share; times executed; SASS), then the samples inside each
        offset range LO-HI (hex, inclusive), e.g. a loop that `loops` printed.
    sass_profile.py selftest
        Runs both on small built-in samples (a ctest does).

Session 36 found with these why 48-key head-size-256 tiles lost (docs/benchmarks.md).
"""
import csv
import gzip
import io
import re
import sys

CLASSES = [("HGMMA", r"\bHGMMA"), ("STL", r"\bSTL\b"), ("LDL", r"\bLDL\b"), ("BAR", r"\bBAR\."),
           ("LDS", r"\bLDS\b"), ("LDG", r"\bLDG(STS)?\b"), ("SYNCS", r"\bSYNCS\.")]
SAMPLES = "Warp Stall Sampling (All Samples)"


def parse_sass(text):
    """[(offset, instruction text)] of every /*offset*/ line."""
    out = []
    for line in text.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            out.append((int(m.group(1), 16), m.group(2)))
    return out


def loops(text, min_len=300):
    """[(start, end, count, {class: n})] for each backward branch worth showing."""
    ins = parse_sass(text)
    at = {a: i for i, (a, _) in enumerate(ins)}
    found = []
    for i, (a, t) in enumerate(ins):
        if "BRA" not in t:
            continue
        m = re.search(r"0x([0-9a-f]+)", t)
        if not m:
            continue
        tgt = int(m.group(1), 16)
        if tgt >= a or tgt not in at:
            continue
        body = [x for _, x in ins[at[tgt]:i + 1]]
        cnt = {k: sum(1 for b in body if re.search(p, b)) for k, p in CLASSES}
        if cnt["HGMMA"] > 0 or len(body) >= min_len:
            found.append((tgt, a, len(body), cnt))
    return found


def open_csv(path):
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def read_csv(f):
    rows = list(csv.reader(f))
    # The first row names the kernel; the header row is the one with the sample column.
    hi = next(i for i, r in enumerate(rows) if SAMPLES in r)
    hdr = rows[hi]
    col = {h: j for j, h in enumerate(hdr)}
    data = [r for r in rows[hi + 1:] if len(r) == len(hdr)]
    return col, data


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


def stalls(f, top=25, ranges=()):
    col, data = read_csv(f)
    base = int(data[0][col["Address"]], 16)
    rows = [(int(r[col["Address"]], 16) - base, num(r[col[SAMPLES]]),
             num(r[col["Instructions Executed"]]) if "Instructions Executed" in col else 0.0,
             r[col["Source"]].strip()) for r in data]
    total = sum(r[1] for r in rows) or 1.0
    best = sorted(rows, key=lambda r: -r[1])[:top]
    sums = [(lo, hi, sum(r[1] for r in rows if lo <= r[0] <= hi)) for lo, hi in ranges]
    return total, best, sums


def main(argv):
    if len(argv) >= 2 and argv[1] == "loops":
        min_len = int(argv[argv.index("--min") + 1]) if "--min" in argv else 300
        for s, e, n, cnt in loops(open(argv[2]).read(), min_len):
            print("loop %#x-%#x: %d instructions, %s" % (s, e, n, ", ".join("%s %d" % kv for kv in cnt.items())))
        return 0
    if len(argv) >= 2 and argv[1] == "stalls":
        top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 25
        ranges = [tuple(int(x, 16) for x in argv[i + 1].split("-")) for i, a in enumerate(argv) if a == "--range"]
        total, best, sums = stalls(open_csv(argv[2]), top, ranges)
        print("samples: %d" % total)
        for off, smp, ex, src in best:
            print("%#7x %7d %5.1f%% %10d  %s" % (off, smp, 100 * smp / total, ex, src[:90]))
        for lo, hi, smp in sums:
            print("range %#x-%#x: %d samples (%.1f%%)" % (lo, hi, smp, 100 * smp / total))
        return 0
    if len(argv) >= 2 and argv[1] == "selftest":
        return selftest()
    sys.stderr.write(__doc__)
    return 2


SAMPLE_SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   HGMMA.64x32x16.F32.BF16 R152, gdesc[UR20], R152 ;
        /*0020*/                   STL [R1+0x4], R190 ;
        /*0030*/                   LDL R190, [R1] ;
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING R190, 0x100 ;
        /*0050*/              @!P1 BRA 0x10 ;
        /*0060*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R0+URZ+0x20], R5 ;
        /*0070*/              @!P0 BRA 0x60 ;
        /*0080*/                   EXIT ;
"""

SAMPLE_CSV = """"Kernel Name","k"
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed"
"0x7f0000001000","MOV R1, c[0x0][0x28]","1","10"
"0x7f0000001010","HGMMA.64x32x16.F32.BF16 R152, gdesc[UR20], R152","30","10"
"0x7f0000001020","@!P1 BRA 0x7f0000001010","9","10"
"0x7f0000001030","EXIT","0","1"
"""


def selftest():
    got = loops(SAMPLE_SASS, min_len=300)
    assert len(got) == 1, got  # the SYNCS spin (2 instructions, no HGMMA) is below --min
    s, e, n, cnt = got[0]
    assert (s, e, n) == (0x10, 0x50, 5), got
    assert cnt == {"HGMMA": 1, "STL": 1, "LDL": 1, "BAR": 1, "LDS": 0, "LDG": 0, "SYNCS": 0}, cnt
    assert [x[:3] for x in loops(SAMPLE_SASS, min_len=2)] == [(0x10, 0x50, 5), (0x60, 0x70, 2)]
    total, best, sums = stalls(io.StringIO(SAMPLE_CSV), top=2, ranges=[(0x10, 0x20)])
    assert total == 40, total
    assert [(b[0], b[1]) for b in best] == [(0x10, 30), (0x20, 9)], best
    assert sums == [(0x10, 0x20, 39)], sums
    print("sass_profile selftest: ok")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except BrokenPipeError:  # piped into head
        sys.exit(0)
