// Placeholder until the address vector lands.
#include "util/util.hpp"
namespace weft {
int av_open(domain&, fi_av_attr*, fid_av**, void*) noexcept { return -FI_ENOSYS; }
}  // namespace weft
