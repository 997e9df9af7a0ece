package org.vattn;

/**
 * What one layer keeps in the cache per block (vattn_kv_cache_spec_t),
 * with the library's defaults; setters chain.
 */
public final class KvCacheSpec {
  final vattn_kv_cache_spec_t raw = new vattn_kv_cache_spec_t();

  public KvCacheSpec kind(int v) { raw.setKind(v); return this; }
  public KvCacheSpec blockSize(int v) { raw.setBlock_size(v); return this; }
  public KvCacheSpec numKvHeads(int v) { raw.setNum_kv_heads(v); return this; }
  public KvCacheSpec headSize(int v) { raw.setHead_size(v); return this; }
  public KvCacheSpec dtype(int v) { raw.setDtype(v); return this; }
  public KvCacheSpec slidingWindow(int v) { raw.setSliding_window(v); return this; }
  public KvCacheSpec attentionChunkSize(int v) { raw.setAttention_chunk_size(v); return this; }
  public KvCacheSpec pageSizePadded(long v) { raw.setPage_size_padded(v); return this; }

  /** The underlying struct (for VattnC calls). */
  public vattn_kv_cache_spec_t raw() { return raw; }

  /** Bytes of one block for one layer (K and V; the latent for MLA). */
  public long pageSizeBytes() {
    long[] out = new long[1];
    VattnC.vattn_kv_cache_spec_page_size_bytes(raw, out);
    return out[0];
  }
}
