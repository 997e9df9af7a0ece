//! copy_blocks / swap_blocks on CPU caches, and the builder's CUDA-graph
//! capture and drafting builds on the CPU backend.

mod common;
use common::data;
use vattn::*;

const NB: i64 = 4;
const BS: i64 = 2;
const H: i64 = 2;
const D: i64 = 4;
const BLOCK: usize = (BS * H * D) as usize;

/// Block `b` of plane `kv` (0 = K, 1 = V) of a compact NHD cache.
fn block(cache: &[f32], kv: usize, b: usize) -> &[f32] {
    let start = (kv * NB as usize + b) * BLOCK;
    &cache[start..start + BLOCK]
}

/// A copy of layer `l`'s elements.
fn layer_data(cache: &KvCache, l: usize) -> Vec<f32> {
    cache.layer(l).unwrap().as_slice::<f32>().unwrap().to_vec()
}

/// Fills layers 0 and 1 with random data (seeds `seed` and `seed + 1`) and
/// returns their contents.
fn fill_two_layers(cache: &mut KvCache, seed: u64) -> Vec<Vec<f32>> {
    for l in 0..2 {
        let mut v = cache.layer_mut(l).unwrap();
        let s = v.as_mut_slice::<f32>().unwrap();
        let fill = data(s.len(), seed + l as u64);
        s.copy_from_slice(&fill);
    }
    (0..2).map(|l| layer_data(cache, l)).collect()
}

#[test]
fn swap_blocks_between_host_caches() {
    let src = data(2 * NB as usize * BLOCK, 11);
    let mut dst = vec![0f32; src.len()];
    {
        let s = TensorView::new(&src, &[2, NB, BS, H, D]).unwrap();
        let mut d = TensorViewMut::new(&mut dst, &[2, NB, BS, H, D]).unwrap();
        swap_blocks(&s, &mut d, &[[0, 2], [3, 1]]).unwrap();
        // Out-of-range block and shape mismatch are refused.
        assert_eq!(swap_blocks(&s, &mut d, &[[0, NB]]).unwrap_err().status, Status::INVALID_ARGUMENT);
        let small = vec![0f32; src.len() / 2];
        let s2 = TensorView::new(&small, &[2, NB / 2, BS, H, D]).unwrap();
        assert!(swap_blocks(&s2, &mut d, &[[0, 0]]).is_err());
        // No pair: nothing to do.
        swap_blocks(&s, &mut d, &[]).unwrap();
    }
    for kv in 0..2 {
        assert_eq!(block(&dst, kv, 2), block(&src, kv, 0));
        assert_eq!(block(&dst, kv, 1), block(&src, kv, 3));
        assert!(block(&dst, kv, 0).iter().all(|&x| x == 0.0));
        assert!(block(&dst, kv, 3).iter().all(|&x| x == 0.0));
    }
}

#[test]
fn copy_blocks_over_tensor_views() {
    let a0 = data(2 * NB as usize * BLOCK, 1);
    let b0 = data(2 * NB as usize * BLOCK, 2);
    let (mut a, mut b) = (a0.clone(), b0.clone());
    {
        let mut ta = TensorViewMut::new(&mut a, &[2, NB, BS, H, D]).unwrap();
        let mut tb = TensorViewMut::new(&mut b, &[2, NB, BS, H, D]).unwrap();
        copy_blocks(&mut [&mut ta, &mut tb], &[[0, 3], [1, 2]]).unwrap();
        let e = copy_blocks(&mut [&mut ta], &[[-1, 0]]).unwrap_err();
        assert_eq!(e.status, Status::INVALID_ARGUMENT);
    }
    for (new, old) in [(&a, &a0), (&b, &b0)] {
        for kv in 0..2 {
            assert_eq!(block(new, kv, 3), block(old, kv, 0));
            assert_eq!(block(new, kv, 2), block(old, kv, 1));
            assert_eq!(block(new, kv, 0), block(old, kv, 0));
            assert_eq!(block(new, kv, 1), block(old, kv, 1));
        }
    }
}

#[test]
fn copy_blocks_over_a_kv_cache() {
    let spec = KvCacheSpec {
        block_size: BS as i32,
        num_kv_heads: H as i32,
        head_size: D as i32,
        dtype: DType::FLOAT32,
        ..Default::default()
    };
    // Layer 2 reads layer 0's cache; HND layout (strided views).
    let mut cache = KvCache::new(
        &[spec, spec, spec],
        Some(&[-1, -1, 0]),
        &KvCacheOptions { num_blocks: NB, layout: Some(Layout::HND), ..Default::default() },
    )
    .unwrap();
    let before = fill_two_layers(&mut cache, 100);
    let strides = cache.layer(0).unwrap().strides().unwrap().to_vec();
    cache.copy_blocks(&[[1, 3], [2, 0]]).unwrap();
    // Element (kv, block, offset, head, d) through the layer's strides.
    let at = |m: &[f32], kv: i64, b: i64, o: i64, h: i64, d: i64| {
        m[(kv * strides[0] + b * strides[1] + o * strides[2] + h * strides[3] + d * strides[4]) as usize]
    };
    for l in 0..2 {
        let now = layer_data(&cache, l);
        let old = &before[l];
        for kv in 0..2 {
            for o in 0..BS {
                for h in 0..H {
                    for d in 0..D {
                        assert_eq!(at(&now, kv, 3, o, h, d), at(old, kv, 1, o, h, d));
                        assert_eq!(at(&now, kv, 0, o, h, d), at(old, kv, 2, o, h, d));
                        assert_eq!(at(&now, kv, 1, o, h, d), at(old, kv, 1, o, h, d));
                    }
                }
            }
        }
    }
    // The sharing layer sees layer 0's memory.
    assert_eq!(
        cache.layer(2).unwrap().as_slice::<f32>().unwrap(),
        cache.layer(0).unwrap().as_slice::<f32>().unwrap()
    );
    assert_eq!(cache.copy_blocks(&[[0, NB]]).unwrap_err().status, Status::INVALID_ARGUMENT);
}

fn cpu_builder(max_num_reqs: i32) -> (Builder, Plan) {
    // CPU is the last backend (CUDA, when built, comes first).
    let cpu = Backend::find("CPU").unwrap();
    assert_eq!(cpu, *Backend::all().unwrap().last().unwrap());
    let b = Builder::new(
        cpu,
        &BuilderOptions {
            num_heads: 4,
            num_kv_heads: 2,
            head_size: 16,
            block_size: 4,
            max_num_reqs,
            max_num_tokens: 32,
            max_blocks_per_req: 4,
            num_threads: 1,
            ..Default::default()
        },
    )
    .unwrap();
    let p = b.new_plan().unwrap();
    (b, p)
}

fn decode_md(n: usize) -> Metadata {
    let qsl: Vec<i32> = (0..=n as i32).collect();
    let seq: Vec<i32> = vec![3; n];
    let table: Vec<i32> = (0..n as i32).collect();
    let slots: Vec<i64> = (0..n as i64).map(|r| r * 4 + 2).collect();
    Metadata::new(&MetadataDesc {
        query_start_loc: &qsl,
        seq_lens: &seq,
        block_table: &table,
        block_table_cols: 1,
        slot_mapping: &slots,
        block_size: 4,
        num_cache_blocks: 8,
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn builder_kv_cache_dtype() {
    let cpu = Backend::find("CPU").unwrap();
    let opts = |kv_cache_dtype| BuilderOptions {
        num_heads: 4,
        num_kv_heads: 2,
        head_size: 16,
        block_size: 4,
        kv_cache_dtype,
        ..Default::default()
    };
    assert_eq!(BuilderOptions::default().kv_cache_dtype, 0); // VATTN_KV_CACHE_DTYPE_AUTO
    for k in 0..3 {
        Builder::new(cpu, &opts(k)).unwrap();
    }
    let e = Builder::new(cpu, &opts(7)).err().unwrap();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    assert!(e.message.contains("kv_cache_dtype = 7"), "{}", e.message);
}

#[test]
fn cudagraph_capture_is_unsupported_on_cpu() {
    let (mut b, mut p) = cpu_builder(4);
    assert_eq!(b.cudagraph_support().unwrap(), CudaGraphSupport::NEVER);
    let md = decode_md(2);
    let e = b.build_for_cudagraph_capture(&mut p, &md).unwrap_err();
    assert_eq!(e.status, Status::UNSUPPORTED);
    assert_eq!(e.status.description(), "unsupported");
    assert!(!e.message.is_empty());
    // The builder still builds normally afterwards.
    b.build(&mut p, 0, &md, false).unwrap();
}

#[test]
fn build_for_drafting_on_cpu() {
    let (mut b, mut p) = cpu_builder(4);
    let md = decode_md(3);
    for draft in 0..3 {
        b.build_for_drafting(&mut p, &md, draft).unwrap();
    }
    // Capacity is still enforced: 5 requests in a plan of 4.
    let big = decode_md(5);
    let e = b.build_for_drafting(&mut p, &big, 0).unwrap_err();
    assert_eq!(e.status, Status::WORKSPACE_TOO_SMALL);
    // A drafting build is a real plan: a forward runs through it.
    let cpu = Backend::find("CPU").unwrap();
    let layer = Layer::new(
        cpu,
        &LayerOptions { num_heads: 4, num_kv_heads: 2, head_size: 16, dtype: DType::FLOAT32, block_size: 4, ..Default::default() },
    )
    .unwrap();
    b.build_for_drafting(&mut p, &md, 1).unwrap();
    let q = data(3 * 4 * 16, 7);
    let k = data(3 * 2 * 16, 8);
    let mut cache = vec![0f32; 2 * 8 * 4 * 2 * 16];
    let mut out = vec![f32::NAN; 3 * 4 * 16];
    {
        let qt = TensorView::new(&q, &[3, 4, 16]).unwrap();
        let kt = TensorView::new(&k, &[3, 2, 16]).unwrap();
        let mut ct = TensorViewMut::new(&mut cache, &[2, 8, 4, 2, 16]).unwrap();
        let mut ot = TensorViewMut::new(&mut out, &[3, 4, 16]).unwrap();
        layer.forward(&p, ForwardArgs::new(&qt, &mut ot).key_value(&kt, &kt).kv_cache(&mut ct)).unwrap();
    }
    assert!(out.iter().all(|x| x.is_finite()));
}

#[test]
fn copy_and_swap_blocks_on_the_null_stream() {
    let src = data(2 * NB as usize * BLOCK, 21);
    let mut dst = vec![0f32; src.len()];
    let a0 = data(2 * NB as usize * BLOCK, 22);
    let mut a = a0.clone();
    {
        let s = TensorView::new(&src, &[2, NB, BS, H, D]).unwrap();
        let mut d = TensorViewMut::new(&mut dst, &[2, NB, BS, H, D]).unwrap();
        let mut ta = TensorViewMut::new(&mut a, &[2, NB, BS, H, D]).unwrap();
        // SAFETY: the NULL stream is always valid (CPU tensors ignore it).
        unsafe {
            swap_blocks_on_stream(&s, &mut d, &[[1, 0], [2, 3]], std::ptr::null_mut()).unwrap();
            copy_blocks_on_stream(&mut [&mut ta], &[[3, 1]], std::ptr::null_mut()).unwrap();
            let e = swap_blocks_on_stream(&s, &mut d, &[[NB, 0]], std::ptr::null_mut()).unwrap_err();
            assert_eq!(e.status, Status::INVALID_ARGUMENT);
            let e = copy_blocks_on_stream(&mut [&mut ta], &[[0, -1]], std::ptr::null_mut()).unwrap_err();
            assert_eq!(e.status, Status::INVALID_ARGUMENT);
        }
    }
    for kv in 0..2 {
        assert_eq!(block(&dst, kv, 0), block(&src, kv, 1));
        assert_eq!(block(&dst, kv, 3), block(&src, kv, 2));
        assert!(block(&dst, kv, 1).iter().all(|&x| x == 0.0));
        assert!(block(&dst, kv, 2).iter().all(|&x| x == 0.0));
        assert_eq!(block(&a, kv, 1), block(&a0, kv, 3));
        for b in [0, 2, 3] {
            assert_eq!(block(&a, kv, b), block(&a0, kv, b));
        }
    }
    // Over a KvCache: block 0 -> 2 in every layer.
    let spec = KvCacheSpec {
        block_size: BS as i32,
        num_kv_heads: H as i32,
        head_size: D as i32,
        dtype: DType::FLOAT32,
        ..Default::default()
    };
    let opts = KvCacheOptions { num_blocks: NB, layout: Some(Layout::NHD), ..Default::default() };
    let mut cache = KvCache::new(&[spec, spec], None, &opts).unwrap();
    let before = fill_two_layers(&mut cache, 200);
    // SAFETY: the NULL stream is always valid.
    unsafe { cache.copy_blocks_on_stream(&[[0, 2]], std::ptr::null_mut()).unwrap() };
    for l in 0..2 {
        let now = layer_data(&cache, l);
        for kv in 0..2 {
            assert_eq!(block(&now, kv, 2), block(&before[l], kv, 0));
            assert_eq!(block(&now, kv, 1), block(&before[l], kv, 1));
        }
    }
    // SAFETY: as above.
    let e = unsafe { cache.copy_blocks_on_stream(&[[NB, 0]], std::ptr::null_mut()) }.unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
}
