/*
 * vattn.i -- SWIG interface of libvattn.
 *
 * The declarations come from vattn.h itself (%include at the bottom), never
 * copied.  What this file adds is how C shapes map onto the target language.
 * Java (tested, package org.vattn):
 *
 *  - every function returning vattn_status_t returns void and throws
 *    org.vattn.VattnException(status, message) when the status is not
 *    VATTN_OK; the message is vattn_last_error_message(), then cleared;
 *  - handles (vattn_metadata_t *, vattn_kv_cache_t *, ...) are plain `long`
 *    addresses, and handle out-parameters `T **out` are `long[]` of at least
 *    one entry; the hand-written classes in java/org/vattn (Metadata,
 *    KvCache, Builder, Plan, Layer, ...) own them and implement
 *    AutoCloseable;
 *  - scalar and small-array out-parameters (`int64_t *out`, `int32_t
 *    *ndim_out`, `int64_t *shape_out`, ...) are Java primitive arrays,
 *    copied back after the call;
 *  - every other int32_t / int64_t / float pointer (input arrays, struct
 *    members such as vattn_metadata_desc_t.query_start_loc, DLTensor.shape)
 *    is a *direct* NIO buffer (IntBuffer / LongBuffer / FloatBuffer in
 *    native byte order) whose address is passed as is: no copy, and the
 *    buffer must stay reachable while C may read it.  Reading such a struct
 *    member back from Java gives null (C does not say how long it is);
 *  - DLTensor.data is a direct java.nio.Buffer (its address); other void *
 *    (CUDA streams) are `long`;
 *  - option structs get a constructor that runs their vattn_*_options_init
 *    (so struct_size and the defaults are set); output structs get
 *    struct_size set.
 */
%module(jniclassname="VattnJNI") VattnC

%{
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "vattn.h"
%}

%include <stdint.i>

#ifdef SWIGJAVA
%{
/* Throws org.vattn.VattnException(status, message) for a failed call. */
static __thread const char *vattn_java_error_msg;
static void vattn_java_throw(JNIEnv *jenv, vattn_status_t status) {
  char msg[2048];
  const char *m = vattn_java_error_msg ? vattn_java_error_msg : vattn_last_error_message();
  size_t i = 0;
  jclass cls;
  jmethodID ctor;
  jstring jmsg;
  jobject ex;
  vattn_java_error_msg = NULL;
  if ((*jenv)->ExceptionCheck(jenv)) return; /* one already pending */
  /* NewStringUTF wants modified UTF-8: keep ASCII, replace the rest. */
  for (; m[i] && i + 1 < sizeof msg; ++i) msg[i] = (m[i] & 0x80) ? '?' : m[i];
  msg[i] = '\0';
  vattn_clear_last_error();
  cls = (*jenv)->FindClass(jenv, "org/vattn/VattnException");
  if (!cls) return; /* NoClassDefFoundError is pending */
  ctor = (*jenv)->GetMethodID(jenv, cls, "<init>", "(ILjava/lang/String;)V");
  if (!ctor) return;
  jmsg = (*jenv)->NewStringUTF(jenv, msg);
  if (!jmsg) return;
  ex = (*jenv)->NewObject(jenv, cls, ctor, (jint)status, jmsg);
  if (ex) (*jenv)->Throw(jenv, (jthrowable)ex);
}
%}

/* ---- status: void + exception ------------------------------------------- */
%typemap(jstype) vattn_status_t "void"
%typemap(javaout) vattn_status_t { $jnicall; }
/* No early return: argout / freearg of the other arguments still run. */
%typemap(out) vattn_status_t %{
  $result = (jint)$1;
  if ($1 != VATTN_OK) vattn_java_throw(jenv, $1);
%}
/* A status passed *in* (vattn_status_string) stays an int. */
%apply int32_t { vattn_status_t status };

/* ---- handles: long addresses ------------------------------------------------ */
%define VATTN_HANDLE(T)
%typemap(jni) T *, const T * "jlong"
%typemap(jtype) T *, const T * "long"
%typemap(jstype) T *, const T * "long"
%typemap(javain) T *, const T * "$javainput"
%typemap(javaout) T *, const T * { return $jnicall; }
%typemap(in) T *, const T * %{ $1 = ($1_ltype)(intptr_t)$input; %}
%typemap(out) T *, const T * %{ $result = (jlong)(intptr_t)$1; %}
%typemap(jni) T **out, const T **out "jlongArray"
%typemap(jtype) T **out, const T **out "long[]"
%typemap(jstype) T **out, const T **out "long[]"
%typemap(javain) T **out, const T **out "$javainput"
%typemap(in) T **out ($*1_ltype temp = NULL), const T **out ($*1_ltype temp = NULL) %{
  if (!$input || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "argument 'out': needs a long[1]");
    return $null;
  }
  $1 = &temp;
%}
%typemap(argout) T **out, const T **out %{
  if (!(*jenv)->ExceptionCheck(jenv)) {
    jlong h = (jlong)(intptr_t)temp$argnum;
    (*jenv)->SetLongArrayRegion(jenv, $input, 0, 1, &h);
  }
%}
%enddef
VATTN_HANDLE(vattn_backend_t)
VATTN_HANDLE(vattn_kv_cache_t)
VATTN_HANDLE(vattn_metadata_t)
VATTN_HANDLE(vattn_builder_t)
VATTN_HANDLE(vattn_plan_t)
VATTN_HANDLE(vattn_layer_t)
VATTN_HANDLE(vattn_v0_metadata_t)
VATTN_HANDLE(vattn_v0_builder_t)
VATTN_HANDLE(vattn_graph_state_t)

/* ---- pointers to numbers: direct NIO buffers ----------------------------- */
%define VATTN_NIO(CTYPE, JBUF)
%typemap(jni) CTYPE *, const CTYPE * "jobject"
%typemap(jtype) CTYPE *, const CTYPE * "java.nio.JBUF"
%typemap(jstype) CTYPE *, const CTYPE * "java.nio.JBUF"
%typemap(javain) CTYPE *, const CTYPE * "$javainput"
%typemap(javaout) CTYPE *, const CTYPE * { return $jnicall; }
%typemap(in) CTYPE *, const CTYPE * %{
  $1 = NULL;
  if ($input) {
    $1 = ($1_ltype)(*jenv)->GetDirectBufferAddress(jenv, $input);
    if (!$1) {
      SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                              "argument '$1_name': a direct NIO buffer is required");
      return $null;
    }
  }
%}
/* Length unknown on the way out. */
%typemap(out) CTYPE *, const CTYPE * %{ (void)$1; $result = NULL; %}
%enddef
VATTN_NIO(int32_t, IntBuffer)
VATTN_NIO(int64_t, LongBuffer)
VATTN_NIO(float, FloatBuffer)

/* DLTensor.data: any direct buffer. */
%typemap(jni) void *data "jobject"
%typemap(jtype) void *data "java.nio.Buffer"
%typemap(jstype) void *data "java.nio.Buffer"
%typemap(javain) void *data "$javainput"
%typemap(javaout) void *data { return $jnicall; }
%typemap(in) void *data %{
  $1 = NULL;
  if ($input) {
    $1 = (*jenv)->GetDirectBufferAddress(jenv, $input);
    if (!$1) {
      SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                              "argument 'data': a direct NIO buffer is required");
      return $null;
    }
  }
%}
%typemap(out) void *data %{ (void)$1; $result = NULL; %}

/* Other void * (streams): raw addresses. */
%typemap(jni) void * "jlong"
%typemap(jtype) void * "long"
%typemap(jstype) void * "long"
%typemap(javain) void * "$javainput"
%typemap(javaout) void * { return $jnicall; }
%typemap(in) void * %{ $1 = (void *)(intptr_t)$input; %}
%typemap(out) void * %{ $result = (jlong)(intptr_t)$1; %}

/* ---- scalar / small-array outputs: primitive arrays, copied back -------- */
%define VATTN_OUT_ARRAY(CTYPE, JTYPE, JARR, JNAME, JFN)
%typemap(jni) CTYPE *OUTARR "JARR"
%typemap(jtype) CTYPE *OUTARR "JTYPE[]"
%typemap(jstype) CTYPE *OUTARR "JTYPE[]"
%typemap(javain) CTYPE *OUTARR "$javainput"
%typemap(in) CTYPE *OUTARR %{
  $1 = NULL;
  if ($input) {
    $1 = ($1_ltype)(*jenv)->Get##JFN##ArrayElements(jenv, $input, NULL);
    if (!$1) return $null;
  }
%}
%typemap(freearg) CTYPE *OUTARR %{
  if ($1) (*jenv)->Release##JFN##ArrayElements(jenv, $input, (JNAME *)$1, 0);
%}
%enddef
VATTN_OUT_ARRAY(int32_t, int, jintArray, jint, Int)
VATTN_OUT_ARRAY(int64_t, long, jlongArray, jlong, Long)
%apply int64_t *OUTARR { int64_t *out, int64_t *out3, int64_t *shape_out, int64_t *num_swaps,
                         int64_t *num_chunks, int64_t *out_len };
%apply int32_t *OUTARR { int32_t *out, int32_t *ndim_out, int32_t *order_out, int32_t *group_out,
                         int32_t *layout_out, int32_t *modified, int32_t *max_seq_len_out };

/* ---- structs ------------------------------------------------------------- */
/* Option structs: the constructor runs their init function. */
%define VATTN_INIT_CTOR(T, INIT)
%extend T {
  T() {
    struct T *p = (struct T *)calloc(1, sizeof(struct T));
    if (p) INIT(p);
    return p;
  }
}
%enddef
VATTN_INIT_CTOR(vattn_kv_cache_spec, vattn_kv_cache_spec_init)
VATTN_INIT_CTOR(vattn_model_limits, vattn_model_limits_init)
VATTN_INIT_CTOR(vattn_backend_selector, vattn_backend_selector_init)
VATTN_INIT_CTOR(vattn_kv_cache_options, vattn_kv_cache_options_init)
VATTN_INIT_CTOR(vattn_slot_mapping_args, vattn_slot_mapping_args_init)
VATTN_INIT_CTOR(vattn_metadata_desc, vattn_metadata_desc_init)
VATTN_INIT_CTOR(vattn_v0_builder_options, vattn_v0_builder_options_init)
VATTN_INIT_CTOR(vattn_v0_seq, vattn_v0_seq_init)
VATTN_INIT_CTOR(vattn_v0_metadata_desc, vattn_v0_metadata_desc_init)
VATTN_INIT_CTOR(vattn_builder_options, vattn_builder_options_init)
VATTN_INIT_CTOR(vattn_layer_options, vattn_layer_options_init)
VATTN_INIT_CTOR(vattn_forward_args, vattn_forward_args_init)

/* Output structs: struct_size set, the rest zero. */
%define VATTN_SIZED_CTOR(T)
%extend T {
  T() {
    struct T *p = (struct T *)calloc(1, sizeof(struct T));
    if (p) p->struct_size = sizeof(struct T);
    return p;
  }
}
%enddef
VATTN_SIZED_CTOR(vattn_backend_info)
VATTN_SIZED_CTOR(vattn_kv_cache_info)

%extend vattn_backend_info {
  /* head_sizes[i], or -1 past the end. */
  int32_t headSizeAt(size_t i) const {
    return (self->head_sizes && i < self->num_head_sizes) ? self->head_sizes[i] : -1;
  }
}

%extend DLTensor {
  /* shape[i] / strides[i] (0 past ndim; strides NULL = compact row-major, given as such). */
  int64_t shapeAt(int i) const {
    return (self->shape && i >= 0 && i < self->ndim) ? self->shape[i] : 0;
  }
  int64_t strideAt(int i) const {
    int64_t s = 1;
    int d;
    if (i < 0 || i >= self->ndim) return 0;
    if (self->strides) return self->strides[i];
    for (d = self->ndim - 1; d > i; --d) s *= self->shape[d];
    return s;
  }
  /* Bytes from the first element to one past the last one reachable. */
  int64_t spanBytes() const {
    int64_t last = 0;
    int d;
    if (!self->shape) return 0;
    for (d = 0; d < self->ndim; ++d) {
      if (self->shape[d] == 0) return 0;
      last += (self->shape[d] - 1) * DLTensor_strideAt(self, d);
    }
    return (last + 1) * ((self->dtype.bits * self->dtype.lanes + 7) / 8);
  }
  /* Copies `dst.capacity()` bytes of a host tensor's memory, from byte
   * `offset` of its first element, into a direct buffer. */
  void readBytes(int64_t offset, void *data, int64_t nbytes) const {
    if (self->device.device_type == kDLCPU && self->data && data && offset >= 0 && nbytes >= 0 &&
        offset + nbytes <= DLTensor_spanBytes(self))
      memcpy(data, (const char *)self->data + self->byte_offset + offset, (size_t)nbytes);
  }
}

/* Contiguous arrays of specs (vattn_kv_cache_create and friends). */
%include <carrays.i>
%array_class(vattn_kv_cache_spec_t, KvCacheSpecArray);

/* ---- host arrays read back from C: Java arrays, copied ----------------------
 * vattn_java_ints / vattn_java_longs are return types of the helpers below
 * (not part of vattn.h): a pointer + length that the out typemap copies
 * into a new int[] / long[] (null for a NULL pointer), or the status of the
 * call that failed (then VattnException is thrown). */
%{
typedef struct vattn_java_ints { const int32_t *data; int64_t len; vattn_status_t status; } vattn_java_ints;
typedef struct vattn_java_longs { const int64_t *data; int64_t len; vattn_status_t status; } vattn_java_longs;
static vattn_java_ints vattn_java_ints_of(const int32_t *p, int64_t n) {
  vattn_java_ints r;
  r.data = p; r.len = n; r.status = VATTN_OK;
  return r;
}
static vattn_java_longs vattn_java_longs_of(const int64_t *p, int64_t n) {
  vattn_java_longs r;
  r.data = p; r.len = n; r.status = VATTN_OK;
  return r;
}

/* A failure found by a helper of this file (not by libvattn): its message
 * is reported by vattn_java_throw instead of vattn_last_error_message(). */
static vattn_status_t vattn_java_fail(const char *msg) {
  vattn_java_error_msg = msg;
  return VATTN_ERR_INVALID_ARGUMENT;
}
%}
%define VATTN_JAVA_ARRAY_OUT(T, JARR, JTYPE, JNAME, JFN)
%typemap(jni) T "JARR"
%typemap(jtype) T "JTYPE[]"
%typemap(jstype) T "JTYPE[]"
%typemap(javaout) T { return $jnicall; }
%typemap(out) T %{
  $result = NULL;
  if ($1.status != VATTN_OK) {
    vattn_java_throw(jenv, $1.status);
  } else if ($1.data && $1.len >= 0 && $1.len <= 0x7fffffff) {
    $result = (*jenv)->New##JFN##Array(jenv, (jsize)$1.len);
    if ($result && $1.len > 0)
      (*jenv)->Set##JFN##ArrayRegion(jenv, $result, 0, (jsize)$1.len, (const JNAME *)$1.data);
  }
%}
%enddef
VATTN_JAVA_ARRAY_OUT(vattn_java_ints, jintArray, int, jint, Int)
VATTN_JAVA_ARRAY_OUT(vattn_java_longs, jlongArray, long, jlong, Long)

/* (pointer, length) pairs from one Java array.  IN: read only; INOUT:
 * copied back after the call. */
%define VATTN_JAVA_ARRAY_ARG(CTYPE, LENTYPE, JARR, JTYPE, JNAME, JFN, NAME, MODE)
%typemap(jni) (CTYPE *NAME, LENTYPE NAME##_len) "JARR"
%typemap(jtype) (CTYPE *NAME, LENTYPE NAME##_len) "JTYPE[]"
%typemap(jstype) (CTYPE *NAME, LENTYPE NAME##_len) "JTYPE[]"
%typemap(javain) (CTYPE *NAME, LENTYPE NAME##_len) "$javainput"
%typemap(in) (CTYPE *NAME, LENTYPE NAME##_len) %{
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "argument '$1_name' is null");
    return $null;
  }
  $2 = (LENTYPE)(*jenv)->GetArrayLength(jenv, $input);
  $1 = ($1_ltype)(*jenv)->Get##JFN##ArrayElements(jenv, $input, NULL);
  if (!$1) return $null;
%}
%typemap(freearg) (CTYPE *NAME, LENTYPE NAME##_len) %{
  if ($1) (*jenv)->Release##JFN##ArrayElements(jenv, $input, (JNAME *)$1, MODE);
%}
%enddef
VATTN_JAVA_ARRAY_ARG(const int64_t, int64_t, jlongArray, long, jlong, Long, slices, JNI_ABORT)
VATTN_JAVA_ARRAY_ARG(int64_t, int64_t, jlongArray, long, jlong, Long, handles, 0)
VATTN_JAVA_ARRAY_ARG(int64_t, int64_t, jlongArray, long, jlong, Long, dims, 0)
VATTN_JAVA_ARRAY_ARG(int64_t, int64_t, jlongArray, long, jlong, Long, ubatches, 0)
VATTN_JAVA_ARRAY_ARG(int64_t, int64_t, jlongArray, long, jlong, Long, padded, 0)

/* copy_blocks / swap_blocks: the block mapping is a long[] of [src, dst]
 * pairs (its length gives num_pairs); the caches of copy_blocks a DLTensor[]. */
%typemap(jni) (const int64_t *block_mapping, size_t num_pairs) "jlongArray"
%typemap(jtype) (const int64_t *block_mapping, size_t num_pairs) "long[]"
%typemap(jstype) (const int64_t *block_mapping, size_t num_pairs) "long[]"
%typemap(javain) (const int64_t *block_mapping, size_t num_pairs) "$javainput"
%typemap(in) (const int64_t *block_mapping, size_t num_pairs) %{
  {
    jsize n_ = $input ? (*jenv)->GetArrayLength(jenv, $input) : 0;
    if (!$input || (n_ & 1)) {
      SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                              "argument 'block_mapping': needs a long[] of [src, dst] pairs");
      return $null;
    }
    $2 = (size_t)(n_ / 2);
    $1 = ($1_ltype)(*jenv)->GetLongArrayElements(jenv, $input, NULL);
    if (!$1) return $null;
  }
%}
%typemap(freearg) (const int64_t *block_mapping, size_t num_pairs) %{
  if ($1) (*jenv)->ReleaseLongArrayElements(jenv, $input, (jlong *)$1, JNI_ABORT);
%}
%typemap(jni) (DLTensor *const *kv_caches, size_t num_layers) "jlongArray"
%typemap(jtype) (DLTensor *const *kv_caches, size_t num_layers) "long[]"
%typemap(jstype) (DLTensor *const *kv_caches, size_t num_layers) "DLTensor[]"
%typemap(javain) (DLTensor *const *kv_caches, size_t num_layers) "DLTensor.cPtrs($javainput)"
%typemap(in) (DLTensor *const *kv_caches, size_t num_layers) (DLTensor **caches_ = NULL) %{
  {
    jsize n_, i_;
    jlong *a_;
    if (!$input) {
      SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "argument 'kv_caches' is null");
      return $null;
    }
    n_ = (*jenv)->GetArrayLength(jenv, $input);
    caches_ = (DLTensor **)calloc((size_t)n_ + 1, sizeof *caches_);
    a_ = (*jenv)->GetLongArrayElements(jenv, $input, NULL);
    if (!caches_ || !a_) {
      free(caches_);
      if (a_) (*jenv)->ReleaseLongArrayElements(jenv, $input, a_, JNI_ABORT);
      SWIG_JavaThrowException(jenv, SWIG_JavaOutOfMemoryError, "kv_caches");
      return $null;
    }
    for (i_ = 0; i_ < n_; ++i_) caches_[i_] = (DLTensor *)(intptr_t)a_[i_];
    (*jenv)->ReleaseLongArrayElements(jenv, $input, a_, JNI_ABORT);
    $1 = caches_;
    $2 = (size_t)n_;
  }
%}
%typemap(freearg) (DLTensor *const *kv_caches, size_t num_layers) %{ free(caches_$argnum); %}
%typemap(javacode) DLTensor %{
  /** Addresses of the tensors (0 for null), for arrays of DLTensor *. */
  static long[] cPtrs(DLTensor[] a) {
    if (a == null) return null;
    long[] r = new long[a.length];
    for (int i = 0; i < a.length; ++i) r[i] = getCPtr(a[i]);
    return r;
  }
%}

/* Pointer members of the metadata descriptions, as Java arrays (copies).
 * The lengths come from the struct's own counts. */
%extend vattn_metadata_desc {
  vattn_java_ints queryStartLocArray() const {
    return vattn_java_ints_of(self->query_start_loc, self->num_reqs + 1);
  }
  vattn_java_ints seqLensArray() const { return vattn_java_ints_of(self->seq_lens, self->num_reqs); }
  vattn_java_ints numComputedTokensArray() const {
    return vattn_java_ints_of(self->num_computed_tokens, self->num_reqs);
  }
  vattn_java_ints blockTableArray() const {
    return vattn_java_ints_of(self->block_table, self->block_table_rows * self->block_table_cols);
  }
  vattn_java_longs slotMappingArray() const {
    return vattn_java_longs_of(self->slot_mapping, self->slot_mapping_len);
  }
  vattn_java_ints encoderSeqLensArray() const {
    return vattn_java_ints_of(self->encoder_seq_lens, self->num_reqs);
  }
  vattn_java_ints logitsIndicesPaddedArray() const {
    return vattn_java_ints_of(self->logits_indices_padded, self->logits_indices_len);
  }
  vattn_java_ints dcpLocalSeqLensArray() const {
    return vattn_java_ints_of(self->dcp_local_seq_lens, self->num_reqs);
  }
}
%extend vattn_v0_metadata_desc {
  vattn_java_longs slotMappingArray() const {
    return vattn_java_longs_of(self->slot_mapping, self->slot_mapping_len);
  }
  vattn_java_ints seqLensArray() const { return vattn_java_ints_of(self->seq_lens, self->num_seqs); }
  vattn_java_ints contextLensArray() const { return vattn_java_ints_of(self->context_lens, self->num_seqs); }
  vattn_java_ints queryStartLocArray() const {
    return vattn_java_ints_of(self->query_start_loc, self->num_seqs + 1);
  }
  vattn_java_ints seqStartLocArray() const {
    return vattn_java_ints_of(self->seq_start_loc, self->num_seqs + 1);
  }
  vattn_java_ints blockTablesArray() const {
    return vattn_java_ints_of(self->block_tables, self->num_seqs * self->block_tables_cols);
  }
  vattn_java_ints encoderSeqLensArray() const {
    return vattn_java_ints_of(self->encoder_seq_lens, self->num_seqs);
  }
  vattn_java_ints crossBlockTablesArray() const {
    return vattn_java_ints_of(self->cross_block_tables, self->num_seqs * self->cross_block_tables_cols);
  }
}

/* Helpers over the functions whose shapes no typemap expresses. */
%inline %{
/* vattn_split_attn_metadata: slices = long[4 * n] of (request_start,
 * request_stop, token_start, token_stop); handles = long[n] receiving the
 * metadata handles (all or none). */
vattn_status_t vattn_java_split_attn_metadata(const vattn_metadata_t *md, const int64_t *slices,
                                              int64_t slices_len, int64_t *handles, int64_t handles_len) {
  vattn_ubatch_slice_t *s;
  vattn_metadata_t **out;
  vattn_status_t st;
  int64_t n, i;
  if (slices_len % 4 != 0)
    return vattn_java_fail("argument 'slices': needs 4 longs per slice (request_start, request_stop, token_start, token_stop)");
  n = slices_len / 4;
  if (handles_len != n) return vattn_java_fail("argument 'handles': needs one entry per slice");
  s = (vattn_ubatch_slice_t *)calloc((size_t)n + 1, sizeof *s);
  out = (vattn_metadata_t **)calloc((size_t)n + 1, sizeof *out);
  if (!s || !out) {
    free(s);
    free(out);
    vattn_java_error_msg = "out of memory";
    return VATTN_ERR_OUT_OF_MEMORY;
  }
  for (i = 0; i < n; ++i) {
    s[i].request_start = slices[4 * i];
    s[i].request_stop = slices[4 * i + 1];
    s[i].token_start = slices[4 * i + 2];
    s[i].token_stop = slices[4 * i + 3];
  }
  st = vattn_split_attn_metadata(s, (size_t)n, md, out);
  if (st == VATTN_OK)
    for (i = 0; i < n; ++i) handles[i] = (int64_t)(intptr_t)out[i];
  free(s);
  free(out);
  return st;
}

/* vattn_ubatch_slices_create: ubatches and padded = long[4 * num_ubatches]
 * receiving (request_start, request_stop, token_start, token_stop) of every
 * slice and of its padded variant. */
vattn_status_t vattn_java_ubatch_slices_create(const int32_t *num_scheduled_tokens, int64_t num_reqs,
                                               int64_t num_tokens_padded, int64_t num_reqs_padded,
                                               int32_t num_ubatches, int64_t split_point, int64_t *ubatches,
                                               int64_t ubatches_len, int64_t *padded, int64_t padded_len) {
  vattn_ubatch_slice_t *s, *p;
  vattn_status_t st;
  int64_t i;
  if (num_ubatches < 0 || ubatches_len != 4 * (int64_t)num_ubatches || padded_len != ubatches_len)
    return vattn_java_fail("arguments 'ubatches' / 'padded': need 4 longs per micro-batch");
  s = (vattn_ubatch_slice_t *)calloc((size_t)num_ubatches + 1, sizeof *s);
  p = (vattn_ubatch_slice_t *)calloc((size_t)num_ubatches + 1, sizeof *p);
  if (!s || !p) {
    free(s);
    free(p);
    vattn_java_error_msg = "out of memory";
    return VATTN_ERR_OUT_OF_MEMORY;
  }
  st = vattn_ubatch_slices_create(num_scheduled_tokens, num_reqs, num_tokens_padded, num_reqs_padded,
                                  num_ubatches, split_point, s, p);
  if (st == VATTN_OK)
    for (i = 0; i < num_ubatches; ++i) {
      ubatches[4 * i] = s[i].request_start;
      ubatches[4 * i + 1] = s[i].request_stop;
      ubatches[4 * i + 2] = s[i].token_start;
      ubatches[4 * i + 3] = s[i].token_stop;
      padded[4 * i] = p[i].request_start;
      padded[4 * i + 1] = p[i].request_stop;
      padded[4 * i + 2] = p[i].token_start;
      padded[4 * i + 3] = p[i].token_stop;
    }
  free(s);
  free(p);
  return st;
}

/* vattn_v0_get_seq_len_block_table_args, scalars: dims = long[3] receiving
 * (num_seqs, max_seq_len, block_table_cols). */
vattn_status_t vattn_java_v0_seq_len_block_table_dims(const vattn_v0_metadata_t *md, int32_t is_prompt,
                                                      int32_t attn_type, int64_t *dims, int64_t dims_len) {
  int64_t n = 0, cols = 0;
  int32_t mx = 0;
  vattn_status_t st;
  if (dims_len < 3) return vattn_java_fail("argument 'dims': needs a long[3]");
  st = vattn_v0_get_seq_len_block_table_args(md, is_prompt, attn_type, NULL, &n, &mx, NULL, &cols);
  if (st == VATTN_OK) {
    dims[0] = n;
    dims[1] = mx;
    dims[2] = cols;
  }
  return st;
}

/* ... and its arrays: the sequence lengths [num_seqs] and the block table
 * [num_seqs * block_table_cols] (null for encoder attention), copied. */
vattn_java_ints vattn_java_v0_seq_lens(const vattn_v0_metadata_t *md, int32_t is_prompt, int32_t attn_type) {
  const int32_t *sl = NULL;
  int64_t n = 0;
  vattn_java_ints r = vattn_java_ints_of(NULL, 0);
  r.status = vattn_v0_get_seq_len_block_table_args(md, is_prompt, attn_type, &sl, &n, NULL, NULL, NULL);
  if (r.status == VATTN_OK) r = vattn_java_ints_of(sl, n);
  return r;
}
vattn_java_ints vattn_java_v0_block_table(const vattn_v0_metadata_t *md, int32_t is_prompt, int32_t attn_type) {
  const int32_t *bt = NULL;
  int64_t n = 0, cols = 0;
  vattn_java_ints r = vattn_java_ints_of(NULL, 0);
  r.status = vattn_v0_get_seq_len_block_table_args(md, is_prompt, attn_type, NULL, &n, NULL, &bt, &cols);
  if (r.status == VATTN_OK) r = vattn_java_ints_of(bt, n * cols);
  return r;
}
%}

/* Wrapped through the helpers above. */
%ignore vattn_split_attn_metadata;
%ignore vattn_ubatch_slices_create;
%ignore vattn_v0_get_seq_len_block_table_args;
%ignore DLManagedTensor;

/* Load the JNI library and check the version when the class loads. */
%pragma(java) jniclasscode=%{
  static {
    String lib = System.getProperty("org.vattn.library", "vattn_java");
    System.loadLibrary(lib);
    long loaded = vattn_version();
    if ((loaded >> 8) != (VATTN_VERSION_NUMBER_get() >> 8))
      throw new UnsatisfiedLinkError("libvattn " + vattn_version_string()
          + " is loaded but these bindings were built for header version " + VATTN_VERSION_NUMBER_get());
  }
%}
%javaconst(1);
%javaconst(0) VATTN_VERSION_NUMBER;
/* Feature bits are `(1u << n)` in C, which is no Java literal. */
%javaconstvalue("1L") VATTN_FEATURE_ALIBI;
%javaconstvalue("2L") VATTN_FEATURE_SLIDING_WINDOW;
%javaconstvalue("4L") VATTN_FEATURE_SOFT_CAP;
%javaconstvalue("8L") VATTN_FEATURE_SINKS;
%javaconstvalue("16L") VATTN_FEATURE_FP8_KV_CACHE;
%javaconstvalue("32L") VATTN_FEATURE_LSE_OUTPUT;
%javaconstvalue("64L") VATTN_FEATURE_CASCADE;
%javaconstvalue("128L") VATTN_FEATURE_MLA;
%javaconstvalue("256L") VATTN_FEATURE_KV_SHARING;
%immutable vattn_backend_info::name;
#endif /* SWIGJAVA */

#ifdef SWIGJAVA
/* DLPack's C enums (kDLCPU, kDLFloat, ...) become int constants; their
 * values (e.g. `5U`) are read through JNI, not copied as Java literals. */
%include "enumtypeunsafe.swg"
%javaconst(0);
#endif
%include "dlpack/dlpack.h"
#ifdef SWIGJAVA
%javaconst(1);
#endif
%include "vattn.h"
