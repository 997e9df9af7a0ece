//! Batch utilities of header section 8 that go beyond the decode / prefill
//! splits: request reordering, micro-batch (ubatch) slices, chunked-local
//! attention, prefill chunking, decode-context-parallel lengths and the
//! per-layer hyperparameters.

use std::ptr;

use crate::metadata::Metadata;
use crate::{check, sys, to_i64, Error, Result};

// ---------------------------------------------------------------------------
// Reordering
// ---------------------------------------------------------------------------

/// Result of [`reorder_batch_to_split_decodes_and_prefills`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reorder {
    /// The `swap_states(i, j)` calls to apply to the persistent batch, in
    /// order (at most one per request).
    pub swaps: Vec<(usize, usize)>,
    /// `order[i]` = original index of the request that ends in slot `i`.
    pub order: Vec<usize>,
    /// `true` iff anything moved.
    pub modified: bool,
}

/// Era B three-way reorder (vLLM `reorder_batch_to_split_decodes_and_prefills`):
/// decodes (computed tokens > 0 and scheduled tokens `<= decode_threshold`),
/// then extends (computed tokens > 0), then prefills (no computed token),
/// with the minimal number of stable swaps.  `num_scheduled_tokens` and
/// `num_computed_tokens` have one entry per request.
pub fn reorder_batch_to_split_decodes_and_prefills(
    num_scheduled_tokens: &[i32],
    num_computed_tokens: &[i32],
    decode_threshold: i32,
) -> Result<Reorder> {
    let n = num_scheduled_tokens.len();
    if num_computed_tokens.len() != n {
        return Err(Error::invalid_argument(format!(
            "argument 'num_computed_tokens': has {} entries for {} requests",
            num_computed_tokens.len(),
            n
        )));
    }
    let mut swaps = vec![0i64; 2 * n];
    let mut order = vec![0i64; n];
    let mut num_swaps = 0i64;
    let mut modified = 0i32;
    // SAFETY: both inputs have n entries; swaps has the 2 * n the header
    // asks for, order n.
    check(unsafe {
        sys::vattn_reorder_batch_to_split_decodes_and_prefills(
            num_scheduled_tokens.as_ptr(),
            num_computed_tokens.as_ptr(),
            to_i64("num_scheduled_tokens", n)?,
            decode_threshold,
            swaps.as_mut_ptr(),
            &mut num_swaps,
            order.as_mut_ptr(),
            &mut modified,
        )
    })?;
    let k = (num_swaps.max(0) as usize).min(n);
    Ok(Reorder {
        swaps: (0..k).map(|i| (swaps[2 * i] as usize, swaps[2 * i + 1] as usize)).collect(),
        order: order.iter().map(|&o| o as usize).collect(),
        modified: modified != 0,
    })
}

// ---------------------------------------------------------------------------
// Micro-batches
// ---------------------------------------------------------------------------

/// A micro-batch: half-open request and token ranges (`vattn_ubatch_slice_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct UbatchSlice {
    /// First request.
    pub request_start: i64,
    /// One past the last request.
    pub request_stop: i64,
    /// First token.
    pub token_start: i64,
    /// One past the last token.
    pub token_stop: i64,
}

impl UbatchSlice {
    /// Number of requests of the slice.
    pub fn num_reqs(&self) -> i64 {
        (self.request_stop - self.request_start).max(0)
    }

    /// Number of tokens of the slice.
    pub fn num_tokens(&self) -> i64 {
        (self.token_stop - self.token_start).max(0)
    }

    /// `true` when the request or the token range is empty.
    pub fn is_empty(&self) -> bool {
        self.num_reqs() == 0 || self.num_tokens() == 0
    }

    fn to_raw(self) -> sys::vattn_ubatch_slice_t {
        sys::vattn_ubatch_slice_t {
            request_start: self.request_start,
            request_stop: self.request_stop,
            token_start: self.token_start,
            token_stop: self.token_stop,
        }
    }

    fn from_raw(s: &sys::vattn_ubatch_slice_t) -> UbatchSlice {
        UbatchSlice {
            request_start: s.request_start,
            request_stop: s.request_stop,
            token_start: s.token_start,
            token_stop: s.token_stop,
        }
    }
}

/// The slices made by [`ubatch_slices_create`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UbatchSlices {
    /// Slices over the real requests and tokens.
    pub slices: Vec<UbatchSlice>,
    /// The same slices, the last one extended to the padded token and
    /// request counts.
    pub padded: Vec<UbatchSlice>,
}

/// vLLM `maybe_create_ubatch_slices`: `num_ubatches` slices split at token
/// multiples of `split_point` (`None` = `num_tokens_padded / num_ubatches`);
/// a request straddling a split point is in both slices.
pub fn ubatch_slices_create(
    num_scheduled_tokens: &[i32],
    num_tokens_padded: i64,
    num_reqs_padded: i64,
    num_ubatches: i32,
    split_point: Option<i64>,
) -> Result<UbatchSlices> {
    if num_ubatches < 1 {
        return Err(Error::invalid_argument(format!(
            "argument 'num_ubatches' = {} must be positive",
            num_ubatches
        )));
    }
    let k = num_ubatches as usize;
    let mut out = vec![sys::vattn_ubatch_slice_t::default(); k];
    let mut padded = vec![sys::vattn_ubatch_slice_t::default(); k];
    // SAFETY: the input has the length passed; both outputs num_ubatches entries.
    check(unsafe {
        sys::vattn_ubatch_slices_create(
            num_scheduled_tokens.as_ptr(),
            to_i64("num_scheduled_tokens", num_scheduled_tokens.len())?,
            num_tokens_padded,
            num_reqs_padded,
            num_ubatches,
            split_point.unwrap_or(0),
            out.as_mut_ptr(),
            padded.as_mut_ptr(),
        )
    })?;
    Ok(UbatchSlices {
        slices: out.iter().map(UbatchSlice::from_raw).collect(),
        padded: padded.iter().map(UbatchSlice::from_raw).collect(),
    })
}

/// vLLM `split_attn_metadata`: the metadata of every slice (`md` is left
/// as it is).
pub fn split_attn_metadata(slices: &[UbatchSlice], md: &Metadata) -> Result<Vec<Metadata>> {
    let raw: Vec<sys::vattn_ubatch_slice_t> = slices.iter().map(|s| s.to_raw()).collect();
    let mut out: Vec<*mut sys::vattn_metadata_t> = vec![ptr::null_mut(); slices.len()];
    // SAFETY: slices and out have num_slices entries; on failure the library
    // leaves no handle in out.
    check(unsafe { sys::vattn_split_attn_metadata(raw.as_ptr(), raw.len(), md.as_ptr(), out.as_mut_ptr()) })?;
    // Take ownership of every handle first, so none leaks if one is NULL.
    let owned: Vec<Option<Metadata>> = out.into_iter().map(Metadata::own).collect();
    owned
        .into_iter()
        .map(|m| m.ok_or_else(|| Error::internal("the library returned success and a NULL handle")))
        .collect()
}

/// `query_start_loc[request_start ..= request_stop] - query_start_loc[request_start]`
/// (vLLM `slice_query_start_locs`).
pub fn slice_query_start_locs(
    query_start_loc: &[i32],
    request_start: usize,
    request_stop: usize,
) -> Result<Vec<i32>> {
    if request_stop < request_start || request_stop >= query_start_loc.len() {
        return Err(Error::invalid_argument(format!(
            "arguments 'request_start' = {} / 'request_stop' = {}: not a request range of a \
             query_start_loc of {} entries",
            request_start,
            request_stop,
            query_start_loc.len()
        )));
    }
    let mut out = vec![0i32; request_stop - request_start + 1];
    // SAFETY: out has stop - start + 1 entries; the input its own length.
    check(unsafe {
        sys::vattn_slice_query_start_locs(
            query_start_loc.as_ptr(),
            to_i64("query_start_loc", query_start_loc.len())?,
            to_i64("request_start", request_start)?,
            to_i64("request_stop", request_stop)?,
            out.as_mut_ptr(),
        )
    })?;
    Ok(out)
}

// ---------------------------------------------------------------------------
// Chunked-local attention
// ---------------------------------------------------------------------------

impl Metadata {
    /// On metadata made by [`Metadata::local_attention_virtual_batches`]:
    /// re-gathers the local block table from `block_table` (row-major, `cols`
    /// columns, the same shape as the original table; vLLM's
    /// `make_block_table` closure).  Returns `num_reqs * C` entries, `C` being
    /// this metadata's `block_table_cols`.
    pub fn local_attention_update_block_table(&self, block_table: &[i32], cols: usize) -> Result<Vec<i32>> {
        if cols == 0 || block_table.len() % cols != 0 {
            return Err(Error::invalid_argument(format!(
                "argument 'block_table': {} entries is not a whole number of rows of {}",
                block_table.len(),
                cols
            )));
        }
        let d = self.describe()?;
        let n = d.seq_lens.len().checked_mul(d.block_table_cols).ok_or_else(|| {
            Error::invalid_argument("the local block table is too large")
        })?;
        let mut out = vec![0i32; n];
        // SAFETY: block_table has rows * cols entries, out n.
        check(unsafe {
            sys::vattn_local_attention_update_block_table(
                self.as_ptr(),
                block_table.as_ptr(),
                to_i64("block_table", block_table.len() / cols)?,
                to_i64("cols", cols)?,
                out.as_mut_ptr(),
                to_i64("out", n)?,
            )
        })?;
        Ok(out)
    }

    /// [`split_attn_metadata`] as a method.
    pub fn split_ubatches(&self, slices: &[UbatchSlice]) -> Result<Vec<Metadata>> {
        split_attn_metadata(slices, self)
    }
}

// ---------------------------------------------------------------------------
// Prefill chunks, DCP lengths, hyperparameters
// ---------------------------------------------------------------------------

/// vLLM `split_prefill_chunks`: greedy packing of consecutive requests into
/// chunks whose `seq_lens` sum is `<= workspace_size`; returns half-open
/// `(start, end)` request ranges offset by `request_offset`.
pub fn split_prefill_chunks(
    seq_lens: &[i32],
    workspace_size: i64,
    request_offset: i64,
) -> Result<Vec<(i64, i64)>> {
    let n = seq_lens.len();
    // At most one chunk per request (and room for one when n == 0).
    let cap = n.max(1);
    let mut out = vec![0i64; 2 * cap];
    let mut num = 0i64;
    // SAFETY: out holds cap pairs.
    check(unsafe {
        sys::vattn_split_prefill_chunks(
            seq_lens.as_ptr(),
            to_i64("seq_lens", n)?,
            workspace_size,
            request_offset,
            out.as_mut_ptr(),
            to_i64("out", cap)?,
            &mut num,
        )
    })?;
    let k = (num.max(0) as usize).min(cap);
    Ok((0..k).map(|i| (out[2 * i], out[2 * i + 1])).collect())
}

/// vLLM `get_dcp_local_seq_lens`: the part of every sequence that decode
/// context parallel rank `dcp_rank` holds (`[num_reqs]`), or with `None`
/// every rank's (`[num_reqs * dcp_size]`, row-major: request `i`, rank `r`
/// at `i * dcp_size + r`).
pub fn get_dcp_local_seq_lens(
    seq_lens: &[i32],
    dcp_size: i32,
    dcp_rank: Option<i32>,
    interleave: i32,
) -> Result<Vec<i32>> {
    if dcp_size < 1 {
        return Err(Error::invalid_argument(format!("argument 'dcp_size' = {} must be positive", dcp_size)));
    }
    if let Some(r) = dcp_rank {
        if r < 0 {
            return Err(Error::invalid_argument(format!(
                "argument 'dcp_rank' = {} is negative (None = every rank)",
                r
            )));
        }
    }
    let n = seq_lens.len();
    let len = match dcp_rank {
        Some(_) => n,
        None => n.checked_mul(dcp_size as usize).ok_or_else(|| Error::invalid_argument("too many requests"))?,
    };
    let mut out = vec![0i32; len.max(1)];
    // SAFETY: out has the length the header specifies for this rank argument.
    check(unsafe {
        sys::vattn_get_dcp_local_seq_lens(
            seq_lens.as_ptr(),
            to_i64("seq_lens", n)?,
            dcp_size,
            dcp_rank.unwrap_or(-1),
            interleave,
            out.as_mut_ptr(),
        )
    })?;
    out.truncate(len);
    Ok(out)
}

/// Attention hyperparameters of one layer (`vattn_per_layer_params_t`, vLLM
/// `PerLayerParameters`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerLayerParams {
    /// `sliding_window - 1`, or -1 for none.
    pub window_left: i32,
    /// Logits soft cap; 0 = none.
    pub logits_soft_cap: f32,
    /// Softmax scale.
    pub sm_scale: f32,
    /// The layer has attention sinks.
    pub has_sinks: bool,
}

impl PerLayerParams {
    fn to_raw(self) -> sys::vattn_per_layer_params_t {
        sys::vattn_per_layer_params_t {
            window_left: self.window_left,
            logits_soft_cap: self.logits_soft_cap,
            sm_scale: self.sm_scale,
            has_sinks: self.has_sinks as i32,
        }
    }
}

/// Result of [`infer_global_hyperparameters`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GlobalParams {
    /// The first layer's parameters.
    pub params: PerLayerParams,
    /// Every layer has the same `window_left`.
    pub has_same_window_lefts: bool,
    /// Every layer has the same parameters.
    pub has_same_all_params: bool,
}

/// vLLM `infer_global_hyperparameters` (era B/C): never fails on a mismatch,
/// reports it in the flags; an empty `layers` is
/// [`crate::Status::INVALID_ARGUMENT`].
pub fn infer_global_hyperparameters(layers: &[PerLayerParams]) -> Result<GlobalParams> {
    let raw: Vec<sys::vattn_per_layer_params_t> = layers.iter().map(|l| l.to_raw()).collect();
    let mut g = sys::vattn_global_params_t::default();
    // SAFETY: raw has num_layers entries; valid out pointer.
    check(unsafe { sys::vattn_infer_global_hyperparameters(raw.as_ptr(), raw.len(), &mut g) })?;
    Ok(GlobalParams {
        params: PerLayerParams {
            window_left: g.params.window_left,
            logits_soft_cap: g.params.logits_soft_cap,
            sm_scale: g.params.sm_scale,
            has_sinks: g.params.has_sinks != 0,
        },
        has_same_window_lefts: g.has_same_window_lefts != 0,
        has_same_all_params: g.has_same_all_params != 0,
    })
}
