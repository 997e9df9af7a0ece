//! vLLM v0 metadata (header section 9): the per-sequence builder, v0
//! attention metadata, its query helpers, the CUDA-graph state, and the v0
//! slot-mapping functions of section 6.

use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use crate::{check, check_len, ensure_version, sys, to_i64, AttnType, Error, Result};

fn non_null<T>(p: *mut T) -> Result<NonNull<T>> {
    NonNull::new(p).ok_or_else(|| Error::internal("the library returned success and a NULL handle"))
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

// ---------------------------------------------------------------------------
// v0 slot mapping
// ---------------------------------------------------------------------------

/// v0 `compute_slot_mapping_start_idx`: `max(0, query_len - sliding_window)`
/// for a prompt with a window (`sliding_window > 0`), else 0.
pub fn v0_slot_mapping_start_idx(
    is_prompt: bool,
    query_len: i64,
    context_len: i64,
    sliding_window: i64,
) -> Result<i64> {
    let mut out = 0i64;
    // SAFETY: valid out pointer.
    check(unsafe {
        sys::vattn_slot_mapping_v0_start_idx(is_prompt as i32, query_len, context_len, sliding_window, &mut out)
    })?;
    Ok(out)
}

/// v0 `compute_slot_mapping` for one sequence, appended to `out`: a profile
/// run appends `seq_len` pads; otherwise `max(0, start_idx - context_len)`
/// pads, then `block_table[i / block_size] * block_size + i % block_size`
/// for `i` in `[max(start_idx, context_len), seq_len)`.  Nothing is appended
/// on error.
#[allow(clippy::too_many_arguments)]
pub fn v0_compute_slot_mapping(
    is_profile_run: bool,
    seq_len: i64,
    context_len: i64,
    start_idx: i64,
    block_size: i32,
    block_table: &[i32],
    num_cache_blocks: i64,
    out: &mut Vec<i64>,
) -> Result<()> {
    // Exactly what the call appends when its arguments are valid (the
    // library checks them; an undersized buffer is reported, never overrun).
    let need = if is_profile_run {
        seq_len.max(0)
    } else {
        (start_idx - context_len).max(0) + (seq_len - start_idx.max(context_len)).max(0)
    };
    let need = usize::try_from(need).map_err(|_| Error::invalid_argument("argument 'seq_len': too large"))?;
    out.try_reserve(need).map_err(|_| Error {
        status: crate::Status::OUT_OF_MEMORY,
        message: format!("cannot reserve {} slots", need),
    })?;
    let mut len = to_i64("out", out.len())?;
    // SAFETY: the library writes only out[len .. capacity) (it checks
    // out_capacity) and reports the new length; those entries are then
    // initialized.
    check(unsafe {
        sys::vattn_slot_mapping_v0_compute(
            is_profile_run as i32,
            seq_len,
            context_len,
            start_idx,
            block_size,
            if block_table.is_empty() { ptr::null() } else { block_table.as_ptr() },
            to_i64("block_table", block_table.len())?,
            num_cache_blocks,
            out.as_mut_ptr(),
            to_i64("out", out.capacity())?,
            &mut len,
        )
    })?;
    let len = len as usize;
    assert!(len >= out.len() && len <= out.capacity(), "vattn_slot_mapping_v0_compute broke its contract");
    // SAFETY: entries up to len were written by the library, within capacity.
    unsafe { out.set_len(len) };
    Ok(())
}

// ---------------------------------------------------------------------------
// v0 builder
// ---------------------------------------------------------------------------

/// Options of a [`V0Builder`] (`vattn_v0_builder_options_t`).  `Default`
/// gives the library's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct V0BuilderOptions {
    /// Cache block size.
    pub block_size: i32,
    /// Sliding window; 0 = none.
    pub sliding_window: i32,
    /// Chunked prefill is on (prompts get their block tables).
    pub chunked_prefill_enabled: bool,
    /// Cache blocks (block ids are checked below it); 0 = unchecked.
    pub num_cache_blocks: i64,
    /// Width of the CUDA-graph block table.
    pub max_blocks_per_seq: i32,
}

impl Default for V0BuilderOptions {
    fn default() -> Self {
        let mut o = sys::vattn_v0_builder_options_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_v0_builder_options_init(&mut o) };
        V0BuilderOptions {
            block_size: o.block_size,
            sliding_window: o.sliding_window,
            chunked_prefill_enabled: o.chunked_prefill_enabled != 0,
            num_cache_blocks: o.num_cache_blocks,
            max_blocks_per_seq: o.max_blocks_per_seq,
        }
    }
}

/// One sequence of a sequence group (`vattn_v0_seq_t`, vLLM `_add_seq_group`).
#[derive(Clone, Copy, Debug, Default)]
pub struct V0Seq<'a> {
    /// A prompt (prefill) rather than a decode.
    pub is_prompt: bool,
    /// Tokens fed this step.
    pub token_len: i64,
    /// Original sequence length.
    pub seq_len: i64,
    /// Current sequence length (decodes).
    pub curr_seq_len: i64,
    /// Query length (1 for a decode).
    pub query_len: i64,
    /// Tokens already in the cache.
    pub context_len: i64,
    /// Sliding-window blocks to keep; 0 = the whole table.
    pub curr_sliding_window_blocks: i32,
    /// The prompt hit the prefix cache.
    pub prefix_cache_hit: bool,
    /// The sequence's block table; `None` = a profile run (no table).
    pub block_table: Option<&'a [i32]>,
}

/// The v0 per-sequence metadata builder (vLLM v0 `CommonMetadataBuilder`).
pub struct V0Builder {
    raw: NonNull<sys::vattn_v0_builder_t>,
}

// SAFETY: every function on the builder takes `&mut self`; not thread-bound.
unsafe impl Send for V0Builder {}
unsafe impl Sync for V0Builder {}

impl Drop for V0Builder {
    fn drop(&mut self) {
        // SAFETY: owned handle, destroyed once.
        unsafe { sys::vattn_v0_builder_destroy(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for V0Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "V0Builder({:p})", self.raw)
    }
}

impl V0Builder {
    /// A builder with `opts`.
    pub fn new(opts: &V0BuilderOptions) -> Result<V0Builder> {
        ensure_version()?;
        let mut o = sys::vattn_v0_builder_options_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_v0_builder_options_init(&mut o) };
        o.block_size = opts.block_size;
        o.sliding_window = opts.sliding_window;
        o.chunked_prefill_enabled = opts.chunked_prefill_enabled as i32;
        o.num_cache_blocks = opts.num_cache_blocks;
        o.max_blocks_per_seq = opts.max_blocks_per_seq;
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers.
        check(unsafe { sys::vattn_v0_builder_create(&mut out, &o) })?;
        Ok(V0Builder { raw: non_null(out)? })
    }

    /// The raw handle (for `vattn-sys` calls).
    pub fn as_ptr(&self) -> *const sys::vattn_v0_builder_t {
        self.raw.as_ptr()
    }

    /// Adds one sequence (prompts before decodes); its block table is copied.
    pub fn add_seq(&mut self, seq: &V0Seq<'_>) -> Result<()> {
        let mut s = sys::vattn_v0_seq_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_v0_seq_init(&mut s) };
        s.is_prompt = seq.is_prompt as i32;
        s.token_len = seq.token_len;
        s.seq_len = seq.seq_len;
        s.curr_seq_len = seq.curr_seq_len;
        s.query_len = seq.query_len;
        s.context_len = seq.context_len;
        s.curr_sliding_window_blocks = seq.curr_sliding_window_blocks;
        s.prefix_cache_hit = seq.prefix_cache_hit as i32;
        match seq.block_table {
            Some(t) => {
                s.block_table = t.as_ptr();
                s.block_table_len = to_i64("block_table", t.len())?;
            }
            None => {
                s.block_table = ptr::null();
                s.block_table_len = 0;
            }
        }
        // SAFETY: the block table has block_table_len entries (copied).
        check(unsafe { sys::vattn_v0_builder_add_seq(self.raw.as_ptr(), &s) })
    }

    /// vLLM `build(seq_lens, query_lens, cuda_graph_pad_size, batch_size)`:
    /// `cuda_graph_pad_size = None` is a batch without CUDA graph, `Some(n)`
    /// pads the slot mapping with `n` pad slots and the rows up to
    /// `batch_size`.  Resets the builder.
    pub fn build(
        &mut self,
        seq_lens: &[i32],
        query_lens: &[i32],
        cuda_graph_pad_size: Option<i64>,
        batch_size: i64,
    ) -> Result<V0Metadata<'static>> {
        if query_lens.len() != seq_lens.len() {
            return Err(Error::invalid_argument(format!(
                "argument 'query_lens': has {} entries, seq_lens {}",
                query_lens.len(),
                seq_lens.len()
            )));
        }
        let mut out = ptr::null_mut();
        // SAFETY: both arrays have num_seqs entries.
        check(unsafe {
            sys::vattn_v0_builder_build(
                self.raw.as_ptr(),
                seq_lens.as_ptr(),
                query_lens.as_ptr(),
                to_i64("seq_lens", seq_lens.len())?,
                cuda_graph_pad_size.unwrap_or(-1),
                batch_size,
                &mut out,
            )
        })?;
        Ok(V0Metadata { raw: non_null(out)?, _state: PhantomData })
    }
}

// ---------------------------------------------------------------------------
// v0 metadata
// ---------------------------------------------------------------------------

/// Host arrays of v0 attention metadata (`vattn_v0_metadata_desc_t`):
/// prefills first, then decodes.  `num_seqs` is `seq_lens.len()`; the
/// optional arrays have `num_seqs` (or `num_seqs + 1` for the start
/// locations) entries.  [`V0Metadata::new`] copies them;
/// [`V0Metadata::describe`] returns one that borrows the handle.
#[derive(Clone, Copy, Debug, Default)]
pub struct V0MetadataDesc<'a> {
    /// Prefill sequences (at the front).
    pub num_prefills: i64,
    /// Tokens of the prefills.
    pub num_prefill_tokens: i64,
    /// Tokens of the decodes.
    pub num_decode_tokens: i64,
    /// Slot of every token (-1 = padding).
    pub slot_mapping: &'a [i64],
    /// `[num_seqs]` sequence lengths.
    pub seq_lens: &'a [i32],
    /// Optional `[num_seqs]` context lengths.
    pub context_lens: Option<&'a [i32]>,
    /// Optional `[num_seqs + 1]` query start offsets.
    pub query_start_loc: Option<&'a [i32]>,
    /// Optional `[num_seqs + 1]` sequence start offsets.
    pub seq_start_loc: Option<&'a [i32]>,
    /// Row-major `[num_seqs, block_tables_cols]` block tables (0-padded).
    pub block_tables: &'a [i32],
    /// Columns of `block_tables`.
    pub block_tables_cols: usize,
    /// Longest query.
    pub max_query_len: i32,
    /// Longest prefill sequence.
    pub max_prefill_seq_len: i32,
    /// Longest decode sequence.
    pub max_decode_seq_len: i32,
    /// Longest decode query.
    pub max_decode_query_len: i32,
    /// The batch runs in a CUDA graph.
    pub use_cuda_graph: bool,
    /// Encoder-decoder: optional `[num_seqs]` encoder lengths.
    pub encoder_seq_lens: Option<&'a [i32]>,
    /// Encoder tokens (sum of `encoder_seq_lens`).
    pub num_encoder_tokens: i64,
    /// Longest encoder sequence.
    pub max_encoder_seq_len: i32,
    /// Encoder-decoder: optional `[num_seqs, cross_block_tables_cols]` cross-attention tables.
    pub cross_block_tables: Option<&'a [i32]>,
    /// Columns of `cross_block_tables`.
    pub cross_block_tables_cols: usize,
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

impl V0MetadataDesc<'_> {
    fn to_raw(&self) -> Result<sys::vattn_v0_metadata_desc_t> {
        let n = self.seq_lens.len();
        let table = |what: &str, t: &[i32], cols: usize| -> Result<()> {
            let need = n.checked_mul(cols).ok_or_else(|| Error::invalid_argument(format!("argument '{}': too large", what)))?;
            check_len(what, t.len(), need)
        };
        table("block_tables", self.block_tables, self.block_tables_cols)?;
        if let Some(t) = self.cross_block_tables {
            table("cross_block_tables", t, self.cross_block_tables_cols)?;
        }
        let mut d = sys::vattn_v0_metadata_desc_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_v0_metadata_desc_init(&mut d) };
        d.num_prefills = self.num_prefills;
        d.num_prefill_tokens = self.num_prefill_tokens;
        d.num_decode_tokens = self.num_decode_tokens;
        d.num_seqs = to_i64("seq_lens", n)?;
        d.slot_mapping = self.slot_mapping.as_ptr();
        d.slot_mapping_len = to_i64("slot_mapping", self.slot_mapping.len())?;
        d.seq_lens = self.seq_lens.as_ptr();
        d.context_lens = opt_ptr("context_lens", self.context_lens, n)?;
        d.query_start_loc = opt_ptr("query_start_loc", self.query_start_loc, n + 1)?;
        d.seq_start_loc = opt_ptr("seq_start_loc", self.seq_start_loc, n + 1)?;
        d.block_tables = self.block_tables.as_ptr();
        d.block_tables_cols = to_i64("block_tables_cols", self.block_tables_cols)?;
        d.max_query_len = self.max_query_len;
        d.max_prefill_seq_len = self.max_prefill_seq_len;
        d.max_decode_seq_len = self.max_decode_seq_len;
        d.max_decode_query_len = self.max_decode_query_len;
        d.use_cuda_graph = self.use_cuda_graph as i32;
        d.encoder_seq_lens = opt_ptr("encoder_seq_lens", self.encoder_seq_lens, n)?;
        d.num_encoder_tokens = self.num_encoder_tokens;
        d.max_encoder_seq_len = self.max_encoder_seq_len;
        d.cross_block_tables = self.cross_block_tables.map_or(ptr::null(), |t| t.as_ptr());
        d.cross_block_tables_cols = to_i64("cross_block_tables_cols", self.cross_block_tables_cols)?;
        Ok(d)
    }
}

/// vLLM v0 `AttentionMetadata`.  Metadata built by [`V0Builder::build`] or
/// [`V0Metadata::new`] owns its arrays (`V0Metadata<'static>`); metadata
/// from [`GraphState::metadata_for_batch`] views the graph state's
/// persistent buffers and borrows it.
pub struct V0Metadata<'s> {
    raw: NonNull<sys::vattn_v0_metadata_t>,
    _state: PhantomData<&'s GraphState>,
}

// SAFETY: every function on v0 metadata takes it `const`; the arrays it may
// view belong to a GraphState that is borrowed shared for 's.
unsafe impl Send for V0Metadata<'_> {}
unsafe impl Sync for V0Metadata<'_> {}

impl Drop for V0Metadata<'_> {
    fn drop(&mut self) {
        // SAFETY: owned handle, destroyed once.
        unsafe { sys::vattn_v0_metadata_destroy(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for V0Metadata<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.describe() {
            Ok(d) => f.debug_tuple("V0Metadata").field(&d).finish(),
            Err(_) => write!(f, "V0Metadata({:p})", self.raw),
        }
    }
}

/// Result of [`V0Metadata::num_prefill_decode_query_kv_tokens`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefillDecodeTokens {
    /// Query tokens of the prefills.
    pub num_prefill_query_tokens: i64,
    /// Key/value tokens of the prefills.
    pub num_prefill_kv_tokens: i64,
    /// Query tokens of the decodes.
    pub num_decode_query_tokens: i64,
}

/// Result of [`V0Metadata::seq_len_block_table_args`]; the slices borrow the
/// metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqLenBlockTableArgs<'m> {
    /// `[num_seqs]` sequence lengths (the encoder's for encoder and
    /// cross-attention).
    pub seq_lens: &'m [i32],
    /// The maximum the kernel is launched for.
    pub max_seq_len: i32,
    /// Row-major `[num_seqs, block_table_cols]`; `None` for encoder attention.
    pub block_table: Option<&'m [i32]>,
    /// Columns of `block_table`.
    pub block_table_cols: usize,
}

impl V0Metadata<'static> {
    /// Validates `desc` and copies its arrays.
    pub fn new(desc: &V0MetadataDesc<'_>) -> Result<V0Metadata<'static>> {
        ensure_version()?;
        let d = desc.to_raw()?;
        let mut out = ptr::null_mut();
        // SAFETY: every array in d covers the length the library reads
        // (checked by to_raw).
        check(unsafe { sys::vattn_v0_metadata_create(&mut out, &d) })?;
        Ok(V0Metadata { raw: non_null(out)?, _state: PhantomData })
    }
}

impl<'s> V0Metadata<'s> {
    /// The raw handle (for `vattn-sys` calls).
    pub fn as_ptr(&self) -> *const sys::vattn_v0_metadata_t {
        self.raw.as_ptr()
    }

    /// The handle's values; the slices borrow the handle.
    pub fn describe(&self) -> Result<V0MetadataDesc<'_>> {
        let mut d = sys::vattn_v0_metadata_desc_t {
            struct_size: std::mem::size_of::<sys::vattn_v0_metadata_desc_t>(),
            ..Default::default()
        };
        // SAFETY: valid handle; out struct_size set.
        check(unsafe { sys::vattn_v0_metadata_describe(self.raw.as_ptr(), &mut d) })?;
        let n = d.num_seqs;
        Ok(V0MetadataDesc {
            num_prefills: d.num_prefills,
            num_prefill_tokens: d.num_prefill_tokens,
            num_decode_tokens: d.num_decode_tokens,
            slot_mapping: slice_or_empty(d.slot_mapping, d.slot_mapping_len),
            seq_lens: slice_or_empty(d.seq_lens, n),
            context_lens: opt_slice(d.context_lens, n),
            query_start_loc: opt_slice(d.query_start_loc, n + 1),
            seq_start_loc: opt_slice(d.seq_start_loc, n + 1),
            block_tables: slice_or_empty(d.block_tables, n * d.block_tables_cols),
            block_tables_cols: d.block_tables_cols.max(0) as usize,
            max_query_len: d.max_query_len,
            max_prefill_seq_len: d.max_prefill_seq_len,
            max_decode_seq_len: d.max_decode_seq_len,
            max_decode_query_len: d.max_decode_query_len,
            use_cuda_graph: d.use_cuda_graph != 0,
            encoder_seq_lens: opt_slice(d.encoder_seq_lens, n),
            num_encoder_tokens: d.num_encoder_tokens,
            max_encoder_seq_len: d.max_encoder_seq_len,
            cross_block_tables: opt_slice(d.cross_block_tables, n * d.cross_block_tables_cols),
            cross_block_tables_cols: d.cross_block_tables_cols.max(0) as usize,
        })
    }

    /// vLLM `get_num_prefill_decode_query_kv_tokens` for `attn_type`.
    pub fn num_prefill_decode_query_kv_tokens(&self, attn_type: AttnType) -> Result<PrefillDecodeTokens> {
        let mut r = [0i64; 3];
        // SAFETY: valid handle; out3 has 3 entries.
        check(unsafe {
            sys::vattn_v0_get_num_prefill_decode_query_kv_tokens(self.raw.as_ptr(), attn_type.0, r.as_mut_ptr())
        })?;
        Ok(PrefillDecodeTokens {
            num_prefill_query_tokens: r[0],
            num_prefill_kv_tokens: r[1],
            num_decode_query_tokens: r[2],
        })
    }

    /// vLLM `get_seq_len_block_table_args`: the sequence lengths, maximum
    /// and block table a kernel of `attn_type` reads for prompts
    /// (`is_prompt`) or decodes.
    pub fn seq_len_block_table_args(&self, is_prompt: bool, attn_type: AttnType) -> Result<SeqLenBlockTableArgs<'_>> {
        let mut sl: *const i32 = ptr::null();
        let mut bt: *const i32 = ptr::null();
        let (mut n, mut mx, mut cols) = (0i64, 0i32, 0i64);
        // SAFETY: valid handle and out pointers; the arrays point into the
        // handle (or the graph state it views), alive while self is.
        check(unsafe {
            sys::vattn_v0_get_seq_len_block_table_args(
                self.raw.as_ptr(),
                is_prompt as i32,
                attn_type.0,
                &mut sl,
                &mut n,
                &mut mx,
                &mut bt,
                &mut cols,
            )
        })?;
        Ok(SeqLenBlockTableArgs {
            seq_lens: slice_or_empty(sl, n),
            max_seq_len: mx,
            block_table: opt_slice(bt, n * cols),
            block_table_cols: cols.max(0) as usize,
        })
    }
}

// ---------------------------------------------------------------------------
// CUDA-graph state
// ---------------------------------------------------------------------------

/// vLLM `CommonAttentionState`: persistent decode input buffers (slot
/// mapping, sequence lengths, block tables) for up to `max_batch_size`
/// sequences, viewed by the metadata of captured batches.
pub struct GraphState {
    raw: NonNull<sys::vattn_graph_state_t>,
}

// SAFETY: metadata_for_batch takes the state const; prepare_replay `&mut`.
unsafe impl Send for GraphState {}
unsafe impl Sync for GraphState {}

impl Drop for GraphState {
    fn drop(&mut self) {
        // SAFETY: owned handle, destroyed once (no V0Metadata borrows it now).
        unsafe { sys::vattn_graph_state_destroy(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for GraphState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GraphState({:p})", self.raw)
    }
}

impl GraphState {
    /// Buffers for `max_batch_size` decodes: slot mapping all pad, sequence
    /// lengths all 1, block tables `[max_batch_size, max_blocks_per_seq]` zeros.
    pub fn new(max_batch_size: i64, max_blocks_per_seq: i32, max_seq_len_to_capture: i32) -> Result<GraphState> {
        ensure_version()?;
        let mut out = ptr::null_mut();
        // SAFETY: valid out pointer.
        check(unsafe {
            sys::vattn_graph_state_create(&mut out, max_batch_size, max_blocks_per_seq, max_seq_len_to_capture)
        })?;
        Ok(GraphState { raw: non_null(out)? })
    }

    /// The raw handle (for `vattn-sys` calls).
    pub fn as_ptr(&self) -> *const sys::vattn_graph_state_t {
        self.raw.as_ptr()
    }

    /// Metadata of a captured decode batch of `batch_size`: views of the
    /// persistent buffers (so it borrows the state).
    pub fn metadata_for_batch(&self, batch_size: i64) -> Result<V0Metadata<'_>> {
        let mut out = ptr::null_mut();
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::vattn_graph_state_metadata_for_batch(self.raw.as_ptr(), batch_size, &mut out) })?;
        Ok(V0Metadata { raw: non_null(out)?, _state: PhantomData })
    }

    /// Copies a real decode batch's slot mapping, sequence lengths and block
    /// tables into the persistent buffers (the first rows; the rest keep
    /// their padding).
    pub fn prepare_replay(&mut self, md: &V0Metadata<'_>) -> Result<()> {
        // SAFETY: valid handles.
        check(unsafe { sys::vattn_graph_state_prepare_replay(self.raw.as_ptr(), md.as_ptr()) })
    }
}
