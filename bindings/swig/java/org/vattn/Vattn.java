package org.vattn;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.nio.LongBuffer;

/** Library-wide functions and helpers of the Java bindings. */
public final class Vattn implements VattnCConstants {
  private Vattn() {}

  /** Version of the loaded library, (major << 16) | (minor << 8) | patch. */
  public static long version() { return VattnC.vattn_version(); }

  /** Version of the loaded library as "MAJOR.MINOR.PATCH". */
  public static String versionString() { return VattnC.vattn_version_string(); }

  /** The library's description of a status code. */
  public static String statusString(int status) { return VattnC.vattn_status_string(status); }

  /**
   * copy_blocks: for every cache (one per layer, logical 5-D) and every
   * pair (src, dst) of {@code pairs} = {src0, dst0, src1, dst1, ...},
   * copies block src to block dst in K and V (default stream).
   */
  public static void copyBlocks(Tensor[] caches, long... pairs) {
    DLTensor[] raw = new DLTensor[caches.length];
    for (int i = 0; i < caches.length; ++i) raw[i] = caches[i].raw();
    VattnC.vattn_copy_blocks(raw, pairs, 0L);
    for (Tensor t : caches) t.touch();
  }

  /**
   * swap_blocks: copies whole blocks (src, dst) pairs from {@code src} to
   * {@code dst}, two caches of the same shape (host to host here; CUDA on
   * the default stream).
   */
  public static void swapBlocks(Tensor src, Tensor dst, long... pairs) {
    VattnC.vattn_swap_blocks(src.raw(), dst.raw(), pairs, 0L);
    src.touch();
    dst.touch();
  }

  /** What {@link #reorderBatchToSplitDecodesAndPrefills} gives. */
  public static final class Reorder {
    /** The swap_states(i, j) to apply in order: {i0, j0, i1, j1, ...}. */
    public final long[] swaps;
    /** order[slot] = original index of the request that ends in slot. */
    public final long[] order;
    /** Whether anything moved. */
    public final boolean modified;

    Reorder(long[] swaps, long[] order, boolean modified) {
      this.swaps = swaps;
      this.order = order;
      this.modified = modified;
    }
  }

  /**
   * Reorders a batch decode -> extend -> prefill with minimal stable swaps
   * (vLLM reorder_batch_to_split_decodes_and_prefills); per request its
   * scheduled and computed tokens (same lengths).
   */
  public static Reorder reorderBatchToSplitDecodesAndPrefills(int[] numScheduledTokens, int[] numComputedTokens,
                                                              int decodeThreshold) {
    if (numScheduledTokens == null || numComputedTokens == null)
      throw new IllegalArgumentException("numScheduledTokens and numComputedTokens are required");
    if (numScheduledTokens.length != numComputedTokens.length)
      throw new IllegalArgumentException("numComputedTokens has " + numComputedTokens.length
          + " entries, numScheduledTokens " + numScheduledTokens.length);
    int n = numScheduledTokens.length;
    IntBuffer sched = direct(numScheduledTokens), comp = direct(numComputedTokens);
    LongBuffer swaps = direct(new long[2 * n]), order = direct(new long[n]);
    long[] numSwaps = new long[1];
    int[] modified = new int[1];
    VattnC.vattn_reorder_batch_to_split_decodes_and_prefills(sched, comp, n, decodeThreshold, swaps, numSwaps, order,
                                                             modified);
    java.lang.ref.Reference.reachabilityFence(new Object[] {sched, comp});
    long[] s = new long[(int) (2 * numSwaps[0])];
    swaps.get(s);
    long[] o = new long[n];
    order.get(o);
    return new Reorder(s, o, modified[0] != 0);
  }

  /**
   * maybe_create_ubatch_slices over requests of {@code numScheduledTokens}
   * tokens: {slices, padded}, each {request_start, request_stop,
   * token_start, token_stop} per micro-batch (half-open ranges; what
   * Metadata.splitUbatches takes).  {@code splitPoint <= 0} =
   * numTokensPadded / numUbatches.
   */
  public static long[][] ubatchSlices(int[] numScheduledTokens, long numTokensPadded, long numReqsPadded,
                                      int numUbatches, long splitPoint) {
    if (numScheduledTokens == null) throw new IllegalArgumentException("numScheduledTokens is required");
    if (numUbatches < 0) throw new IllegalArgumentException("numUbatches is negative");
    IntBuffer sched = direct(numScheduledTokens);
    long[] slices = new long[4 * numUbatches], padded = new long[4 * numUbatches];
    VattnC.vattn_java_ubatch_slices_create(sched, numScheduledTokens.length, numTokensPadded, numReqsPadded,
                                           numUbatches, splitPoint, slices, padded);
    java.lang.ref.Reference.reachabilityFence(sched);
    return new long[][] {slices, padded};
  }

  /** Direct native-order buffer holding a copy of {@code a} (null for null). */
  static IntBuffer direct(int[] a) {
    if (a == null) return null;
    IntBuffer b = ByteBuffer.allocateDirect(Math.max(1, a.length) * 4).order(ByteOrder.nativeOrder()).asIntBuffer();
    b.put(a).flip();
    return b;
  }

  /** Direct native-order buffer holding a copy of {@code a} (null for null). */
  static LongBuffer direct(long[] a) {
    if (a == null) return null;
    LongBuffer b = ByteBuffer.allocateDirect(Math.max(1, a.length) * 8).order(ByteOrder.nativeOrder()).asLongBuffer();
    b.put(a).flip();
    return b;
  }

  static void checkHandle(long h, String what) {
    if (h == 0) throw new IllegalStateException(what + " is closed");
  }
}
