package org.vattn;

/** A metadata builder: turns Metadata into a Plan that layers run. */
public final class Builder implements AutoCloseable {
  private long handle;

  /** A builder of {@code backend}; {@code opts} from new vattn_builder_options_t() (defaults). */
  public Builder(Backend backend, vattn_builder_options_t opts) {
    long[] out = new long[1];
    VattnC.vattn_builder_create(out, backend.handle, opts);
    handle = out[0];
  }

  long handle() { Vattn.checkHandle(handle, "Builder"); return handle; }

  /** A new plan with this builder's capacity. */
  public Plan newPlan() {
    long[] out = new long[1];
    VattnC.vattn_plan_create(out, handle());
    return new Plan(out[0]);
  }

  /** Builds {@code md} into {@code plan} (default stream). commonPrefixLen > 0 = cascade. */
  public void build(Plan plan, long commonPrefixLen, Metadata md, boolean fastBuild) {
    VattnC.vattn_builder_build(handle(), plan.handle(), commonPrefixLen, md.handle(), fastBuild ? 1 : 0, 0L);
  }

  /**
   * Builds {@code md} for a CUDA-graph capture (checked against the
   * builder's CUDA-graph level); the CPU backend throws VattnException with
   * VATTN_ERR_UNSUPPORTED.
   */
  public void buildForCudagraphCapture(Plan plan, Metadata md) {
    VattnC.vattn_builder_build_for_cudagraph_capture(handle(), plan.handle(), md.handle(), 0L);
  }

  /** Builds {@code md} for speculative draft step {@code draftIndex} (fast build, no cascade). */
  public void buildForDrafting(Plan plan, Metadata md, int draftIndex) {
    VattnC.vattn_builder_build_for_drafting(handle(), plan.handle(), md.handle(), draftIndex, 0L);
  }

  /** Reorder threshold (0 = the backend does not reorder). */
  public int reorderBatchThreshold() {
    int[] out = new int[1];
    VattnC.vattn_builder_reorder_batch_threshold(handle(), out);
    return out[0];
  }

  /** CUDA-graph support level (VATTN_CUDAGRAPH_*). */
  public int cudagraphSupport() {
    int[] out = new int[1];
    VattnC.vattn_builder_cudagraph_support(handle(), out);
    return out[0];
  }

  @Override public void close() {
    if (handle != 0) {
      VattnC.vattn_builder_destroy(handle);
      handle = 0;
    }
  }
}
