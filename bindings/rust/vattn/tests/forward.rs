//! A small attention step on the CPU backend, checked against an f64
//! reference: a prefill batch then a decode batch through the paged cache.

mod common;
use common::*;
use vattn::*;

const H: usize = 4;
const HKV: usize = 2;
const D: usize = 16;
const BS: i32 = 4;
const NB: i64 = 8;

struct Setup {
    cpu: Backend,
    layer: Layer,
    builder: Builder,
    plan: Plan,
}

fn setup() -> Setup {
    let cpu = Backend::find("CPU").unwrap();
    let layer = Layer::new(
        cpu,
        &LayerOptions {
            num_heads: H as i32,
            num_kv_heads: HKV as i32,
            head_size: D as i32,
            dtype: DType::FLOAT32,
            block_size: BS,
            ..Default::default()
        },
    )
    .unwrap();
    let mut builder = Builder::new(
        cpu,
        &BuilderOptions {
            num_heads: H as i32,
            num_kv_heads: HKV as i32,
            head_size: D as i32,
            block_size: BS,
            max_num_reqs: 8,
            max_num_tokens: 64,
            max_blocks_per_req: 4,
            num_threads: 2,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(builder.cudagraph_support().unwrap(), CudaGraphSupport::NEVER);
    let plan = builder.new_plan().unwrap();
    let _ = &mut builder;
    Setup { cpu, layer, builder, plan }
}

fn spec() -> KvCacheSpec {
    KvCacheSpec {
        block_size: BS,
        num_kv_heads: HKV as i32,
        head_size: D as i32,
        dtype: DType::FLOAT32,
        ..Default::default()
    }
}

/// Runs the two steps with `kv` as layer 0's cache; returns the max error.
fn two_steps(s: &mut Setup, cache: &mut KvCache<'_>) -> f64 {
    // Request A: 3 tokens, blocks [0, 1]; request B: 4 tokens, blocks [2, 3].
    let (la, lb) = (3usize, 4usize);
    let ka = data((la + 1) * HKV * D, 1);
    let va = data((la + 1) * HKV * D, 2);
    let kb = data((lb + 1) * HKV * D, 3);
    let vb = data((lb + 1) * HKV * D, 4);
    let mut worst = 0f64;

    // ---- step 1: both prefills ------------------------------------------------
    let t = la + lb;
    let q = data(t * H * D, 5);
    let mut k = ka[..la * HKV * D].to_vec();
    k.extend_from_slice(&kb[..lb * HKV * D]);
    let mut v = va[..la * HKV * D].to_vec();
    v.extend_from_slice(&vb[..lb * HKV * D]);
    let md = Metadata::new(&MetadataDesc {
        query_start_loc: &[0, la as i32, t as i32],
        seq_lens: &[la as i32, lb as i32],
        block_table: &[0, 1, 2, 3],
        block_table_cols: 2,
        slot_mapping: &[0, 1, 2, 8, 9, 10, 11],
        block_size: BS,
        num_cache_blocks: NB,
        ..Default::default()
    })
    .unwrap();
    s.builder.build(&mut s.plan, 0, &md, false).unwrap();
    let mut out = vec![0f32; t * H * D];
    {
        let qv = TensorView::new(&q, &[t as i64, H as i64, D as i64]).unwrap();
        let kv_ = TensorView::new(&k, &[t as i64, HKV as i64, D as i64]).unwrap();
        let vv = TensorView::new(&v, &[t as i64, HKV as i64, D as i64]).unwrap();
        let mut ov = TensorViewMut::new(&mut out, &[t as i64, H as i64, D as i64]).unwrap();
        let mut kvc = cache.layer_mut(0).unwrap();
        s.layer
            .forward(&s.plan, ForwardArgs::new(&qv, &mut ov).key_value(&kv_, &vv).kv_cache(&mut kvc))
            .unwrap();
    }
    let f64v = |x: &[f32]| x.iter().map(|&y| y as f64).collect::<Vec<f64>>();
    let ra = reference(&q[..la * H * D], &f64v(&ka), &f64v(&va), la, la, H, HKV, D);
    let rb = reference(&q[la * H * D..], &f64v(&kb), &f64v(&vb), lb, lb, H, HKV, D);
    worst = worst.max(max_abs_diff(&out[..la * H * D], &ra));
    worst = worst.max(max_abs_diff(&out[la * H * D..], &rb));

    // The cache holds request B's token 1 key at slot 9 (block 2, offset 1).
    {
        let l = cache.layer(0).unwrap();
        let st = l.strides().map(|s| s.to_vec()).unwrap_or_else(|| vec![NB * 4 * 2 * 16, 4 * 2 * 16, 2 * 16, 16, 1]);
        let mem = l.as_slice::<f32>().unwrap();
        for h in 0..HKV {
            for x in 0..D {
                let idx = 2 * st[1] + st[2] + h as i64 * st[3] + x as i64 * st[4];
                assert_eq!(mem[idx as usize], kb[(HKV + h) * D + x]);
            }
        }
    }

    // ---- step 2: one decode each (B first, then A) --------------------------
    let q2 = data(2 * H * D, 6);
    let mut k2 = kb[lb * HKV * D..].to_vec();
    k2.extend_from_slice(&ka[la * HKV * D..]);
    let mut v2 = vb[lb * HKV * D..].to_vec();
    v2.extend_from_slice(&va[la * HKV * D..]);
    let md2 = Metadata::new(&MetadataDesc {
        query_start_loc: &[0, 1, 2],
        seq_lens: &[lb as i32 + 1, la as i32 + 1],
        block_table: &[2, 3, 0, 1],
        block_table_cols: 2,
        slot_mapping: &[12, 3],
        block_size: BS,
        num_cache_blocks: NB,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(split_decodes_and_prefills(&md2, 1, true).unwrap().num_decodes, 2);
    s.builder.build(&mut s.plan, 0, &md2, false).unwrap();
    let mut out2 = vec![0f32; 2 * H * D];
    let mut lse = vec![0f32; H * 2];
    {
        let qv = TensorView::new(&q2, &[2, H as i64, D as i64]).unwrap();
        let kv_ = TensorView::new(&k2, &[2, HKV as i64, D as i64]).unwrap();
        let vv = TensorView::new(&v2, &[2, HKV as i64, D as i64]).unwrap();
        let mut ov = TensorViewMut::new(&mut out2, &[2, H as i64, D as i64]).unwrap();
        let mut lv = TensorViewMut::new(&mut lse, &[H as i64, 2]).unwrap();
        let mut kvc = cache.layer_mut(0).unwrap();
        s.layer
            .forward(
                &s.plan,
                ForwardArgs::new(&qv, &mut ov).key_value(&kv_, &vv).kv_cache(&mut kvc).output_lse(&mut lv),
            )
            .unwrap();
    }
    let rb2 = reference(&q2[..H * D], &f64v(&kb), &f64v(&vb), 1, lb + 1, H, HKV, D);
    let ra2 = reference(&q2[H * D..], &f64v(&ka), &f64v(&va), 1, la + 1, H, HKV, D);
    worst = worst.max(max_abs_diff(&out2[..H * D], &rb2));
    worst = worst.max(max_abs_diff(&out2[H * D..], &ra2));
    assert!(lse.iter().all(|x| x.is_finite()));
    worst
}

#[test]
fn forward_matches_f64_reference() {
    let mut s = setup();
    let mut cache = KvCache::new(
        &[spec()],
        None,
        &KvCacheOptions { num_blocks: NB, backend: Some(s.cpu), ..Default::default() },
    )
    .unwrap();
    let err = two_steps(&mut s, &mut cache);
    assert!(err < 1e-4, "max abs error {}", err);
}

#[test]
fn forward_on_caller_owned_cache() {
    let mut s = setup();
    let mut mem = vec![0f32; 2 * NB as usize * BS as usize * HKV * D];
    {
        let view = TensorViewMut::new(&mut mem, &[2, NB, BS as i64, HKV as i64, D as i64]).unwrap();
        let mut cache = KvCache::from_tensors(&[spec()], None, vec![Some(view)], &KvCacheOptions::default()).unwrap();
        assert_eq!(cache.info().unwrap().total_bytes, 0);
        let err = two_steps(&mut s, &mut cache);
        assert!(err < 1e-4, "max abs error {}", err);
    }
    assert!(mem.iter().any(|&x| x != 0.0));
}

#[test]
fn forward_errors() {
    let s = setup();
    let q = vec![0f32; H * D];
    let mut out = vec![0f32; H * D];
    let qv = TensorView::new(&q, &[1, H as i64, D as i64]).unwrap();
    // Wrong head count in the output.
    let mut ov = TensorViewMut::new(&mut out, &[1, 1, (H * D) as i64]).unwrap();
    let e = s.layer.forward(&s.plan, ForwardArgs::new(&qv, &mut ov)).unwrap_err();
    assert_ne!(e.status, Status::OK);
    assert!(!e.message.is_empty());

    // Unsupported head size is refused at creation.
    let e = Layer::new(
        s.cpu,
        &LayerOptions { num_heads: 2, head_size: 13, dtype: DType::FLOAT32, ..Default::default() },
    )
    .unwrap_err();
    assert!(e.status == Status::UNSUPPORTED || e.status == Status::INVALID_ARGUMENT, "{:?}", e);
    // Slopes of the wrong length never reach the library.
    let e = Layer::new(
        s.cpu,
        &LayerOptions { num_heads: 2, head_size: 16, alibi_slopes: Some(vec![1.0]), ..Default::default() },
    )
    .unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
}
