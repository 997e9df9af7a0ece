//! Shared helpers of the integration tests: deterministic data and an f64
//! reference of paged causal attention.
#![allow(dead_code)]

/// Deterministic pseudo-random floats in [-1, 1).
pub fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f64 / (1u64 << 24) as f64 * 2.0 - 1.0) as f32
        })
        .collect()
}

/// Causal attention of `q` (`[nq, H, D]`, the last `nq` positions of a
/// sequence) over `k`/`v` (`[S, Hkv, D]`, the whole sequence), in f64.
pub fn reference(q: &[f32], k: &[f64], v: &[f64], nq: usize, s: usize, h: usize, hkv: usize, d: usize) -> Vec<f64> {
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0f64; nq * h * d];
    for i in 0..nq {
        let pos = s - nq + i; // absolute position of query token i
        for head in 0..h {
            let kh = head / (h / hkv);
            let mut logits = Vec::with_capacity(pos + 1);
            for j in 0..=pos {
                let mut dot = 0f64;
                for x in 0..d {
                    dot += q[(i * h + head) * d + x] as f64 * k[(j * hkv + kh) * d + x];
                }
                logits.push(dot * scale);
            }
            let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
            let z: f64 = w.iter().sum();
            for x in 0..d {
                let mut acc = 0f64;
                for j in 0..=pos {
                    acc += w[j] * v[(j * hkv + kh) * d + x];
                }
                out[(i * h + head) * d + x] = acc / z;
            }
        }
    }
    out
}

pub fn max_abs_diff(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (*x as f64 - y).abs()).fold(0.0, f64::max)
}
