package org.vattn;

import java.nio.IntBuffer;
import java.nio.LongBuffer;

/**
 * Batch metadata (vLLM CommonAttentionMetadata): a validated copy of a
 * batch's host arrays.  Close it (try-with-resources) to free it.
 */
public final class Metadata implements AutoCloseable {
  private long handle;

  /** Host arrays of one batch; {@code numReqs = seqLens.length}. */
  public static final class Desc {
    /** [num_reqs + 1], 0-based, non-decreasing. */
    public int[] queryStartLoc;
    /** [num_reqs]. */
    public int[] seqLens;
    /** Optional [num_reqs]; null = seq_lens - query_lens. */
    public int[] numComputedTokens;
    /** Row-major [rows, blockTableCols]. */
    public int[] blockTable = new int[0];
    /** Columns of blockTable. */
    public int blockTableCols;
    /** Slot of every token, padding -1. */
    public long[] slotMapping = new long[0];
    /** Tokens incl. padding; -1 = queryStartLoc[numReqs]. */
    public long numActualTokens = -1;
    /** Causal attention. */
    public boolean causal = true;
    /** Cache block size (0 = unknown). */
    public int blockSize;
    /** Cache blocks, block ids must be below (0 = unchecked). */
    public long numCacheBlocks;
    /** Longest query; -1 = computed. */
    public int maxQueryLen = -1;
    /** Longest sequence (may be an upper bound); -1 = computed. */
    public int maxSeqLen = -1;
    /** Optional [num_reqs] encoder lengths (cross-attention). */
    public int[] encoderSeqLens;
    /** Optional padded logits indices (KV-sharing fast prefill). */
    public int[] logitsIndicesPadded;
    /** Real entries of logitsIndicesPadded. */
    public long numLogitsIndices;
    /** Optional [num_reqs] decode-context-parallel local lengths. */
    public int[] dcpLocalSeqLens;

    public Desc queryStartLoc(int... v) { queryStartLoc = v; return this; }
    public Desc seqLens(int... v) { seqLens = v; return this; }
    public Desc numComputedTokens(int... v) { numComputedTokens = v; return this; }
    public Desc blockTable(int cols, int... v) { blockTableCols = cols; blockTable = v; return this; }
    public Desc slotMapping(long... v) { slotMapping = v; return this; }
    public Desc numActualTokens(long v) { numActualTokens = v; return this; }
    public Desc causal(boolean v) { causal = v; return this; }
    public Desc blockSize(int v) { blockSize = v; return this; }
    public Desc numCacheBlocks(long v) { numCacheBlocks = v; return this; }
    public Desc maxQueryLen(int v) { maxQueryLen = v; return this; }
    public Desc maxSeqLen(int v) { maxSeqLen = v; return this; }
    public Desc encoderSeqLens(int... v) { encoderSeqLens = v; return this; }
    public Desc logitsIndices(long numReal, int... padded) { numLogitsIndices = numReal; logitsIndicesPadded = padded; return this; }
    public Desc dcpLocalSeqLens(int... v) { dcpLocalSeqLens = v; return this; }

    /** Number of requests. */
    public int numReqs() { return seqLens == null ? 0 : seqLens.length; }
  }

  /** Decode/prefill split of a batch. */
  public static final class Split {
    public final long numDecodes, numPrefills, numDecodeTokens, numPrefillTokens;

    Split(vattn_decode_prefill_split_t s) {
      numDecodes = s.getNum_decodes();
      numPrefills = s.getNum_prefills();
      numDecodeTokens = s.getNum_decode_tokens();
      numPrefillTokens = s.getNum_prefill_tokens();
    }

    @Override public String toString() {
      return "Split{decodes=" + numDecodes + ", prefills=" + numPrefills + ", decodeTokens="
          + numDecodeTokens + ", prefillTokens=" + numPrefillTokens + "}";
    }
  }

  private Metadata(long handle) { this.handle = handle; }

  /** Validates and copies {@code d}; throws VattnException naming a bad field. */
  public static Metadata create(Desc d) {
    if (d.queryStartLoc == null || d.seqLens == null)
      throw new IllegalArgumentException("queryStartLoc and seqLens are required");
    int n = d.seqLens.length;
    if (d.queryStartLoc.length != n + 1)
      throw new IllegalArgumentException("queryStartLoc has " + d.queryStartLoc.length
          + " entries, expected seqLens.length + 1 = " + (n + 1));
    checkLen("numComputedTokens", d.numComputedTokens, n);
    checkLen("encoderSeqLens", d.encoderSeqLens, n);
    checkLen("dcpLocalSeqLens", d.dcpLocalSeqLens, n);
    if (d.blockTableCols < 0 || (d.blockTableCols == 0 ? d.blockTable.length != 0
                                                       : d.blockTable.length % d.blockTableCols != 0))
      throw new IllegalArgumentException("blockTable is not a whole number of rows of blockTableCols");
    // Direct buffers stay referenced (locals) until create returns; C copies them.
    IntBuffer qsl = Vattn.direct(d.queryStartLoc), seq = Vattn.direct(d.seqLens);
    IntBuffer nct = Vattn.direct(d.numComputedTokens), bt = Vattn.direct(d.blockTable);
    LongBuffer slots = Vattn.direct(d.slotMapping);
    IntBuffer enc = Vattn.direct(d.encoderSeqLens), logits = Vattn.direct(d.logitsIndicesPadded);
    IntBuffer dcp = Vattn.direct(d.dcpLocalSeqLens);
    vattn_metadata_desc_t c = new vattn_metadata_desc_t();
    c.setNum_reqs(n);
    c.setNum_actual_tokens(d.numActualTokens >= 0 ? d.numActualTokens : d.queryStartLoc[n]);
    c.setQuery_start_loc(qsl);
    c.setSeq_lens(seq);
    c.setNum_computed_tokens(nct);
    c.setBlock_table(bt);
    c.setBlock_table_rows(d.blockTableCols == 0 ? 0 : d.blockTable.length / d.blockTableCols);
    c.setBlock_table_cols(d.blockTableCols);
    c.setSlot_mapping(slots);
    c.setSlot_mapping_len(d.slotMapping.length);
    c.setCausal(d.causal ? 1 : 0);
    c.setBlock_size(d.blockSize);
    c.setNum_cache_blocks(d.numCacheBlocks);
    c.setMax_query_len(d.maxQueryLen);
    c.setMax_seq_len(d.maxSeqLen);
    c.setEncoder_seq_lens(enc);
    c.setLogits_indices_padded(logits);
    c.setLogits_indices_len(d.logitsIndicesPadded == null ? 0 : d.logitsIndicesPadded.length);
    c.setNum_logits_indices(d.numLogitsIndices);
    c.setDcp_local_seq_lens(dcp);
    long[] out = new long[1];
    VattnC.vattn_metadata_create(out, c);
    java.lang.ref.Reference.reachabilityFence(new Object[] {qsl, seq, nct, bt, slots, enc, logits, dcp});
    return new Metadata(out[0]);
  }

  private static void checkLen(String what, int[] a, int n) {
    if (a != null && a.length < n)
      throw new IllegalArgumentException(what + " has fewer than " + n + " entries");
  }

  long handle() { Vattn.checkHandle(handle, "Metadata"); return handle; }

  /**
   * The handle's values as a new Desc whose arrays are copies (optional
   * ones null when absent); {@code create(md.describe())} makes an equal
   * metadata.
   */
  public Desc describe() {
    vattn_metadata_desc_t c = new vattn_metadata_desc_t();
    VattnC.vattn_metadata_describe(handle(), c);
    Desc d = new Desc();
    d.queryStartLoc = c.queryStartLocArray();
    d.seqLens = c.seqLensArray();
    d.numComputedTokens = c.numComputedTokensArray();
    d.blockTable = c.blockTableArray();
    if (d.blockTable == null) d.blockTable = new int[0];
    d.blockTableCols = (int) c.getBlock_table_cols();
    d.slotMapping = c.slotMappingArray();
    if (d.slotMapping == null) d.slotMapping = new long[0];
    d.numActualTokens = c.getNum_actual_tokens();
    d.causal = c.getCausal() != 0;
    d.maxQueryLen = c.getMax_query_len();
    d.maxSeqLen = c.getMax_seq_len();
    d.blockSize = c.getBlock_size();
    d.numCacheBlocks = c.getNum_cache_blocks();
    d.encoderSeqLens = c.encoderSeqLensArray();
    d.logitsIndicesPadded = c.logitsIndicesPaddedArray();
    d.numLogitsIndices = c.getNum_logits_indices();
    d.dcpLocalSeqLens = c.dcpLocalSeqLensArray();
    return d;
  }

  /**
   * vLLM split_attn_metadata: the metadata of every micro-batch slice;
   * {@code slices} holds 4 longs per slice (request_start, request_stop,
   * token_start, token_stop), half-open.  This metadata is left as it is.
   */
  public Metadata[] splitUbatches(long... slices) {
    long[] handles = new long[slices.length / 4];
    VattnC.vattn_java_split_attn_metadata(handle(), slices, handles);
    Metadata[] r = new Metadata[handles.length];
    for (int i = 0; i < r.length; ++i) r[i] = new Metadata(handles[i]);
    return r;
  }

  /** The KV-sharing fast-prefill metadata of this batch. */
  public Metadata kvSharingFastPrefill() {
    long[] out = new long[1];
    VattnC.vattn_make_kv_sharing_fast_prefill_metadata(handle(), out);
    return new Metadata(out[0]);
  }

  /** vLLM split_decodes_and_prefills. */
  public Split split(int decodeThreshold, boolean requireUniform) {
    vattn_decode_prefill_split_t s = new vattn_decode_prefill_split_t();
    VattnC.vattn_split_decodes_and_prefills(handle(), decodeThreshold, requireUniform ? 1 : 0, s);
    return new Split(s);
  }

  /** A copy truncated to the real sizes. */
  public Metadata unpadded(long numTokens, long numReqs) {
    long[] out = new long[1];
    VattnC.vattn_metadata_unpadded(handle(), numTokens, numReqs, out);
    return new Metadata(out[0]);
  }

  /** Frees the handle (idempotent). */
  @Override public void close() {
    if (handle != 0) {
      VattnC.vattn_metadata_destroy(handle);
      handle = 0;
    }
  }
}
