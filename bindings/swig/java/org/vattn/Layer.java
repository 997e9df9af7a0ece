package org.vattn;

/** An attention layer (vLLM AttentionImpl) of one backend. */
public final class Layer implements AutoCloseable {
  private long handle;

  /** A layer; {@code opts} from new vattn_layer_options_t() (defaults). */
  public Layer(Backend backend, vattn_layer_options_t opts) {
    long[] out = new long[1];
    VattnC.vattn_layer_create(out, backend.handle, opts);
    handle = out[0];
  }

  long handle() { Vattn.checkHandle(handle, "Layer"); return handle; }

  /**
   * Writes key/value into kvCache through the plan's slot mapping, then
   * attends every query token and writes output.  key/value/kvCache/lse may
   * be null where the header allows it.
   */
  public void forward(Plan plan, Tensor query, Tensor key, Tensor value, Tensor kvCache, Tensor output, Tensor outputLse) {
    vattn_forward_args_t a = new vattn_forward_args_t();
    a.setQuery(query.dl);
    if (key != null) a.setKey(key.dl);
    if (value != null) a.setValue(value.dl);
    if (kvCache != null) a.setKv_cache(kvCache.dl);
    a.setOutput(output.dl);
    if (outputLse != null) a.setOutput_lse(outputLse.dl);
    VattnC.vattn_layer_forward(handle(), plan.handle(), a);
    for (Tensor t : new Tensor[] {query, key, value, kvCache, output, outputLse})
      if (t != null) t.touch();
  }

  @Override public void close() {
    if (handle != 0) {
      VattnC.vattn_layer_destroy(handle);
      handle = 0;
    }
  }
}
