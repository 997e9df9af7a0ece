package org.vattn;

import java.nio.IntBuffer;

/** The paged KV caches of a model's layers.  Close it to free the memory. */
public final class KvCache implements AutoCloseable {
  private long handle;
  private final int[] sharing; // kv_sharing_target per layer (null = none)
  private final int numLayers;

  private KvCache(long handle, int[] sharing, int numLayers) {
    this.handle = handle;
    this.sharing = sharing == null ? null : sharing.clone();
    this.numLayers = numLayers;
  }

  /**
   * Allocates host caches of {@code numBlocks} blocks for layers with the
   * given specs; {@code sharing[i]} is -1 or the earlier layer whose cache
   * layer i reads (null = no sharing); {@code backend} may be null.
   */
  public static KvCache create(KvCacheSpec[] specs, int[] sharing, long numBlocks, Backend backend) {
    vattn_kv_cache_options_t o = new vattn_kv_cache_options_t();
    o.setNum_blocks(numBlocks);
    if (backend != null) o.setBackend(backend.handle);
    return create(specs, sharing, o);
  }

  /** Allocates caches with full options. */
  public static KvCache create(KvCacheSpec[] specs, int[] sharing, vattn_kv_cache_options_t opts) {
    if (sharing != null && sharing.length != specs.length)
      throw new IllegalArgumentException("sharing has " + sharing.length + " entries for " + specs.length + " layers");
    KvCacheSpecArray arr = new KvCacheSpecArray(specs.length);
    for (int i = 0; i < specs.length; ++i) arr.setitem(i, specs[i].raw);
    IntBuffer sh = Vattn.direct(sharing);
    long[] out = new long[1];
    VattnC.vattn_kv_cache_create(out, arr.cast(), sh, specs.length, opts);
    java.lang.ref.Reference.reachabilityFence(new Object[] {arr, sh});
    return new KvCache(out[0], sharing, specs.length);
  }

  long handle() { Vattn.checkHandle(handle, "KvCache"); return handle; }

  /** Blocks, bytes, layers, groups, device and layout. */
  public vattn_kv_cache_info_t info() {
    vattn_kv_cache_info_t i = new vattn_kv_cache_info_t();
    VattnC.vattn_kv_cache_get_info(handle(), i);
    return i;
  }

  /**
   * Layer {@code layer}'s cache (logical 5-D, the layout's strides); valid
   * while this cache is open.
   */
  public Tensor layer(long layer) {
    DLTensor dl = new DLTensor();
    VattnC.vattn_kv_cache_layer_tensor(handle(), layer, dl);
    return Tensor.view(dl, this);
  }

  /**
   * copy_blocks over every layer that owns its cache (sharing layers see
   * the copies through their target): for each pair (src, dst) of
   * {@code pairs} copies block src to block dst in K and V.
   */
  public void copyBlocks(long... pairs) {
    java.util.List<Tensor> own = new java.util.ArrayList<>();
    for (int i = 0; i < numLayers; ++i)
      if (sharing == null || sharing[i] < 0) own.add(layer(i));
    Vattn.copyBlocks(own.toArray(new Tensor[0]), pairs);
  }

  /** Frees the caches (idempotent); views of them must not be used after. */
  @Override public void close() {
    if (handle != 0) {
      VattnC.vattn_kv_cache_destroy(handle);
      handle = 0;
    }
  }
}
