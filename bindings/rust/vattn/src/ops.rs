//! Slot mapping and cache / merge operations on host or device tensors.

use std::os::raw::c_void;
use std::ptr;

use crate::{check, check_len, sys, to_i64, AsDlTensor, AsDlTensorMut, Error, KvCacheDtype, Result};

/// Inputs of [`compute_slot_mapping`] (v1: token position -> cache slot
/// through a block table).
#[derive(Clone, Copy, Debug)]
pub struct SlotMappingArgs<'a> {
    /// Row-major `[rows, row_stride]` block ids.
    pub block_table: &'a [i32],
    /// Columns of `block_table` (max blocks per request).
    pub row_stride: usize,
    /// Optional `[rows]`: valid entries per row (else `row_stride`).
    pub num_blocks_per_row: Option<&'a [i32]>,
    /// `[num_reqs + 1]` query start offsets.
    pub query_start_loc: &'a [i32],
    /// Absolute position of every token (`query_start_loc[num_reqs]` of them).
    pub positions: &'a [i64],
    /// Cache block size.
    pub block_size: i32,
    /// Block ids must be in `[0, num_cache_blocks)`.
    pub num_cache_blocks: i64,
    /// Context-parallel world size (1 = none).
    pub cp_world_size: i32,
    /// Context-parallel rank.
    pub cp_rank: i32,
    /// Context-parallel interleave.
    pub cp_interleave: i32,
}

impl Default for SlotMappingArgs<'_> {
    fn default() -> Self {
        let mut a = sys::vattn_slot_mapping_args_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_slot_mapping_args_init(&mut a) };
        SlotMappingArgs {
            block_table: &[],
            row_stride: 0,
            num_blocks_per_row: None,
            query_start_loc: &[0],
            positions: &[],
            block_size: a.block_size,
            num_cache_blocks: a.num_cache_blocks,
            cp_world_size: a.cp_world_size,
            cp_rank: a.cp_rank,
            cp_interleave: a.cp_interleave,
        }
    }
}

/// Writes the slot of every token into `slot_mapping[..num_tokens]` and
/// pads the rest with [`crate::PAD_SLOT_ID`].  Nothing is written on error.
pub fn compute_slot_mapping(args: &SlotMappingArgs<'_>, slot_mapping: &mut [i64]) -> Result<()> {
    if args.query_start_loc.is_empty() {
        return Err(Error::invalid_argument("argument 'query_start_loc': is empty"));
    }
    let num_reqs = args.query_start_loc.len() - 1;
    let rows = if args.row_stride == 0 { 0 } else { args.block_table.len() / args.row_stride };
    if args.row_stride != 0 && args.block_table.len() % args.row_stride != 0 {
        return Err(Error::invalid_argument("argument 'block_table': not a whole number of rows"));
    }
    let mut a = sys::vattn_slot_mapping_args_t::default();
    // SAFETY: valid pointer.
    unsafe { sys::vattn_slot_mapping_args_init(&mut a) };
    a.block_table = args.block_table.as_ptr();
    a.num_rows = to_i64("block_table", rows)?;
    a.row_stride = to_i64("row_stride", args.row_stride)?;
    a.num_blocks_per_row = match args.num_blocks_per_row {
        Some(n) => {
            check_len("num_blocks_per_row", n.len(), rows)?;
            n.as_ptr()
        }
        None => ptr::null(),
    };
    a.query_start_loc = args.query_start_loc.as_ptr();
    a.num_reqs = to_i64("query_start_loc", num_reqs)?;
    a.positions = args.positions.as_ptr();
    a.num_tokens = to_i64("positions", args.positions.len())?;
    a.block_size = args.block_size;
    a.num_cache_blocks = args.num_cache_blocks;
    a.cp_world_size = args.cp_world_size;
    a.cp_rank = args.cp_rank;
    a.cp_interleave = args.cp_interleave;
    // SAFETY: every array covers what its count says; the output has
    // slot_mapping.len() entries.
    check(unsafe {
        sys::vattn_slot_mapping_compute(
            &a,
            slot_mapping.as_mut_ptr(),
            to_i64("slot_mapping", slot_mapping.len())?,
        )
    })
}

/// `reshape_and_cache_flash`: writes `key` / `value` `[T', H, D]` into
/// `kv_cache` at `slot_mapping[i]` (int64 `[T]` on the cache's device);
/// slot -1 is skipped.  Runs on the default stream.
pub fn reshape_and_cache(
    key: &dyn AsDlTensor,
    value: &dyn AsDlTensor,
    kv_cache: &mut dyn AsDlTensorMut,
    slot_mapping: &dyn AsDlTensor,
    kv_cache_dtype: KvCacheDtype,
    k_scale: f32,
    v_scale: f32,
) -> Result<()> {
    // SAFETY: the tensors are borrowed for the call; NULL stream.
    check(unsafe {
        sys::vattn_reshape_and_cache(
            key.as_dl_tensor(),
            value.as_dl_tensor(),
            kv_cache.as_dl_tensor_mut(),
            slot_mapping.as_dl_tensor(),
            kv_cache_dtype.0,
            k_scale,
            v_scale,
            ptr::null_mut(),
        )
    })
}

/// `merge_attn_states`: `output[T, H, D]` = softmax-weighted merge of a
/// prefix and a suffix partial result with float32 LSEs `[H, T]`.
pub fn merge_attn_states(
    output: &mut dyn AsDlTensorMut,
    output_lse: Option<&mut dyn AsDlTensorMut>,
    prefix_output: &dyn AsDlTensor,
    prefix_lse: &dyn AsDlTensor,
    suffix_output: &dyn AsDlTensor,
    suffix_lse: &dyn AsDlTensor,
) -> Result<()> {
    let lse = output_lse.map_or(ptr::null_mut(), |t| t.as_dl_tensor_mut());
    // SAFETY: the tensors are borrowed for the call; NULL stream.
    check(unsafe {
        sys::vattn_merge_attn_states(
            output.as_dl_tensor_mut(),
            lse,
            prefix_output.as_dl_tensor(),
            prefix_lse.as_dl_tensor(),
            suffix_output.as_dl_tensor(),
            suffix_lse.as_dl_tensor(),
            ptr::null_mut(),
        )
    })
}

fn mapping_len(block_mapping: &[[i64; 2]]) -> usize {
    block_mapping.len()
}

/// `copy_blocks`: for every cache of `kv_caches` (one per layer, logical
/// 5-D) and every `[src, dst]` pair of `block_mapping`, copies block `src`
/// to block `dst` in K and V.  Runs on the default stream.  For all layers
/// of a [`crate::KvCache`] use [`crate::KvCache::copy_blocks`].
pub fn copy_blocks(kv_caches: &mut [&mut dyn AsDlTensorMut], block_mapping: &[[i64; 2]]) -> Result<()> {
    // SAFETY: the NULL stream is always valid.
    unsafe { copy_blocks_on_stream(kv_caches, block_mapping, ptr::null_mut()) }
}

/// [`copy_blocks`] with the copies issued on `stream`: a `cudaStream_t`, or
/// NULL for the default stream.  CPU caches ignore the stream (the copy is
/// done when this returns); on CUDA the copy is asynchronous on `stream`.
///
/// # Safety
/// `stream` must be NULL or a live `cudaStream_t` of the caches' device.
pub unsafe fn copy_blocks_on_stream(
    kv_caches: &mut [&mut dyn AsDlTensorMut],
    block_mapping: &[[i64; 2]],
    stream: *mut c_void,
) -> Result<()> {
    let ptrs: Vec<*mut sys::DLTensor> = kv_caches.iter_mut().map(|t| t.as_dl_tensor_mut()).collect();
    copy_blocks_raw(&ptrs, block_mapping, stream)
}

/// copy_blocks over raw tensors that the caller holds borrowed, on `stream`
/// (NULL or a live `cudaStream_t`, which the caller vouches for).
pub(crate) fn copy_blocks_raw(
    ptrs: &[*mut sys::DLTensor],
    block_mapping: &[[i64; 2]],
    stream: *mut c_void,
) -> Result<()> {
    // SAFETY: every tensor is borrowed (exclusively) by the caller for the
    // call; the mapping is num_pairs contiguous [src, dst] pairs; the
    // caller guarantees the stream.
    check(unsafe {
        sys::vattn_copy_blocks(
            ptrs.as_ptr(),
            ptrs.len(),
            block_mapping.as_ptr() as *const i64,
            mapping_len(block_mapping),
            stream,
        )
    })
}

/// `swap_blocks`: copies whole blocks `[src_block, dst_block]` from `src`
/// to `dst`, two caches of the same shape (CPU<->CPU here; CPU<->CUDA and
/// CUDA<->CUDA on the default stream).
pub fn swap_blocks(src: &dyn AsDlTensor, dst: &mut dyn AsDlTensorMut, block_mapping: &[[i64; 2]]) -> Result<()> {
    // SAFETY: the NULL stream is always valid.
    unsafe { swap_blocks_on_stream(src, dst, block_mapping, ptr::null_mut()) }
}

/// [`swap_blocks`] with the copies issued on `stream`: a `cudaStream_t`, or
/// NULL for the default stream.  CPU<->CPU swaps ignore the stream (the
/// copy is done when this returns); when a GPU is involved the copy is
/// asynchronous on `stream` (the host side should be pinned for overlap).
///
/// # Safety
/// `stream` must be NULL or a live `cudaStream_t` of the CUDA cache's device.
pub unsafe fn swap_blocks_on_stream(
    src: &dyn AsDlTensor,
    dst: &mut dyn AsDlTensorMut,
    block_mapping: &[[i64; 2]],
    stream: *mut c_void,
) -> Result<()> {
    // The tensors are borrowed for the call; the mapping is num_pairs
    // contiguous pairs; the caller guarantees the stream.
    check(sys::vattn_swap_blocks(
        src.as_dl_tensor(),
        dst.as_dl_tensor_mut(),
        block_mapping.as_ptr() as *const i64,
        mapping_len(block_mapping),
        stream,
    ))
}
