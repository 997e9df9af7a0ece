// metadata_api.cpp -- header section 7: CommonAttentionMetadata handles.
// The invariants live in src/metadata/metadata_check.cpp.
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/options.h"
#include "metadata/metadata.h"

namespace {

constexpr size_t kDescMinSize = VATTN_STRUCT_MIN_SIZE(vattn_metadata_desc_t, dcp_local_seq_lens);

}  // namespace

extern "C" {

VATTN_API void vattn_metadata_desc_init(vattn_metadata_desc_t *desc) {
  if (!desc) return;
  std::memset(desc, 0, sizeof *desc);
  desc->struct_size = sizeof *desc;
  desc->causal = 1;
  desc->max_query_len = -1;
  desc->max_seq_len = -1;
}

VATTN_API vattn_status_t vattn_metadata_create(vattn_metadata_t **out,
                                               const vattn_metadata_desc_t *desc) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    VATTN_CHECK_NOT_NULL(desc);
    vattn_metadata_desc_t d;
    VATTN_TRY(vattn::read_options(desc, &d, vattn_metadata_desc_init, kDescMinSize, "desc"));
    auto h = std::make_unique<vattn_metadata>();
    VATTN_TRY(vattn::metadata_from_desc(d, "desc", &h->md));
    *out = h.release();
    return VATTN_OK;
  });
}

VATTN_API void vattn_metadata_destroy(vattn_metadata_t *md) {
  vattn::guard_void([&] { delete md; });
}

VATTN_API vattn_status_t vattn_metadata_describe(const vattn_metadata_t *md,
                                                 vattn_metadata_desc_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(md);
    VATTN_TRY(vattn::check_out_struct(out, kDescMinSize, "out"));
    vattn_metadata_desc_t d;
    vattn::metadata_to_desc(md->md, &d);
    vattn::write_out(out, d);
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_metadata_unpadded(const vattn_metadata_t *md, int64_t num_tokens,
                                                 int64_t num_reqs, vattn_metadata_t **out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    VATTN_CHECK_NOT_NULL(md);
    auto h = std::make_unique<vattn_metadata>();
    VATTN_TRY(vattn::metadata_unpadded(md->md, num_tokens, num_reqs, &h->md));
    *out = h.release();
    return VATTN_OK;
  });
}

}  // extern "C"
