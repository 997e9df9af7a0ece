//! v0 slot mapping, builder, metadata and CUDA-graph state (header sections
//! 6 and 9) through the safe API.

use vattn::*;

const PAD: i64 = PAD_SLOT_ID;

#[test]
fn v0_slot_mapping() {
    assert_eq!(v0_slot_mapping_start_idx(true, 10, 0, 4).unwrap(), 6);
    assert_eq!(v0_slot_mapping_start_idx(true, 3, 0, 4).unwrap(), 0);
    assert_eq!(v0_slot_mapping_start_idx(true, 10, 0, 0).unwrap(), 0);
    assert_eq!(v0_slot_mapping_start_idx(false, 10, 9, 4).unwrap(), 0);

    // seq_len 10, context 2, start 6: 6 - 2 = 4 pads, then positions 6..10
    // through the table [3, 5, 2] with block size 4.
    let table = [3, 5, 2];
    let mut out = vec![99i64];
    v0_compute_slot_mapping(false, 10, 2, 6, 4, &table, 8, &mut out).unwrap();
    let mut want = vec![99i64, PAD, PAD, PAD, PAD];
    want.extend((6..10).map(|i| table[i / 4] as i64 * 4 + (i % 4) as i64));
    assert_eq!(out, want);
    assert_eq!(&out[5..], &[22, 23, 8, 9]);

    // No window: every position from the context on.
    let mut out = Vec::new();
    v0_compute_slot_mapping(false, 6, 3, 0, 4, &table, 8, &mut out).unwrap();
    assert_eq!(out, vec![15, 20, 21]);

    // Profile run: seq_len pads, no table.
    let mut out = vec![1i64];
    v0_compute_slot_mapping(true, 3, 0, 0, 4, &[], 0, &mut out).unwrap();
    assert_eq!(out, vec![1, PAD, PAD, PAD]);

    // A block outside the cache: error, nothing appended.
    let mut out = vec![7i64];
    let e = v0_compute_slot_mapping(false, 10, 0, 0, 4, &table, 4, &mut out).unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    assert_eq!(out, vec![7]);
}

fn prompt_and_decode(b: &mut V0Builder) {
    // A: a 6-token prompt over blocks [3, 7]; B: a decode at position 9
    // over blocks [1, 2, 5].
    b.add_seq(&V0Seq {
        is_prompt: true,
        token_len: 6,
        seq_len: 6,
        curr_seq_len: 6,
        query_len: 6,
        context_len: 0,
        block_table: Some(&[3, 7]),
        ..Default::default()
    })
    .unwrap();
    add_decode(b);
}

fn add_decode(b: &mut V0Builder) {
    b.add_seq(&V0Seq {
        is_prompt: false,
        token_len: 1,
        seq_len: 10,
        curr_seq_len: 10,
        query_len: 1,
        context_len: 9,
        block_table: Some(&[1, 2, 5]),
        ..Default::default()
    })
    .unwrap();
}

fn builder() -> V0Builder {
    V0Builder::new(&V0BuilderOptions {
        block_size: 4,
        num_cache_blocks: 16,
        max_blocks_per_seq: 4,
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn v0_builder_and_metadata() {
    assert_eq!(V0BuilderOptions::default().block_size, 16);
    let mut b = builder();
    prompt_and_decode(&mut b);
    let md = b.build(&[6, 10], &[6, 1], None, 0).unwrap();
    let d = md.describe().unwrap();
    assert_eq!((d.num_prefills, d.num_prefill_tokens, d.num_decode_tokens), (1, 6, 1));
    // Prompt slots 0..6 through [3, 7]; the decode's position 9 = block 5, offset 1.
    assert_eq!(d.slot_mapping, &[12, 13, 14, 15, 28, 29, 21]);
    assert_eq!(d.seq_lens, &[6, 10]);
    assert_eq!(d.context_lens.unwrap(), &[0, 9]);
    assert_eq!(d.query_start_loc.unwrap(), &[0, 6, 7]);
    assert_eq!(d.seq_start_loc.unwrap(), &[0, 6, 16]);
    // Without chunked prefill a plain prompt gets no table; 0-padded rows.
    assert_eq!(d.block_tables_cols, 3);
    assert_eq!(d.block_tables, &[0, 0, 0, 1, 2, 5]);
    assert_eq!((d.max_query_len, d.max_prefill_seq_len, d.max_decode_seq_len, d.max_decode_query_len), (6, 6, 10, 1));
    assert!(!d.use_cuda_graph);
    assert!(d.encoder_seq_lens.is_none());

    let t = md.num_prefill_decode_query_kv_tokens(AttnType::DECODER).unwrap();
    assert_eq!(
        t,
        PrefillDecodeTokens { num_prefill_query_tokens: 6, num_prefill_kv_tokens: 6, num_decode_query_tokens: 1 }
    );
    let a = md.seq_len_block_table_args(true, AttnType::DECODER).unwrap();
    assert_eq!((a.seq_lens, a.max_seq_len, a.block_table_cols), (&[6, 10][..], 6, 3));
    assert_eq!(a.block_table.unwrap(), d.block_tables);
    assert_eq!(md.seq_len_block_table_args(false, AttnType::DECODER).unwrap().max_seq_len, 10);
    let e = md.seq_len_block_table_args(true, AttnType::ENCODER).unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    assert!(e.message.contains("encoder_seq_lens"), "{}", e.message);
    assert!(md.seq_len_block_table_args(true, AttnType::ENCODER_ONLY).is_err());

    // The builder was reset by build: building again with nothing added fails.
    assert_eq!(b.build(&[1], &[1], None, 0).unwrap_err().status, Status::INVALID_ARGUMENT);
    // A prompt after a decode is refused.
    add_decode(&mut b);
    let e = b
        .add_seq(&V0Seq { is_prompt: true, token_len: 2, seq_len: 2, query_len: 2, ..Default::default() })
        .unwrap_err();
    assert!(e.message.contains("prefills come first"), "{}", e.message);
    // Lengths of the two arrays must match.
    assert!(b.build(&[10], &[1, 1], None, 0).is_err());
}

#[test]
fn v0_cuda_graph_batch_and_state() {
    let mut b = builder();
    add_decode(&mut b);
    let g = b.build(&[10], &[1], Some(3), 4).unwrap();
    let d = g.describe().unwrap();
    assert!(d.use_cuda_graph);
    assert_eq!(d.num_decode_tokens, 4);
    assert_eq!(d.slot_mapping, &[21, PAD, PAD, PAD]);
    assert_eq!(d.seq_lens, &[10, 1, 1, 1]);
    assert_eq!(d.block_tables_cols, 4);
    assert_eq!(&d.block_tables[..4], &[1, 2, 5, 0]);
    assert!(d.block_tables[4..].iter().all(|&x| x == 0));

    let mut st = GraphState::new(4, 4, 64).unwrap();
    {
        let m = st.metadata_for_batch(2).unwrap();
        let d = m.describe().unwrap();
        assert_eq!((d.slot_mapping, d.seq_lens), (&[PAD, PAD][..], &[1, 1][..]));
        assert_eq!(d.block_tables, &[0; 8]);
        assert!(d.use_cuda_graph);
        assert!(d.query_start_loc.is_none());
        assert_eq!(d.max_decode_seq_len, 64);
    }
    // Replay a real decode batch (one sequence, 3 block columns).
    add_decode(&mut b);
    let real = b.build(&[10], &[1], None, 0).unwrap();
    st.prepare_replay(&real).unwrap();
    {
        let m = st.metadata_for_batch(2).unwrap();
        let d = m.describe().unwrap();
        assert_eq!(d.slot_mapping, &[21, PAD]);
        assert_eq!(d.seq_lens, &[10, 1]);
        assert_eq!(d.block_tables, &[1, 2, 5, 0, 0, 0, 0, 0]);
        let a = m.seq_len_block_table_args(false, AttnType::DECODER).unwrap();
        assert_eq!((a.seq_lens, a.block_table_cols), (&[10, 1][..], 4));
    }
    // Prefills never replay; batch sizes are bounded.
    prompt_and_decode(&mut b);
    let mixed = b.build(&[6, 10], &[6, 1], None, 0).unwrap();
    assert_eq!(st.prepare_replay(&mixed).unwrap_err().status, Status::INVALID_ARGUMENT);
    assert_eq!(st.metadata_for_batch(5).unwrap_err().status, Status::INVALID_ARGUMENT);
    assert_eq!(GraphState::new(0, 4, 64).unwrap_err().status, Status::INVALID_ARGUMENT);
}

#[test]
fn v0_metadata_from_desc_encoder_decoder() {
    // Two decodes of an encoder-decoder model.
    let md = V0Metadata::new(&V0MetadataDesc {
        num_decode_tokens: 2,
        slot_mapping: &[1, 2],
        seq_lens: &[5, 3],
        block_tables: &[0, 1],
        block_tables_cols: 1,
        max_query_len: 1,
        max_decode_seq_len: 5,
        max_decode_query_len: 1,
        encoder_seq_lens: Some(&[4, 2]),
        num_encoder_tokens: 6,
        max_encoder_seq_len: 4,
        cross_block_tables: Some(&[7, 8]),
        cross_block_tables_cols: 1,
        ..Default::default()
    })
    .unwrap();
    let d = md.describe().unwrap();
    assert_eq!(d.encoder_seq_lens.unwrap(), &[4, 2]);
    assert_eq!(d.cross_block_tables.unwrap(), &[7, 8]);
    assert!(d.context_lens.is_none());

    let x = md.seq_len_block_table_args(false, AttnType::ENCODER_DECODER).unwrap();
    assert_eq!((x.seq_lens, x.max_seq_len, x.block_table, x.block_table_cols), (&[4, 2][..], 4, Some(&[7, 8][..]), 1));
    let e = md.seq_len_block_table_args(false, AttnType::ENCODER).unwrap();
    assert_eq!((e.seq_lens, e.block_table), (&[4, 2][..], None));
    let s = md.seq_len_block_table_args(false, AttnType::DECODER).unwrap();
    assert_eq!((s.seq_lens, s.max_seq_len, s.block_table), (&[5, 3][..], 5, Some(&[0, 1][..])));

    // vLLM: decoder (prefill q, prefill q, decode q); encoder (enc, enc, 0);
    // cross (prefill q, enc, decode q).
    let t = |a| {
        let r = md.num_prefill_decode_query_kv_tokens(a).unwrap();
        (r.num_prefill_query_tokens, r.num_prefill_kv_tokens, r.num_decode_query_tokens)
    };
    assert_eq!(t(AttnType::DECODER), (0, 0, 2));
    assert_eq!(t(AttnType::ENCODER), (6, 6, 0));
    assert_eq!(t(AttnType::ENCODER_DECODER), (0, 6, 2));

    // Invariants are checked: a wrong encoder token total.
    let e = V0Metadata::new(&V0MetadataDesc {
        seq_lens: &[1],
        max_decode_seq_len: 1,
        encoder_seq_lens: Some(&[4]),
        num_encoder_tokens: 5,
        max_encoder_seq_len: 4,
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    assert!(e.message.contains("num_encoder_tokens"), "{}", e.message);
    // Short arrays are caught before the library.
    let e = V0Metadata::new(&V0MetadataDesc {
        seq_lens: &[1, 1],
        block_tables: &[0],
        block_tables_cols: 1,
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.message.contains("block_tables"), "{}", e.message);
}

#[test]
fn v0_handles_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<V0Builder>();
    both::<V0Metadata<'static>>();
    both::<GraphState>();
}
