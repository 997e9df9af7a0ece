package org.vattn;

import java.nio.IntBuffer;

/**
 * vLLM v0 metadata builder: add the sequences of a step (prefills first,
 * then decodes) with addSeq, then build() a V0Metadata.  Close it
 * (try-with-resources) to free it.
 */
public final class V0Builder implements AutoCloseable {
  private long handle;

  /** A builder with {@code opts} from new vattn_v0_builder_options_t() (defaults). */
  public V0Builder(vattn_v0_builder_options_t opts) {
    long[] out = new long[1];
    VattnC.vattn_v0_builder_create(out, opts);
    handle = out[0];
  }

  long handle() { Vattn.checkHandle(handle, "V0Builder"); return handle; }

  /**
   * Adds one sequence (vLLM _add_seq_group); {@code seq} from new
   * vattn_v0_seq_t() (defaults), its block_table a direct IntBuffer (or
   * null = no table) that must stay reachable until this returns.
   */
  public void addSeq(vattn_v0_seq_t seq) {
    VattnC.vattn_v0_builder_add_seq(handle(), seq);
  }

  /**
   * Adds one sequence with the block table {@code blockTable} (copied for
   * the call; null = no table, e.g. a profile run); the seq's own
   * block_table and block_table_len are replaced.
   */
  public void addSeq(vattn_v0_seq_t seq, int... blockTable) {
    IntBuffer bt = Vattn.direct(blockTable);
    seq.setBlock_table(bt);
    seq.setBlock_table_len(blockTable == null ? 0 : blockTable.length);
    try {
      addSeq(seq);
    } finally {
      java.lang.ref.Reference.reachabilityFence(bt);
    }
  }

  /**
   * vLLM build(seq_lens, query_lens, cuda_graph_pad_size, batch_size):
   * {@code cudaGraphPadSize < 0} is a batch without CUDA graph, {@code n >= 0}
   * pads the slot mapping with n pad slots and the rows up to
   * {@code batchSize}.  Resets the builder.  The arrays have one entry per
   * added sequence.
   */
  public V0Metadata build(int[] seqLens, int[] queryLens, long cudaGraphPadSize, long batchSize) {
    if (seqLens == null || queryLens == null) throw new IllegalArgumentException("seqLens and queryLens are required");
    if (seqLens.length != queryLens.length)
      throw new IllegalArgumentException("queryLens has " + queryLens.length + " entries, seqLens " + seqLens.length);
    IntBuffer sl = Vattn.direct(seqLens), ql = Vattn.direct(queryLens);
    long[] out = new long[1];
    VattnC.vattn_v0_builder_build(handle(), sl, ql, seqLens.length, cudaGraphPadSize < 0 ? -1 : cudaGraphPadSize,
                                  batchSize, out);
    java.lang.ref.Reference.reachabilityFence(new Object[] {sl, ql});
    return new V0Metadata(out[0]);
  }

  /** build without CUDA graph. */
  public V0Metadata build(int[] seqLens, int[] queryLens) { return build(seqLens, queryLens, -1, 0); }

  /** Frees the handle (idempotent). */
  @Override public void close() {
    if (handle != 0) {
      VattnC.vattn_v0_builder_destroy(handle);
      handle = 0;
    }
  }
}
