// Placeholder until the completion objects land (replaced by eq/cq/cntr/wait/poll .cpp).
#include "util/util.hpp"
namespace weft {
int eq_open(fabric&, fi_eq_attr*, fid_eq**, void*) noexcept { return -FI_ENOSYS; }
int wait_open(fabric&, fi_wait_attr*, fid_wait**) noexcept { return -FI_ENOSYS; }
int trywait(fabric&, fid**, int) noexcept { return -FI_ENOSYS; }
int cq_open(domain&, fi_cq_attr*, fid_cq**, void*) noexcept { return -FI_ENOSYS; }
int cntr_open(domain&, fi_cntr_attr*, fid_cntr**, void*) noexcept { return -FI_ENOSYS; }
int poll_open(domain&, fi_poll_attr*, fid_poll**) noexcept { return -FI_ENOSYS; }
}  // namespace weft
#include "util/eq.hpp"
namespace weft {
ssize_t eq_post(fid_eq*, uint32_t, const void*, size_t, uint64_t) noexcept { return -FI_ENOSYS; }
int eq_post_error(fid_eq*, fid_t, void*, uint64_t, int, int, const void*, size_t) noexcept { return -FI_ENOSYS; }
}  // namespace weft
