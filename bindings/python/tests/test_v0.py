"""v0 metadata: builder, helpers, CUDA-graph state."""
import numpy as np
import pytest

import vattn


def test_v0_builder_prefill_and_decode():
    b = vattn.V0MetadataBuilder(block_size=4, max_blocks_per_seq=4)
    b.add_seq(True, token_len=6, seq_len=6, query_len=6, context_len=0, block_table=[2, 3])
    b.add_seq(False, token_len=1, seq_len=9, query_len=1, context_len=8,
              block_table=[5, 6, 7])
    md = b.build([6, 9], [6, 1], -1, 2)
    assert (md.num_prefills, md.num_prefill_tokens, md.num_decode_tokens) == (1, 6, 1)
    np.testing.assert_array_equal(md.slot_mapping, [8, 9, 10, 11, 12, 13, 28])
    np.testing.assert_array_equal(md.seq_lens, [6, 9])
    assert md.max_prefill_seq_len == 6 and md.max_decode_seq_len == 9
    assert md.block_tables.shape[0] == 2
    assert vattn.get_num_prefill_decode_query_kv_tokens(md, "decoder") == (6, 6, 1)
    seq_lens, max_len, table = vattn.get_seq_len_block_table_args(md, False, "decoder")
    assert max_len == 9 and table is not None


def test_v0_metadata_roundtrip_and_errors():
    md = vattn.V0AttentionMetadata(num_prefills=0, num_prefill_tokens=0, num_decode_tokens=2,
                                   slot_mapping=[4, 9], seq_lens=[5, 10],
                                   block_tables=[[1, 0, 0], [2, 3, 0]], max_decode_seq_len=10)
    np.testing.assert_array_equal(md.slot_mapping, [4, 9])
    assert md.num_decode_tokens == 2 and md.num_decodes == 2
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.V0AttentionMetadata(num_prefills=3, num_prefill_tokens=0, num_decode_tokens=2,
                                  slot_mapping=[4, 9], seq_lens=[5, 10], block_tables=None)


def test_graph_state():
    st = vattn.CommonAttentionState(max_batch_size=4, max_blocks_per_seq=3)
    cap = st.graph_capture_get_metadata_for_batch(2)
    np.testing.assert_array_equal(cap.slot_mapping, [-1, -1])
    real = vattn.V0AttentionMetadata(num_prefills=0, num_prefill_tokens=0, num_decode_tokens=2,
                                     slot_mapping=[4, 9], seq_lens=[5, 10],
                                     block_tables=[[1, 0, 0], [2, 3, 0]],
                                     max_decode_seq_len=10)
    st.prepare_graph_input_buffers(real)
    again = st.graph_capture_get_metadata_for_batch(2)
    np.testing.assert_array_equal(again.slot_mapping, [4, 9])
    with pytest.raises(vattn.InvalidArgumentError):
        st.graph_capture_get_metadata_for_batch(5)
