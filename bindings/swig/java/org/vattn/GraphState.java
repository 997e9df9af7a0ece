package org.vattn;

/**
 * CUDA-graph state of v0 decodes (vLLM CommonAttentionState): persistent
 * input buffers for up to maxBatchSize decodes (slot mapping all PAD, seq
 * lens all 1, block tables zeros).  Close it (try-with-resources) to free
 * it, after every V0Metadata it gave.
 */
public final class GraphState implements AutoCloseable {
  private long handle;

  /** State for batches up to {@code maxBatchSize} with {@code maxBlocksPerSeq} block columns. */
  public GraphState(long maxBatchSize, int maxBlocksPerSeq, int maxSeqLenToCapture) {
    long[] out = new long[1];
    VattnC.vattn_graph_state_create(out, maxBatchSize, maxBlocksPerSeq, maxSeqLenToCapture);
    handle = out[0];
  }

  long handle() { Vattn.checkHandle(handle, "GraphState"); return handle; }

  /**
   * Metadata of a captured decode batch of {@code batchSize}: views of this
   * state's buffers (they see later prepareReplay calls), valid while this
   * state is open.
   */
  public V0Metadata metadataForBatch(long batchSize) {
    long[] out = new long[1];
    VattnC.vattn_graph_state_metadata_for_batch(handle(), batchSize, out);
    return new V0Metadata(out[0]);
  }

  /**
   * Copies a real decode batch's slot mapping, seq lens and block tables
   * into the buffers (its rows first; the rest keep their padding).
   */
  public void prepareReplay(V0Metadata md) {
    VattnC.vattn_graph_state_prepare_replay(handle(), md.handle());
  }

  /** Frees the handle (idempotent). */
  @Override public void close() {
    if (handle != 0) {
      VattnC.vattn_graph_state_destroy(handle);
      handle = 0;
    }
  }
}
