"""KV cache specs, allocation, layer views (zero-copy, lifetime), from_tensors."""
import gc
import math

import numpy as np
import pytest

import vattn
from vattn import (FullAttentionSpec, SlidingWindowSpec, ChunkedLocalAttentionSpec,
                   MLAAttentionSpec, CrossAttentionSpec, EncoderOnlyAttentionSpec, KVCache)


def test_page_sizes():
    assert FullAttentionSpec(16, 8, 128, "bfloat16").page_size_bytes == 2 * 16 * 8 * 128 * 2
    assert FullAttentionSpec(16, 2, 64, "float32").page_size_bytes == 2 * 16 * 2 * 64 * 4
    assert SlidingWindowSpec(16, 8, 128, "float16", sliding_window=128).page_size_bytes == \
        2 * 16 * 8 * 128 * 2
    assert ChunkedLocalAttentionSpec(16, 8, 128, "fp8", 64).page_size_bytes == 2 * 16 * 8 * 128
    assert MLAAttentionSpec(16, 1, 576, "bfloat16").page_size_bytes == 16 * 576 * 2
    assert MLAAttentionSpec(16, 1, 576, "uint8", cache_dtype_str="fp8_ds_mla").page_size_bytes \
        == 16 * 656
    assert CrossAttentionSpec(16, 4, 64, "float16").page_size_bytes == 2 * 16 * 4 * 64 * 2
    assert FullAttentionSpec(16, 2, 64, "float32", page_size_padded=20000).page_size_bytes == 20000


def test_page_size_padded_too_small():
    with pytest.raises(vattn.InvalidArgumentError) as ei:
        FullAttentionSpec(16, 2, 64, "float32", page_size_padded=8).page_size_bytes
    assert ei.value.message


def test_max_memory_usage_bytes():
    full = FullAttentionSpec(16, 8, 128, "bfloat16")
    page = full.page_size_bytes
    assert full.max_memory_usage_bytes(max_model_len=1000, max_num_batched_tokens=256) == \
        math.ceil(1000 / 16) * page
    sw = SlidingWindowSpec(16, 8, 128, "bfloat16", sliding_window=128)
    assert sw.max_memory_usage_bytes(max_model_len=4096, max_num_batched_tokens=256) == \
        (math.ceil(min(128 - 1 + 256, 4096) / 16) + 1) * page
    cl = ChunkedLocalAttentionSpec(16, 8, 128, "bfloat16", attention_chunk_size=512)
    assert cl.max_memory_usage_bytes(max_model_len=4096, max_num_batched_tokens=256) == \
        math.ceil(min(512 + 256, 4096) / 16) * page
    assert EncoderOnlyAttentionSpec(16, 8, 128, "bfloat16").max_memory_usage_bytes(
        max_model_len=4096, max_num_batched_tokens=256) == 0
    cross = CrossAttentionSpec(16, 8, 128, "bfloat16")
    assert cross.max_memory_usage_bytes(max_model_len=4096, max_num_batched_tokens=256,
                                        max_encoder_len=1500) == math.ceil(1500 / 16) * page

    class Cfg:      # a vllm_config-like object
        class model_config:
            max_model_len = 1000

        class scheduler_config:
            max_num_batched_tokens = 256

    assert full.max_memory_usage_bytes(Cfg) == math.ceil(1000 / 16) * page


def test_merge():
    a = FullAttentionSpec(16, 8, 128, "bfloat16")
    b = FullAttentionSpec(16, 8, 128, "bfloat16", sliding_window=64)
    m = vattn.KVCacheSpec.merge([a, b])
    assert isinstance(m, FullAttentionSpec) and m.sliding_window == 64
    assert FullAttentionSpec.merge([a, a]) == a
    with pytest.raises(vattn.InvalidArgumentError) as ei:
        FullAttentionSpec.merge([FullAttentionSpec(16, 8, 128, "bfloat16", sliding_window=32), b])
    assert "window" in ei.value.message
    with pytest.raises(vattn.InvalidArgumentError):
        FullAttentionSpec.merge([a, FullAttentionSpec(16, 4, 128, "bfloat16")])


def _cache(num_layers=2, num_blocks=8, layout=None, **kw):
    specs = [FullAttentionSpec(4, 2, 8, "float32") for _ in range(num_layers)]
    return KVCache(specs, num_blocks=num_blocks, layout=layout, **kw)


def test_cache_info_and_views():
    with _cache() as c:
        assert (c.num_blocks, c.num_layers, c.num_groups) == (8, 2, 1)
        assert c.device == "cpu"
        assert c.layout == "NHD"
        assert c.total_bytes >= 2 * 8 * FullAttentionSpec(4, 2, 8, "float32").page_size_bytes
        v = c[0]
        assert v.shape == (2, 8, 4, 2, 8)
        assert v.dtype == "float32" and v.device == "cpu"
        assert v.__dlpack_device__() == (vattn.lib.kDLCPU, 0)
        a = np.from_dlpack(v)
        assert a.shape == v.shape
        assert not a.any()          # zero_fill default
        assert c.layer_group(1) == 0
        assert c.group_spec(0) == FullAttentionSpec(4, 2, 8, "float32")


def test_views_share_memory():
    c = _cache()
    a = c.layer(0).numpy()           # writable numpy over the cache
    b = np.from_dlpack(c.layer(0))   # the DLPack consumer path (read-only in numpy 1.x)
    a[1, 3, 2, 1, 5] = 42.0
    assert b[1, 3, 2, 1, 5] == 42.0
    assert a.__array_interface__["data"][0] == c[0].data_ptr
    assert b.__array_interface__["data"][0] == c[0].data_ptr
    other = np.from_dlpack(c[1])
    assert not other.any()      # layers are separate memory


def test_hnd_layout_strides():
    c = _cache(layout="HND")
    assert c.layout == "HND"
    v = c[0]
    assert v.shape == (2, 8, 4, 2, 8)
    # physical (2, num_blocks, H, block_size, D)
    assert v.strides == (8 * 2 * 4 * 8, 2 * 4 * 8, 8, 4 * 8, 1)
    a = np.from_dlpack(v)
    assert a.strides == tuple(4 * s for s in v.strides)


def test_default_layout_follows_override():
    vattn.set_kv_cache_layout("HND")
    assert _cache().layout == "HND"


def test_view_keeps_cache_alive():
    c = _cache()
    a = c[0].numpy()
    r = np.from_dlpack(c[0])
    a[0, 0, 0, 0, 0] = 7.0
    c.close()                   # deferred: exported arrays still live
    assert c.closed and c._h is not None
    del c
    gc.collect()
    assert a[0, 0, 0, 0, 0] == 7.0 and r[0, 0, 0, 0, 0] == 7.0
    a[...] = 1.0                # memory still valid
    assert r.sum() == r.size


def test_closed_cache_rejected():
    c = _cache()
    v = c[0]
    c.close()
    with pytest.raises(vattn.InvalidArgumentError, match="closed"):
        c.layer(0)
    with pytest.raises(vattn.InvalidArgumentError, match="closed"):
        vattn.reshape_and_cache_flash(np.zeros((1, 2, 8), np.float32),
                                      np.zeros((1, 2, 8), np.float32), v,
                                      np.zeros(1, np.int64))


def test_unconsumed_capsule_is_released():
    c = _cache()
    cap = c[0].__dlpack__()
    assert c._exports == 1
    del cap
    gc.collect()
    assert c._exports == 0


def test_kv_sharing_and_names():
    specs = {"layers.0.attn": FullAttentionSpec(4, 2, 8, "float32"),
             "layers.1.attn": FullAttentionSpec(4, 2, 8, "float32")}
    c = KVCache(specs, kv_sharing_target={"layers.1.attn": "layers.0.attn"}, num_blocks=4)
    assert c.layer_names == ["layers.0.attn", "layers.1.attn"]
    a0 = c["layers.0.attn"].numpy()
    a1 = np.from_dlpack(c["layers.1.attn"])
    a0[0, 1, 2, 1, 3] = 5.0
    assert a1[0, 1, 2, 1, 3] == 5.0     # the sharing layer reads its target's cache
    with pytest.raises(KeyError):
        c["nope"]
    lst = KVCache([FullAttentionSpec(4, 2, 8, "float32")] * 2, [-1, 0], num_blocks=4)
    assert lst[1].data_ptr == lst[0].data_ptr


def test_groups_of_different_specs():
    specs = [FullAttentionSpec(4, 2, 8, "float32"),
             SlidingWindowSpec(4, 2, 8, "float32", sliding_window=8),
             FullAttentionSpec(4, 2, 8, "float32")]
    c = KVCache(specs, num_blocks=3)
    assert c.num_groups == 2
    assert c.layer_group(0) == c.layer_group(2) != c.layer_group(1)
    assert isinstance(c.group_spec(c.layer_group(1)), SlidingWindowSpec)


def test_memory_budget():
    spec = FullAttentionSpec(4, 2, 8, "float32")
    page = spec.page_size_bytes
    assert vattn.num_blocks_for_budget([spec, spec], 10 * page) == 5
    assert vattn.num_blocks_for_budget([spec, spec], 10 * page, [-1, 0]) == 10
    c = KVCache([spec, spec], memory_budget_bytes=10 * page)
    assert c.num_blocks == 5


def test_bad_arguments():
    spec = FullAttentionSpec(4, 2, 8, "float32")
    with pytest.raises(vattn.InvalidArgumentError) as ei:
        KVCache([spec], [3], num_blocks=4)
    assert ei.value.message
    with pytest.raises(vattn.InvalidArgumentError):
        KVCache([spec], num_blocks=-2)
    with pytest.raises(vattn.InvalidArgumentError, match="KVCacheSpec"):
        KVCache(["spec"], num_blocks=2)
    if vattn.cuda_device_count() == 0:
        with pytest.raises((vattn.NoDeviceError, vattn.UnsupportedError)):
            KVCache([spec], num_blocks=2, device="cuda")


def test_from_tensors_shares_caller_memory():
    spec = FullAttentionSpec(4, 2, 8, "float32")
    t0 = np.zeros((2, 6, 4, 2, 8), np.float32)
    c = KVCache.from_tensors([spec, spec], [t0, None], kv_sharing_target=[-1, 0])
    assert c.num_blocks == 6
    assert c.total_bytes == 0
    assert c[0].data_ptr == t0.__array_interface__["data"][0]
    t0[1, 2, 3, 1, 7] = 9.0
    assert np.from_dlpack(c[1])[1, 2, 3, 1, 7] == 9.0


def test_from_tensors_hnd_strides():
    spec = FullAttentionSpec(4, 2, 8, "float32")
    phys = np.zeros((2, 6, 2, 4, 8), np.float32)           # HND physical
    logical = phys.transpose(0, 1, 3, 2, 4)
    c = KVCache.from_tensors([spec], [logical])
    assert c.layout == "HND"
    assert c[0].strides == tuple(s // 4 for s in logical.strides)
