// The public header must compile as C++17 (-pedantic -Werror).
#include "vattn.h"

#include <cstdio>

int main() {
  static_assert(VATTN_OK == 0, "OK is zero");
  vattn_layer_options_t opts;
  vattn_layer_options_init(&opts);
  if (opts.struct_size != sizeof opts) return 1;
  if (vattn_version() != VATTN_VERSION_NUMBER) return 2;
  std::printf("vattn %s from C++17\n", vattn_version_string());
  return 0;
}
