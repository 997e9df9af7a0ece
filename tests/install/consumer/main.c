/* Links against an installed libvattn and checks the loaded version. */
#include <stdio.h>
#include <vattn.h>

int main(void) {
  if (vattn_version() != VATTN_VERSION_NUMBER) return 1;
  printf("consumer: vattn %s, %zu backends\n", vattn_version_string(), vattn_backend_count());
  return 0;
}
