package org.vattn;

/**
 * vLLM v0 attention metadata (prefills first, then decodes).  Close it
 * (try-with-resources) to free it.
 */
public final class V0Metadata implements AutoCloseable {
  private long handle;

  /** What get_seq_len_block_table_args gives, copied into Java arrays. */
  public static final class SeqLenBlockTableArgs {
    /** [numSeqs] sequence lengths (the encoder's for encoder / cross attention). */
    public final int[] seqLens;
    /** The maximum the kernel is launched for. */
    public final int maxSeqLen;
    /** Row-major [numSeqs, blockTableCols]; null for encoder attention. */
    public final int[] blockTable;
    /** Columns of blockTable. */
    public final long blockTableCols;

    SeqLenBlockTableArgs(int[] seqLens, int maxSeqLen, int[] blockTable, long blockTableCols) {
      this.seqLens = seqLens;
      this.maxSeqLen = maxSeqLen;
      this.blockTable = blockTable;
      this.blockTableCols = blockTableCols;
    }
  }

  V0Metadata(long handle) { this.handle = handle; }

  /**
   * Validates and copies {@code desc} (its arrays are direct NIO buffers
   * that must stay reachable until this returns).
   */
  public static V0Metadata create(vattn_v0_metadata_desc_t desc) {
    long[] out = new long[1];
    VattnC.vattn_v0_metadata_create(out, desc);
    return new V0Metadata(out[0]);
  }

  long handle() { Vattn.checkHandle(handle, "V0Metadata"); return handle; }

  /**
   * The handle's values; read the arrays with the struct's *Array()
   * methods (copies) while this metadata is open.
   */
  public vattn_v0_metadata_desc_t describe() {
    vattn_v0_metadata_desc_t d = new vattn_v0_metadata_desc_t();
    VattnC.vattn_v0_metadata_describe(handle(), d);
    return d;
  }

  /** get_num_prefill_decode_query_kv_tokens: {prefill query, prefill kv, decode query} tokens. */
  public long[] numPrefillDecodeQueryKvTokens(int attnType) {
    long[] out = new long[3];
    VattnC.vattn_v0_get_num_prefill_decode_query_kv_tokens(handle(), attnType, out);
    return out;
  }

  /** get_seq_len_block_table_args for prompts ({@code isPrompt}) or decodes of {@code attnType}. */
  public SeqLenBlockTableArgs seqLenBlockTableArgs(boolean isPrompt, int attnType) {
    long[] dims = new long[3];
    int p = isPrompt ? 1 : 0;
    VattnC.vattn_java_v0_seq_len_block_table_dims(handle(), p, attnType, dims);
    int[] seqLens = VattnC.vattn_java_v0_seq_lens(handle(), p, attnType);
    int[] table = VattnC.vattn_java_v0_block_table(handle(), p, attnType);
    return new SeqLenBlockTableArgs(seqLens, (int) dims[1], table, dims[2]);
  }

  /** Frees the handle (idempotent). */
  @Override public void close() {
    if (handle != 0) {
      VattnC.vattn_v0_metadata_destroy(handle);
      handle = 0;
    }
  }
}
