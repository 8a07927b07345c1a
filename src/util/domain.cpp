// SPDX-License-Identifier: BSD-3-Clause
// The domain object (fi_domain): creates the per-domain objects and hands
// endpoint creation to the provider.
#include "util/domain.hpp"

#include <netinet/in.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <cstring>
#include <memory>

#include "core/fabric2.hpp"
#include "core/info.hpp"
#include "core/log.hpp"
#include "core/prov_template.hpp"
#include "util/coll.hpp"
#include "util/eq.hpp"
#include "util/mr.hpp"
#include "util/util.hpp"

namespace weft {

namespace {

void domain_destroy(domain* d) noexcept {
  d->pd.reset();
  if (!d->parent) mr_map_destroy(*d);  // a part shares its parent's
  info_free(d->info);
  delete d;
}

int domain_close(fid* f) noexcept {
  auto* d = from_fid<domain>(f);
  if (d->users_.busy()) return -FI_EBUSY;
  if (d->eq) eq_drop(d->eq);
  d->fab->users_.drop();
  domain_destroy(d);
  return 0;
}

// fi_domain_bind: an EQ for asynchronous memory registration events.
int domain_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  auto* d = from_fid<domain>(f);
  if (!bfid || !is_eq(bfid)) return -FI_EINVAL;
  if (!only(flags, FI_REG_MR)) return -FI_EBADFLAGS;
  if (d->eq) return -FI_EBUSY;
  d->eq = reinterpret_cast<fid_eq*>(bfid);
  eq_take(d->eq);
  return 0;
}

int domain_control(fid* f, int command, void* arg) noexcept {
  auto* d = from_fid<domain>(f);
  switch (command) {
    case FI_MAP_RAW_MR:
      return mr_map_raw(*d, static_cast<struct fi_mr_map_raw*>(arg));
    case FI_UNMAP_KEY:
      return mr_unmap_key(*d, static_cast<uint64_t*>(arg));
    default:
      return -FI_ENOSYS;
  }
}

fi_ops domain_fi_ops = {
    sizeof(fi_ops), domain_close, domain_bind, domain_control, fid_no_ops_open, fid_no_tostr, fid_no_ops_set,
};

domain& of(fid_domain* d) {
  return *domain::of(d);
}

int dom_av_open(fid_domain* d, fi_av_attr* attr, fid_av** av, void* ctx) noexcept {
  if (!is_class(&d->fid, FI_CLASS_DOMAIN)) return -FI_EINVAL;
  return av_open(of(d), attr, av, ctx);
}
int dom_cq_open(fid_domain* d, fi_cq_attr* attr, fid_cq** cq, void* ctx) noexcept {
  if (!is_class(&d->fid, FI_CLASS_DOMAIN)) return -FI_EINVAL;
  return cq_open(of(d), attr, cq, ctx);
}
int dom_cntr_open(fid_domain* d, fi_cntr_attr* attr, fid_cntr** cntr, void* ctx) noexcept {
  if (!is_class(&d->fid, FI_CLASS_DOMAIN)) return -FI_EINVAL;
  return cntr_open(of(d), attr, cntr, ctx);
}
int dom_poll_open(fid_domain* d, fi_poll_attr* attr, fid_poll** ps) noexcept {
  if (!is_class(&d->fid, FI_CLASS_DOMAIN)) return -FI_EINVAL;
  return poll_open(of(d), attr, ps);
}
int dom_endpoint(fid_domain* d, fi_info* info, fid_ep** ep, void* ctx) noexcept {
  if (!is_class(&d->fid, FI_CLASS_DOMAIN) || !info || !ep) return -FI_EINVAL;
  return guard([&] { return of(d).pd->endpoint(info, ep, ctx); });
}
int dom_endpoint2(fid_domain* d, fi_info* info, fid_ep** ep, uint64_t flags, void* ctx) noexcept {
  if (flags) return -FI_EBADFLAGS;
  return dom_endpoint(d, info, ep, ctx);
}
int dom_scalable_ep(fid_domain* d, fi_info* info, fid_ep** sep, void* ctx) noexcept {
  if (!is_class(&d->fid, FI_CLASS_DOMAIN) || !info || !sep) return -FI_EINVAL;
  return guard([&] { return of(d).pd->scalable_ep(info, sep, ctx); });
}
int dom_stx_ctx(fid_domain* d, fi_tx_attr* attr, fid_stx** stx, void* ctx) noexcept {
  if (!is_class(&d->fid, FI_CLASS_DOMAIN) || !stx) return -FI_EINVAL;
  return guard([&] { return of(d).pd->stx_ctx(attr, stx, ctx); });
}
int dom_srx_ctx(fid_domain* d, fi_rx_attr* attr, fid_ep** rx, void* ctx) noexcept {
  if (!is_class(&d->fid, FI_CLASS_DOMAIN) || !rx) return -FI_EINVAL;
  return guard([&] { return of(d).pd->srx_ctx(attr, rx, ctx); });
}
int dom_query_atomic(fid_domain* d, fi_datatype dt, fi_op op, fi_atomic_attr* attr, uint64_t flags) noexcept {
  if (!is_class(&d->fid, FI_CLASS_DOMAIN) || !attr) return -FI_EINVAL;
  return guard([&] { return of(d).pd->query_atomic(dt, op, attr, flags); });
}
int dom_query_collective(fid_domain* d, fi_collective_op coll, fi_collective_attr* attr, uint64_t flags) noexcept {
  if (!is_class(&d->fid, FI_CLASS_DOMAIN)) return -FI_EINVAL;
  return coll_query(of(d), coll, attr, flags);
}

fi_ops_domain domain_ops = {
    sizeof(fi_ops_domain), dom_av_open, dom_cq_open, dom_endpoint,     dom_scalable_ep,      dom_cntr_open,
    dom_poll_open,         dom_stx_ctx, dom_srx_ctx, dom_query_atomic, dom_query_collective, dom_endpoint2,
};

// The attributes whose meaning depends on the caller's API (fi_domain(3)
// of 2.x): FI_MR_BASIC/SCALABLE are gone from 2.x, FI_PROGRESS_CONTROL_UNIFIED
// is new in it; weft keeps no authorization keys in AVs (FI_AV_AUTH_KEY,
// 1.20) and has no peer groups (max_group_id, 2.0).
int check_versioned_attrs(uint32_t version, const fi_domain_attr& a) {
  auto progress_ok = [&](fi_progress p) {
    unsigned v = static_cast<unsigned>(p);
    return v <= FI_PROGRESS_MANUAL || (api_v2(version) && p == FI_PROGRESS_CONTROL_UNIFIED);
  };
  if (!progress_ok(a.control_progress) || !progress_ok(a.data_progress)) return -FI_EINVAL;
  if (api_v2(version) && (a.mr_mode & (FI_MR_BASIC | FI_MR_SCALABLE))) return -FI_EINVAL;
  if (FI_VERSION_GE(version, FI_VERSION(1, 20)) && a.auth_key_size == FI_AV_AUTH_KEY) return -FI_ENODATA;
  if (tail_of(&a).max_group_id) return -FI_ENODATA;
  return 0;
}

// FI_PROGRESS_CONTROL_UNIFIED is manual progress of everything.
fi_progress progress_of(fi_progress asked, fi_progress unspec) {
  if (asked == FI_PROGRESS_UNSPEC) return unspec;
  return asked == FI_PROGRESS_CONTROL_UNIFIED ? FI_PROGRESS_MANUAL : asked;
}

size_t addrlen_of(uint32_t fmt) {
  switch (fmt) {
    case FI_SOCKADDR_IN:
      return sizeof(sockaddr_in);
    case FI_SOCKADDR_IN6:
      return sizeof(sockaddr_in6);
    case FI_ADDR_STR:
      return 64;
    default:
      return 0;
  }
}

}  // namespace

int domain_open(fabric& fab, fi_info* info, fid_domain** out, void* context) noexcept {
  return guard([&]() -> int {
    if (!info || !out || !info->domain_attr) return -FI_EINVAL;
    if (info->fabric_attr && info->fabric_attr->prov_name &&
        !names_provider(info->fabric_attr->prov_name, fab.prov->name()))
      return -FI_EINVAL;
    auto templates = fab.prov->templates();
    const fi_info* tmpl = nullptr;
    for (const info_ptr& t : *templates)
      if (!info->domain_attr->name || !strcmp(t->domain_attr->name, info->domain_attr->name)) tmpl = t.get();
    if (!tmpl) return -FI_ENODATA;

    std::unique_ptr<domain, void (*)(domain*)> d(new domain{}, domain_destroy);
    d->info = info_dup(info, domain_attr_size_for(fab.api_version));
    if (!d->info) return -FI_ENOMEM;
    d->fab = &fab;
    d->prov = fab.prov;
    d->api_version = fab.api_version;
    const fi_domain_attr* a = d->info->domain_attr;  // the newest layout, zero beyond the caller's
    if (int ret = check_versioned_attrs(fab.api_version, *a)) return ret;
    // mr_mode: legacy values (API < 1.5, or FI_MR_BASIC/SCALABLE at any 1.x
    // version) map to bits.
    uint64_t mode = static_cast<uint64_t>(a->mr_mode);
    d->mr_legacy_basic = mode == FI_MR_BASIC;
    if (mode == FI_MR_BASIC) {
      mode = mr_basic_map;
    } else if (mode == FI_MR_SCALABLE) {
      mode = 0;
    } else if (FI_VERSION_LT(fab.api_version, FI_VERSION(1, 5))) {
      mode = 0;
    }
    if (FI_VERSION_LT(fab.api_version, FI_VERSION(1, 5)) && (info->mode & FI_LOCAL_MR)) mode |= FI_MR_LOCAL;
    d->mr_mode = mode;
    d->threading = a->threading == FI_THREAD_UNSPEC ? FI_THREAD_SAFE : a->threading;
    d->data_progress = progress_of(a->data_progress, FI_PROGRESS_MANUAL);
    d->control_progress = progress_of(a->control_progress, FI_PROGRESS_AUTO);
    d->addr_format = info->addr_format != FI_FORMAT_UNSPEC ? info->addr_format : tmpl->addr_format;
    d->addrlen = addrlen_of(d->addr_format);
    if (!d->addrlen) return -FI_EINVAL;
    d->fid_.fid.fclass = FI_CLASS_DOMAIN;
    d->fid_.fid.context = context;
    d->fid_.fid.ops = &domain_fi_ops;
    d->fid_.ops = &domain_ops;
    d->fid_.mr = &mr_ops;
    mr_map_create(*d);
    d->pd = fab.prov->open_domain(*d);
    fab.users_.add();
    WEFT_INFO(FI_LOG_DOMAIN, "opened domain %s", tmpl->domain_attr->name);
    *out = &d.release()->fid_;
    return 0;
  });
}

void domain_part_deleter::operator()(domain* d) const noexcept {
  domain_destroy(d);
}

domain_part domain_open_part(domain& parent, provider& prov, const fi_info* info) {
  domain_part d(new domain{});
  d->info = info_dup(info);
  if (!d->info) throw std::bad_alloc();
  d->parent = &parent;
  d->fab = parent.fab;
  d->prov = &prov;
  d->api_version = parent.api_version;
  d->mr_mode = parent.mr_mode;
  d->mr_legacy_basic = parent.mr_legacy_basic;
  d->threading = parent.threading;
  d->data_progress = parent.data_progress;
  d->control_progress = parent.control_progress;
  d->addr_format = info->addr_format;
  d->addrlen = addrlen_of(d->addr_format);
  if (!d->addrlen) fail(FI_EINVAL, "part domain: unknown address format");
  d->fid_.fid.fclass = FI_CLASS_DOMAIN;
  d->fid_.fid.ops = &domain_fi_ops;
  d->fid_.ops = &domain_ops;
  d->fid_.mr = &mr_ops;
  d->mrs = parent.mrs;
  d->eq = nullptr;
  d->pd = prov.open_domain(*d);
  return d;
}

}  // namespace weft
