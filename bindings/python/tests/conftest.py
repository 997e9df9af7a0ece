"""Shared helpers.  A test that reaches a C function the loaded libvattn does
not export yet (MissingFunctionError), or a backend stub that says "not yet
implemented", is reported as skipped with the function's name, never passed."""
import numpy as np
import pytest

import vattn


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    fn = pyfuncitem.obj
    args = {a: pyfuncitem.funcargs[a] for a in pyfuncitem._fixtureinfo.argnames}
    try:
        fn(**args)
    except vattn.MissingFunctionError as e:
        pytest.skip("C function missing: %s" % e.message)
    except vattn.UnsupportedError as e:
        if "not yet implemented" in e.message:
            pytest.skip("C function not implemented yet: %s" % e.message)
        raise
    return True


def ref_attention(q, k_all, v_all, query_pos, key_len, *, scale, causal=True, window=0,
                  soft_cap=0.0, alibi=None, sinks=None):
    """float64 attention of one request.  q [Q, H, D] at absolute positions
    query_pos; k_all/v_all [S, Hkv, D] at positions 0..S-1.  Returns (out, lse)."""
    q = q.astype(np.float64)
    k = k_all[:key_len].astype(np.float64)
    v = v_all[:key_len].astype(np.float64)
    Q, H, D = q.shape
    Hkv = k.shape[1]
    g = H // Hkv
    out = np.zeros((Q, H, D))
    lse = np.full((H, Q), -np.inf)
    j = np.arange(key_len)
    for h in range(H):
        kh, vh = k[:, h // g], v[:, h // g]
        s = (q[:, h] @ kh.T) * scale                     # [Q, S]
        if soft_cap:
            s = soft_cap * np.tanh(s / soft_cap)
        if alibi is not None:
            s = s - alibi[h] * np.abs(query_pos[:, None] - j[None, :])
        mask = np.ones_like(s, dtype=bool)
        if causal:
            mask &= j[None, :] <= query_pos[:, None]
        if window:
            mask &= np.abs(query_pos[:, None] - j[None, :]) < window
        s = np.where(mask, s, -np.inf)
        m = s.max(axis=1, keepdims=True)
        if sinks is not None:
            m = np.maximum(m, sinks[h])
        m = np.where(np.isfinite(m), m, 0.0)
        p = np.exp(s - m)
        denom = p.sum(axis=1, keepdims=True)
        if sinks is not None:
            denom = denom + np.exp(sinks[h] - m)
        out[:, h] = np.where(denom > 0, (p @ vh) / np.where(denom > 0, denom, 1), 0.0)
        lse[h] = np.where(denom[:, 0] > 0, np.log(np.where(denom[:, 0] > 0, denom[:, 0], 1))
                          + m[:, 0], -np.inf)
    return out, lse


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _clean_layout():
    vattn.set_kv_cache_layout(None)
    yield
    vattn.set_kv_cache_layout(None)
