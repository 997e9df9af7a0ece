//! Batch utilities (header section 8) through the safe API, checked against
//! values computed here or the worked examples of vLLM's semantics.

use vattn::*;

fn md(qsl: &[i32], seq_lens: &[i32], cols: usize, block_table: &[i32]) -> Metadata {
    let t = *qsl.last().unwrap() as i64;
    let slots: Vec<i64> = (0..t).collect();
    Metadata::new(&MetadataDesc {
        query_start_loc: qsl,
        seq_lens,
        block_table,
        block_table_cols: cols,
        slot_mapping: &slots,
        ..Default::default()
    })
    .unwrap()
}

/// Applies `swap_states(i, j)` calls to the identity permutation.
fn apply_swaps(n: usize, swaps: &[(usize, usize)]) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for &(i, j) in swaps {
        v.swap(i, j);
    }
    v
}

#[test]
fn reorder_decodes_extends_prefills() {
    // [P, P, D, D] -> era B/C order [2, 3, 0, 1] (vllm-semantics.md section 6).
    let r = reorder_batch_to_split_decodes_and_prefills(&[5, 7, 1, 1], &[0, 0, 9, 4], 1).unwrap();
    assert_eq!(r.order, vec![2, 3, 0, 1]);
    assert!(r.modified);
    assert!(r.swaps.len() <= 4);
    assert_eq!(apply_swaps(4, &r.swaps), r.order);

    // Decode, extend, prefill mixed: E P D D E -> D D E E P, stable within regions.
    let sched = [3, 4, 1, 1, 2];
    let comp = [5, 0, 7, 2, 1];
    let r = reorder_batch_to_split_decodes_and_prefills(&sched, &comp, 1).unwrap();
    let region = |i: usize| if comp[i] == 0 { 2 } else if sched[i] <= 1 { 0 } else { 1 };
    let regions: Vec<i32> = r.order.iter().map(|&i| region(i)).collect();
    assert_eq!(regions, vec![0, 0, 1, 1, 2]);
    assert_eq!(apply_swaps(5, &r.swaps), r.order);
    // Requests already in their region never move.
    for (slot, &orig) in r.order.iter().enumerate() {
        if region(slot) == regions[slot] {
            assert_eq!(orig, slot, "slot {} was already in place", slot);
        }
    }

    // Already ordered: nothing moves.
    let r = reorder_batch_to_split_decodes_and_prefills(&[1, 3, 8], &[4, 4, 0], 1).unwrap();
    assert_eq!((r.order, r.swaps.is_empty(), r.modified), (vec![0, 1, 2], true, false));
    // A new single-token prompt is a prefill, not a decode.
    let r = reorder_batch_to_split_decodes_and_prefills(&[1, 1], &[0, 3], 1).unwrap();
    assert_eq!(r.order, vec![1, 0]);

    let e = reorder_batch_to_split_decodes_and_prefills(&[1, 1], &[0], 1).unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    let r = reorder_batch_to_split_decodes_and_prefills(&[], &[], 1).unwrap();
    assert!(r.order.is_empty() && !r.modified);
}

#[test]
fn ubatch_slices_and_split_metadata() {
    // cu = [0, 3, 8, 12]; default split point 16 / 2 = 8.
    let s = ubatch_slices_create(&[3, 5, 4], 16, 4, 2, None).unwrap();
    let sl = |r0, r1, t0, t1| UbatchSlice { request_start: r0, request_stop: r1, token_start: t0, token_stop: t1 };
    assert_eq!(s.slices, vec![sl(0, 2, 0, 8), sl(2, 3, 8, 12)]);
    assert_eq!(s.padded, vec![sl(0, 2, 0, 8), sl(2, 4, 8, 16)]);
    assert_eq!(s.slices[1].num_tokens(), 4);
    assert!(!s.slices[0].is_empty());

    // Split point 4: request 1 straddles the boundary and is in both.
    let s = ubatch_slices_create(&[3, 5, 4], 16, 4, 2, Some(4)).unwrap();
    assert_eq!(s.slices, vec![sl(0, 2, 0, 4), sl(1, 3, 4, 12)]);

    let m = md(&[0, 3, 8, 12], &[10, 20, 30], 2, &[0, 1, 2, 3, 4, 5]);
    let parts = split_attn_metadata(&s.slices, &m).unwrap();
    assert_eq!(parts.len(), 2);
    let d0 = parts[0].describe().unwrap();
    // Last request continues into the next ubatch: 8 - 4 = 4 tokens less.
    assert_eq!(d0.query_start_loc, &[0, 3, 4]);
    assert_eq!(d0.seq_lens, &[10, 16]);
    assert_eq!(d0.num_actual_tokens, Some(4));
    assert_eq!(d0.block_table, &[0, 1, 2, 3]);
    assert_eq!(d0.slot_mapping, &[0, 1, 2, 3]);
    let d1 = parts[1].describe().unwrap();
    // First request started earlier: 4 - 3 = 1 skipped token.
    assert_eq!(d1.query_start_loc, &[0, 4, 8]);
    assert_eq!(d1.seq_lens, &[20, 30]);
    assert_eq!(d1.num_actual_tokens, Some(8));
    assert_eq!(d1.block_table, &[2, 3, 4, 5]);
    assert_eq!(d1.slot_mapping, &[4, 5, 6, 7, 8, 9, 10, 11]);
    // The input is left as it was.
    assert_eq!(m.describe().unwrap().seq_lens, &[10, 20, 30]);
    assert_eq!(m.split_ubatches(&s.slices).unwrap().len(), 2);

    // An empty slice is refused and leaves nothing behind.
    let e = split_attn_metadata(&[sl(0, 1, 0, 3), sl(1, 1, 3, 3)], &m).unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    assert!(split_attn_metadata(&[], &m).map(|v| v.is_empty()).unwrap_or(true));
    assert_eq!(ubatch_slices_create(&[3], 3, 1, 0, None).unwrap_err().status, Status::INVALID_ARGUMENT);
}

#[test]
fn slice_query_start_locs_subtracts_the_start() {
    let qsl = [0, 3, 8, 12, 20];
    assert_eq!(slice_query_start_locs(&qsl, 1, 3).unwrap(), vec![0, 5, 9]);
    assert_eq!(slice_query_start_locs(&qsl, 0, 4).unwrap(), qsl.to_vec());
    assert_eq!(slice_query_start_locs(&qsl, 2, 2).unwrap(), vec![0]);
    assert_eq!(slice_query_start_locs(&qsl, 3, 5).unwrap_err().status, Status::INVALID_ARGUMENT);
    assert_eq!(slice_query_start_locs(&qsl, 3, 2).unwrap_err().status, Status::INVALID_ARGUMENT);
}

#[test]
fn prefill_chunks_and_dcp_lens() {
    // Greedy: [3, 4] = 7 <= 8, then [5] (5 + 2 = 7) ... computed below.
    let seq = [3, 4, 5, 2, 8];
    let ws = 8i64;
    let mut want = Vec::new();
    let (mut start, mut sum) = (0usize, 0i64);
    for (i, &s) in seq.iter().enumerate() {
        if sum + s as i64 > ws {
            want.push((start as i64 + 10, i as i64 + 10));
            start = i;
            sum = 0;
        }
        sum += s as i64;
    }
    want.push((start as i64 + 10, seq.len() as i64 + 10));
    assert_eq!(split_prefill_chunks(&seq, ws, 10).unwrap(), want);
    assert_eq!(want, vec![(10, 12), (12, 14), (14, 15)]);
    assert_eq!(split_prefill_chunks(&[9], 8, 0).unwrap_err().status, Status::INVALID_ARGUMENT);

    let seq = [0, 1, 7, 8, 13, 100];
    let (size, inter) = (4, 2);
    let local = |s: i32, r: i32| {
        let base = s / inter / size * inter;
        let rem = s - base * size;
        base + (rem - r * inter).clamp(0, inter)
    };
    let all = get_dcp_local_seq_lens(&seq, size, None, inter).unwrap();
    assert_eq!(all.len(), seq.len() * size as usize);
    for (i, &s) in seq.iter().enumerate() {
        let mut total = 0;
        for r in 0..size {
            assert_eq!(all[i * size as usize + r as usize], local(s, r), "seq {} rank {}", s, r);
            total += local(s, r);
        }
        assert_eq!(total, s);
    }
    let r1 = get_dcp_local_seq_lens(&seq, size, Some(1), inter).unwrap();
    assert_eq!(r1, seq.iter().map(|&s| local(s, 1)).collect::<Vec<_>>());
    assert_eq!(get_dcp_local_seq_lens(&seq, size, Some(-2), inter).unwrap_err().status, Status::INVALID_ARGUMENT);
    assert_eq!(get_dcp_local_seq_lens(&seq, size, Some(4), inter).unwrap_err().status, Status::INVALID_ARGUMENT);
}

#[test]
fn global_hyperparameters() {
    let a = PerLayerParams { window_left: 127, logits_soft_cap: 0.0, sm_scale: 0.125, has_sinks: false };
    let g = infer_global_hyperparameters(&[a, a]).unwrap();
    assert_eq!(g, GlobalParams { params: a, has_same_window_lefts: true, has_same_all_params: true });
    let b = PerLayerParams { window_left: -1, ..a };
    let g = infer_global_hyperparameters(&[a, b]).unwrap();
    assert_eq!((g.params, g.has_same_window_lefts, g.has_same_all_params), (a, false, false));
    let c = PerLayerParams { has_sinks: true, ..a };
    let g = infer_global_hyperparameters(&[a, c]).unwrap();
    assert_eq!((g.has_same_window_lefts, g.has_same_all_params), (true, false));
    let e = infer_global_hyperparameters(&[]).unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    assert!(e.message.contains("no attention layers"), "{}", e.message);
}

#[test]
fn local_attention_virtual_batches_worked_example() {
    // vllm-semantics.md section 7: chunk 4, q = [4, 10, 5], s = [6, 17, 9].
    let (chunk, bs, cols) = (4, 2, 9usize);
    let table: Vec<i32> = (0..3).flat_map(|r| (0..cols as i32).map(move |c| 100 * r + c)).collect();
    let m = md(&[0, 4, 14, 19], &[6, 17, 9], cols, &table);
    let local = m.local_attention_virtual_batches(chunk, bs).unwrap();
    let d = local.describe().unwrap();
    assert_eq!(d.query_start_loc, &[0, 2, 4, 5, 9, 13, 14, 18, 19]);
    assert_eq!(d.seq_lens, &[4, 2, 4, 4, 4, 1, 4, 1]);
    assert_eq!(d.num_actual_tokens, Some(19));
    assert_eq!(d.max_query_len, Some(4));
    assert_eq!(d.max_seq_len, Some(4));
    let q_local = [2, 2, 1, 4, 4, 1, 4, 1];
    let k_local = [4, 2, 4, 4, 4, 1, 4, 1];
    let nct: Vec<i32> = q_local.iter().zip(&k_local).map(|(q, k)| k - q).collect();
    assert_eq!(d.num_computed_tokens.unwrap(), &nct[..]);
    assert_eq!(d.slot_mapping.len(), 19);

    // Block table: chunk / bs columns from key_start / bs, clamped to cols - 1.
    let rows = [0, 0, 1, 1, 1, 1, 2, 2];
    let key_starts = [0, 4, 4, 8, 12, 16, 4, 8];
    let per = (chunk / bs) as usize;
    assert_eq!(d.block_table_cols, per);
    let expect = |t: &[i32]| -> Vec<i32> {
        let mut v = Vec::new();
        for (r, ks) in rows.iter().zip(&key_starts) {
            for p in 0..per {
                let c = ((ks / bs) as usize + p).min(cols - 1);
                v.push(t[*r * cols + c]);
            }
        }
        v
    };
    assert_eq!(d.block_table, &expect(&table)[..]);
    assert_eq!(&d.block_table[10..12], &[108, 108]);

    // Re-gather from another table of the same shape.
    let other: Vec<i32> = table.iter().map(|x| x + 1000).collect();
    assert_eq!(local.local_attention_update_block_table(&other, cols).unwrap(), expect(&other));
    // Too few rows for the recorded gathers.
    let e = local.local_attention_update_block_table(&other[..cols], cols).unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    assert!(local.local_attention_update_block_table(&other, 0).is_err());

    // chunk must be a multiple of the block size.
    assert_eq!(m.local_attention_virtual_batches(3, 2).unwrap_err().status, Status::INVALID_ARGUMENT);
}

#[test]
fn kv_sharing_fast_prefill() {
    let make = |logits: &[i32], n: i64| {
        Metadata::new(&MetadataDesc {
            query_start_loc: &[0, 3, 5, 9],
            seq_lens: &[3, 4, 6],
            block_table: &[0, 1, 2],
            block_table_cols: 1,
            slot_mapping: &[0, 1, 2, 3, 4, 5, 6, 7, 8],
            logits_indices_padded: Some(logits),
            num_logits_indices: n,
            ..Default::default()
        })
        .unwrap()
    };
    // Bucket each index into its request; count; prefix sum.
    let qsl = [0, 3, 5, 9];
    let logits = [1, 2, 8, 0, 0];
    let mut counts = [0i32; 3];
    for &i in &logits[..3] {
        counts[qsl[1..].iter().filter(|&&e| e <= i).count()] += 1;
    }
    assert_eq!(counts, [2, 0, 1]);
    let m = make(&logits, 3);
    let f = m.kv_sharing_fast_prefill().unwrap();
    let d = f.describe().unwrap();
    assert_eq!(d.query_start_loc, &[0, counts[0], counts[0] + counts[1], 3]);
    assert_eq!(d.num_actual_tokens, Some(3));
    assert_eq!(d.max_query_len, Some(2));
    // Unchanged: seq lens, block table, max_seq_len.
    assert_eq!(d.seq_lens, &[3, 4, 6]);
    assert_eq!(d.block_table, &[0, 1, 2]);
    // vLLM keeps the whole slot mapping; vattn cuts it to the selected
    // tokens' slots (src/metadata/fast_prefill.cpp), here slot == token.
    assert_eq!(d.slot_mapping, &[1, 2, 8]);
    assert_eq!(d.max_seq_len, m.describe().unwrap().max_seq_len);

    // Without logits indices a multi-token batch cannot be shortened.
    let plain = md(&[0, 3, 5], &[3, 4], 1, &[0, 1]);
    assert_eq!(plain.kv_sharing_fast_prefill().unwrap_err().status, Status::INVALID_ARGUMENT);
    // max_query_len == 1: returned unchanged.
    let dec = md(&[0, 1, 2], &[3, 4], 1, &[0, 1]);
    let same = dec.kv_sharing_fast_prefill().unwrap().describe().unwrap().query_start_loc.to_vec();
    assert_eq!(same, vec![0, 1, 2]);
}

#[test]
fn spec_decode_reshapes() {
    let (t, h, d) = (6i64, 2i64, 4i64);
    let q: Vec<f32> = (0..(t * h * d)).map(|x| x as f32).collect();
    let v = TensorView::new(&q, &[t, h, d]).unwrap();
    let r = v.reshape_query_for_spec_decode(3).unwrap();
    assert_eq!(r.shape(), &[3, 2, h, d]);
    // Same data: the view's data pointer is the slice's.
    let raw = unsafe { &*r.as_dl_tensor() };
    assert_eq!(raw.data as *const f32, q.as_ptr());
    if let Some(st) = r.strides() {
        assert_eq!(st, &[2 * h * d, h * d, d, 1]);
    }
    let back = r.reshape_attn_output_for_spec_decode().unwrap();
    assert_eq!(back.shape(), &[t, h, d]);
    // 3-D is returned as it is.
    assert_eq!(v.reshape_attn_output_for_spec_decode().unwrap().shape(), &[t, h, d]);
    // T % B != 0, and a 2-D query, are refused.
    assert_eq!(v.reshape_query_for_spec_decode(4).unwrap_err().status, Status::INVALID_ARGUMENT);
    let flat = TensorView::new(&q, &[t, h * d]).unwrap();
    assert!(flat.reshape_query_for_spec_decode(2).is_err());
    drop(v);

    let mut out = vec![0f32; (t * h * d) as usize];
    {
        let mut o = TensorViewMut::new(&mut out, &[2, 3, h, d]).unwrap();
        let o3 = o.reshape_attn_output_for_spec_decode().unwrap();
        assert_eq!(o3.shape(), &[t, h, d]);
    }
}
