//! Metadata builders, plans and attention layers.

use std::marker::PhantomData;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};

use crate::{
    check, ensure_version, sys, AsDlTensor, AsDlTensorMut, AttnType, Backend, CudaGraphSupport,
    DType, Error, KvCacheDtype, Metadata, Result, Status,
};

fn non_null<T>(p: *mut T) -> Result<NonNull<T>> {
    NonNull::new(p).ok_or_else(|| Error {
        status: Status::INTERNAL,
        message: "the library returned success and a NULL handle".into(),
    })
}

/// Options of a metadata builder (`vattn_builder_options_t`).  `Default`
/// gives the library's defaults.
#[derive(Clone, Copy, Debug)]
pub struct BuilderOptions {
    /// Device index.
    pub device_id: i32,
    /// Query heads of the layers this builder serves.
    pub num_heads: i32,
    /// KV heads.
    pub num_kv_heads: i32,
    /// Head size.
    pub head_size: i32,
    /// Cache block size.
    pub block_size: i32,
    /// Plan capacity: requests.
    pub max_num_reqs: i32,
    /// Plan capacity: tokens.
    pub max_num_tokens: i64,
    /// Plan capacity: blocks per request.
    pub max_blocks_per_req: i32,
    /// CPU backend: worker threads, 0 = all hardware threads.
    pub num_threads: i32,
    /// CUDA: SMs to plan for, 0 = query the device.
    pub num_sms: i32,
    /// Split-KV bound, 0 = backend default.
    pub max_num_splits: i32,
    /// KV cache element type of the layers the plans serve
    /// (`VATTN_KV_CACHE_DTYPE_*`, default auto): CUDA shapes decode work for it.
    pub kv_cache_dtype: i32,
}

impl Default for BuilderOptions {
    fn default() -> Self {
        let mut o = sys::vattn_builder_options_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_builder_options_init(&mut o) };
        BuilderOptions {
            device_id: o.device_id,
            num_heads: o.num_heads,
            num_kv_heads: o.num_kv_heads,
            head_size: o.head_size,
            block_size: o.block_size,
            max_num_reqs: o.max_num_reqs,
            max_num_tokens: o.max_num_tokens,
            max_blocks_per_req: o.max_blocks_per_req,
            num_threads: o.num_threads,
            num_sms: o.num_sms,
            max_num_splits: o.max_num_splits,
            kv_cache_dtype: o.kv_cache_dtype,
        }
    }
}

impl BuilderOptions {
    fn to_raw(&self) -> sys::vattn_builder_options_t {
        let mut o = sys::vattn_builder_options_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_builder_options_init(&mut o) };
        o.device_id = self.device_id;
        o.num_heads = self.num_heads;
        o.num_kv_heads = self.num_kv_heads;
        o.head_size = self.head_size;
        o.block_size = self.block_size;
        o.max_num_reqs = self.max_num_reqs;
        o.max_num_tokens = self.max_num_tokens;
        o.max_blocks_per_req = self.max_blocks_per_req;
        o.num_threads = self.num_threads;
        o.num_sms = self.num_sms;
        o.max_num_splits = self.max_num_splits;
        o.kv_cache_dtype = self.kv_cache_dtype;
        o
    }
}

/// A metadata builder of one backend and KV cache group: turns
/// [`Metadata`] into a [`Plan`] that layers run.
pub struct Builder {
    raw: NonNull<sys::vattn_builder_t>,
}

// SAFETY: `&self` methods call only const-handle functions (concurrent use
// allowed by the header); building takes `&mut self`.
unsafe impl Send for Builder {}
unsafe impl Sync for Builder {}

impl Drop for Builder {
    fn drop(&mut self) {
        // SAFETY: owned handle, destroyed once.
        unsafe { sys::vattn_builder_destroy(self.raw.as_ptr()) }
    }
}

impl Builder {
    /// A builder of `backend` for layers of the given geometry.
    pub fn new(backend: Backend, opts: &BuilderOptions) -> Result<Builder> {
        ensure_version()?;
        let o = opts.to_raw();
        let mut out = ptr::null_mut();
        // SAFETY: valid descriptor and pointers.
        check(unsafe { sys::vattn_builder_create(&mut out, backend.as_ptr(), &o) })?;
        Ok(Builder { raw: non_null(out)? })
    }

    /// The raw handle (for `vattn-sys` calls).
    pub fn as_ptr(&self) -> *const sys::vattn_builder_t {
        self.raw.as_ptr()
    }

    /// CUDA-graph support level.
    pub fn cudagraph_support(&self) -> Result<CudaGraphSupport> {
        let mut v = 0i32;
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::vattn_builder_cudagraph_support(self.raw.as_ptr(), &mut v) })?;
        Ok(CudaGraphSupport(v))
    }

    /// Reorder threshold (0 = the backend does not reorder).
    pub fn reorder_batch_threshold(&self) -> Result<i32> {
        let mut v = 0i32;
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::vattn_builder_reorder_batch_threshold(self.raw.as_ptr(), &mut v) })?;
        Ok(v)
    }

    /// A new plan with this builder's capacity (its persistent buffers are
    /// allocated now and reused by every build).
    pub fn new_plan(&self) -> Result<Plan> {
        let mut out = ptr::null_mut();
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::vattn_plan_create(&mut out, self.raw.as_ptr()) })?;
        Ok(Plan { raw: non_null(out)? })
    }

    /// Builds `md` into `plan` on the default stream.  `common_prefix_len
    /// > 0` turns on cascade attention.
    pub fn build(
        &mut self,
        plan: &mut Plan,
        common_prefix_len: i64,
        md: &Metadata,
        fast_build: bool,
    ) -> Result<()> {
        // SAFETY: the NULL stream is always valid.
        unsafe { self.build_on_stream(plan, common_prefix_len, md, fast_build, ptr::null_mut()) }
    }

    /// [`Builder::build`] with copies issued on `stream`.
    ///
    /// # Safety
    /// `stream` must be NULL or a live `cudaStream_t` of the builder's device.
    pub unsafe fn build_on_stream(
        &mut self,
        plan: &mut Plan,
        common_prefix_len: i64,
        md: &Metadata,
        fast_build: bool,
        stream: *mut c_void,
    ) -> Result<()> {
        check(sys::vattn_builder_build(
            self.raw.as_ptr(),
            plan.raw.as_ptr(),
            common_prefix_len,
            md.as_ptr(),
            fast_build as i32,
            stream,
        ))
    }

    /// Builds metadata for a CUDA-graph capture (checked against the
    /// builder's support level), on the default stream.
    pub fn build_for_cudagraph_capture(&mut self, plan: &mut Plan, md: &Metadata) -> Result<()> {
        // SAFETY: handles valid, NULL stream.
        check(unsafe {
            sys::vattn_builder_build_for_cudagraph_capture(
                self.raw.as_ptr(),
                plan.raw.as_ptr(),
                md.as_ptr(),
                ptr::null_mut(),
            )
        })
    }

    /// Builds for a speculative draft step (fast build, no cascade), on the
    /// default stream.
    pub fn build_for_drafting(&mut self, plan: &mut Plan, md: &Metadata, draft_index: i32) -> Result<()> {
        // SAFETY: handles valid, NULL stream.
        check(unsafe {
            sys::vattn_builder_build_for_drafting(
                self.raw.as_ptr(),
                plan.raw.as_ptr(),
                md.as_ptr(),
                draft_index,
                ptr::null_mut(),
            )
        })
    }
}

/// A run plan: persistent buffers sized at creation, rebuilt by
/// [`Builder::build`] for each batch and read by [`Layer::forward`].
pub struct Plan {
    raw: NonNull<sys::vattn_plan_t>,
}

// SAFETY: forward reads the plan through a const pointer (concurrent use
// allowed); building it takes `&mut`.
unsafe impl Send for Plan {}
unsafe impl Sync for Plan {}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: owned handle, destroyed once.
        unsafe { sys::vattn_plan_destroy(self.raw.as_ptr()) }
    }
}

impl Plan {
    /// Same as [`Builder::new_plan`].
    pub fn new(builder: &Builder) -> Result<Plan> {
        builder.new_plan()
    }

    /// The raw handle (for `vattn-sys` calls).
    pub fn as_ptr(&self) -> *const sys::vattn_plan_t {
        self.raw.as_ptr()
    }
}

/// Options of an attention layer (`vattn_layer_options_t`).  `Default`
/// gives the library's defaults.
#[derive(Clone, Debug)]
pub struct LayerOptions {
    /// Query heads.
    pub num_heads: i32,
    /// Head size.
    pub head_size: i32,
    /// KV heads; 0 = `num_heads`.
    pub num_kv_heads: i32,
    /// Softmax scale; 0 = `1 / sqrt(head_size)`.
    pub scale: f32,
    /// q/k/v/output dtype.
    pub dtype: DType,
    /// KV cache dtype.
    pub kv_cache_dtype: KvCacheDtype,
    /// Attention type.
    pub attn_type: AttnType,
    /// Sliding window (tokens incl. self); 0 = none.
    pub sliding_window: i32,
    /// Logits soft cap; 0 = none.
    pub logits_soft_cap: f32,
    /// ALiBi slopes, one per query head.
    pub alibi_slopes: Option<Vec<f32>>,
    /// Attention sinks, one per query head.
    pub sinks: Option<Vec<f32>>,
    /// Reads another layer's cache and never writes it.
    pub kv_sharing: bool,
    /// Cache block size.
    pub block_size: i32,
}

impl Default for LayerOptions {
    fn default() -> Self {
        let mut o = sys::vattn_layer_options_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_layer_options_init(&mut o) };
        LayerOptions {
            num_heads: o.num_heads,
            head_size: o.head_size,
            num_kv_heads: o.num_kv_heads,
            scale: o.scale,
            dtype: DType(o.dtype),
            kv_cache_dtype: KvCacheDtype(o.kv_cache_dtype),
            attn_type: AttnType(o.attn_type),
            sliding_window: o.sliding_window,
            logits_soft_cap: o.logits_soft_cap,
            alibi_slopes: None,
            sinks: None,
            kv_sharing: o.kv_sharing != 0,
            block_size: o.block_size,
        }
    }
}

/// An attention layer (vLLM `AttentionImpl`) of one backend.
pub struct Layer {
    raw: NonNull<sys::vattn_layer_t>,
}

// SAFETY: forward takes the layer const (concurrent calls allowed by the
// header, each with its own output and cache).
unsafe impl Send for Layer {}
unsafe impl Sync for Layer {}

impl Drop for Layer {
    fn drop(&mut self) {
        // SAFETY: owned handle, destroyed once.
        unsafe { sys::vattn_layer_destroy(self.raw.as_ptr()) }
    }
}

impl Layer {
    /// Creates a layer; unsupported head size / dtype / block size /
    /// feature combinations fail here with [`Status::UNSUPPORTED`].
    pub fn new(backend: Backend, opts: &LayerOptions) -> Result<Layer> {
        ensure_version()?;
        let heads = opts.num_heads.max(0) as usize;
        for (what, v) in [("alibi_slopes", &opts.alibi_slopes), ("sinks", &opts.sinks)] {
            if let Some(v) = v {
                if v.len() != heads {
                    return Err(Error::invalid_argument(format!(
                        "argument '{}': has {} entries for num_heads = {}",
                        what,
                        v.len(),
                        heads
                    )));
                }
            }
        }
        let mut o = sys::vattn_layer_options_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_layer_options_init(&mut o) };
        o.num_heads = opts.num_heads;
        o.head_size = opts.head_size;
        o.num_kv_heads = opts.num_kv_heads;
        o.scale = opts.scale;
        o.dtype = opts.dtype.0;
        o.kv_cache_dtype = opts.kv_cache_dtype.0;
        o.attn_type = opts.attn_type.0;
        o.sliding_window = opts.sliding_window;
        o.logits_soft_cap = opts.logits_soft_cap;
        o.alibi_slopes = opts.alibi_slopes.as_ref().map_or(ptr::null(), |v| v.as_ptr());
        o.sinks = opts.sinks.as_ref().map_or(ptr::null(), |v| v.as_ptr());
        o.kv_sharing = opts.kv_sharing as i32;
        o.block_size = opts.block_size;
        let mut out = ptr::null_mut();
        // SAFETY: slopes/sinks have num_heads entries (copied by the library).
        check(unsafe { sys::vattn_layer_create(&mut out, backend.as_ptr(), &o) })?;
        Ok(Layer { raw: non_null(out)? })
    }

    /// The raw handle (for `vattn-sys` calls).
    pub fn as_ptr(&self) -> *const sys::vattn_layer_t {
        self.raw.as_ptr()
    }

    /// Writes the new K/V into the cache through the plan's slot mapping
    /// (unless K/V are absent or the layer shares another's cache), then
    /// attends every query token of the batch and writes the output.
    pub fn forward(&self, plan: &Plan, args: ForwardArgs<'_>) -> Result<()> {
        // SAFETY: every tensor in args is borrowed for the call (the
        // lifetime of ForwardArgs); handles are valid.
        check(unsafe { sys::vattn_layer_forward(self.raw.as_ptr(), plan.raw.as_ptr(), &args.raw) })
    }
}

/// Tensors of one [`Layer::forward`] call.  The builder methods borrow the
/// tensors until the call.
///
/// ```no_run
/// # fn f(layer: &vattn::Layer, plan: &vattn::Plan, q: &vattn::TensorView,
/// #      k: &vattn::TensorView, v: &vattn::TensorView,
/// #      cache: &mut vattn::KvCache, out: &mut vattn::TensorViewMut) -> vattn::Result<()> {
/// let mut kv = cache.layer_mut(0)?;
/// layer.forward(plan, vattn::ForwardArgs::new(q, out).key_value(k, v).kv_cache(&mut kv))?;
/// # Ok(()) }
/// ```
pub struct ForwardArgs<'a> {
    raw: sys::vattn_forward_args_t,
    _borrows: PhantomData<&'a mut ()>,
}

impl<'a> ForwardArgs<'a> {
    /// Query `[>= num_actual_tokens, num_heads, head_size]` and output of
    /// the same shape (layer dtype).
    pub fn new(query: &'a dyn AsDlTensor, output: &'a mut dyn AsDlTensorMut) -> Self {
        let mut raw = sys::vattn_forward_args_t::default();
        // SAFETY: valid pointer.
        unsafe { sys::vattn_forward_args_init(&mut raw) };
        raw.query = query.as_dl_tensor();
        raw.output = output.as_dl_tensor_mut();
        ForwardArgs { raw, _borrows: PhantomData }
    }

    /// New keys and values `[>= slot_mapping_len, num_kv_heads, head_size]`.
    pub fn key_value(mut self, key: &'a dyn AsDlTensor, value: &'a dyn AsDlTensor) -> Self {
        self.raw.key = key.as_dl_tensor();
        self.raw.value = value.as_dl_tensor();
        self
    }

    /// The layer's KV cache (logical 5-D).
    pub fn kv_cache(mut self, kv_cache: &'a mut dyn AsDlTensorMut) -> Self {
        self.raw.kv_cache = kv_cache.as_dl_tensor_mut();
        self
    }

    /// Optional float32 log-sum-exp output `[num_heads, >= num_actual_tokens]`.
    pub fn output_lse(mut self, lse: &'a mut dyn AsDlTensorMut) -> Self {
        self.raw.output_lse = lse.as_dl_tensor_mut();
        self
    }

    /// fp8 cache scales (stored = x / scale; default 1).
    pub fn scales(mut self, k_scale: f32, v_scale: f32) -> Self {
        self.raw.k_scale = k_scale;
        self.raw.v_scale = v_scale;
        self
    }

    /// Runs on `stream` (CUDA) instead of the default stream.
    ///
    /// # Safety
    /// `stream` must be NULL or a live `cudaStream_t` of the tensors' device.
    pub unsafe fn stream(mut self, stream: *mut c_void) -> Self {
        self.raw.stream = stream;
        self
    }
}

macro_rules! debug_handle {
    ($($t:ident),*) => {$(
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($t), "({:p})"), self.raw)
            }
        }
    )*};
}
debug_handle!(Builder, Plan, Layer);
