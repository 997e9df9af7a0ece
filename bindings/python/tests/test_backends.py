"""Registry, selector, KV cache shape / stride order, layout."""
import pytest

import vattn


def test_registry():
    bs = vattn.backends()
    assert len(bs) == vattn.backend_count() >= 1
    names = [b.name for b in bs]
    assert "CPU" in names                  # always built
    assert vattn.get_backend(names.index("CPU")) == vattn.get_backend("CPU")
    assert vattn.get_backend(0) == bs[0]
    assert vattn.get_backend("cpu") == vattn.get_backend("CPU")


def test_backend_info():
    b = vattn.get_backend("CPU")
    assert b.get_name() == "CPU"
    assert b.device_type == vattn.lib.kDLCPU
    assert isinstance(b.cudagraph_support, vattn.AttentionCGSupport)
    assert "float32" in b.supported_dtypes
    assert "decoder" in b.supported_attn_types
    assert b.supports_head_size(64) and not b.supports_head_size(7)
    assert b.supports_block_size(16)
    assert 64 in b.get_supported_head_sizes()
    assert "lse_output" in b.features


def test_not_found():
    with pytest.raises(vattn.NotFoundError) as ei:
        vattn.get_backend("FLASH_ATTN_9000")
    assert "FLASH_ATTN_9000" in ei.value.message
    with pytest.raises(vattn.NotFoundError):
        vattn.get_backend(10_000)


def test_kv_cache_shape():
    b = vattn.get_backend("CPU")
    assert b.get_kv_cache_shape(100, 16, 4, 64) == (2, 100, 16, 4, 64)
    assert vattn.get_kv_cache_shape("CPU", 7, 32, 1, 128) == (2, 7, 32, 1, 128)
    with pytest.raises(vattn.UnsupportedError, match="MLA"):   # the CPU backend has no MLA
        b.get_kv_cache_shape(10, 16, 1, 576, use_mla=True)


def test_stride_order():
    b = vattn.get_backend("CPU")
    assert b.get_kv_cache_stride_order(layout="NHD") == (0, 1, 2, 3, 4)
    assert b.get_kv_cache_stride_order(layout="HND") == (0, 1, 3, 2, 4)
    assert b.get_kv_cache_stride_order(True, "NHD") == (2, 0, 1, 3, 4, 5)
    assert vattn.get_kv_cache_stride_order("CPU", True, "HND") == (2, 4, 0, 1, 3, 5)
    with pytest.raises(vattn.InvalidArgumentError):
        b.get_kv_cache_stride_order(layout=7)
    with pytest.raises(vattn.InvalidArgumentError, match="NHD"):
        b.get_kv_cache_stride_order(layout="XYZ")


def test_layout_override_takes_effect_at_once(monkeypatch):
    monkeypatch.delenv("VATTN_KV_CACHE_LAYOUT", raising=False)
    assert vattn.get_kv_cache_layout() == "NHD"
    vattn.set_kv_cache_layout("HND")
    assert vattn.get_kv_cache_layout() == "HND"
    assert vattn.get_backend("CPU").get_kv_cache_stride_order() == (0, 1, 3, 2, 4)
    vattn.set_kv_cache_layout(None)
    assert vattn.get_kv_cache_layout() == "NHD"


def test_layout_from_env(monkeypatch):
    monkeypatch.setenv("VATTN_KV_CACHE_LAYOUT", "HND")
    assert vattn.get_kv_cache_layout() == "HND"
    vattn.set_kv_cache_layout("NHD")
    assert vattn.get_kv_cache_layout() == "NHD"


def test_get_attn_backend_selects_cpu():
    b = vattn.get_attn_backend(64, "float32", "auto", 16, device="cpu")
    assert b.name == "CPU"
    b = vattn.get_attn_backend(head_size=128, dtype="bfloat16", kv_cache_dtype="fp8",
                               block_size=16, use_mla=False, has_sink=True, device="cpu")
    assert b.name == "CPU"
    import numpy as np
    assert vattn.get_attn_backend(64, np.float16, device="cpu").name == "CPU"


def test_get_attn_backend_unsupported_lists_reasons():
    with pytest.raises(vattn.UnsupportedError) as ei:
        vattn.get_attn_backend(7, "float32", device="cpu")
    assert "CPU" in ei.value.message
    assert ei.value.status == vattn.lib.VATTN_ERR_UNSUPPORTED


def test_get_attn_backend_forced_by_env(monkeypatch):
    monkeypatch.setenv("VATTN_ATTENTION_BACKEND", "nosuch")
    with pytest.raises(vattn.VattnError) as ei:
        vattn.get_attn_backend(64, "float32", device="cpu")
    assert "nosuch" in ei.value.message
    monkeypatch.setenv("VATTN_ATTENTION_BACKEND", "cpu")
    assert vattn.get_attn_backend(64, "float32", device="cpu").name == "CPU"


def test_bad_enum_values():
    with pytest.raises(vattn.InvalidArgumentError, match="attn_type"):
        vattn.get_attn_backend(64, "float32", attn_type="sideways")
    with pytest.raises(vattn.InvalidArgumentError, match="kv_cache_dtype"):
        vattn.get_attn_backend(64, "float32", kv_cache_dtype="int3")
    with pytest.raises(vattn.InvalidArgumentError, match="device"):
        vattn.get_attn_backend(64, "float32", device="tpu")
