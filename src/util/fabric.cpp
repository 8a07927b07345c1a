// SPDX-License-Identifier: BSD-3-Clause
// The fabric object: a provider's top-level handle (fi_fabric).
#include "util/fabric.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>

#include <cstring>
#include <memory>

#include "core/fabric2.hpp"
#include "core/log.hpp"
#include "util/util.hpp"

namespace weft {

int domain_open(fabric& fab, fi_info* info, fid_domain** dom, void* context) noexcept;

namespace {

int fabric_close(fid* f) noexcept {
  auto* fab = from_fid<fabric>(f);
  if (fab->users_.busy()) return -FI_EBUSY;
  delete fab;
  return 0;
}

int fabric_control(fid*, int, void*) noexcept {
  return -FI_ENOSYS;
}

fi_ops fabric_fi_ops = {
    sizeof(fi_ops), fabric_close, fid_no_bind, fabric_control, fid_no_ops_open, fid_no_tostr, fid_no_ops_set,
};

int fabric_domain(fid_fabric* f, fi_info* info, fid_domain** dom, void* context) noexcept {
  if (!is_class(&f->fid, FI_CLASS_FABRIC)) return -FI_EINVAL;
  return domain_open(*fabric::of(f), info, dom, context);
}

int fabric_domain2(fid_fabric* f, fi_info* info, fid_domain** dom, uint64_t flags, void* context) noexcept {
  if (flags) return -FI_EBADFLAGS;  // FI_PEER domains are not supported
  return fabric_domain(f, info, dom, context);
}

int fabric_passive_ep(fid_fabric* f, fi_info* info, fid_pep** pep, void* context) noexcept {
  if (!is_class(&f->fid, FI_CLASS_FABRIC) || !info || !pep) return -FI_EINVAL;
  return guard([&] { return fabric::of(f)->prov->passive_ep(*fabric::of(f), info, pep, context); });
}

int fabric_eq_open(fid_fabric* f, fi_eq_attr* attr, fid_eq** eq, void* context) noexcept {
  if (!is_class(&f->fid, FI_CLASS_FABRIC)) return -FI_EINVAL;
  return eq_open(*fabric::of(f), attr, eq, context);
}

int fabric_wait_open(fid_fabric* f, fi_wait_attr* attr, fid_wait** waitset) noexcept {
  if (!is_class(&f->fid, FI_CLASS_FABRIC)) return -FI_EINVAL;
  return wait_open(*fabric::of(f), attr, waitset);
}

int fabric_trywait(fid_fabric* f, fid** fids, int count) noexcept {
  if (!is_class(&f->fid, FI_CLASS_FABRIC)) return -FI_EINVAL;
  return trywait(*fabric::of(f), fids, count);
}

fi_ops_fabric fabric_ops = {
    sizeof(fi_ops_fabric), fabric_domain,  fabric_passive_ep, fabric_eq_open,
    fabric_wait_open,      fabric_trywait, fabric_domain2,
};

}  // namespace

int fabric_open(fi_fabric_attr* attr, fid_fabric** out, void* context, uint32_t api_version) {
  if (!attr || !out) return -FI_EINVAL;
  if (attr->fabric) return -FI_EINVAL;  // already open: fi_fabric takes an attr from fi_getinfo
  provider* prov = nullptr;
  if (attr->prov_name) {
    prov = find_provider(attr->prov_name);
  } else if (attr->name) {
    prov = find_provider(attr->name);  // a provider's fabric carries its name
  }
  if (!prov) return -FI_ENODATA;
  if (attr->name && !names_provider(attr->name, prov->name())) return -FI_ENODATA;
  if (api_version == 0) api_version = FI_VERSION(1, 0);
  if (!api_accepted(api_version)) return -FI_ENOSYS;
  note_caller_api(api_version);

  auto fab = std::make_unique<fabric>();
  fab->fid_.fid.fclass = FI_CLASS_FABRIC;
  fab->fid_.fid.context = context;
  fab->fid_.fid.ops = &fabric_fi_ops;
  fab->fid_.ops = &fabric_ops;
  fab->fid_.api_version = api_version;
  fab->prov = prov;
  fab->name = std::string(name_prefix()) + prov->name();
  fab->api_version = api_version;
  WEFT_INFO(FI_LOG_FABRIC, "opened fabric %s (api %u.%u)", fab->name.c_str(), FI_MAJOR(api_version),
            FI_MINOR(api_version));
  *out = &fab.release()->fid_;
  return 0;
}

}  // namespace weft
