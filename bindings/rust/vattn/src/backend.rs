//! Backends: registry, selector, descriptors.

use std::ffi::{CStr, CString};
use std::ptr::{self, NonNull};

use crate::{
    check, ensure_version, sys, AttnType, CudaGraphSupport, DType, DeviceType, Error, Features,
    KvCacheDtype, Layout, Result,
};

/// An attention backend descriptor ("CPU", "CUDA", ...).  Descriptors are
/// immutable, owned by the library and live for the whole process, so this
/// is a cheap `Copy` reference.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Backend {
    raw: NonNull<sys::vattn_backend_t>,
}

// SAFETY: the header states that backend descriptors are immutable and live
// for the life of the process.
unsafe impl Send for Backend {}
unsafe impl Sync for Backend {}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.info() {
            Ok(i) => write!(f, "Backend({:?})", i.name),
            Err(_) => write!(f, "Backend({:p})", self.raw),
        }
    }
}

/// What a backend supports (`vattn_backend_info_t`).
#[derive(Clone, Debug)]
pub struct BackendInfo {
    /// Registered name ("CPU", "CUDA", ...).
    pub name: &'static str,
    /// Device its tensors live on.
    pub device_type: DeviceType,
    /// CUDA-graph support level of its metadata builder.
    pub cudagraph_support: CudaGraphSupport,
    /// Query-length threshold under which requests count as decodes when
    /// the batch is reordered; 0 = the backend does not reorder.
    pub reorder_batch_threshold: i32,
    /// Supported block sizes are multiples of this.
    pub block_size_multiple: i32,
    /// Largest supported head size.
    pub max_head_size: i32,
    /// Supported head sizes are multiples of this (up to `max_head_size`).
    pub head_size_multiple: i32,
    /// Bit `1 << d` for each supported q/k/v [`DType`] `d`.
    pub dtypes: u32,
    /// Bit `1 << d` for each supported [`KvCacheDtype`] `d`.
    pub kv_cache_dtypes: u32,
    /// Bit `1 << t` for each supported [`AttnType`] `t`.
    pub attn_types: u32,
    /// Supported features.
    pub features: Features,
    /// Head sizes the backend is tested with.
    pub head_sizes: &'static [i32],
}

impl BackendInfo {
    /// `true` when q/k/v of `dtype` are supported.
    pub fn supports_dtype(&self, dtype: DType) -> bool {
        (0..32).contains(&dtype.0) && self.dtypes & (1u32 << dtype.0) != 0
    }
    /// `true` when a cache of `dtype` is supported.
    pub fn supports_kv_cache_dtype(&self, dtype: KvCacheDtype) -> bool {
        (0..32).contains(&dtype.0) && self.kv_cache_dtypes & (1u32 << dtype.0) != 0
    }
    /// `true` when layers of `attn_type` are supported.
    pub fn supports_attn_type(&self, attn_type: AttnType) -> bool {
        (0..32).contains(&attn_type.0) && self.attn_types & (1u32 << attn_type.0) != 0
    }
}

/// What the caller needs from a backend (`vattn_backend_selector_t`, vLLM
/// `get_attn_backend`'s arguments).  `Default` gives the library's defaults.
#[derive(Clone, Copy, Debug)]
pub struct Selector {
    /// Head size of the layers.
    pub head_size: i32,
    /// q/k/v element type.
    pub dtype: DType,
    /// KV cache element type.
    pub kv_cache_dtype: KvCacheDtype,
    /// Cache block size.
    pub block_size: i32,
    /// Multi-head latent attention.
    pub use_mla: bool,
    /// The layers have attention sinks.
    pub has_sink: bool,
    /// Attention type.
    pub attn_type: AttnType,
    /// Device wanted; `None` = CUDA when a GPU is usable, else CPU.
    pub device_type: Option<DeviceType>,
    /// Features the caller needs.
    pub features: Features,
}

impl Default for Selector {
    fn default() -> Self {
        let mut s = sys::vattn_backend_selector_t::default();
        // SAFETY: valid pointer to a struct of the header's type.
        unsafe { sys::vattn_backend_selector_init(&mut s) };
        Selector {
            head_size: s.head_size,
            dtype: DType(s.dtype),
            kv_cache_dtype: KvCacheDtype(s.kv_cache_dtype),
            block_size: s.block_size,
            use_mla: s.use_mla != 0,
            has_sink: s.has_sink != 0,
            attn_type: AttnType(s.attn_type),
            device_type: if s.device_type == 0 { None } else { Some(DeviceType(s.device_type)) },
            features: Features(s.features),
        }
    }
}

impl Selector {
    fn to_raw(self) -> sys::vattn_backend_selector_t {
        let mut s = sys::vattn_backend_selector_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_backend_selector_init(&mut s) };
        s.head_size = self.head_size;
        s.dtype = self.dtype.0;
        s.kv_cache_dtype = self.kv_cache_dtype.0;
        s.block_size = self.block_size;
        s.use_mla = self.use_mla as i32;
        s.has_sink = self.has_sink as i32;
        s.attn_type = self.attn_type.0;
        s.device_type = self.device_type.map_or(0, |d| d.0);
        s.features = self.features.0;
        s
    }
}

impl Backend {
    pub(crate) fn from_raw(raw: *const sys::vattn_backend_t) -> Result<Backend> {
        NonNull::new(raw as *mut sys::vattn_backend_t)
            .map(|raw| Backend { raw })
            .ok_or_else(|| Error {
                status: crate::Status::INTERNAL,
                message: "the library returned a NULL backend".into(),
            })
    }

    /// The raw descriptor pointer (for `vattn-sys` calls).
    pub fn as_ptr(&self) -> *const sys::vattn_backend_t {
        self.raw.as_ptr()
    }

    /// Number of registered backends.
    pub fn count() -> usize {
        // SAFETY: no arguments.
        unsafe { sys::vattn_backend_count() }
    }

    /// The `index`-th registered backend (CPU first).
    pub fn get(index: usize) -> Result<Backend> {
        ensure_version()?;
        let mut out = ptr::null();
        // SAFETY: valid out pointer.
        check(unsafe { sys::vattn_backend_get(index, &mut out) })?;
        Backend::from_raw(out)
    }

    /// Every registered backend, in registration order.
    pub fn all() -> Result<Vec<Backend>> {
        (0..Backend::count()).map(Backend::get).collect()
    }

    /// The backend of a case-insensitive name; [`crate::Status::NOT_FOUND`]
    /// if none.
    pub fn find(name: &str) -> Result<Backend> {
        ensure_version()?;
        let c = CString::new(name)
            .map_err(|_| Error::invalid_argument("argument 'name': contains a NUL byte"))?;
        let mut out = ptr::null();
        // SAFETY: NUL-terminated string, valid out pointer.
        check(unsafe { sys::vattn_backend_find(c.as_ptr(), &mut out) })?;
        Backend::from_raw(out)
    }

    /// The first registered backend that supports everything `sel` asks
    /// for (vLLM `get_attn_backend`; `VATTN_ATTENTION_BACKEND` forces one).
    /// When none fits, the error message lists every backend and why.
    pub fn select(sel: &Selector) -> Result<Backend> {
        ensure_version()?;
        let raw = sel.to_raw();
        let mut out = ptr::null();
        // SAFETY: valid pointers.
        check(unsafe { sys::vattn_get_attn_backend(&raw, &mut out) })?;
        Backend::from_raw(out)
    }

    /// What this backend supports.
    pub fn info(&self) -> Result<BackendInfo> {
        let mut i = sys::vattn_backend_info_t {
            struct_size: std::mem::size_of::<sys::vattn_backend_info_t>(),
            ..Default::default()
        };
        // SAFETY: valid descriptor and out pointer.
        check(unsafe { sys::vattn_backend_get_info(self.raw.as_ptr(), &mut i) })?;
        // SAFETY: the header says the pointers refer to static storage.
        let name = if i.name.is_null() {
            ""
        } else {
            unsafe { CStr::from_ptr(i.name) }.to_str().unwrap_or("")
        };
        let head_sizes: &'static [i32] = if i.head_sizes.is_null() || i.num_head_sizes == 0 {
            &[]
        } else {
            // SAFETY: static storage of num_head_sizes entries.
            unsafe { std::slice::from_raw_parts(i.head_sizes, i.num_head_sizes) }
        };
        Ok(BackendInfo {
            name,
            device_type: DeviceType(i.device_type),
            cudagraph_support: CudaGraphSupport(i.cudagraph_support),
            reorder_batch_threshold: i.reorder_batch_threshold,
            block_size_multiple: i.block_size_multiple,
            max_head_size: i.max_head_size,
            head_size_multiple: i.head_size_multiple,
            dtypes: i.dtypes,
            kv_cache_dtypes: i.kv_cache_dtypes,
            attn_types: i.attn_types,
            features: Features(i.features),
            head_sizes,
        })
    }

    /// Logical KV cache shape of one layer: rank 5 `(2, num_blocks,
    /// block_size, num_kv_heads, head_size)`, or rank 3 for MLA.
    pub fn kv_cache_shape(
        &self,
        num_blocks: i64,
        block_size: i32,
        num_kv_heads: i32,
        head_size: i32,
        use_mla: bool,
    ) -> Result<Vec<i64>> {
        let mut shape = [0i64; 5];
        let mut ndim = 0i32;
        // SAFETY: shape holds 5 entries as required.
        check(unsafe {
            sys::vattn_backend_kv_cache_shape(
                self.raw.as_ptr(),
                num_blocks,
                block_size,
                num_kv_heads,
                head_size,
                use_mla as i32,
                shape.as_mut_ptr(),
                &mut ndim,
            )
        })?;
        Ok(shape[..(ndim.clamp(0, 5) as usize)].to_vec())
    }

    /// Physical order of the logical dims for `layout` (vLLM
    /// `get_kv_cache_stride_order`), optionally with a leading layers dim.
    pub fn kv_cache_stride_order(
        &self,
        layout: Layout,
        include_num_layers_dimension: bool,
    ) -> Result<Vec<i32>> {
        let mut order = [0i32; 6];
        let mut ndim = 0i32;
        // SAFETY: order holds 6 entries as required.
        check(unsafe {
            sys::vattn_backend_kv_cache_stride_order(
                self.raw.as_ptr(),
                layout.0,
                include_num_layers_dimension as i32,
                order.as_mut_ptr(),
                &mut ndim,
            )
        })?;
        Ok(order[..(ndim.clamp(0, 6) as usize)].to_vec())
    }
}

/// The default KV cache layout: the override set by
/// [`set_kv_cache_layout`], else `VATTN_KV_CACHE_LAYOUT`, else NHD.
pub fn get_kv_cache_layout() -> Result<Layout> {
    let mut l = 0i32;
    // SAFETY: valid out pointer.
    check(unsafe { sys::vattn_get_kv_cache_layout(&mut l) })?;
    Ok(Layout(l))
}

/// Overrides the default KV cache layout for the process (takes effect at once).
pub fn set_kv_cache_layout(layout: Layout) -> Result<()> {
    if layout.0 < 0 {
        return Err(Error::invalid_argument("argument 'layout': use unset_kv_cache_layout()"));
    }
    // SAFETY: plain integer.
    check(unsafe { sys::vattn_set_kv_cache_layout(layout.0) })
}

/// Removes the override of [`set_kv_cache_layout`].
pub fn unset_kv_cache_layout() -> Result<()> {
    // SAFETY: plain integer.
    check(unsafe { sys::vattn_set_kv_cache_layout(-1) })
}
