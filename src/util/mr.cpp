// Placeholder until memory registration lands.
#include "util/util.hpp"
namespace weft {
fi_ops_mr mr_ops = {sizeof(fi_ops_mr), nullptr, nullptr, nullptr};
void mr_map_create(domain&) {}
void mr_map_destroy(domain&) noexcept {}
}  // namespace weft
