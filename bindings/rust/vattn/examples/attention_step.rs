//! One attention step on the CPU backend: a batch of two requests (a
//! 3-token prefill and a 1-token decode over 4 cached tokens) through a
//! paged KV cache.
//!
//! Run: `VATTN_LIB_DIR=<dir of libvattn.so> cargo run --example attention_step`

use vattn::*;

fn main() -> Result<()> {
    let (heads, kv_heads, head_size, block_size) = (4usize, 2usize, 16usize, 4i32);
    let cpu = Backend::select(&Selector {
        head_size: head_size as i32,
        dtype: DType::FLOAT32,
        block_size,
        device_type: Some(DeviceType::CPU),
        ..Default::default()
    })?;
    println!("libvattn {} - backend {:?}", version_string(), cpu.info()?.name);

    // The cache: 8 blocks of 4 tokens for one layer.
    let spec = KvCacheSpec {
        block_size,
        num_kv_heads: kv_heads as i32,
        head_size: head_size as i32,
        dtype: DType::FLOAT32,
        ..Default::default()
    };
    let mut cache = KvCache::new(&[spec], None, &KvCacheOptions { num_blocks: 8, ..Default::default() })?;

    let layer = Layer::new(
        cpu,
        &LayerOptions {
            num_heads: heads as i32,
            num_kv_heads: kv_heads as i32,
            head_size: head_size as i32,
            dtype: DType::FLOAT32,
            block_size,
            ..Default::default()
        },
    )?;
    let mut builder = Builder::new(
        cpu,
        &BuilderOptions {
            num_heads: heads as i32,
            num_kv_heads: kv_heads as i32,
            head_size: head_size as i32,
            block_size,
            max_num_reqs: 4,
            max_num_tokens: 32,
            max_blocks_per_req: 4,
            ..Default::default()
        },
    )?;
    let mut plan = builder.new_plan()?;

    // Step 1: request 0 prefills 4 tokens into blocks [2, 3] (slots 8..11).
    // Step 2: request 0 decodes its 5th token (slot 12) while request 1
    // prefills 3 tokens into blocks [0, 1]; decodes come first.
    let steps: [(&[i32], &[i32], &[i32], &[i64]); 2] = [
        (&[0, 4], &[4], &[2, 3], &[8, 9, 10, 11]),
        (&[0, 1, 4], &[5, 3], &[2, 3, 0, 1], &[12, 0, 1, 2]),
    ];
    for (step, (qsl, seq_lens, block_table, slots)) in steps.iter().enumerate() {
        let md = Metadata::new(&MetadataDesc {
            query_start_loc: qsl,
            seq_lens,
            block_table,
            block_table_cols: 2,
            slot_mapping: slots,
            block_size,
            num_cache_blocks: 8,
            ..Default::default()
        })?;
        let split = split_decodes_and_prefills(&md, 1, false)?;
        builder.build(&mut plan, 0, &md, false)?;

        let t = slots.len();
        let fill = |n: usize, seed: f32| (0..n).map(|i| ((i as f32 + seed) * 0.37).sin()).collect::<Vec<f32>>();
        let (q, k, v) = (fill(t * heads * head_size, 1.0), fill(t * kv_heads * head_size, 2.0), fill(t * kv_heads * head_size, 3.0));
        let mut out = vec![0f32; t * heads * head_size];
        let qv = TensorView::new(&q, &[t as i64, heads as i64, head_size as i64])?;
        let kv = TensorView::new(&k, &[t as i64, kv_heads as i64, head_size as i64])?;
        let vv = TensorView::new(&v, &[t as i64, kv_heads as i64, head_size as i64])?;
        let mut ov = TensorViewMut::new(&mut out, &[t as i64, heads as i64, head_size as i64])?;
        let mut layer0 = cache.layer_mut(0)?;
        layer.forward(&plan, ForwardArgs::new(&qv, &mut ov).key_value(&kv, &vv).kv_cache(&mut layer0))?;
        drop(ov);
        println!(
            "step {}: {} decode(s), {} prefill(s); output[0][0][..4] = {:?}",
            step,
            split.num_decodes,
            split.num_prefills,
            &out[..4]
        );
    }
    Ok(())
}
