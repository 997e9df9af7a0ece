package org.vattn;

/** A run plan, made by Builder.newPlan() and rebuilt by Builder.build(). */
public final class Plan implements AutoCloseable {
  private long handle;

  Plan(long handle) { this.handle = handle; }

  long handle() { Vattn.checkHandle(handle, "Plan"); return handle; }

  @Override public void close() {
    if (handle != 0) {
      VattnC.vattn_plan_destroy(handle);
      handle = 0;
    }
  }
}
