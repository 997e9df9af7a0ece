//! KV cache specs, allocation and per-layer views.

use std::marker::PhantomData;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};

use crate::tensor::{device_type, Sealed};
use crate::{
    check, check_len, ensure_version, sys, AsDlTensor, AsDlTensorMut, Backend, DType, DeviceType,
    Element, Error, Layout, Result, SpecKind, Status, TensorViewMut,
};

/// What one layer keeps in the cache per block (`vattn_kv_cache_spec_t`,
/// vLLM's `KVCacheSpec`).  `Default` gives the library's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvCacheSpec {
    /// Kind of spec.
    pub kind: SpecKind,
    /// Tokens per block.
    pub block_size: i32,
    /// KV heads (MLA: 1).
    pub num_kv_heads: i32,
    /// Head size (MLA: kv_lora_rank + rope dim, e.g. 576).
    pub head_size: i32,
    /// Element type stored in the cache.
    pub dtype: DType,
    /// Sliding window in tokens; 0 = none.
    pub sliding_window: i32,
    /// Chunked-local attention chunk; 0 = none.
    pub attention_chunk_size: i32,
    /// MLA only: the fp8_ds_mla format (656 bytes per token).
    pub mla_fp8_ds: bool,
    /// When non-zero, overrides the page size (must be >= the real one).
    pub page_size_padded: i64,
}

impl Default for KvCacheSpec {
    fn default() -> Self {
        let mut s = sys::vattn_kv_cache_spec_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_kv_cache_spec_init(&mut s) };
        KvCacheSpec::from_raw(&s)
    }
}

/// An output spec with its struct_size set (the library checks it).
fn raw_spec_out() -> sys::vattn_kv_cache_spec_t {
    let mut s = sys::vattn_kv_cache_spec_t::default();
    // SAFETY: valid pointer.
    unsafe { sys::vattn_kv_cache_spec_init(&mut s) };
    s
}

impl KvCacheSpec {
    pub(crate) fn from_raw(s: &sys::vattn_kv_cache_spec_t) -> Self {
        KvCacheSpec {
            kind: SpecKind(s.kind),
            block_size: s.block_size,
            num_kv_heads: s.num_kv_heads,
            head_size: s.head_size,
            dtype: DType(s.dtype),
            sliding_window: s.sliding_window,
            attention_chunk_size: s.attention_chunk_size,
            mla_fp8_ds: s.mla_fp8_ds != 0,
            page_size_padded: s.page_size_padded,
        }
    }

    pub(crate) fn to_raw(&self) -> sys::vattn_kv_cache_spec_t {
        let mut s = sys::vattn_kv_cache_spec_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_kv_cache_spec_init(&mut s) };
        s.kind = self.kind.0;
        s.block_size = self.block_size;
        s.num_kv_heads = self.num_kv_heads;
        s.head_size = self.head_size;
        s.dtype = self.dtype.0;
        s.sliding_window = self.sliding_window;
        s.attention_chunk_size = self.attention_chunk_size;
        s.mla_fp8_ds = self.mla_fp8_ds as i32;
        s.page_size_padded = self.page_size_padded;
        s
    }

    /// Bytes of one block of this spec for one layer (K and V together;
    /// the latent for MLA).
    pub fn page_size_bytes(&self) -> Result<i64> {
        let raw = self.to_raw();
        let mut out = 0i64;
        // SAFETY: valid pointers.
        check(unsafe { sys::vattn_kv_cache_spec_page_size_bytes(&raw, &mut out) })?;
        Ok(out)
    }

    /// Worst-case bytes one request needs (vLLM `max_memory_usage_bytes`).
    pub fn max_memory_usage_bytes(&self, limits: &ModelLimits) -> Result<i64> {
        let raw = self.to_raw();
        let l = limits.to_raw();
        let mut out = 0i64;
        // SAFETY: valid pointers.
        check(unsafe { sys::vattn_kv_cache_spec_max_memory_usage_bytes(&raw, &l, &mut out) })?;
        Ok(out)
    }

    /// Merges the specs of the layers of one group (vLLM `Spec.merge`).
    pub fn merge(specs: &[KvCacheSpec]) -> Result<KvCacheSpec> {
        let raw: Vec<_> = specs.iter().map(KvCacheSpec::to_raw).collect();
        let mut out = raw_spec_out();
        // SAFETY: raw has specs.len() entries.
        check(unsafe { sys::vattn_kv_cache_specs_merge(raw.as_ptr(), raw.len(), &mut out) })?;
        Ok(KvCacheSpec::from_raw(&out))
    }
}

/// Limits that size the cache pool (`vattn_model_limits_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelLimits {
    /// Longest sequence.
    pub max_model_len: i64,
    /// Most tokens in one batch.
    pub max_num_batched_tokens: i64,
    /// Longest encoder input (cross-attention).
    pub max_encoder_len: i64,
    /// Decode context parallel world size.
    pub dcp_world_size: i32,
    /// Prefill context parallel world size.
    pub pcp_world_size: i32,
}

impl Default for ModelLimits {
    fn default() -> Self {
        let mut l = sys::vattn_model_limits_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_model_limits_init(&mut l) };
        ModelLimits {
            max_model_len: l.max_model_len,
            max_num_batched_tokens: l.max_num_batched_tokens,
            max_encoder_len: l.max_encoder_len,
            dcp_world_size: l.dcp_world_size,
            pcp_world_size: l.pcp_world_size,
        }
    }
}

impl ModelLimits {
    fn to_raw(self) -> sys::vattn_model_limits_t {
        let mut l = sys::vattn_model_limits_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_model_limits_init(&mut l) };
        l.max_model_len = self.max_model_len;
        l.max_num_batched_tokens = self.max_num_batched_tokens;
        l.max_encoder_len = self.max_encoder_len;
        l.dcp_world_size = self.dcp_world_size;
        l.pcp_world_size = self.pcp_world_size;
        l
    }
}

/// How to allocate a cache (`vattn_kv_cache_options_t`).
#[derive(Clone, Copy, Debug)]
pub struct KvCacheOptions {
    /// Device of the cache (CPU by default).
    pub device_type: DeviceType,
    /// Device index.
    pub device_id: i32,
    /// Layout; `None` = [`crate::get_kv_cache_layout`].
    pub layout: Option<Layout>,
    /// Zero the memory after allocation.
    pub zero_fill: bool,
    /// Blocks per layer; 0 = as many as fit in `memory_budget_bytes`.
    pub num_blocks: i64,
    /// Memory budget used when `num_blocks` is 0.
    pub memory_budget_bytes: i64,
    /// Backend giving shape and stride order; `None` = the device's default.
    pub backend: Option<Backend>,
}

impl Default for KvCacheOptions {
    fn default() -> Self {
        let mut o = sys::vattn_kv_cache_options_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_kv_cache_options_init(&mut o) };
        KvCacheOptions {
            device_type: DeviceType(o.device_type),
            device_id: o.device_id,
            layout: None,
            zero_fill: o.zero_fill != 0,
            num_blocks: o.num_blocks,
            memory_budget_bytes: o.memory_budget_bytes,
            backend: None,
        }
    }
}

impl KvCacheOptions {
    fn to_raw(&self) -> sys::vattn_kv_cache_options_t {
        let mut o = sys::vattn_kv_cache_options_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_kv_cache_options_init(&mut o) };
        o.device_type = self.device_type.0;
        o.device_id = self.device_id;
        if let Some(l) = self.layout {
            o.layout = l.0;
        }
        o.zero_fill = self.zero_fill as i32;
        o.num_blocks = self.num_blocks;
        o.memory_budget_bytes = self.memory_budget_bytes;
        o.backend = self.backend.map_or(ptr::null(), |b| b.as_ptr());
        o
    }
}

/// Facts about an allocated cache (`vattn_kv_cache_info_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvCacheInfo {
    /// Blocks per layer.
    pub num_blocks: i64,
    /// Bytes owned (0 for caller-owned tensors).
    pub total_bytes: i64,
    /// Layers.
    pub num_layers: i32,
    /// Groups of layers with equal specs.
    pub num_groups: i32,
    /// Device type.
    pub device_type: DeviceType,
    /// Device index.
    pub device_id: i32,
    /// Physical layout.
    pub layout: Layout,
}

/// The paged KV caches of a model's layers (`vattn_kv_cache_t`).
///
/// `'a` is the lifetime of caller-owned memory for caches made by
/// [`KvCache::from_tensors`]; caches allocated by the library are
/// `KvCache<'static>`.
pub struct KvCache<'a> {
    raw: NonNull<sys::vattn_kv_cache_t>,
    // Caller-owned tensors, boxed so that the DLTensors handed to the
    // library keep their addresses.
    _tensors: Vec<Option<Box<TensorViewMut<'a>>>>,
    _memory: PhantomData<&'a mut [u8]>,
}

// SAFETY: const functions may run concurrently (the header's thread-safety
// paragraph); `&self` methods only call those.  The handle is not tied to a
// thread.
unsafe impl Send for KvCache<'_> {}
unsafe impl Sync for KvCache<'_> {}

impl Drop for KvCache<'_> {
    fn drop(&mut self) {
        // SAFETY: owned handle, destroyed once.
        unsafe { sys::vattn_kv_cache_destroy(self.raw.as_ptr()) }
    }
}

fn check_sharing(sharing: Option<&[i32]>, n: usize) -> Result<*const i32> {
    match sharing {
        None => Ok(ptr::null()),
        Some(s) => {
            if s.len() != n {
                return Err(Error::invalid_argument(format!(
                    "argument 'kv_sharing_target': has {} entries for {} layers",
                    s.len(),
                    n
                )));
            }
            Ok(s.as_ptr())
        }
    }
}

impl KvCache<'static> {
    /// Blocks per layer that fit in `memory_budget_bytes` when every
    /// non-sharing layer keeps that many pages of its own size.
    /// `kv_sharing_target[i]` is -1 or the earlier layer whose cache layer
    /// `i` reads.
    pub fn num_blocks_for_budget(
        specs: &[KvCacheSpec],
        kv_sharing_target: Option<&[i32]>,
        memory_budget_bytes: i64,
    ) -> Result<i64> {
        let sharing = check_sharing(kv_sharing_target, specs.len())?;
        let raw: Vec<_> = specs.iter().map(KvCacheSpec::to_raw).collect();
        let mut out = 0i64;
        // SAFETY: arrays of specs.len() entries.
        check(unsafe {
            sys::vattn_kv_cache_num_blocks_for_budget(
                raw.as_ptr(),
                sharing,
                raw.len(),
                memory_budget_bytes,
                &mut out,
            )
        })?;
        Ok(out)
    }

    /// Allocates the caches of `specs.len()` layers (layer `i` has spec
    /// `specs[i]`; `kv_sharing_target` as in
    /// [`KvCache::num_blocks_for_budget`]).
    pub fn new(
        specs: &[KvCacheSpec],
        kv_sharing_target: Option<&[i32]>,
        opts: &KvCacheOptions,
    ) -> Result<KvCache<'static>> {
        ensure_version()?;
        let sharing = check_sharing(kv_sharing_target, specs.len())?;
        let raw_specs: Vec<_> = specs.iter().map(KvCacheSpec::to_raw).collect();
        let o = opts.to_raw();
        let mut out = ptr::null_mut();
        // SAFETY: arrays of specs.len() entries; valid pointers.
        check(unsafe {
            sys::vattn_kv_cache_create(&mut out, raw_specs.as_ptr(), sharing, raw_specs.len(), &o)
        })?;
        Ok(KvCache { raw: non_null(out)?, _tensors: Vec::new(), _memory: PhantomData })
    }
}

fn non_null<T>(p: *mut T) -> Result<NonNull<T>> {
    NonNull::new(p).ok_or_else(|| Error {
        status: Status::INTERNAL,
        message: "the library returned success and a NULL handle".into(),
    })
}

impl<'a> KvCache<'a> {
    /// A cache over caller-owned memory: `tensors[i]` is layer `i`'s cache
    /// in the backend's logical shape (any strides), `None` for sharing
    /// layers.  The views are kept (and their memory stays borrowed) for
    /// the life of the cache.
    pub fn from_tensors(
        specs: &[KvCacheSpec],
        kv_sharing_target: Option<&[i32]>,
        tensors: Vec<Option<TensorViewMut<'a>>>,
        opts: &KvCacheOptions,
    ) -> Result<KvCache<'a>> {
        ensure_version()?;
        let sharing = check_sharing(kv_sharing_target, specs.len())?;
        check_len("tensors", tensors.len(), specs.len())?;
        let raw_specs: Vec<_> = specs.iter().map(KvCacheSpec::to_raw).collect();
        let mut boxed: Vec<Option<Box<TensorViewMut<'a>>>> =
            tensors.into_iter().map(|t| t.map(Box::new)).collect();
        let ptrs: Vec<*const sys::DLTensor> = boxed
            .iter_mut()
            .map(|t| t.as_mut().map_or(ptr::null(), |t| t.as_dl_tensor_mut() as *const _))
            .collect();
        let o = opts.to_raw();
        let mut out = ptr::null_mut();
        // SAFETY: arrays of specs.len() entries; the tensors live in `boxed`,
        // which the handle keeps.
        check(unsafe {
            sys::vattn_kv_cache_create_from_tensors(
                &mut out,
                raw_specs.as_ptr(),
                sharing,
                raw_specs.len(),
                ptrs.as_ptr(),
                &o,
            )
        })?;
        Ok(KvCache { raw: non_null(out)?, _tensors: boxed, _memory: PhantomData })
    }

    /// The raw handle (for `vattn-sys` calls).
    pub fn as_ptr(&self) -> *const sys::vattn_kv_cache_t {
        self.raw.as_ptr()
    }

    /// Blocks, bytes, layers, groups, device and layout.
    pub fn info(&self) -> Result<KvCacheInfo> {
        let mut i = sys::vattn_kv_cache_info_t {
            struct_size: std::mem::size_of::<sys::vattn_kv_cache_info_t>(),
            ..Default::default()
        };
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::vattn_kv_cache_get_info(self.raw.as_ptr(), &mut i) })?;
        Ok(KvCacheInfo {
            num_blocks: i.num_blocks,
            total_bytes: i.total_bytes,
            num_layers: i.num_layers,
            num_groups: i.num_groups,
            device_type: DeviceType(i.device_type),
            device_id: i.device_id,
            layout: Layout(i.layout),
        })
    }

    /// Group index of a layer.
    pub fn layer_group(&self, layer: usize) -> Result<i32> {
        let mut g = 0i32;
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::vattn_kv_cache_layer_group(self.raw.as_ptr(), layer, &mut g) })?;
        Ok(g)
    }

    /// Merged spec of a group.
    pub fn group_spec(&self, group: usize) -> Result<KvCacheSpec> {
        let mut s = raw_spec_out();
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::vattn_kv_cache_group_spec(self.raw.as_ptr(), group, &mut s) })?;
        Ok(KvCacheSpec::from_raw(&s))
    }

    fn layer_tensor(&self, layer: usize) -> Result<sys::DLTensor> {
        // SAFETY: DLTensor is plain data; zeroed is a valid (empty) value.
        let mut dl: sys::DLTensor = unsafe { std::mem::zeroed() };
        // SAFETY: valid handle and out pointer; shape/strides point into the
        // handle and live until it is destroyed.
        check(unsafe { sys::vattn_kv_cache_layer_tensor(self.raw.as_ptr(), layer, &mut dl) })?;
        Ok(dl)
    }

    /// Read-only view of layer `layer`'s cache (a sharing layer gets its
    /// target's), in the logical shape with the layout's strides.
    pub fn layer(&self, layer: usize) -> Result<KvLayer<'_>> {
        Ok(KvLayer { dl: self.layer_tensor(layer)?, _cache: PhantomData })
    }

    /// `copy_blocks` over every layer of this cache: for every `[src, dst]`
    /// pair, copies block `src` to block `dst` in K and V.  Layers sharing
    /// another layer's memory are copied once.
    pub fn copy_blocks(&mut self, block_mapping: &[[i64; 2]]) -> Result<()> {
        // SAFETY: the NULL stream is always valid.
        unsafe { self.copy_blocks_on_stream(block_mapping, ptr::null_mut()) }
    }

    /// [`KvCache::copy_blocks`] with the copies issued on `stream`: a
    /// `cudaStream_t`, or NULL for the default stream.  A CPU cache ignores
    /// the stream (the copy is done when this returns).
    ///
    /// # Safety
    /// `stream` must be NULL or a live `cudaStream_t` of the cache's device.
    pub unsafe fn copy_blocks_on_stream(
        &mut self,
        block_mapping: &[[i64; 2]],
        stream: *mut c_void,
    ) -> Result<()> {
        let n = self.info()?.num_layers.max(0) as usize;
        let mut tensors: Vec<sys::DLTensor> = Vec::with_capacity(n);
        for l in 0..n {
            let dl = self.layer_tensor(l)?;
            if !tensors.iter().any(|t| t.data == dl.data && t.byte_offset == dl.byte_offset) {
                tensors.push(dl);
            }
        }
        let ptrs: Vec<*mut sys::DLTensor> = tensors.iter_mut().map(|t| t as *mut sys::DLTensor).collect();
        // The tensors are views of this cache, borrowed exclusively by &mut self.
        crate::ops::copy_blocks_raw(&ptrs, block_mapping, stream)
    }

    /// Writable view of layer `layer`'s cache, for [`crate::Layer::forward`]
    /// and the cache operations.
    pub fn layer_mut(&mut self, layer: usize) -> Result<KvLayerMut<'_>> {
        Ok(KvLayerMut { dl: self.layer_tensor(layer)?, _cache: PhantomData })
    }
}

fn dl_shape(dl: &sys::DLTensor) -> &[i64] {
    if dl.shape.is_null() || dl.ndim <= 0 {
        &[]
    } else {
        // SAFETY: the library's tensor has ndim shape entries.
        unsafe { std::slice::from_raw_parts(dl.shape, dl.ndim as usize) }
    }
}

fn dl_strides(dl: &sys::DLTensor) -> Option<&[i64]> {
    if dl.strides.is_null() || dl.ndim <= 0 {
        None
    } else {
        // SAFETY: ndim entries.
        Some(unsafe { std::slice::from_raw_parts(dl.strides, dl.ndim as usize) })
    }
}

/// Number of elements from the first to one past the last element reachable.
fn dl_extent(dl: &sys::DLTensor) -> usize {
    let shape = dl_shape(dl);
    if shape.contains(&0) {
        return 0;
    }
    match dl_strides(dl) {
        None => shape.iter().product::<i64>() as usize,
        Some(st) => 1 + shape.iter().zip(st).map(|(&d, &s)| (d - 1) * s).sum::<i64>() as usize,
    }
}

fn dl_as_slice<T: Element>(dl: &sys::DLTensor) -> Result<&[T]> {
    if device_type(dl) != DeviceType::CPU {
        return Err(Error {
            status: Status::UNSUPPORTED,
            message: "the cache is not in host memory".into(),
        });
    }
    let want = T::DL_DTYPE;
    if (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) != (want.code, want.bits, want.lanes) {
        return Err(Error::invalid_argument("element type differs from the cache's dtype"));
    }
    let n = dl_extent(dl);
    if n == 0 {
        return Ok(&[]);
    }
    // SAFETY: host memory of the cache, n elements from data + byte_offset,
    // alive while the cache is borrowed.
    Ok(unsafe {
        std::slice::from_raw_parts(
            (dl.data as *const u8).add(dl.byte_offset as usize) as *const T,
            n,
        )
    })
}

/// A read-only view of one layer's cache, borrowed from the [`KvCache`].
pub struct KvLayer<'c> {
    dl: sys::DLTensor,
    _cache: PhantomData<&'c ()>,
}

/// A writable view of one layer's cache, exclusively borrowed from the
/// [`KvCache`].
pub struct KvLayerMut<'c> {
    dl: sys::DLTensor,
    _cache: PhantomData<&'c mut ()>,
}

macro_rules! layer_view_common {
    ($t:ident) => {
        impl<'c> $t<'c> {
            /// Logical shape, e.g. `(2, num_blocks, block_size, num_kv_heads, head_size)`.
            pub fn shape(&self) -> &[i64] {
                dl_shape(&self.dl)
            }
            /// Strides in elements (`None` = compact row-major).
            pub fn strides(&self) -> Option<&[i64]> {
                dl_strides(&self.dl)
            }
            /// Device type of the memory.
            pub fn device_type(&self) -> DeviceType {
                device_type(&self.dl)
            }
            /// The memory as a host slice of `T` (CPU caches only), covering
            /// every element the view reaches; index it with
            /// [`Self::strides`].
            pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
                dl_as_slice(&self.dl)
            }
            /// The DLTensor (shape and strides point into the cache handle).
            pub fn raw(&self) -> &sys::DLTensor {
                &self.dl
            }
        }
        impl Sealed for $t<'_> {}
        impl AsDlTensor for $t<'_> {
            fn as_dl_tensor(&self) -> *const sys::DLTensor {
                &self.dl
            }
        }
        // SAFETY: a borrow of the cache (shared or exclusive).
        unsafe impl Send for $t<'_> {}
        unsafe impl Sync for $t<'_> {}
    };
}
layer_view_common!(KvLayer);
layer_view_common!(KvLayerMut);

impl AsDlTensorMut for KvLayerMut<'_> {
    fn as_dl_tensor_mut(&mut self) -> *mut sys::DLTensor {
        &mut self.dl
    }
}

impl<'c> KvLayerMut<'c> {
    /// The memory as a mutable host slice (CPU caches only).
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T]> {
        let s = dl_as_slice::<T>(&self.dl)?;
        // SAFETY: this view borrows the cache exclusively.
        Ok(unsafe { std::slice::from_raw_parts_mut(s.as_ptr() as *mut T, s.len()) })
    }
}

impl std::fmt::Debug for KvCache<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.info() {
            Ok(i) => f.debug_tuple("KvCache").field(&i).finish(),
            Err(_) => write!(f, "KvCache({:p})", self.raw),
        }
    }
}
