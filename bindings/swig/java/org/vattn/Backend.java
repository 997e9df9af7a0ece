package org.vattn;

/**
 * An attention backend descriptor ("CPU", "CUDA", ...).  Descriptors are
 * immutable and live for the whole process: nothing to close.
 */
public final class Backend {
  final long handle;

  private Backend(long handle) { this.handle = handle; }

  /** Number of registered backends. */
  public static long count() { return VattnC.vattn_backend_count(); }

  /** The i-th registered backend (CPU first). */
  public static Backend get(long index) {
    long[] out = new long[1];
    VattnC.vattn_backend_get(index, out);
    return new Backend(out[0]);
  }

  /** Backend by case-insensitive name; VATTN_ERR_NOT_FOUND if none. */
  public static Backend find(String name) {
    long[] out = new long[1];
    VattnC.vattn_backend_find(name, out);
    return new Backend(out[0]);
  }

  /** The first backend supporting everything {@code sel} asks for (vLLM get_attn_backend). */
  public static Backend select(vattn_backend_selector_t sel) {
    long[] out = new long[1];
    VattnC.vattn_get_attn_backend(sel, out);
    return new Backend(out[0]);
  }

  /** What the backend supports. */
  public vattn_backend_info_t info() {
    vattn_backend_info_t info = new vattn_backend_info_t();
    VattnC.vattn_backend_get_info(handle, info);
    return info;
  }

  /** Registered name. */
  public String name() { return info().getName(); }

  /** Logical KV cache shape of one layer (rank 5, or 3 for MLA). */
  public long[] kvCacheShape(long numBlocks, int blockSize, int numKvHeads, int headSize, boolean useMla) {
    long[] shape = new long[5];
    int[] ndim = new int[1];
    VattnC.vattn_backend_kv_cache_shape(handle, numBlocks, blockSize, numKvHeads, headSize, useMla ? 1 : 0, shape, ndim);
    return java.util.Arrays.copyOf(shape, ndim[0]);
  }

  @Override public boolean equals(Object o) { return o instanceof Backend && ((Backend) o).handle == handle; }
  @Override public int hashCode() { return Long.hashCode(handle); }
  @Override public String toString() { return "Backend(" + name() + ")"; }
}
