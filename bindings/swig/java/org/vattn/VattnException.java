package org.vattn;

/**
 * A vattn call failed: {@link #getStatus()} is the pinned status code
 * (VattnCConstants.VATTN_ERR_*), the message is the library's own
 * (vattn_last_error_message(), naming the offending argument).
 * Unchecked, like the JDK's IllegalArgumentException.
 */
public class VattnException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final int status;

  /** Called from the JNI layer for a non-OK status. */
  public VattnException(int status, String message) {
    super(VattnC.vattn_status_string(status) + " (" + status + "): " + message);
    this.status = status;
  }

  /** The status code (never VATTN_OK). */
  public int getStatus() { return status; }
}
