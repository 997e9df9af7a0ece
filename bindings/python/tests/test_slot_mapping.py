"""Slot mapping: v0 rules and the v1 block-table mapping."""
import numpy as np
import pytest

import vattn


def test_v0_start_idx():
    assert vattn.compute_slot_mapping_start_idx(True, 10, 0, 8) == 2
    assert vattn.compute_slot_mapping_start_idx(True, 5, 0, 8) == 0
    assert vattn.compute_slot_mapping_start_idx(False, 10, 0, 8) == 0
    assert vattn.compute_slot_mapping_start_idx(True, 10, 0, None) == 0


def test_v0_compute_docstring_example():
    out = []
    r = vattn.compute_slot_mapping(False, out, 7, 10, 0, 2, 4, {7: [0, 1, 0]})
    assert r is out
    assert out == [-1, -1, 2, 3, 4, 5, 6, 7, 0, 1]
    vattn.compute_slot_mapping(False, out, 7, 6, 4, 0, 4, {7: [3, 5]})   # appends
    assert out[10:] == [20, 21]


def test_v0_profile_run():
    out = [9]
    vattn.compute_slot_mapping(True, out, 0, 5, 0, 0, 16, None)
    assert out == [9, -1, -1, -1, -1, -1]


def test_v0_errors():
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.compute_slot_mapping(False, [], 0, 40, 0, 0, 4, {0: [1]})
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.compute_slot_mapping(False, [], 0, 4, 0, 0, 4, {0: [9]}, num_cache_blocks=4)


def test_v1_compute():
    bt = np.array([[1, 2], [3, 4]], np.int32)
    out = vattn.compute_block_table_slot_mapping(bt, [0, 3, 5], [0, 1, 2, 4, 5], 4)
    np.testing.assert_array_equal(out, [4, 5, 6, 16, 17])
    buf = np.zeros(8, np.int64)
    r = vattn.compute_block_table_slot_mapping(bt, [0, 3, 5], [0, 1, 2, 4, 5], 4, out=buf)
    assert r is buf
    np.testing.assert_array_equal(buf, [4, 5, 6, 16, 17, -1, -1, -1])


def test_v1_context_parallel():
    bt = np.array([[1, 2]], np.int32)
    r0 = vattn.compute_block_table_slot_mapping(bt, [0, 4], [0, 1, 2, 3], 4, cp_world_size=2,
                                                cp_rank=0)
    r1 = vattn.compute_block_table_slot_mapping(bt, [0, 4], [0, 1, 2, 3], 4, cp_world_size=2,
                                                cp_rank=1)
    np.testing.assert_array_equal(r0, [4, -1, 5, -1])
    np.testing.assert_array_equal(r1, [-1, 4, -1, 5])


def test_v1_errors():
    bt = np.array([[1, 2]], np.int32)
    with pytest.raises(vattn.InvalidArgumentError) as ei:
        vattn.compute_block_table_slot_mapping(bt, [0, 1], [4], 4, num_blocks_per_row=[1])
    assert ei.value.message
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.compute_block_table_slot_mapping(bt, [0, 1], [0], 4, num_cache_blocks=1)
    with pytest.raises(vattn.InvalidArgumentError):
        vattn.compute_block_table_slot_mapping(bt, [0, 1], [0], 4,
                                               out=np.zeros(4, np.int32))


def test_block_table_class():
    t = vattn.BlockTable(block_size=4, max_num_reqs=3, max_num_blocks_per_req=4,
                         max_num_batched_tokens=8)
    t.add_row([5, 6], 0)
    t.append_row([7], 0)
    t.add_row([9], 1)
    t.swap_row(0, 1)
    np.testing.assert_array_equal(t.num_blocks_per_row[:2], [1, 3])
    t.move_row(1, 2)
    np.testing.assert_array_equal(t.block_table[2, :3], [5, 6, 7])
    sm = t.compute_slot_mapping(2, np.array([0, 1, 3], np.int32), np.array([2, 8, 9]))
    np.testing.assert_array_equal(sm, [38, 28, 29, -1, -1, -1, -1, -1])
    t.clear_row(1)
    assert t.num_blocks_per_row[1] == 0 and not t.block_table[1].any()
