//! Cache and merge operations on host tensors, and concurrent use of
//! shared handles.

mod common;
use common::data;
use vattn::*;

#[test]
fn reshape_and_cache_writes_slots() {
    let (nb, bs, h, d) = (4i64, 4i64, 2i64, 8i64);
    let mut cache = vec![0f32; (2 * nb * bs * h * d) as usize];
    let k = data(3 * (h * d) as usize, 1);
    let v = data(3 * (h * d) as usize, 2);
    let slots = [5i64, PAD_SLOT_ID, 14];
    {
        let kt = TensorView::new(&k, &[3, h, d]).unwrap();
        let vt = TensorView::new(&v, &[3, h, d]).unwrap();
        let st = TensorView::new(&slots, &[3]).unwrap();
        let mut ct = TensorViewMut::new(&mut cache, &[2, nb, bs, h, d]).unwrap();
        reshape_and_cache(&kt, &vt, &mut ct, &st, KvCacheDtype::AUTO, 1.0, 1.0).unwrap();
        // A slot past the cache is an error on CPU.
        let bad = [nb * bs];
        let st = TensorView::new(&bad, &[1]).unwrap();
        let k1 = TensorView::new(&k[..(h * d) as usize], &[1, h, d]).unwrap();
        let e = reshape_and_cache(&k1, &k1, &mut ct, &st, KvCacheDtype::AUTO, 1.0, 1.0).unwrap_err();
        assert_eq!(e.status, Status::INVALID_ARGUMENT);
    }
    let hd = (h * d) as usize;
    let plane = (nb * bs) as usize * hd; // K plane, then V plane
    assert_eq!(&cache[5 * hd..6 * hd], &k[..hd]);
    assert_eq!(&cache[plane + 5 * hd..plane + 6 * hd], &v[..hd]);
    assert_eq!(&cache[14 * hd..15 * hd], &k[2 * hd..]);
    // The padded token wrote nothing else.
    let written: usize = cache.iter().filter(|&&x| x != 0.0).count();
    assert_eq!(written, 4 * hd);
}

#[test]
fn merge_attn_states_weights_by_lse() {
    let (t, h, d) = (2i64, 2i64, 4i64);
    let n = (t * h * d) as usize;
    let p = vec![1f32; n];
    let s = vec![3f32; n];
    let plse = vec![0f32; (h * t) as usize];
    let slse = vec![0f32; (h * t) as usize];
    let mut out = vec![0f32; n];
    let mut olse = vec![0f32; (h * t) as usize];
    {
        let pv = TensorView::new(&p, &[t, h, d]).unwrap();
        let sv = TensorView::new(&s, &[t, h, d]).unwrap();
        let plv = TensorView::new(&plse, &[h, t]).unwrap();
        let slv = TensorView::new(&slse, &[h, t]).unwrap();
        let mut ov = TensorViewMut::new(&mut out, &[t, h, d]).unwrap();
        let mut olv = TensorViewMut::new(&mut olse, &[h, t]).unwrap();
        merge_attn_states(&mut ov, Some(&mut olv), &pv, &plv, &sv, &slv).unwrap();
    }
    // Equal LSEs: the plain average, and lse = log(2).
    assert!(out.iter().all(|&x| (x - 2.0).abs() < 1e-6), "{:?}", out);
    assert!(olse.iter().all(|&x| (x - std::f32::consts::LN_2).abs() < 1e-6), "{:?}", olse);
}

#[test]
fn shared_handles_across_threads() {
    let md = Metadata::new(&MetadataDesc {
        query_start_loc: &[0, 1, 4],
        seq_lens: &[5, 3],
        block_table: &[0, 1, 2, 3],
        block_table_cols: 2,
        slot_mapping: &[4, 32, 33, 34],
        block_size: 16,
        ..Default::default()
    })
    .unwrap();
    let cpu = Backend::find("CPU").unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..200 {
                    let sp = split_decodes_and_prefills(&md, 1, false).unwrap();
                    assert_eq!((sp.num_decodes, sp.num_prefills), (1, 1));
                    assert_eq!(cpu.info().unwrap().name, "CPU");
                    // Errors are per thread.
                    assert_eq!(Backend::find("none").unwrap_err().status, Status::NOT_FOUND);
                }
            });
        }
    });
    // Handles move to other threads.
    let h = std::thread::spawn(move || md.num_reqs().unwrap());
    assert_eq!(h.join().unwrap(), 2);
}
