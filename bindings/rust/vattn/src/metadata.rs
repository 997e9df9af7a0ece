//! CommonAttentionMetadata and the batch utilities over it.

use std::ptr::{self, NonNull};

use crate::{check, check_len, ensure_version, sys, to_i64, Error, Result, Status};

/// Host arrays describing one batch (`vattn_metadata_desc_t`).
///
/// Array lengths come from the slices: `num_reqs` is `seq_lens.len()`,
/// `query_start_loc` must have `num_reqs + 1` entries, the block table is
/// `block_table.len() / block_table_cols` rows.  Everything else is checked
/// by the library.  [`Metadata::new`] copies the arrays;
/// [`Metadata::describe`] returns one that borrows the handle.
#[derive(Clone, Copy, Debug)]
pub struct MetadataDesc<'a> {
    /// `[num_reqs + 1]`, 0-based, non-decreasing.
    pub query_start_loc: &'a [i32],
    /// `[num_reqs]`, each `>=` its query length.
    pub seq_lens: &'a [i32],
    /// Optional `[num_reqs]`; `None` = `seq_lens - query_lens`.
    pub num_computed_tokens: Option<&'a [i32]>,
    /// Row-major `[rows, block_table_cols]` block ids, `rows >= num_reqs`.
    pub block_table: &'a [i32],
    /// Max blocks per request (columns of `block_table`).
    pub block_table_cols: usize,
    /// Cache slot of every token; padding entries are -1.
    pub slot_mapping: &'a [i64],
    /// Tokens including CUDA-graph padding; `None` = `query_start_loc[num_reqs]`.
    pub num_actual_tokens: Option<i64>,
    /// Causal attention.
    pub causal: bool,
    /// `None` = computed.
    pub max_query_len: Option<i32>,
    /// `None` = computed (may be an upper bound).
    pub max_seq_len: Option<i32>,
    /// Cache block size; 0 = unknown.
    pub block_size: i32,
    /// Cache blocks (block ids must be below it); 0 = unchecked.
    pub num_cache_blocks: i64,
    /// Optional `[num_reqs]` encoder lengths (cross-attention).
    pub encoder_seq_lens: Option<&'a [i32]>,
    /// Optional padded logits indices.
    pub logits_indices_padded: Option<&'a [i32]>,
    /// Number of real logits indices.
    pub num_logits_indices: i64,
    /// Optional `[num_reqs]` decode-context-parallel local lengths.
    pub dcp_local_seq_lens: Option<&'a [i32]>,
}

impl Default for MetadataDesc<'_> {
    fn default() -> Self {
        MetadataDesc {
            query_start_loc: &[],
            seq_lens: &[],
            num_computed_tokens: None,
            block_table: &[],
            block_table_cols: 0,
            slot_mapping: &[],
            num_actual_tokens: None,
            causal: true,
            max_query_len: None,
            max_seq_len: None,
            block_size: 0,
            num_cache_blocks: 0,
            encoder_seq_lens: None,
            logits_indices_padded: None,
            num_logits_indices: 0,
            dcp_local_seq_lens: None,
        }
    }
}

fn opt_ptr(what: &str, s: Option<&[i32]>, need: usize) -> Result<*const i32> {
    match s {
        None => Ok(ptr::null()),
        Some(s) => {
            check_len(what, s.len(), need)?;
            Ok(s.as_ptr())
        }
    }
}

impl MetadataDesc<'_> {
    /// Number of requests (`seq_lens.len()`).
    pub fn num_reqs(&self) -> usize {
        self.seq_lens.len()
    }

    fn to_raw(&self) -> Result<sys::vattn_metadata_desc_t> {
        let n = self.seq_lens.len();
        if self.query_start_loc.len() != n + 1 {
            return Err(Error::invalid_argument(format!(
                "argument 'query_start_loc': has {} entries, expected num_reqs + 1 = {} \
                 (num_reqs = seq_lens.len())",
                self.query_start_loc.len(),
                n + 1
            )));
        }
        let rows = if self.block_table_cols == 0 {
            if !self.block_table.is_empty() {
                return Err(Error::invalid_argument(
                    "argument 'block_table_cols': is 0 but block_table is not empty",
                ));
            }
            0
        } else {
            if self.block_table.len() % self.block_table_cols != 0 {
                return Err(Error::invalid_argument(format!(
                    "argument 'block_table': {} entries is not a whole number of rows of {}",
                    self.block_table.len(),
                    self.block_table_cols
                )));
            }
            self.block_table.len() / self.block_table_cols
        };
        let mut d = sys::vattn_metadata_desc_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_metadata_desc_init(&mut d) };
        d.num_reqs = to_i64("seq_lens", n)?;
        d.num_actual_tokens = match self.num_actual_tokens {
            Some(t) => t,
            None => self.query_start_loc[n] as i64,
        };
        d.query_start_loc = self.query_start_loc.as_ptr();
        d.seq_lens = self.seq_lens.as_ptr();
        d.num_computed_tokens = opt_ptr("num_computed_tokens", self.num_computed_tokens, n)?;
        d.block_table = self.block_table.as_ptr();
        d.block_table_rows = to_i64("block_table", rows)?;
        d.block_table_cols = to_i64("block_table_cols", self.block_table_cols)?;
        d.slot_mapping = self.slot_mapping.as_ptr();
        d.slot_mapping_len = to_i64("slot_mapping", self.slot_mapping.len())?;
        d.causal = self.causal as i32;
        d.max_query_len = self.max_query_len.unwrap_or(-1);
        d.max_seq_len = self.max_seq_len.unwrap_or(-1);
        d.block_size = self.block_size;
        d.num_cache_blocks = self.num_cache_blocks;
        d.encoder_seq_lens = opt_ptr("encoder_seq_lens", self.encoder_seq_lens, n)?;
        match self.logits_indices_padded {
            Some(l) => {
                d.logits_indices_padded = l.as_ptr();
                d.logits_indices_len = to_i64("logits_indices_padded", l.len())?;
            }
            None => {
                d.logits_indices_padded = ptr::null();
                d.logits_indices_len = 0;
            }
        }
        d.num_logits_indices = self.num_logits_indices;
        d.dcp_local_seq_lens = opt_ptr("dcp_local_seq_lens", self.dcp_local_seq_lens, n)?;
        Ok(d)
    }
}

/// Batch metadata (vLLM `CommonAttentionMetadata`): an immutable,
/// validated copy of a batch's host arrays.
pub struct Metadata {
    raw: NonNull<sys::vattn_metadata_t>,
}

// SAFETY: every function on a metadata handle takes it `const` (safe to call
// concurrently per the header); the handle is not tied to a thread.
unsafe impl Send for Metadata {}
unsafe impl Sync for Metadata {}

impl Drop for Metadata {
    fn drop(&mut self) {
        // SAFETY: owned handle, destroyed once.
        unsafe { sys::vattn_metadata_destroy(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Metadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.describe() {
            Ok(d) => f.debug_tuple("Metadata").field(&d).finish(),
            Err(_) => write!(f, "Metadata({:p})", self.raw),
        }
    }
}

fn slice_or_empty<'a, T>(p: *const T, n: i64) -> &'a [T] {
    if p.is_null() || n <= 0 {
        &[]
    } else {
        // SAFETY: the caller names an array of the handle with n entries.
        unsafe { std::slice::from_raw_parts(p, n as usize) }
    }
}

fn opt_slice<'a, T>(p: *const T, n: i64) -> Option<&'a [T]> {
    if p.is_null() {
        None
    } else {
        Some(slice_or_empty(p, n))
    }
}

impl Metadata {
    /// Validates every invariant of `desc` and copies its arrays.
    pub fn new(desc: &MetadataDesc<'_>) -> Result<Metadata> {
        ensure_version()?;
        let d = desc.to_raw()?;
        let mut out = ptr::null_mut();
        // SAFETY: every array pointer in d covers the length the library
        // reads (checked by to_raw).
        check(unsafe { sys::vattn_metadata_create(&mut out, &d) })?;
        Metadata::from_raw(out)
    }

    /// Takes ownership of a handle the library returned (None for NULL).
    pub(crate) fn own(p: *mut sys::vattn_metadata_t) -> Option<Metadata> {
        NonNull::new(p).map(|raw| Metadata { raw })
    }

    fn from_raw(p: *mut sys::vattn_metadata_t) -> Result<Metadata> {
        NonNull::new(p).map(|raw| Metadata { raw }).ok_or_else(|| Error {
            status: Status::INTERNAL,
            message: "the library returned success and a NULL handle".into(),
        })
    }

    /// The raw handle (for `vattn-sys` calls).
    pub fn as_ptr(&self) -> *const sys::vattn_metadata_t {
        self.raw.as_ptr()
    }

    /// The handle's values; the slices borrow the handle.
    pub fn describe(&self) -> Result<MetadataDesc<'_>> {
        let mut d = sys::vattn_metadata_desc_t {
            struct_size: std::mem::size_of::<sys::vattn_metadata_desc_t>(),
            ..Default::default()
        };
        // SAFETY: valid handle; out struct_size set.
        check(unsafe { sys::vattn_metadata_describe(self.raw.as_ptr(), &mut d) })?;
        let n = d.num_reqs;
        Ok(MetadataDesc {
            query_start_loc: slice_or_empty(d.query_start_loc, n + 1),
            seq_lens: slice_or_empty(d.seq_lens, n),
            num_computed_tokens: opt_slice(d.num_computed_tokens, n),
            block_table: slice_or_empty(d.block_table, d.block_table_rows * d.block_table_cols),
            block_table_cols: d.block_table_cols.max(0) as usize,
            slot_mapping: slice_or_empty(d.slot_mapping, d.slot_mapping_len),
            num_actual_tokens: Some(d.num_actual_tokens),
            causal: d.causal != 0,
            max_query_len: Some(d.max_query_len),
            max_seq_len: Some(d.max_seq_len),
            block_size: d.block_size,
            num_cache_blocks: d.num_cache_blocks,
            encoder_seq_lens: opt_slice(d.encoder_seq_lens, n),
            logits_indices_padded: opt_slice(d.logits_indices_padded, d.logits_indices_len),
            num_logits_indices: d.num_logits_indices,
            dcp_local_seq_lens: opt_slice(d.dcp_local_seq_lens, n),
        })
    }

    /// Number of requests.
    pub fn num_reqs(&self) -> Result<usize> {
        Ok(self.describe()?.seq_lens.len())
    }

    /// A copy truncated to the real sizes (`unpadded(num_tokens, num_reqs)`).
    pub fn unpadded(&self, num_tokens: i64, num_reqs: i64) -> Result<Metadata> {
        let mut out = ptr::null_mut();
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::vattn_metadata_unpadded(self.raw.as_ptr(), num_tokens, num_reqs, &mut out) })?;
        Metadata::from_raw(out)
    }

    /// Chunked-local attention virtual batches (vLLM
    /// `make_local_attention_virtual_batches`).
    pub fn local_attention_virtual_batches(
        &self,
        attn_chunk_size: i32,
        block_size: i32,
    ) -> Result<Metadata> {
        let mut out = ptr::null_mut();
        // SAFETY: valid handle and out pointer.
        check(unsafe {
            sys::vattn_make_local_attention_virtual_batches(
                attn_chunk_size,
                self.raw.as_ptr(),
                block_size,
                &mut out,
            )
        })?;
        Metadata::from_raw(out)
    }

    /// The KV-sharing fast-prefill metadata of this batch.
    pub fn kv_sharing_fast_prefill(&self) -> Result<Metadata> {
        let mut out = ptr::null_mut();
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::vattn_make_kv_sharing_fast_prefill_metadata(self.raw.as_ptr(), &mut out) })?;
        Metadata::from_raw(out)
    }
}

/// Requests and tokens of a batch split into decodes then prefills.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Decode requests (query length `<=` the threshold), at the front.
    pub num_decodes: i64,
    /// Prefill requests.
    pub num_prefills: i64,
    /// Tokens of the decode requests.
    pub num_decode_tokens: i64,
    /// Tokens of the prefill requests.
    pub num_prefill_tokens: i64,
}

/// Split of a batch into decodes, extends and prefills.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Split3 {
    /// Decode requests.
    pub num_decodes: i64,
    /// Extend requests (chunked prefills with cached context).
    pub num_extends: i64,
    /// Fresh prefill requests.
    pub num_prefills: i64,
    /// Tokens of the decodes.
    pub num_decode_tokens: i64,
    /// Tokens of the extends.
    pub num_extend_tokens: i64,
    /// Tokens of the prefills.
    pub num_prefill_tokens: i64,
}

/// vLLM `split_decodes_and_prefills`: requests with query length `<=
/// decode_threshold` at the front of a reordered batch are decodes; with
/// `require_uniform`, decodes must all have the same query length.
pub fn split_decodes_and_prefills(
    md: &Metadata,
    decode_threshold: i32,
    require_uniform: bool,
) -> Result<Split> {
    let mut s = sys::vattn_decode_prefill_split_t::default();
    // SAFETY: valid handle and out pointer.
    check(unsafe {
        sys::vattn_split_decodes_and_prefills(md.as_ptr(), decode_threshold, require_uniform as i32, &mut s)
    })?;
    Ok(Split {
        num_decodes: s.num_decodes,
        num_prefills: s.num_prefills,
        num_decode_tokens: s.num_decode_tokens,
        num_prefill_tokens: s.num_prefill_tokens,
    })
}

/// vLLM `split_decodes_prefills_and_extends`.
pub fn split_decodes_prefills_and_extends(md: &Metadata, decode_threshold: i32) -> Result<Split3> {
    let mut s = sys::vattn_decode_extend_prefill_split_t::default();
    // SAFETY: valid handle and out pointer.
    check(unsafe { sys::vattn_split_decodes_prefills_and_extends(md.as_ptr(), decode_threshold, &mut s) })?;
    Ok(Split3 {
        num_decodes: s.num_decodes,
        num_extends: s.num_extends,
        num_prefills: s.num_prefills,
        num_decode_tokens: s.num_decode_tokens,
        num_extend_tokens: s.num_extend_tokens,
        num_prefill_tokens: s.num_prefill_tokens,
    })
}

/// Inputs of [`use_cascade_attention`].
#[derive(Clone, Copy, Debug, Default)]
pub struct CascadeQuery<'a> {
    /// Shared prefix length in tokens.
    pub common_prefix_len: i64,
    /// Query length of each request.
    pub query_lens: &'a [i32],
    /// Query heads.
    pub num_q_heads: i32,
    /// KV heads.
    pub num_kv_heads: i32,
    /// ALiBi in use.
    pub use_alibi: bool,
    /// Sliding window in use.
    pub use_sliding_window: bool,
    /// Chunked local attention in use.
    pub use_local_attention: bool,
    /// SMs of the GPU (0 = not known).
    pub num_sms: i32,
    /// Decode context parallel world size (0 counts as 1).
    pub dcp_world_size: i32,
}

/// vLLM `use_cascade_attention`: whether cascade attention pays off.
pub fn use_cascade_attention(q: &CascadeQuery<'_>) -> Result<bool> {
    let mut out = 0i32;
    // SAFETY: query_lens has the length passed.
    check(unsafe {
        sys::vattn_use_cascade_attention(
            q.common_prefix_len,
            q.query_lens.as_ptr(),
            to_i64("query_lens", q.query_lens.len())?,
            q.num_q_heads,
            q.num_kv_heads,
            q.use_alibi as i32,
            q.use_sliding_window as i32,
            q.use_local_attention as i32,
            q.num_sms,
            q.dcp_world_size.max(1),
            &mut out,
        )
    })?;
    Ok(out != 0)
}
