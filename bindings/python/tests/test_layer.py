"""Metadata builder / plan and Attention.forward against a float64 reference."""
import numpy as np
import pytest

import vattn
from conftest import ref_attention

H, HKV, D, BS, NB = 4, 2, 16, 4, 24


def make_batch(rng, query_lens, seq_lens, *, layout=None, dtype="float32", kv="auto",
               shared_prefix_blocks=0, pad_tokens=0):
    cache_dtype = "fp8" if kv != "auto" else dtype
    cache = vattn.KVCache([vattn.FullAttentionSpec(BS, HKV, D, cache_dtype)], num_blocks=NB,
                          layout=layout)
    n = len(query_lens)
    cols = max(-(-s // BS) for s in seq_lens)
    perm = list(rng.permutation(np.arange(1 + shared_prefix_blocks, NB)))   # block 0 = null
    bt = np.zeros((n, cols), np.int32)
    for r, s in enumerate(seq_lens):
        for c in range(-(-s // BS)):
            bt[r, c] = 1 + c if c < shared_prefix_blocks else perm.pop()
    qsl = np.concatenate([[0], np.cumsum(query_lens)]).astype(np.int32)
    T = int(qsl[-1])
    pos = np.concatenate([np.arange(s - q, s) for q, s in zip(query_lens, seq_lens)])
    req = np.repeat(np.arange(n), query_lens)
    slots = (bt[req, pos // BS].astype(np.int64) * BS + pos % BS)
    slots = np.concatenate([slots, np.full(pad_tokens, -1, np.int64)])
    # context K/V are written straight into the cache memory (zero copy)
    if kv == "auto":
        mem = cache[0].numpy()
        mem[...] = 0
        for r, (q, s) in enumerate(zip(query_lens, seq_lens)):
            for p in range(s - q):
                b, o = bt[r, p // BS], p % BS
                mem[:, b, o] = rng.standard_normal((2, HKV, D)).astype(mem.dtype)
    md = vattn.CommonAttentionMetadata(query_start_loc=qsl, seq_lens=seq_lens,
                                       block_table_tensor=bt, slot_mapping=slots,
                                       num_actual_tokens=T + pad_tokens, block_size=BS,
                                       num_cache_blocks=NB)
    npdt = np.float16 if dtype == "float16" else np.float32
    q = rng.standard_normal((T + pad_tokens, H, D)).astype(npdt)
    k = rng.standard_normal((T + pad_tokens, HKV, D)).astype(npdt)
    v = rng.standard_normal((T + pad_tokens, HKV, D)).astype(npdt)
    return cache, md, q, k, v, bt


def gather(cache_arr, row, seq_len):
    p = np.arange(seq_len)
    return cache_arr[0, row[p // BS], p % BS], cache_arr[1, row[p // BS], p % BS]


def check_forward(layer, cache, md, q, k, v, bt, *, atol, use_kv=True, prefix=0, lse=False,
                  **ref_kw):
    builder = vattn.MetadataBuilder("CPU", H, HKV, D, BS)
    plan = builder.build(prefix, md)
    out_lse = np.full((H, q.shape[0]), 7.0, np.float32) if lse else None
    out = layer.forward(q, k, v, cache[0], plan, output_lse=out_lse)
    assert out.shape == (q.shape[0], H, D) and out.dtype == q.dtype
    mem = np.from_dlpack(cache[0]) if use_kv else None
    qsl = md.query_start_loc
    for r in range(md.num_reqs):
        a, b = qsl[r], qsl[r + 1]
        s = md.seq_lens[r]
        K, V = gather(mem, bt[r], s)
        if use_kv:   # the new tokens were written through the slot mapping
            np.testing.assert_allclose(K[s - (b - a):], k[a:b], atol=atol)
        want, want_lse = ref_attention(q[a:b], K, V, np.arange(s - (b - a), s), s,
                                       scale=layer.scale, **ref_kw)
        np.testing.assert_allclose(out[a:b].astype(np.float64), want, atol=atol, rtol=atol)
        if lse:
            np.testing.assert_allclose(out_lse[:, a:b], want_lse, atol=atol * 10, rtol=1e-4)
    return out


QL, SL = [1, 3, 5, 1], [9, 7, 5, 12]   # decode, chunked prefill, prefill, decode


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_forward_mixed_batch(rng, layout):
    cache, md, q, k, v, bt = make_batch(rng, QL, SL, layout=layout)
    layer = vattn.Attention(H, D, 0.25, num_kv_heads=HKV, dtype="float32", block_size=BS,
                            device="cpu")
    check_forward(layer, cache, md, q, k, v, bt, atol=1e-4, lse=True)


@pytest.mark.parametrize("kw,ref", [
    (dict(sliding_window=3), dict(window=3)),
    (dict(logits_soft_cap=2.0), dict(soft_cap=2.0)),
    (dict(alibi_slopes=[0.5, 0.25, 0.125, 0.0625]),
     dict(alibi=np.array([0.5, 0.25, 0.125, 0.0625]))),
    (dict(sinks=[0.5, -1.0, 2.0, 0.0]), dict(sinks=np.array([0.5, -1.0, 2.0, 0.0]))),
])
def test_forward_features(rng, kw, ref):
    cache, md, q, k, v, bt = make_batch(rng, QL, SL)
    layer = vattn.Attention(H, D, None, num_kv_heads=HKV, dtype="float32", block_size=BS,
                            device="cpu", **kw)
    assert layer.scale == pytest.approx(D ** -0.5)
    check_forward(layer, cache, md, q, k, v, bt, atol=1e-4, **ref)


def test_forward_float16(rng):
    cache, md, q, k, v, bt = make_batch(rng, QL, SL, dtype="float16")
    layer = vattn.Attention(H, D, 0.25, num_kv_heads=HKV, dtype=np.float16, block_size=BS,
                            device="cpu")
    check_forward(layer, cache, md, q, k, v, bt, atol=5e-3)


def test_forward_fp8_cache(rng):
    cache, md, q, k, v, bt = make_batch(rng, [3, 2], [3, 2], kv="fp8")
    assert cache[0].dtype == "uint8"
    layer = vattn.Attention(H, D, 0.25, num_kv_heads=HKV, dtype="float32", block_size=BS,
                            kv_cache_dtype="fp8", device="cpu")
    plan = vattn.MetadataBuilder("CPU", H, HKV, D, BS).build(0, md)
    out = layer.forward(q, k, v, cache[0], plan, k_scale=0.5, v_scale=0.5)
    qsl = md.query_start_loc
    for r in range(2):
        a, b = qsl[r], qsl[r + 1]
        want, _ = ref_attention(q[a:b], k[a:b], v[a:b], np.arange(b - a), b - a, scale=0.25)
        np.testing.assert_allclose(out[a:b], want, atol=0.15)


def test_forward_cascade(rng):
    ql, sl = [1] * 3 + [2], [10, 11, 9, 12]
    cache, md, q, k, v, bt = make_batch(rng, ql, sl, shared_prefix_blocks=2)
    layer = vattn.Attention(H, D, 0.25, num_kv_heads=HKV, dtype="float32", block_size=BS,
                            device="cpu")
    plan = check_forward(layer, cache, md, q, k, v, bt, atol=1e-4, prefix=8)
    assert plan is not None


def test_forward_padding_rows_zeroed_and_output_in_place(rng):
    cache, md, q, k, v, bt = make_batch(rng, [2, 1], [4, 6], pad_tokens=3)
    layer = vattn.Attention(H, D, 0.25, num_kv_heads=HKV, dtype="float32", block_size=BS,
                            device="cpu")
    plan = vattn.MetadataBuilder("CPU", H, HKV, D, BS).build(0, md)
    big = np.full((10, H, D), 7.0, np.float32)
    out = big[2:8]                       # caller-provided view into a larger buffer
    r = layer.forward(q, k, v, cache[0], plan, output=out)
    assert r is out
    assert (big[:2] == 7).all() and (big[8:] == 7).all()
    assert not big[5:8].any()            # rows past the 3 real tokens are zeros
    want, _ = ref_attention(q[0:2], *gather(np.from_dlpack(cache[0]), bt[0], 4),
                            np.arange(2, 4), 4, scale=0.25)
    np.testing.assert_allclose(big[2:4], want, atol=1e-4)


def test_encoder_attention_without_cache(rng):
    ql = [3, 5]
    qsl = np.array([0, 3, 8], np.int32)
    md = vattn.CommonAttentionMetadata(query_start_loc=qsl, seq_lens=ql,
                                       block_table_tensor=np.zeros((2, 1), np.int32),
                                       slot_mapping=np.full(8, -1), causal=False)
    q = rng.standard_normal((8, H, D)).astype(np.float32)
    k = rng.standard_normal((8, HKV, D)).astype(np.float32)
    v = rng.standard_normal((8, HKV, D)).astype(np.float32)
    for attn_type, window in (("encoder", None), ("encoder_only", 2)):
        layer = vattn.Attention(H, D, 0.25, num_kv_heads=HKV, dtype="float32",
                                attn_type=attn_type, sliding_window=window, device="cpu")
        plan = vattn.MetadataBuilder("CPU", H, HKV, D, BS).build(0, md)
        out = layer.forward(q, k, v, None, plan)
        for a, b in ((0, 3), (3, 8)):
            want, _ = ref_attention(q[a:b], k[a:b], v[a:b], np.arange(b - a), b - a, scale=0.25,
                                    causal=False, window=window or 0)
            np.testing.assert_allclose(out[a:b], want, atol=1e-4)


def test_kv_sharing_layer_does_not_write(rng):
    cache, md, q, k, v, bt = make_batch(rng, [2], [5])
    before = np.from_dlpack(cache[0]).copy()
    layer = vattn.Attention(H, D, 0.25, num_kv_heads=HKV, dtype="float32", block_size=BS,
                            kv_sharing_target_layer_name="layers.0", device="cpu")
    plan = vattn.MetadataBuilder("CPU", H, HKV, D, BS).build(0, md)
    layer.forward(q, k, v, cache[0], plan)
    np.testing.assert_array_equal(np.from_dlpack(cache[0]), before)


def test_builder_properties_and_plan_reuse(rng):
    b = vattn.MetadataBuilder("CPU", H, HKV, D, BS, max_num_reqs=4, max_num_tokens=64)
    assert isinstance(b.cudagraph_support, vattn.AttentionCGSupport)
    assert b.reorder_batch_threshold in (None, 1)
    cache, md, q, k, v, bt = make_batch(rng, QL, SL)
    plan = b.make_plan()
    assert b.build(0, md, plan=plan) is plan
    assert plan.num_actual_tokens == md.num_actual_tokens
    b.build(0, md, fast_build=True, plan=plan)
    assert b.build_for_drafting(md, 0, plan=plan) is plan
    if b.cudagraph_support == vattn.AttentionCGSupport.NEVER:
        with pytest.raises(vattn.VattnError):
            b.build_for_cudagraph_capture(md, plan=plan)


def test_builder_errors(rng):
    cache, md, q, k, v, bt = make_batch(rng, QL, SL)
    small = vattn.MetadataBuilder("CPU", H, HKV, D, BS, max_num_reqs=2)
    with pytest.raises(vattn.WorkspaceTooSmallError) as ei:
        small.build(0, md)
    assert ei.value.message
    for kind in ("auto", "fp8", "fp8_e5m2"):
        vattn.MetadataBuilder("CPU", H, HKV, D, BS, kv_cache_dtype=kind).build(0, md)
    with pytest.raises(vattn.InvalidArgumentError, match="kv_cache_dtype"):
        vattn.MetadataBuilder("CPU", H, HKV, D, BS, kv_cache_dtype="int8")
    with pytest.raises(vattn.InvalidArgumentError, match="kv_cache_dtype = 5"):
        vattn.MetadataBuilder("CPU", H, HKV, D, BS, kv_cache_dtype=5)
    b = vattn.MetadataBuilder("CPU", H, HKV, D, BS)
    with pytest.raises(vattn.InvalidArgumentError):
        b.build(3, md)                      # not a multiple of block_size
    with pytest.raises(vattn.InvalidArgumentError, match="CommonAttentionMetadata"):
        b.build(0, {"query_start_loc": [0]})


def test_layer_errors(rng):
    with pytest.raises(vattn.VattnError) as ei:
        vattn.Attention(16, D, 0.25, num_kv_heads=5, dtype="float32", device="cpu",
                        backend="CPU")
    assert ei.value.message
    with pytest.raises(vattn.UnsupportedError):
        vattn.Attention(H, 7, 0.25, dtype="float32", device="cpu", backend="CPU")
    with pytest.raises(vattn.InvalidArgumentError, match="alibi_slopes"):
        vattn.Attention(H, D, 0.25, alibi_slopes=[1.0], dtype="float32", device="cpu")
    cache, md, q, k, v, bt = make_batch(rng, QL, SL)
    layer = vattn.Attention(H, D, 0.25, num_kv_heads=HKV, dtype="float32", block_size=BS,
                            device="cpu")
    plan = vattn.MetadataBuilder("CPU", H, HKV, D, BS).build(0, md)
    with pytest.raises(vattn.InvalidArgumentError, match="Plan"):
        layer.forward(q, k, v, cache[0], md)
    with pytest.raises(vattn.InvalidArgumentError) as ei:
        layer.forward(q[:, :2], k, v, cache[0], plan)
    assert "query" in ei.value.message
    with pytest.raises(vattn.InvalidArgumentError):
        layer.forward(q.astype(np.float16), k, v, cache[0], plan,
                      output=np.zeros(q.shape, np.float16))
    with pytest.raises(vattn.InvalidArgumentError, match="__dlpack__"):
        layer.forward(q.tolist(), k, v, cache[0], plan)


def test_torch_cpu_tensors(rng):
    torch = pytest.importorskip("torch")
    cache, md, q, k, v, bt = make_batch(rng, QL, SL)
    layer = vattn.Attention(H, D, 0.25, num_kv_heads=HKV, dtype=torch.float32, block_size=BS,
                            device="cpu")
    plan = vattn.MetadataBuilder("CPU", H, HKV, D, BS).build(0, md)
    kv = torch.from_dlpack(cache[0])
    out = layer.forward(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), kv, plan)
    assert isinstance(out, torch.Tensor)
    kv.zero_()                                   # torch writes, vattn/numpy see it
    assert not np.from_dlpack(cache[0]).any()
