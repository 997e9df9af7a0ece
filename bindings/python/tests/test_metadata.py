"""CommonAttentionMetadata and the batch utilities (vLLM names and results)."""
import numpy as np
import pytest

import vattn
from vattn import CommonAttentionMetadata


def md_from(query_lens, seq_lens, cols=4, num_actual_tokens=None, **kw):
    qsl = np.concatenate([[0], np.cumsum(query_lens)]).astype(np.int32)
    n = len(query_lens)
    bt = np.arange(n * cols, dtype=np.int32).reshape(n, cols)
    tokens = int(qsl[-1]) if num_actual_tokens is None else num_actual_tokens
    sm = np.full(tokens, -1, dtype=np.int64)
    sm[:int(qsl[-1])] = np.arange(int(qsl[-1]))
    return CommonAttentionMetadata(query_start_loc=qsl, seq_lens=np.array(seq_lens, np.int32),
                                   block_table_tensor=bt, slot_mapping=sm,
                                   num_actual_tokens=num_actual_tokens, **kw)


def test_construct_and_read_back():
    md = md_from([1, 1, 3, 4], [10, 12, 3, 20])
    assert md.num_reqs == 4 and md.batch_size() == 4
    assert md.num_actual_tokens == 9
    assert md.max_query_len == 4 and md.max_seq_len == 20
    assert md.causal is True
    np.testing.assert_array_equal(md.query_start_loc, [0, 1, 2, 5, 9])
    np.testing.assert_array_equal(md.query_start_loc_cpu, [0, 1, 2, 5, 9])
    np.testing.assert_array_equal(md.seq_lens_cpu, [10, 12, 3, 20])
    np.testing.assert_array_equal(md.num_computed_tokens_cpu, [9, 11, 0, 16])
    np.testing.assert_array_equal(md.naive_query_lens(), [1, 1, 3, 4])
    assert md.block_table_tensor.shape == (4, 4) and md.block_table_tensor.dtype == np.int32
    assert md.slot_mapping.dtype == np.int64 and len(md.slot_mapping) == 9
    assert md.query_start_loc.dtype == np.int32
    with pytest.raises(ValueError):
        md.seq_lens[0] = 3           # read-only copies


def test_construct_from_lists_and_vllm_cpu_names():
    md = CommonAttentionMetadata(query_start_loc_cpu=[0, 2, 3], seq_lens_cpu=[5, 1],
                                 block_table_tensor=[[1, 2], [3, 0]], slot_mapping=[4, 5, 12],
                                 num_reqs=2, num_actual_tokens=3, max_query_len=2,
                                 max_seq_len=5, causal=False)
    assert md.causal is False and md.max_query_len == 2
    np.testing.assert_array_equal(md.seq_lens, [5, 1])


def test_padded_buffers_use_num_reqs():
    md = CommonAttentionMetadata(query_start_loc=[0, 1, 2, 2, 2], seq_lens=[4, 5, 0, 0],
                                 block_table_tensor=np.zeros((4, 2), np.int32),
                                 slot_mapping=[1, 2, -1, -1], num_reqs=2, num_actual_tokens=4)
    assert md.num_reqs == 2 and md.num_actual_tokens == 4
    np.testing.assert_array_equal(md.query_start_loc, [0, 1, 2])


def test_invalid_metadata_messages():
    with pytest.raises(vattn.InvalidArgumentError) as ei:
        CommonAttentionMetadata(query_start_loc=[1, 2], seq_lens=[3],
                                block_table_tensor=[[0]], slot_mapping=[0])
    assert "query_start_loc" in ei.value.message
    with pytest.raises(vattn.InvalidArgumentError) as ei:
        CommonAttentionMetadata(query_start_loc=[0, 4], seq_lens=[2],
                                block_table_tensor=[[0]], slot_mapping=[0, 1, 2, 3])
    assert "seq_len" in ei.value.message
    with pytest.raises(vattn.InvalidArgumentError, match="integers"):
        CommonAttentionMetadata(query_start_loc=[0.0, 1.5], seq_lens=[2],
                                block_table_tensor=[[0]], slot_mapping=[0])


def test_unpadded_and_replace():
    md = md_from([2, 4], [5, 6], num_actual_tokens=8)
    assert len(md.slot_mapping) == 8
    u = md.unpadded(6, 2)
    assert u.num_actual_tokens == 6 and len(u.slot_mapping) == 6
    assert u.max_query_len == md.max_query_len
    r = md.replace(causal=False)
    assert r.causal is False and md.causal is True
    np.testing.assert_array_equal(r.seq_lens, md.seq_lens)


def test_split_decodes_and_prefills():
    md = md_from([1, 1, 3, 4], [10, 10, 10, 10])
    assert vattn.split_decodes_and_prefills(md) == (2, 2, 2, 7)
    assert vattn.split_decodes_and_prefills(md, decode_threshold=3) == (3, 1, 5, 4)
    # all decode: the (possibly padded) num_actual_tokens is returned
    assert vattn.split_decodes_and_prefills(md_from([1, 1], [3, 4], num_actual_tokens=4)) == \
        (2, 0, 4, 0)
    assert vattn.split_decodes_and_prefills(md_from([3, 1], [3, 4])) == (0, 2, 0, 4)
    # require_uniform: later short requests still count as prefills
    md = md_from([2, 1, 2, 4], [10, 10, 10, 10])
    assert vattn.split_decodes_and_prefills(md, decode_threshold=4, require_uniform=True) == \
        (1, 3, 2, 7)
    assert vattn.split_decodes_and_prefills(md_from([2, 2], [5, 5]), 2, True) == (2, 0, 4, 0)


def test_split_decodes_prefills_and_extends():
    md = md_from([1, 1, 4, 4], [10, 10, 8, 4])
    assert vattn.split_decodes_prefills_and_extends(md) == (2, 1, 1, 2, 4, 4)
    md = md_from([1, 4, 4], [10, 8, 9])      # no pure prefill: all non-decodes extend
    assert vattn.split_decodes_prefills_and_extends(md) == (1, 2, 0, 1, 8, 0)


def test_reorder_batch():
    # era B: [P, P, D, D] -> [2, 3, 0, 1]
    assert vattn.reorder_batch_to_split_decodes_and_prefills([5, 5, 1, 1], [0, 0, 10, 10]) == \
        [2, 3, 0, 1]
    swaps, modified = vattn.reorder_batch_swaps([5, 5, 1, 1], [0, 0, 10, 10])
    assert modified and 1 <= len(swaps) <= 4
    order = list(range(4))
    for i, j in swaps:
        order[i], order[j] = order[j], order[i]
    assert order == [2, 3, 0, 1]
    assert vattn.reorder_batch_to_split_decodes_and_prefills([1, 3, 4], [5, 5, 0]) == [0, 1, 2]
    assert vattn.reorder_batch_swaps([1, 3, 4], [5, 5, 0]) == ([], False)
    # decode -> extend -> prefill; a new single-token prompt is a prefill
    assert vattn.reorder_batch_to_split_decodes_and_prefills([1, 6, 1], [0, 3, 7]) == [2, 1, 0]
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.reorder_batch_to_split_decodes_and_prefills([1, 2], [0])


def test_make_local_attention_virtual_batches():
    q, s = [4, 10, 5], [6, 17, 9]
    qsl = np.concatenate([[0], np.cumsum(q)]).astype(np.int32)
    bt = (np.arange(3)[:, None] * 100 + np.arange(9)[None, :]).astype(np.int32)
    md = CommonAttentionMetadata(query_start_loc=qsl, seq_lens=s, block_table_tensor=bt,
                                 slot_mapping=np.arange(19))
    loc = vattn.make_local_attention_virtual_batches(4, md, 2)
    assert isinstance(loc, CommonAttentionMetadata)
    assert loc.num_reqs == 8 and loc.num_actual_tokens == 19
    np.testing.assert_array_equal(loc.query_start_loc, [0, 2, 4, 5, 9, 13, 14, 18, 19])
    np.testing.assert_array_equal(loc.seq_lens, [4, 2, 4, 4, 4, 1, 4, 1])
    assert loc.max_query_len == 4 and loc.max_seq_len == 4 and loc.causal
    expected = [[0, 1], [2, 3], [102, 103], [104, 105], [106, 107], [108, 108],
                [202, 203], [204, 205]]
    np.testing.assert_array_equal(loc.block_table_tensor, expected)
    np.testing.assert_array_equal(loc.make_block_table(bt + 1000), np.array(expected) + 1000)
    with pytest.raises(vattn.InvalidArgumentError) as ei:
        vattn.make_local_attention_virtual_batches(6, md, 4)
    assert "divisible" in ei.value.message


def test_slice_query_start_locs():
    out = vattn.slice_query_start_locs(np.array([0, 2, 5, 9, 10], np.int32), slice(1, 3))
    np.testing.assert_array_equal(out, [0, 3, 7])
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.slice_query_start_locs([0, 2, 5], (1, 9))


def test_ubatch_slices_and_split_attn_metadata():
    assert vattn.maybe_create_ubatch_slices(False, [4, 4], 8, 2) == (None, None)
    slices, padded = vattn.maybe_create_ubatch_slices(True, [4, 4, 4, 4], 16, 4, 2, 6)
    assert slices[0] == vattn.UBatchSlice(slice(0, 2), slice(0, 6))
    assert slices[1] == vattn.UBatchSlice(slice(1, 4), slice(6, 16))
    assert padded[1].token_slice.stop == 16 and slices[0].num_tokens == 6
    md = md_from([4, 4, 4, 4], [10, 10, 10, 10])
    a, b = vattn.split_attn_metadata(slices, md)
    np.testing.assert_array_equal(a.query_start_loc, [0, 4, 6])
    np.testing.assert_array_equal(a.seq_lens, [10, 8])     # cut request shortened
    assert a.num_actual_tokens == 6 and a.num_reqs == 2
    np.testing.assert_array_equal(b.query_start_loc, [0, 2, 6, 10])
    np.testing.assert_array_equal(b.seq_lens, [10, 10, 10])
    assert b.num_actual_tokens == 10
    np.testing.assert_array_equal(md.seq_lens, [10, 10, 10, 10])   # input untouched
    even, _ = vattn.maybe_create_ubatch_slices(True, [4, 4, 4, 4], 16, 4)
    assert even[0].token_slice == slice(0, 8) and even[1].request_slice == slice(2, 4)


def test_kv_sharing_fast_prefill():
    md = md_from([3, 2, 4], [3, 2, 4], logits_indices_padded=[2, 4, 8, 0],
                 num_logits_indices=3)
    fp = vattn.make_kv_sharing_fast_prefill_common_attn_metadata(md)
    np.testing.assert_array_equal(fp.query_start_loc, [0, 1, 2, 3])
    assert fp.num_actual_tokens == 3 and fp.max_query_len == 1
    np.testing.assert_array_equal(fp.seq_lens, md.seq_lens)
    dec = md_from([1, 1], [4, 5])
    same = vattn.make_kv_sharing_fast_prefill_common_attn_metadata(dec)
    np.testing.assert_array_equal(same.query_start_loc, dec.query_start_loc)
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.make_kv_sharing_fast_prefill_common_attn_metadata(md_from([3, 2], [3, 2]))


def test_use_cascade_attention():
    args = dict(num_query_heads=32, num_kv_heads=8, use_alibi=False, use_sliding_window=False,
                use_local_attention=False, num_sms=132)
    assert vattn.use_cascade_attention(100, [5] * 10, **args) is False      # short prefix
    assert vattn.use_cascade_attention(512, [5] * 4, **args) is False       # few requests
    assert vattn.use_cascade_attention(512, [5] * 10, **args) is True       # no flash-decoding
    assert vattn.use_cascade_attention(512, [5] * 10, **dict(args, use_alibi=True)) is False
    assert vattn.use_cascade_attention(512, [5] * 10, dcp_world_size=2, **args) is False


def test_reshape_query_for_spec_decode_is_a_view():
    q = np.arange(8 * 2 * 4, dtype=np.float32).reshape(8, 2, 4)
    v = vattn.reshape_query_for_spec_decode(q, 2)
    assert v.shape == (2, 4, 2, 4)
    assert v.__array_interface__["data"][0] == q.__array_interface__["data"][0]
    q[5, 1, 3] = -1.0
    assert v[1, 1, 1, 3] == -1.0
    back = vattn.reshape_attn_output_for_spec_decode(v)
    assert back.shape == (8, 2, 4) and back[5, 1, 3] == -1.0
    assert vattn.reshape_attn_output_for_spec_decode(q).shape == (8, 2, 4)
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.reshape_query_for_spec_decode(q, 3)


def test_split_prefill_chunks():
    assert vattn.split_prefill_chunks([5, 3, 4, 2], 8) == [(0, 2), (2, 4)]
    assert vattn.split_prefill_chunks([5, 3, 4, 2], 8, request_offset=10) == [(10, 12), (12, 14)]
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.split_prefill_chunks([9], 8)


def test_dcp_local_seq_lens():
    np.testing.assert_array_equal(vattn.get_dcp_local_seq_lens([10, 3], 2), [[5, 5], [2, 1]])
    np.testing.assert_array_equal(vattn.get_dcp_local_seq_lens([10, 3], 2, 1), [5, 1])


def test_infer_global_hyperparameters():
    P = vattn.PerLayerParameters
    g = vattn.infer_global_hyperparameters({"a": P(-1, 0.0, 0.125), "b": P(-1, 0.0, 0.125)})
    assert g == P(-1, 0.0, 0.125) and g.has_same_window_lefts and g.has_same_all_params
    g = vattn.infer_global_hyperparameters([P(127, 0.0, 0.125), P(-1, 0.0, 0.125)])
    assert g.window_left == 127 and not g.has_same_window_lefts and not g.has_same_all_params
    with pytest.raises(vattn.InvalidArgumentError) as ei:
        vattn.infer_global_hyperparameters({})
    assert "no attention layers" in ei.value.message
