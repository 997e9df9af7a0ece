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

    public Desc queryStartLoc(int... v) { queryStartLoc = v; return this; }
    public Desc seqLens(int... v) { seqLens = v; return this; }
    public Desc numComputedTokens(int... v) { numComputedTokens = v; return this; }
    public Desc blockTable(int cols, int... v) { blockTableCols = cols; blockTable = v; return this; }
    public Desc slotMapping(long... v) { slotMapping = v; return this; }
    public Desc numActualTokens(long v) { numActualTokens = v; return this; }
    public Desc causal(boolean v) { causal = v; return this; }
    public Desc blockSize(int v) { blockSize = v; return this; }
    public Desc numCacheBlocks(long v) { numCacheBlocks = v; return this; }
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
    if (d.numComputedTokens != null && d.numComputedTokens.length < n)
      throw new IllegalArgumentException("numComputedTokens has fewer than " + n + " entries");
    if (d.blockTableCols < 0 || (d.blockTableCols == 0 ? d.blockTable.length != 0
                                                       : d.blockTable.length % d.blockTableCols != 0))
      throw new IllegalArgumentException("blockTable is not a whole number of rows of blockTableCols");
    // Direct buffers stay referenced (locals) until create returns; C copies them.
    IntBuffer qsl = Vattn.direct(d.queryStartLoc), seq = Vattn.direct(d.seqLens);
    IntBuffer nct = Vattn.direct(d.numComputedTokens), bt = Vattn.direct(d.blockTable);
    LongBuffer slots = Vattn.direct(d.slotMapping);
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
    long[] out = new long[1];
    VattnC.vattn_metadata_create(out, c);
    java.lang.ref.Reference.reachabilityFence(new Object[] {qsl, seq, nct, bt, slots});
    return new Metadata(out[0]);
  }

  long handle() { Vattn.checkHandle(handle, "Metadata"); return handle; }

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
