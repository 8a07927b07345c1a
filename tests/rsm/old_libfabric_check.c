// SPDX-License-Identifier: BSD-3-Clause
/* Run over a libfabric older than the RSM face needs (see
 * fake_old_libfabric.c): rsm_get_controller answers
 * RSMERR_BAD_LIBRARY_VERSION for every controller, and nothing crashes. */
#include <rsmapi.h>
#include <stdio.h>

int main(void) {
  const char* names[] = {"shm", "tcp", "loopback"};
  int bad = 0;
  for (int i = 0; i < 3; i++) {
    rsmapi_controller_handle_t c = 0;
    int r = rsm_get_controller((char*)names[i], &c);
    if (r != RSMERR_BAD_LIBRARY_VERSION) {
      fprintf(stderr, "rsm_get_controller(%s) = %d, want %d\n", names[i], r, RSMERR_BAD_LIBRARY_VERSION);
      bad = 1;
    }
  }
  return bad;
}
