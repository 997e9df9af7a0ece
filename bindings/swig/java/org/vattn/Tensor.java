package org.vattn;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;

/**
 * A DLPack tensor for vattn calls: a DLTensor built over a direct
 * ByteBuffer's address (host memory), or a view the library filled in
 * (a KV cache layer).  It keeps its buffers reachable.
 */
public final class Tensor {
  final DLTensor dl;
  private final ByteBuffer data;
  private final LongBuffer shape, strides;
  private final Object owner; // keeps a KvCache alive for its views

  private Tensor(DLTensor dl, ByteBuffer data, LongBuffer shape, LongBuffer strides, Object owner) {
    this.dl = dl;
    this.data = data;
    this.shape = shape;
    this.strides = strides;
    this.owner = owner;
  }

  /** A compact float32 host tensor of {@code shape}, zero-filled. */
  public static Tensor float32(long... shape) {
    long n = 1;
    for (long d : shape) n = Math.multiplyExact(n, d);
    ByteBuffer b = ByteBuffer.allocateDirect((int) Math.max(4, Math.multiplyExact(n, 4L))).order(ByteOrder.nativeOrder());
    return over(b, VattnCConstants.VATTN_DTYPE_FLOAT32, shape, null);
  }

  /** A compact float32 host tensor holding a copy of {@code values}. */
  public static Tensor float32(float[] values, long... shape) {
    Tensor t = float32(shape);
    if (values.length != t.numel()) throw new IllegalArgumentException("values has " + values.length + " entries, shape needs " + t.numel());
    t.floats().put(values);
    return t;
  }

  /** A compact int64 host tensor holding a copy of {@code values} (e.g. a slot mapping). */
  public static Tensor int64(long[] values) {
    ByteBuffer b = ByteBuffer.allocateDirect(Math.max(8, values.length * 8)).order(ByteOrder.nativeOrder());
    b.asLongBuffer().put(values);
    DLTensor dl = base(b, 1);
    DLDataType t = new DLDataType();
    t.setCode((short) DLDataTypeCode.kDLInt);
    t.setBits((short) 64);
    t.setLanes(1);
    dl.setDtype(t);
    LongBuffer s = Vattn.direct(new long[] {values.length});
    dl.setShape(s);
    return new Tensor(dl, b, s, null, null);
  }

  /**
   * A host tensor over a direct buffer (native order), dtype VATTN_DTYPE_*,
   * strides in elements or null for compact row-major.
   */
  public static Tensor over(ByteBuffer data, int dtype, long[] shape, long[] strides) {
    if (!data.isDirect()) throw new IllegalArgumentException("data must be a direct ByteBuffer");
    long size = VattnC.vattn_dtype_size(dtype);
    if (size == 0) throw new IllegalArgumentException("unknown dtype " + dtype);
    long span = 1;
    for (int i = 0; i < shape.length; ++i) {
      if (shape[i] < 0) throw new IllegalArgumentException("negative dimension");
      if (shape[i] == 0) { span = 0; break; }
    }
    if (span != 0) {
      long last = 0, s = 1;
      for (int i = shape.length - 1; i >= 0; --i) {
        long st = strides != null ? strides[i] : s;
        if (st < 0) throw new IllegalArgumentException("negative stride");
        last += (shape[i] - 1) * st;
        s *= shape[i];
      }
      span = (last + 1) * size;
    }
    if (span > data.capacity())
      throw new IllegalArgumentException("tensor needs " + span + " bytes, buffer has " + data.capacity());
    DLTensor dl = base(data, shape.length);
    DLDataType t = new DLDataType();
    switch (dtype) {
      case VattnCConstants.VATTN_DTYPE_FLOAT32: t.setCode((short) DLDataTypeCode.kDLFloat); t.setBits((short) 32); break;
      case VattnCConstants.VATTN_DTYPE_FLOAT16: t.setCode((short) DLDataTypeCode.kDLFloat); t.setBits((short) 16); break;
      case VattnCConstants.VATTN_DTYPE_BFLOAT16: t.setCode((short) DLDataTypeCode.kDLBfloat); t.setBits((short) 16); break;
      default: t.setCode((short) DLDataTypeCode.kDLUInt); t.setBits((short) 8); break;
    }
    t.setLanes(1);
    dl.setDtype(t);
    LongBuffer sh = Vattn.direct(shape), st = Vattn.direct(strides);
    dl.setShape(sh);
    dl.setStrides(st);
    return new Tensor(dl, data, sh, st, null);
  }

  private static DLTensor base(ByteBuffer data, int ndim) {
    DLTensor dl = new DLTensor();
    dl.setData(data);
    DLDevice dev = new DLDevice();
    dev.setDevice_type(DLDeviceType.kDLCPU);
    dev.setDevice_id(0);
    dl.setDevice(dev);
    dl.setNdim(ndim);
    return dl;
  }

  /** A view the library filled in (shape/strides owned by {@code owner}). */
  static Tensor view(DLTensor dl, Object owner) { return new Tensor(dl, null, null, null, owner); }

  /** The DLTensor (for VattnC calls). */
  public DLTensor raw() { return dl; }

  public int ndim() { return dl.getNdim(); }

  public long[] shape() {
    long[] s = new long[dl.getNdim()];
    for (int i = 0; i < s.length; ++i) s[i] = dl.shapeAt(i);
    return s;
  }

  /** Strides in elements (compact row-major ones when the tensor has none). */
  public long[] strides() {
    long[] s = new long[dl.getNdim()];
    for (int i = 0; i < s.length; ++i) s[i] = dl.strideAt(i);
    return s;
  }

  public long numel() {
    long n = 1;
    for (long d : shape()) n *= d;
    return n;
  }

  /** The float view of a float32 tensor made by this class (position 0). */
  public FloatBuffer floats() {
    if (data == null) throw new IllegalStateException("not a Java-allocated tensor; use readFloats()");
    return data.duplicate().order(ByteOrder.nativeOrder()).asFloatBuffer();
  }

  /** Copies every element this host tensor reaches (by its strides) out as floats. */
  public float[] readFloats() {
    long bytes = dl.spanBytes();
    ByteBuffer b = ByteBuffer.allocateDirect((int) Math.max(4, bytes)).order(ByteOrder.nativeOrder());
    dl.readBytes(0, b, bytes);
    float[] out = new float[(int) (bytes / 4)];
    b.asFloatBuffer().get(out);
    return out;
  }

  /** Keeps the buffers and owner reachable up to here. */
  void touch() { java.lang.ref.Reference.reachabilityFence(new Object[] {data, shape, strides, owner}); }
}
