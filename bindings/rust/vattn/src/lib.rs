//! Safe Rust API for **libvattn**, the attention stack of an LLM inference
//! engine: paged KV cache, slot mapping, batch metadata, attention backends,
//! metadata builders and attention layers (vLLM's attention layer, rebuilt
//! as a C library).
//!
//! Every handle of the C API is an owning Rust value (`NonNull` inside,
//! `Drop` calls the matching `vattn_*_destroy`); every fallible call returns
//! [`Result`], whose [`Error`] carries the library's pinned [`Status`] code
//! and its message (read from `vattn_last_error_message()` and then
//! cleared).  Host arrays are slices; tensors are borrowed DLPack tensors
//! built over slices by [`TensorView`] / [`TensorViewMut`].
//!
//! # Thread safety
//!
//! The C header promises that functions taking a `const` handle may run
//! concurrently on one handle, and that non-const functions need external
//! synchronization.  This crate maps that onto `&self` / `&mut self`: every
//! `&self` method calls only `const`-handle functions, so handles are
//! `Sync`; they are not tied to a thread, so they are `Send`.  Backend
//! descriptors are immutable for the life of the process.
//!
//! # Example
//!
//! ```no_run
//! use vattn::{Metadata, MetadataDesc};
//! let md = Metadata::new(&MetadataDesc {
//!     query_start_loc: &[0, 1, 4],
//!     seq_lens: &[5, 3],
//!     block_table: &[0, 1, 2, 3],
//!     block_table_cols: 2,
//!     slot_mapping: &[4, 32, 33, 34],
//!     block_size: 16,
//!     ..Default::default()
//! })?;
//! let split = vattn::split_decodes_and_prefills(&md, 1, false)?;
//! assert_eq!((split.num_decodes, split.num_prefills), (1, 1));
//! # Ok::<(), vattn::Error>(())
//! ```
#![warn(missing_docs)]

pub use vattn_sys as sys;

use std::ffi::CStr;
use std::fmt;

mod attention;
mod backend;
mod batch;
mod kv_cache;
mod metadata;
mod ops;
mod tensor;
mod v0;

pub use attention::{Builder, BuilderOptions, ForwardArgs, Layer, LayerOptions, Plan};
pub use backend::{
    get_kv_cache_layout, set_kv_cache_layout, unset_kv_cache_layout, Backend, BackendInfo,
    Selector,
};
pub use kv_cache::{
    KvCache, KvCacheInfo, KvCacheOptions, KvCacheSpec, KvLayer, KvLayerMut, ModelLimits,
};
pub use metadata::{
    split_decodes_and_prefills, split_decodes_prefills_and_extends, use_cascade_attention,
    CascadeQuery, Metadata, MetadataDesc, Split, Split3,
};
pub use batch::{
    get_dcp_local_seq_lens, infer_global_hyperparameters, reorder_batch_to_split_decodes_and_prefills,
    slice_query_start_locs, split_attn_metadata, split_prefill_chunks, ubatch_slices_create, GlobalParams,
    PerLayerParams, Reorder, UbatchSlice, UbatchSlices,
};
pub use ops::{
    compute_slot_mapping, copy_blocks, copy_blocks_on_stream, merge_attn_states, reshape_and_cache, swap_blocks,
    swap_blocks_on_stream, SlotMappingArgs,
};
pub use v0::{
    v0_compute_slot_mapping, v0_slot_mapping_start_idx, GraphState, PrefillDecodeTokens,
    SeqLenBlockTableArgs, V0Builder, V0BuilderOptions, V0Metadata, V0MetadataDesc, V0Seq,
};
pub use tensor::{AsDlTensor, AsDlTensorMut, Bf16, Element, TensorView, TensorViewMut, F16};

// ---------------------------------------------------------------------------
// Integer newtypes for the header's constants
// ---------------------------------------------------------------------------

macro_rules! const_newtype {
    (
        $(#[$meta:meta])*
        $name:ident($ty:ty) {
            $( $(#[$cmeta:meta])* $c:ident = $v:expr; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(transparent)]
        pub struct $name(pub $ty);

        impl $name {
            $( $(#[$cmeta])* pub const $c: $name = $name($v as $ty); )*

            /// Name of the constant this value equals, if any.
            pub fn name(self) -> Option<&'static str> {
                $( if self.0 == ($v as $ty) { return Some(stringify!($c)); } )*
                None
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => write!(f, concat!(stringify!($name), "::{}"), n),
                    None => write!(f, concat!(stringify!($name), "({})"), self.0),
                }
            }
        }

        impl From<$name> for $ty {
            fn from(v: $name) -> $ty { v.0 }
        }
    };
}

const_newtype! {
    /// A status code of the C API (`vattn_status_t`).  The values are pinned
    /// by the header and never renumbered; unknown future codes are kept as
    /// they are.
    Status(i32) {
        /// Success.
        OK = sys::VATTN_OK;
        /// An argument is malformed or out of range.
        INVALID_ARGUMENT = sys::VATTN_ERR_INVALID_ARGUMENT;
        /// Valid, but not supported by this backend or build.
        UNSUPPORTED = sys::VATTN_ERR_UNSUPPORTED;
        /// A host or device allocation failed.
        OUT_OF_MEMORY = sys::VATTN_ERR_OUT_OF_MEMORY;
        /// A caller-provided buffer (or a plan's capacity) is too small.
        WORKSPACE_TOO_SMALL = sys::VATTN_ERR_WORKSPACE_TOO_SMALL;
        /// The CUDA runtime reported an error.
        CUDA = sys::VATTN_ERR_CUDA;
        /// No backend or item of that name or index.
        NOT_FOUND = sys::VATTN_ERR_NOT_FOUND;
        /// A bug in vattn.
        INTERNAL = sys::VATTN_ERR_INTERNAL;
        /// CUDA was requested but no usable GPU exists, or the build has no CUDA.
        NO_DEVICE = sys::VATTN_ERR_NO_DEVICE;
    }
}

impl Status {
    /// Alias of [`Status::WORKSPACE_TOO_SMALL`] (`VATTN_ERR_BUFFER_TOO_SMALL`).
    pub const BUFFER_TOO_SMALL: Status = Status(sys::VATTN_ERR_BUFFER_TOO_SMALL);

    /// The library's short description ("invalid argument", ...).
    pub fn description(self) -> &'static str {
        // SAFETY: vattn_status_string returns static, NUL-terminated text.
        unsafe { CStr::from_ptr(sys::vattn_status_string(self.0)) }
            .to_str()
            .unwrap_or("unknown status")
    }

    /// `true` for [`Status::OK`].
    pub fn is_ok(self) -> bool {
        self.0 == sys::VATTN_OK
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

const_newtype! {
    /// Element type of tensors and caches (`VATTN_DTYPE_*`).
    DType(i32) {
        /// 32-bit IEEE float.
        FLOAT32 = sys::VATTN_DTYPE_FLOAT32;
        /// 16-bit IEEE float.
        FLOAT16 = sys::VATTN_DTYPE_FLOAT16;
        /// bfloat16.
        BFLOAT16 = sys::VATTN_DTYPE_BFLOAT16;
        /// fp8 e4m3, stored in DLTensors as uint8.
        FP8_E4M3 = sys::VATTN_DTYPE_FP8_E4M3;
        /// fp8 e5m2, stored in DLTensors as uint8.
        FP8_E5M2 = sys::VATTN_DTYPE_FP8_E5M2;
        /// Raw bytes.
        UINT8 = sys::VATTN_DTYPE_UINT8;
    }
}

impl DType {
    /// Bytes per element, 0 for an unknown dtype.
    pub fn size(self) -> usize {
        // SAFETY: pure function of an integer.
        unsafe { sys::vattn_dtype_size(self.0) }
    }
}

const_newtype! {
    /// Element type stored in the KV cache (`VATTN_KV_CACHE_DTYPE_*`).
    KvCacheDtype(i32) {
        /// The model dtype.
        AUTO = sys::VATTN_KV_CACHE_DTYPE_AUTO;
        /// fp8 e4m3 (vLLM's "fp8").
        FP8_E4M3 = sys::VATTN_KV_CACHE_DTYPE_FP8_E4M3;
        /// fp8 e5m2.
        FP8_E5M2 = sys::VATTN_KV_CACHE_DTYPE_FP8_E5M2;
    }
}

const_newtype! {
    /// Physical KV cache layout (`VATTN_LAYOUT_*`).
    Layout(i32) {
        /// (2, num_blocks, block_size, num_kv_heads, head_size) in memory.
        NHD = sys::VATTN_LAYOUT_NHD;
        /// (2, num_blocks, num_kv_heads, block_size, head_size) in memory.
        HND = sys::VATTN_LAYOUT_HND;
    }
}

const_newtype! {
    /// Attention type of a layer (`VATTN_ATTN_*`, vLLM `AttentionType`).
    AttnType(i32) {
        /// Causal self-attention through the KV cache.
        DECODER = sys::VATTN_ATTN_DECODER;
        /// Non-causal on Q/K/V, no cache (encoder of an encoder-decoder model).
        ENCODER = sys::VATTN_ATTN_ENCODER;
        /// Bidirectional, no cache.
        ENCODER_ONLY = sys::VATTN_ATTN_ENCODER_ONLY;
        /// Decoder queries over the cross-attention cache.
        ENCODER_DECODER = sys::VATTN_ATTN_ENCODER_DECODER;
    }
}

const_newtype! {
    /// CUDA-graph support level of a metadata builder (`VATTN_CUDAGRAPH_*`),
    /// ordered from least to most capable.
    CudaGraphSupport(i32) {
        /// Never captured.
        NEVER = sys::VATTN_CUDAGRAPH_NEVER;
        /// Uniform batches of single-token decodes.
        UNIFORM_SINGLE_TOKEN_DECODE = sys::VATTN_CUDAGRAPH_UNIFORM_SINGLE_TOKEN_DECODE;
        /// Uniform batches.
        UNIFORM_BATCH = sys::VATTN_CUDAGRAPH_UNIFORM_BATCH;
        /// Any batch.
        ALWAYS = sys::VATTN_CUDAGRAPH_ALWAYS;
    }
}

const_newtype! {
    /// Kind of a KV cache spec (`VATTN_KV_SPEC_*`).
    SpecKind(i32) {
        /// Full attention.
        FULL = sys::VATTN_KV_SPEC_FULL;
        /// Sliding-window attention.
        SLIDING_WINDOW = sys::VATTN_KV_SPEC_SLIDING_WINDOW;
        /// Chunked local attention.
        CHUNKED_LOCAL = sys::VATTN_KV_SPEC_CHUNKED_LOCAL;
        /// Multi-head latent attention.
        MLA = sys::VATTN_KV_SPEC_MLA;
        /// Cross-attention (encoder-decoder).
        CROSS_ATTENTION = sys::VATTN_KV_SPEC_CROSS_ATTENTION;
        /// Encoder-only (no cache kept).
        ENCODER_ONLY = sys::VATTN_KV_SPEC_ENCODER_ONLY;
    }
}

const_newtype! {
    /// DLPack device type of a tensor or cache (`kDLCPU`, `kDLCUDA`, ...).
    DeviceType(i32) {
        /// Host memory.
        CPU = sys::kDLCPU;
        /// CUDA device memory.
        CUDA = sys::kDLCUDA;
        /// Pinned host memory.
        CUDA_HOST = sys::kDLCUDAHost;
        /// CUDA managed memory.
        CUDA_MANAGED = sys::kDLCUDAManaged;
    }
}

const_newtype! {
    /// Feature bits of a backend (`VATTN_FEATURE_*`); combine with `|`.
    Features(u32) {
        /// No feature.
        NONE = 0u32;
        /// ALiBi slopes.
        ALIBI = sys::VATTN_FEATURE_ALIBI;
        /// Sliding window.
        SLIDING_WINDOW = sys::VATTN_FEATURE_SLIDING_WINDOW;
        /// Logits soft cap.
        SOFT_CAP = sys::VATTN_FEATURE_SOFT_CAP;
        /// Attention sinks.
        SINKS = sys::VATTN_FEATURE_SINKS;
        /// fp8 KV cache.
        FP8_KV_CACHE = sys::VATTN_FEATURE_FP8_KV_CACHE;
        /// Log-sum-exp output.
        LSE_OUTPUT = sys::VATTN_FEATURE_LSE_OUTPUT;
        /// Cascade (shared prefix) attention.
        CASCADE = sys::VATTN_FEATURE_CASCADE;
        /// Multi-head latent attention.
        MLA = sys::VATTN_FEATURE_MLA;
        /// KV cache sharing between layers.
        KV_SHARING = sys::VATTN_FEATURE_KV_SHARING;
    }
}

impl Features {
    /// `true` when every bit of `other` is set in `self`.
    pub fn contains(self, other: Features) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Features {
    type Output = Features;
    fn bitor(self, rhs: Features) -> Features {
        Features(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for Features {
    fn bitor_assign(&mut self, rhs: Features) {
        self.0 |= rhs.0;
    }
}

/// Padding slot in a slot mapping (`VATTN_PAD_SLOT_ID`): kernels skip it.
pub const PAD_SLOT_ID: i64 = sys::VATTN_PAD_SLOT_ID as i64;

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// A failed vattn call: the status code and the library's message, which
/// names the offending argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The pinned status code (never [`Status::OK`]).
    pub status: Status,
    /// What was wrong, as the library (or this crate's argument checks) said it.
    pub message: String,
}

impl Error {
    /// Builds an error from a failed status and this thread's last error
    /// message, then clears that message so it cannot leak into a later
    /// call's report.
    pub fn last(status: Status) -> Error {
        // SAFETY: never NULL, valid until the next vattn call on this thread;
        // copied at once.
        let message = unsafe { CStr::from_ptr(sys::vattn_last_error_message()) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: no arguments.
        unsafe { sys::vattn_clear_last_error() };
        let message = if message.is_empty() { status.description().to_string() } else { message };
        Error { status, message }
    }

    /// An internal error (the library broke its own contract).
    pub(crate) fn internal(message: impl Into<String>) -> Error {
        Error { status: Status::INTERNAL, message: message.into() }
    }

    /// An error found by this crate before calling the library.
    pub fn invalid_argument(message: impl Into<String>) -> Error {
        Error { status: Status::INVALID_ARGUMENT, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.status.description(), self.status.0, self.message)
    }
}

impl std::error::Error for Error {}

/// Result of a vattn call.
pub type Result<T> = std::result::Result<T, Error>;

/// Turns a C status into a `Result`.
pub(crate) fn check(status: sys::vattn_status_t) -> Result<()> {
    if status == sys::VATTN_OK {
        Ok(())
    } else {
        Err(Error::last(Status(status)))
    }
}

/// Checks a slice length against what the C side will read.
pub(crate) fn check_len(what: &str, len: usize, need: usize) -> Result<()> {
    if len < need {
        Err(Error::invalid_argument(format!(
            "argument '{}': has {} entries, needs at least {}",
            what, len, need
        )))
    } else {
        Ok(())
    }
}

pub(crate) fn to_i64(what: &str, v: usize) -> Result<i64> {
    i64::try_from(v).map_err(|_| Error::invalid_argument(format!("argument '{}': too large", what)))
}

// ---------------------------------------------------------------------------
// Versions and devices
// ---------------------------------------------------------------------------

/// Version of the loaded library as `(major << 16) | (minor << 8) | patch`.
pub fn version() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::vattn_version() }
}

/// Version of the loaded library as "MAJOR.MINOR.PATCH".
pub fn version_string() -> &'static str {
    // SAFETY: static storage.
    unsafe { CStr::from_ptr(sys::vattn_version_string()) }.to_str().unwrap_or("?")
}

/// Version of the header these bindings were generated from.
pub const HEADER_VERSION: u32 = sys::VATTN_VERSION_NUMBER;

/// Checks that the loaded library has the major and minor version of the
/// header these bindings were built with (the ABI is stable within a minor
/// version).  Handle constructors call this once per process.
pub fn check_version() -> Result<()> {
    let v = version();
    if v >> 8 != HEADER_VERSION >> 8 {
        return Err(Error {
            status: Status::UNSUPPORTED,
            message: format!(
                "libvattn {} is loaded but these bindings were built for {}.{}.x",
                version_string(),
                HEADER_VERSION >> 16,
                (HEADER_VERSION >> 8) & 0xff
            ),
        });
    }
    Ok(())
}

pub(crate) fn ensure_version() -> Result<()> {
    static CHECK: std::sync::OnceLock<Result<()>> = std::sync::OnceLock::new();
    CHECK.get_or_init(check_version).clone()
}

/// Number of usable CUDA devices: 0 when built without CUDA or when no GPU
/// is present (not an error).
pub fn cuda_device_count() -> Result<i32> {
    let mut n = 0i32;
    // SAFETY: valid out pointer.
    check(unsafe { sys::vattn_cuda_device_count(&mut n) })?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_debug_and_description() {
        assert_eq!(format!("{:?}", Status::NOT_FOUND), "Status::NOT_FOUND");
        assert_eq!(format!("{:?}", Status(1234)), "Status(1234)");
        assert_eq!(Status::INVALID_ARGUMENT.description(), "invalid argument");
        assert_eq!(Status(1234).description(), "unknown status");
        assert_eq!(Status::BUFFER_TOO_SMALL, Status::WORKSPACE_TOO_SMALL);
    }

    #[test]
    fn version_is_checked() {
        check_version().unwrap();
        assert_eq!(version() >> 8, HEADER_VERSION >> 8);
        assert!(version_string().starts_with("0.1."));
    }

    #[test]
    fn features_and_dtypes() {
        let f = Features::ALIBI | Features::SINKS;
        assert!(f.contains(Features::SINKS));
        assert!(!f.contains(Features::MLA));
        assert_eq!(DType::FLOAT32.size(), 4);
        assert_eq!(DType::BFLOAT16.size(), 2);
        assert_eq!(DType(99).size(), 0);
        assert_eq!(cuda_device_count().unwrap() >= 0, true);
    }
}
