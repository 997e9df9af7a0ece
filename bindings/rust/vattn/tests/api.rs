//! Integration tests of the safe API against the real library.

use vattn::*;

#[test]
fn backends_registry() {
    assert!(Backend::count() >= 1);
    // Selection order: CUDA first when the library was built with it, CPU last.
    let cpu = Backend::get(Backend::count() - 1).unwrap();
    let info = cpu.info().unwrap();
    assert_eq!(info.name, "CPU");
    assert_eq!(info.device_type, DeviceType::CPU);
    assert!(info.supports_dtype(DType::FLOAT32));
    assert!(info.features.contains(Features::LSE_OUTPUT));
    assert!(!info.head_sizes.is_empty());
    assert_eq!(Backend::find("cpu").unwrap(), cpu);
    assert_eq!(*Backend::all().unwrap().last().unwrap(), cpu);

    let e = Backend::find("no-such-backend").unwrap_err();
    assert_eq!(e.status, Status::NOT_FOUND);
    assert!(!e.message.is_empty());
    // The message was read and cleared.
    let left = unsafe { std::ffi::CStr::from_ptr(sys::vattn_last_error_message()) };
    assert!(left.to_bytes().is_empty());
    assert!(Backend::get(1000).is_err());
    assert!(Backend::find("a\0b").is_err());
}

#[test]
fn selector_and_shapes() {
    let cpu = Backend::select(&Selector {
        head_size: 64,
        dtype: DType::FLOAT32,
        block_size: 16,
        device_type: Some(DeviceType::CPU),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(cpu.info().unwrap().name, "CPU");
    let e = Backend::select(&Selector { head_size: 7, device_type: Some(DeviceType::CPU), ..Default::default() })
        .unwrap_err();
    assert_eq!(e.status, Status::UNSUPPORTED);
    assert!(e.message.contains("CPU"), "{}", e.message);

    assert_eq!(cpu.kv_cache_shape(10, 16, 8, 128, false).unwrap(), vec![2, 10, 16, 8, 128]);
    assert_eq!(cpu.kv_cache_stride_order(Layout::NHD, false).unwrap(), vec![0, 1, 2, 3, 4]);
    assert_eq!(cpu.kv_cache_stride_order(Layout::HND, false).unwrap(), vec![0, 1, 3, 2, 4]);
    assert_eq!(cpu.kv_cache_stride_order(Layout::HND, true).unwrap(), vec![2, 4, 0, 1, 3, 5]);
}

#[test]
fn metadata_create_describe_split() {
    // Two decodes (query 1) then one prefill (query 3).
    let md = Metadata::new(&MetadataDesc {
        query_start_loc: &[0, 1, 2, 5],
        seq_lens: &[5, 6, 3],
        block_table: &[0, 1, 2, 3, 4, 5],
        block_table_cols: 2,
        slot_mapping: &[4, 21, 32, 33, 34],
        block_size: 16,
        num_cache_blocks: 8,
        ..Default::default()
    })
    .unwrap();
    let d = md.describe().unwrap();
    assert_eq!(d.query_start_loc, &[0, 1, 2, 5]);
    assert_eq!(d.seq_lens, &[5, 6, 3]);
    assert_eq!(d.slot_mapping.len(), 5);
    assert_eq!(d.num_actual_tokens, Some(5));
    assert_eq!(d.max_query_len, Some(3));
    assert_eq!(d.max_seq_len, Some(6));
    assert_eq!(md.num_reqs().unwrap(), 3);

    let s = split_decodes_and_prefills(&md, 1, false).unwrap();
    assert_eq!(
        s,
        Split { num_decodes: 2, num_prefills: 1, num_decode_tokens: 2, num_prefill_tokens: 3 }
    );
    let s3 = split_decodes_prefills_and_extends(&md, 1).unwrap();
    assert_eq!((s3.num_decodes, s3.num_extends + s3.num_prefills), (2, 1));

    let u = md.unpadded(2, 2).unwrap();
    assert_eq!(u.describe().unwrap().seq_lens, &[5, 6]);
}

#[test]
fn metadata_errors() {
    // query_start_loc of the wrong length: caught before the library.
    let e = Metadata::new(&MetadataDesc {
        query_start_loc: &[0, 1],
        seq_lens: &[1, 2],
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    assert!(e.message.contains("query_start_loc"));

    // Decreasing query_start_loc: caught by the library, which names it.
    let e = Metadata::new(&MetadataDesc {
        query_start_loc: &[0, 3, 2],
        seq_lens: &[3, 3],
        block_table: &[0, 1],
        block_table_cols: 1,
        slot_mapping: &[0, 1, 2],
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    assert!(e.message.contains("query_start_loc"), "{}", e.message);
    assert!(e.to_string().starts_with("invalid argument (1): "));

    // A block id outside the cache.
    let e = Metadata::new(&MetadataDesc {
        query_start_loc: &[0, 1],
        seq_lens: &[1],
        block_table: &[9],
        block_table_cols: 1,
        slot_mapping: &[0],
        block_size: 16,
        num_cache_blocks: 4,
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
}

#[test]
fn kv_cache_spec_page_sizes() {
    let spec = KvCacheSpec {
        block_size: 16,
        num_kv_heads: 8,
        head_size: 128,
        dtype: DType::BFLOAT16,
        ..Default::default()
    };
    assert_eq!(spec.kind, SpecKind::FULL);
    assert_eq!(spec.page_size_bytes().unwrap(), 2 * 16 * 8 * 128 * 2);
    let mla = KvCacheSpec { kind: SpecKind::MLA, num_kv_heads: 1, head_size: 576, ..spec };
    assert_eq!(mla.page_size_bytes().unwrap(), 16 * 576 * 2);
    let padded = KvCacheSpec { page_size_padded: 1 << 20, ..spec };
    assert_eq!(padded.page_size_bytes().unwrap(), 1 << 20);
    let bad = KvCacheSpec { head_size: 0, ..spec };
    assert_eq!(bad.page_size_bytes().unwrap_err().status, Status::INVALID_ARGUMENT);

    let limits = ModelLimits { max_model_len: 1024, ..Default::default() };
    assert_eq!(spec.max_memory_usage_bytes(&limits).unwrap(), 1024 / 16 * spec.page_size_bytes().unwrap());

    let sw = KvCacheSpec { sliding_window: 128, ..spec };
    let merged = KvCacheSpec::merge(&[spec, sw]).unwrap();
    assert_eq!(merged.sliding_window, 128);
    assert!(KvCacheSpec::merge(&[spec, KvCacheSpec { head_size: 64, ..spec }]).is_err());
}

#[test]
fn kv_cache_allocation_and_views() {
    let spec = KvCacheSpec { block_size: 4, num_kv_heads: 2, head_size: 16, dtype: DType::FLOAT32, ..Default::default() };
    let page = spec.page_size_bytes().unwrap();
    assert_eq!(KvCache::num_blocks_for_budget(&[spec, spec], None, 10 * 2 * page).unwrap(), 10);
    assert_eq!(KvCache::num_blocks_for_budget(&[spec, spec], Some(&[-1, 0]), 10 * 2 * page).unwrap(), 20);

    let mut cache = KvCache::new(
        &[spec, spec, spec],
        Some(&[-1, -1, 0]),
        &KvCacheOptions { num_blocks: 8, layout: Some(Layout::HND), ..Default::default() },
    )
    .unwrap();
    let info = cache.info().unwrap();
    assert_eq!((info.num_blocks, info.num_layers, info.device_type), (8, 3, DeviceType::CPU));
    assert_eq!(info.layout, Layout::HND);
    assert_eq!(info.total_bytes, 2 * 8 * page);
    assert_eq!(cache.group_spec(cache.layer_group(0).unwrap() as usize).unwrap().head_size, 16);
    {
        let l0 = cache.layer(0).unwrap();
        assert_eq!(l0.shape(), &[2, 8, 4, 2, 16]);
        // HND: the head dim is outside the block offset dim.
        assert_eq!(l0.strides().unwrap(), &[8 * 4 * 2 * 16, 4 * 2 * 16, 16, 4 * 16, 1]);
        assert!(l0.as_slice::<f32>().unwrap().iter().all(|&x| x == 0.0));
        assert!(l0.as_slice::<i32>().is_err());
    }
    // Layer 2 shares layer 0's memory.
    cache.layer_mut(0).unwrap().as_mut_slice::<f32>().unwrap()[5] = 3.0;
    assert_eq!(cache.layer(2).unwrap().as_slice::<f32>().unwrap()[5], 3.0);
    assert_eq!(cache.layer(1).unwrap().as_slice::<f32>().unwrap()[5], 0.0);
    assert!(cache.layer(3).is_err());
}

#[test]
fn slot_mapping() {
    let mut slots = [0i64; 6];
    compute_slot_mapping(
        &SlotMappingArgs {
            block_table: &[3, 1, 0, 2],
            row_stride: 2,
            query_start_loc: &[0, 2, 4],
            positions: &[0, 5, 3, 4],
            block_size: 4,
            num_cache_blocks: 4,
            ..Default::default()
        },
        &mut slots,
    )
    .unwrap();
    assert_eq!(slots, [12, 5, 3, 8, PAD_SLOT_ID, PAD_SLOT_ID]);
}

#[test]
fn handles_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<Metadata>();
    both::<KvCache<'static>>();
    both::<Builder>();
    both::<Plan>();
    both::<Layer>();
    both::<Backend>();
    both::<TensorView<'static>>();
}
