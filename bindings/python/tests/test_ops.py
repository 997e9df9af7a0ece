"""reshape_and_cache_flash, merge_attn_states, copy_blocks, swap_blocks."""
import numpy as np
import pytest

import vattn


def cache(layout=None, nb=6, bs=4, h=2, d=8, dtype="float32"):
    return vattn.KVCache([vattn.FullAttentionSpec(bs, h, d, dtype)], num_blocks=nb,
                         layout=layout)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_reshape_and_cache_flash(rng, layout):
    c = cache(layout)
    k = rng.standard_normal((5, 2, 8)).astype(np.float32)
    v = rng.standard_normal((5, 2, 8)).astype(np.float32)
    slots = np.array([3, 9, -1, 22, 0], np.int64)
    vattn.reshape_and_cache_flash(k, v, c[0], slots, "auto", 1.0, 1.0)
    mem = np.from_dlpack(c[0])               # logical view whatever the layout
    for t, s in enumerate(slots):
        if s < 0:
            continue
        np.testing.assert_array_equal(mem[0, s // 4, s % 4], k[t])
        np.testing.assert_array_equal(mem[1, s // 4, s % 4], v[t])
    assert np.count_nonzero(mem[0].reshape(-1, 2, 8).any(axis=(1, 2))) == 4


def test_reshape_and_cache_token_count_is_slot_count(rng):
    c = cache()
    k = rng.standard_normal((6, 2, 8)).astype(np.float32)     # longer than slot_mapping
    vattn.reshape_and_cache(k, k, c[0], np.array([1, 2], np.int64))
    mem = np.from_dlpack(c[0])
    np.testing.assert_array_equal(mem[0, 0, 1:3], k[:2])


def test_reshape_and_cache_errors(rng):
    c = cache()
    k = np.zeros((2, 2, 8), np.float32)
    with pytest.raises(vattn.InvalidArgumentError) as ei:
        vattn.reshape_and_cache_flash(k, k, c[0], np.array([0, 24], np.int64))
    assert ei.value.message
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.reshape_and_cache_flash(k, k, c[0], np.array([0, 1], np.int32))
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.reshape_and_cache_flash(np.zeros((2, 3, 8), np.float32), k, c[0],
                                      np.array([0, 1], np.int64))


def test_merge_attn_states(rng):
    T, H, D = 5, 3, 8
    po = rng.standard_normal((T, H, D)).astype(np.float32)
    so = rng.standard_normal((T, H, D)).astype(np.float32)
    pl = rng.standard_normal((H, T)).astype(np.float32)
    sl = rng.standard_normal((H, T)).astype(np.float32)
    pl[0, 1] = np.inf                                 # +inf is treated as -inf
    out = np.zeros((T, H, D), np.float32)
    out_lse = np.zeros((H, T), np.float32)
    r = vattn.merge_attn_states(out, po, pl, so, sl, out_lse)
    assert r is out
    p = np.where(np.isinf(pl), -np.inf, pl).astype(np.float64)
    s = sl.astype(np.float64)
    m = np.maximum(p, s)
    wp, ws = np.exp(p - m), np.exp(s - m)
    want = (wp.T[:, :, None] * po + ws.T[:, :, None] * so) / (wp + ws).T[:, :, None]
    np.testing.assert_allclose(out, want, atol=1e-5)
    np.testing.assert_allclose(out_lse, np.log(wp + ws) + m, atol=1e-5)
    np.testing.assert_allclose(out[1, 0], so[1, 0], atol=1e-6)
    vattn.merge_attn_states(out, po, pl, so, sl)       # output_lse optional


def test_copy_blocks(rng):
    a, b = cache(), cache()
    for c in (a, b):
        c[0].numpy()[...] = rng.standard_normal((2, 6, 4, 2, 8))
    a_before = np.from_dlpack(a[0]).copy()
    vattn.copy_blocks([a[0], b[0]], [[1, 3], [2, 5]])
    for c in (a, b):
        m = np.from_dlpack(c[0])
        np.testing.assert_array_equal(m[:, 3], m[:, 1])
        np.testing.assert_array_equal(m[:, 5], m[:, 2])
    np.testing.assert_array_equal(np.from_dlpack(a[0])[:, 0], a_before[:, 0])
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.copy_blocks([a[0]], [[1, 99]])
    with pytest.raises(vattn.InvalidArgumentError, match="block_mapping"):
        vattn.copy_blocks([a[0]], [1, 2, 3])


def test_swap_blocks(rng):
    src, dst = cache(), cache(layout="HND")
    src[0].numpy()[...] = rng.standard_normal((2, 6, 4, 2, 8))
    plain = cache()
    vattn.swap_blocks(src[0], plain[0], np.array([[0, 4], [3, 1]]))
    s, d = np.from_dlpack(src[0]), np.from_dlpack(plain[0])
    np.testing.assert_array_equal(d[:, 4], s[:, 0])
    np.testing.assert_array_equal(d[:, 1], s[:, 3])
    assert not d[:, 0].any()
    try:
        vattn.swap_blocks(src[0], dst[0], [[0, 0]])   # different layouts: copy or refuse
    except vattn.InvalidArgumentError as e:
        assert e.message
    else:
        np.testing.assert_array_equal(np.from_dlpack(dst[0])[:, 0], s[:, 0])
