"""CUDA paths through vattn objects only (no torch/cupy needed): device caches,
their DLPack device, swap_blocks host <-> device, copy_blocks on the device,
and forward on CUDA tensors when torch is installed.  Skipped without a GPU."""
import numpy as np
import pytest

import vattn

pytestmark = pytest.mark.skipif(vattn.cuda_device_count() == 0, reason="no CUDA device")

SPEC = vattn.FullAttentionSpec(16, 2, 64, "float16")


def test_cuda_cache_and_views():
    c = vattn.KVCache([SPEC], num_blocks=8, device="cuda")
    assert c.device == "cuda:0"
    v = c[0]
    assert v.__dlpack_device__() == (vattn.lib.kDLCUDA, 0)
    assert v.shape == (2, 8, 16, 2, 64)
    with pytest.raises(vattn.InvalidArgumentError):
        v.numpy()


def test_swap_and_copy_blocks_round_trip(rng):
    host = vattn.KVCache([SPEC], num_blocks=8)
    dev = vattn.KVCache([SPEC], num_blocks=8, device="cuda")
    back = vattn.KVCache([SPEC], num_blocks=8)
    h = host[0].numpy()
    h[...] = rng.standard_normal(h.shape).astype(np.float16)
    vattn.swap_blocks(host[0], dev[0], [[1, 2], [3, 4]])
    vattn.copy_blocks([dev[0]], [[2, 5]])
    vattn.swap_blocks(dev[0], back[0], [[2, 0], [4, 1], [5, 7]])
    b = np.from_dlpack(back[0])
    np.testing.assert_array_equal(b[:, 0], h[:, 1])
    np.testing.assert_array_equal(b[:, 1], h[:, 3])
    np.testing.assert_array_equal(b[:, 7], h[:, 1])


def test_cuda_backend_selected():
    b = vattn.get_attn_backend(64, "float16", device="cuda")
    assert b.device_type == vattn.lib.kDLCUDA


def test_forward_cuda_matches_cpu(rng):
    torch = pytest.importorskip("torch")
    ql, sl = [1, 4], [20, 4]
    qsl = np.array([0, 1, 5], np.int32)
    bt = np.array([[1, 2], [3, 0]], np.int32)
    pos = np.array([19, 0, 1, 2, 3])
    req = np.array([0, 1, 1, 1, 1])
    slots = bt[req, pos // 16] * 16 + pos % 16
    md = vattn.CommonAttentionMetadata(query_start_loc=qsl, seq_lens=sl, block_table_tensor=bt,
                                       slot_mapping=slots)
    q = torch.randn(5, 4, 64, dtype=torch.float16)
    k = torch.randn(5, 2, 64, dtype=torch.float16)
    v = torch.randn(5, 2, 64, dtype=torch.float16)
    outs = []
    for dev in ("cpu", "cuda"):
        cache = vattn.KVCache([SPEC], num_blocks=8, device=dev)
        layer = vattn.Attention(4, 64, 0.125, num_kv_heads=2, dtype="float16", device=dev)
        plan = vattn.MetadataBuilder(layer.backend, 4, 2, 64, 16).build(0, md)
        out = layer.forward(q.to(dev), k.to(dev), v.to(dev), cache[0], plan)
        torch.cuda.synchronize()
        outs.append(out.cpu().float())
    assert torch.allclose(outs[0], outs[1], atol=2e-2, rtol=2e-2)
