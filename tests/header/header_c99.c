/* The public header must compile as strict C99 with no CUDA include path. */
#include "vattn.h"

#include <stdio.h>

int main(void) {
  vattn_kv_cache_spec_t spec;
  vattn_status_t st;
  vattn_kv_cache_spec_init(&spec);
  st = vattn_kv_cache_spec_page_size_bytes(NULL, NULL);
  if (st != VATTN_ERR_INVALID_ARGUMENT) return 1;
  if (vattn_last_error_message()[0] == '\0') return 2;
  if (vattn_version() != VATTN_VERSION_NUMBER) return 3;
  printf("vattn %s from C99\n", vattn_version_string());
  return 0;
}
