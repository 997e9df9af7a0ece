//! Borrowed DLPack tensors over host slices.

use std::marker::PhantomData;
use std::os::raw::c_void;

use crate::{sys, DType, DeviceType, Error, Result};

/// A host element type that can back a tensor.
///
/// Implemented for `f32`, `f64`, `i32`, `i64`, `u8` and the 16-bit float
/// carriers [`F16`] and [`Bf16`].
pub trait Element: Copy + Send + Sync + 'static + private::Sealed {
    /// DLPack dtype of this element.
    const DL_DTYPE: sys::DLDataType;
}

mod private {
    pub trait Sealed {}
}

/// An IEEE half-precision value, kept as its bit pattern.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct F16(pub u16);

/// A bfloat16 value, kept as its bit pattern.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Bf16(pub u16);

impl Bf16 {
    /// Rounds an `f32` to the nearest bfloat16 (ties to even; NaN stays NaN).
    pub fn from_f32(x: f32) -> Bf16 {
        let b = x.to_bits();
        if x.is_nan() {
            return Bf16(((b >> 16) as u16) | 0x40);
        }
        let round = 0x7fff + ((b >> 16) & 1);
        Bf16((b.wrapping_add(round) >> 16) as u16)
    }
    /// The exact `f32` value.
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

macro_rules! element {
    ($t:ty, $code:expr, $bits:expr) => {
        impl private::Sealed for $t {}
        impl Element for $t {
            const DL_DTYPE: sys::DLDataType =
                sys::DLDataType { code: $code as u8, bits: $bits, lanes: 1 };
        }
    };
}
element!(f32, sys::kDLFloat, 32);
element!(f64, sys::kDLFloat, 64);
element!(i32, sys::kDLInt, 32);
element!(i64, sys::kDLInt, 64);
element!(u8, sys::kDLUInt, 8);
element!(F16, sys::kDLFloat, 16);
element!(Bf16, sys::kDLBfloat, 16);

/// Anything that can be passed to the library as a `const DLTensor *`.
///
/// Sealed: implemented by [`TensorView`], [`TensorViewMut`] and the KV cache
/// layer views, whose pointers are valid for as long as they are borrowed.
pub trait AsDlTensor: private::Sealed {
    /// The tensor, valid while `self` is borrowed.
    fn as_dl_tensor(&self) -> *const sys::DLTensor;
}

/// Anything that can be passed to the library as a writable `DLTensor *`.
pub trait AsDlTensorMut: AsDlTensor {
    /// The tensor, valid (and exclusively borrowed) while `self` is.
    fn as_dl_tensor_mut(&mut self) -> *mut sys::DLTensor;
}

/// Shape + strides storage shared by the two views: the `DLTensor` points at
/// the vectors' heap buffers, which do not move when the view does.
struct Layout {
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
}

fn layout(len: usize, shape: &[i64], strides: Option<&[i64]>) -> Result<Layout> {
    if shape.iter().any(|&d| d < 0) {
        return Err(Error::invalid_argument(format!("tensor shape {:?} has a negative dimension", shape)));
    }
    let numel: i64 = shape.iter().try_fold(1i64, |a, &d| a.checked_mul(d)).ok_or_else(|| {
        Error::invalid_argument(format!("tensor shape {:?} overflows", shape))
    })?;
    match strides {
        None => {
            if numel as u128 != len as u128 {
                return Err(Error::invalid_argument(format!(
                    "tensor shape {:?} has {} elements but the slice has {}",
                    shape, numel, len
                )));
            }
            Ok(Layout { shape: shape.to_vec(), strides: None })
        }
        Some(st) => {
            if st.len() != shape.len() {
                return Err(Error::invalid_argument(format!(
                    "tensor strides {:?} and shape {:?} differ in rank",
                    st, shape
                )));
            }
            if st.iter().any(|&s| s < 0) {
                return Err(Error::invalid_argument(format!("tensor strides {:?} are negative", st)));
            }
            // Highest element index reachable, which must lie in the slice.
            if numel > 0 {
                let mut last: i128 = 0;
                for (d, s) in shape.iter().zip(st) {
                    last += (*d as i128 - 1) * *s as i128;
                }
                if last >= len as i128 {
                    return Err(Error::invalid_argument(format!(
                        "tensor shape {:?} with strides {:?} reaches element {} of a slice of {}",
                        shape, st, last, len
                    )));
                }
            }
            Ok(Layout { shape: shape.to_vec(), strides: Some(st.to_vec()) })
        }
    }
}

fn dl_tensor(data: *mut c_void, dtype: sys::DLDataType, l: &mut Layout) -> sys::DLTensor {
    sys::DLTensor {
        data,
        device: sys::DLDevice { device_type: sys::kDLCPU, device_id: 0 },
        ndim: l.shape.len() as i32,
        dtype,
        shape: l.shape.as_mut_ptr(),
        strides: l.strides.as_mut().map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: 0,
    }
}

/// Runs one of the spec-decode reshapes on `src` and returns the view it
/// made with shape and strides copied into an owned [`Layout`] (the
/// library may point them at its scratch buffers or at `src`'s arrays).
fn spec_decode_reshape(src: *const sys::DLTensor, batch_size: Option<i64>) -> Result<(sys::DLTensor, Layout)> {
    let mut shape_buf = [0i64; 4];
    let mut strides_buf = [0i64; 4];
    // SAFETY: DLTensor is plain data; zeroed is a valid (empty) value.
    let mut out: sys::DLTensor = unsafe { std::mem::zeroed() };
    // SAFETY: src is a live tensor borrowed by the caller; the buffers have
    // the 4 entries the header asks for.
    crate::check(unsafe {
        match batch_size {
            Some(b) => sys::vattn_reshape_query_for_spec_decode(
                src,
                b,
                &mut out,
                shape_buf.as_mut_ptr(),
                strides_buf.as_mut_ptr(),
            ),
            None => sys::vattn_reshape_attn_output_for_spec_decode(
                src,
                &mut out,
                shape_buf.as_mut_ptr(),
                strides_buf.as_mut_ptr(),
            ),
        }
    })?;
    let nd = out.ndim.max(0) as usize;
    let copy = |p: *const i64| -> Option<Vec<i64>> {
        if p.is_null() {
            None
        } else {
            // SAFETY: the library's view has ndim entries there (still alive:
            // the scratch buffers above or src's arrays).
            Some(unsafe { std::slice::from_raw_parts(p, nd) }.to_vec())
        }
    };
    let mut layout = Layout { shape: copy(out.shape).unwrap_or_default(), strides: copy(out.strides) };
    out.shape = layout.shape.as_mut_ptr();
    out.strides = layout.strides.as_mut().map_or(std::ptr::null_mut(), |s| s.as_mut_ptr());
    Ok((out, layout))
}

/// A read-only DLPack tensor over a host slice: the slice stays borrowed
/// for `'a`.
pub struct TensorView<'a> {
    dl: sys::DLTensor,
    layout: Layout,
    _data: PhantomData<&'a [u8]>,
}

impl<'a> TensorView<'a> {
    /// A compact row-major tensor of `shape` over `data` (whose length must
    /// be the product of `shape`).
    pub fn new<T: Element>(data: &'a [T], shape: &[i64]) -> Result<Self> {
        Self::build(data, shape, None)
    }

    /// A strided tensor (strides in elements, non-negative) over `data`;
    /// every element it reaches must lie inside the slice.
    pub fn with_strides<T: Element>(data: &'a [T], shape: &[i64], strides: &[i64]) -> Result<Self> {
        Self::build(data, shape, Some(strides))
    }

    fn build<T: Element>(data: &'a [T], shape: &[i64], strides: Option<&[i64]>) -> Result<Self> {
        let mut layout = layout(data.len(), shape, strides)?;
        let dl = dl_tensor(data.as_ptr() as *mut c_void, T::DL_DTYPE, &mut layout);
        Ok(TensorView { dl, layout, _data: PhantomData })
    }

    /// A view of `data` with a vattn dtype that has no Rust element type
    /// (fp8 as uint8 bytes, or f16/bf16 bit patterns in `u16`s): the shape
    /// counts elements of `dtype`.
    pub fn from_bytes(data: &'a [u8], dtype: DType, shape: &[i64]) -> Result<Self> {
        let (dl_dtype, size) = dl_dtype_of(dtype)?;
        if data.len() % size != 0 {
            return Err(Error::invalid_argument("byte slice is not a whole number of elements"));
        }
        let mut layout = layout(data.len() / size, shape, None)?;
        let dl = dl_tensor(data.as_ptr() as *mut c_void, dl_dtype, &mut layout);
        Ok(TensorView { dl, layout, _data: PhantomData })
    }

    /// The shape.
    pub fn shape(&self) -> &[i64] {
        &self.layout.shape
    }

    /// The strides in elements (`None` = compact row-major).
    pub fn strides(&self) -> Option<&[i64]> {
        self.layout.strides.as_deref()
    }

    /// vLLM `reshape_query_for_spec_decode`: a view of a query `[T, H, D]`
    /// as `[B, T / B, H, D]` over the same data (`T % B == 0`).
    pub fn reshape_query_for_spec_decode(&self, batch_size: i64) -> Result<TensorView<'a>> {
        let (dl, layout) = spec_decode_reshape(&self.dl, Some(batch_size))?;
        Ok(TensorView { dl, layout, _data: PhantomData })
    }

    /// vLLM `reshape_attn_output_for_spec_decode`: `[B, L, H, D]` viewed as
    /// `[B * L, H, D]`; a 3-D tensor is returned as it is.
    pub fn reshape_attn_output_for_spec_decode(&self) -> Result<TensorView<'a>> {
        let (dl, layout) = spec_decode_reshape(&self.dl, None)?;
        Ok(TensorView { dl, layout, _data: PhantomData })
    }
}

/// A writable DLPack tensor over a host slice: the slice stays exclusively
/// borrowed for `'a`.
pub struct TensorViewMut<'a> {
    dl: sys::DLTensor,
    layout: Layout,
    _data: PhantomData<&'a mut [u8]>,
}

impl<'a> TensorViewMut<'a> {
    /// A compact row-major tensor of `shape` over `data`.
    pub fn new<T: Element>(data: &'a mut [T], shape: &[i64]) -> Result<Self> {
        Self::build(data, shape, None)
    }

    /// A strided tensor over `data` (see [`TensorView::with_strides`]).
    pub fn with_strides<T: Element>(
        data: &'a mut [T],
        shape: &[i64],
        strides: &[i64],
    ) -> Result<Self> {
        Self::build(data, shape, Some(strides))
    }

    fn build<T: Element>(data: &'a mut [T], shape: &[i64], strides: Option<&[i64]>) -> Result<Self> {
        let mut layout = layout(data.len(), shape, strides)?;
        let dl = dl_tensor(data.as_mut_ptr() as *mut c_void, T::DL_DTYPE, &mut layout);
        Ok(TensorViewMut { dl, layout, _data: PhantomData })
    }

    /// A writable view of raw bytes holding elements of `dtype` (see
    /// [`TensorView::from_bytes`]).
    pub fn from_bytes(data: &'a mut [u8], dtype: DType, shape: &[i64]) -> Result<Self> {
        let (dl_dtype, size) = dl_dtype_of(dtype)?;
        if data.len() % size != 0 {
            return Err(Error::invalid_argument("byte slice is not a whole number of elements"));
        }
        let mut layout = layout(data.len() / size, shape, None)?;
        let dl = dl_tensor(data.as_mut_ptr() as *mut c_void, dl_dtype, &mut layout);
        Ok(TensorViewMut { dl, layout, _data: PhantomData })
    }

    /// The shape.
    pub fn shape(&self) -> &[i64] {
        &self.layout.shape
    }

    /// The strides in elements (`None` = compact row-major).
    pub fn strides(&self) -> Option<&[i64]> {
        self.layout.strides.as_deref()
    }

    /// [`TensorView::reshape_query_for_spec_decode`] on a writable view: the
    /// new view reborrows this one.
    pub fn reshape_query_for_spec_decode(&mut self, batch_size: i64) -> Result<TensorViewMut<'_>> {
        let (dl, layout) = spec_decode_reshape(&self.dl, Some(batch_size))?;
        Ok(TensorViewMut { dl, layout, _data: PhantomData })
    }

    /// [`TensorView::reshape_attn_output_for_spec_decode`] on a writable
    /// view: the new view reborrows this one.
    pub fn reshape_attn_output_for_spec_decode(&mut self) -> Result<TensorViewMut<'_>> {
        let (dl, layout) = spec_decode_reshape(&self.dl, None)?;
        Ok(TensorViewMut { dl, layout, _data: PhantomData })
    }
}

/// DLPack dtype and element size of a vattn dtype.
pub(crate) fn dl_dtype_of(dtype: DType) -> Result<(sys::DLDataType, usize)> {
    let (code, bits) = match dtype {
        DType::FLOAT32 => (sys::kDLFloat, 32),
        DType::FLOAT16 => (sys::kDLFloat, 16),
        DType::BFLOAT16 => (sys::kDLBfloat, 16),
        DType::FP8_E4M3 | DType::FP8_E5M2 | DType::UINT8 => (sys::kDLUInt, 8),
        _ => return Err(Error::invalid_argument(format!("unknown dtype {:?}", dtype))),
    };
    Ok((sys::DLDataType { code: code as u8, bits, lanes: 1 }, bits as usize / 8))
}

impl private::Sealed for TensorView<'_> {}
impl AsDlTensor for TensorView<'_> {
    fn as_dl_tensor(&self) -> *const sys::DLTensor {
        &self.dl
    }
}
impl private::Sealed for TensorViewMut<'_> {}
impl AsDlTensor for TensorViewMut<'_> {
    fn as_dl_tensor(&self) -> *const sys::DLTensor {
        &self.dl
    }
}
impl AsDlTensorMut for TensorViewMut<'_> {
    fn as_dl_tensor_mut(&mut self) -> *mut sys::DLTensor {
        &mut self.dl
    }
}

// SAFETY: a TensorView is a shared borrow of plain host data plus owned
// shape/strides; a TensorViewMut an exclusive one.  The raw pointers inside
// the DLTensor point only at those.
unsafe impl Send for TensorView<'_> {}
unsafe impl Sync for TensorView<'_> {}
unsafe impl Send for TensorViewMut<'_> {}
unsafe impl Sync for TensorViewMut<'_> {}

impl std::fmt::Debug for TensorView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorView")
            .field("shape", &self.shape())
            .field("strides", &self.strides())
            .field("dtype", &(self.dl.dtype.code, self.dl.dtype.bits))
            .finish()
    }
}

impl std::fmt::Debug for TensorViewMut<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorViewMut")
            .field("shape", &self.shape())
            .field("strides", &self.strides())
            .field("dtype", &(self.dl.dtype.code, self.dl.dtype.bits))
            .finish()
    }
}

pub(crate) use private::Sealed;

/// Device type of a DLTensor as the crate's newtype.
pub(crate) fn device_type(dl: &sys::DLTensor) -> DeviceType {
    DeviceType(dl.device.device_type as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_must_match_slice() {
        let v = vec![0f32; 6];
        let t = TensorView::new(&v, &[2, 3]).unwrap();
        assert_eq!(t.shape(), &[2, 3]);
        let dl = unsafe { &*t.as_dl_tensor() };
        assert_eq!(dl.ndim, 2);
        assert!(dl.strides.is_null());
        assert_eq!(dl.dtype.bits, 32);
        assert!(TensorView::new(&v, &[4, 2]).is_err());
        assert!(TensorView::new(&v, &[-1, -6]).is_err());
    }

    #[test]
    fn strides_must_stay_inside() {
        let v = vec![0i64; 10];
        assert!(TensorView::with_strides(&v, &[2, 3], &[5, 1]).is_ok());
        let e = TensorView::with_strides(&v, &[2, 3], &[8, 1]).err().unwrap();
        assert_eq!(e.status, crate::Status::INVALID_ARGUMENT);
        assert!(TensorView::with_strides(&v, &[0, 3], &[100, 1]).is_ok());
    }

    #[test]
    fn bf16_round_trip() {
        assert_eq!(Bf16::from_f32(1.0).to_f32(), 1.0);
        assert_eq!(Bf16::from_f32(-2.5).to_f32(), -2.5);
        assert!((Bf16::from_f32(0.1).to_f32() - 0.1).abs() < 1e-3);
    }

    #[test]
    fn view_moves_keep_shape_pointer() {
        let mut v = vec![1f32; 4];
        let t = TensorViewMut::new(&mut v, &[4]).unwrap();
        let boxed = Box::new(t);
        let dl = unsafe { &*boxed.as_dl_tensor() };
        assert_eq!(unsafe { *dl.shape }, 4);
    }
}
