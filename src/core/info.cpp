// SPDX-License-Identifier: BSD-3-Clause
#include "core/info.hpp"

#include <rdma/fi_domain.h>

#include <cstdlib>
#include <cstring>

#include "common/object.hpp"
#include "core/fabric2.hpp"

namespace weft {

char* dup_cstr(const char* s) {
  if (!s) return nullptr;
  char* d = strdup(s);
  if (!d) throw std::bad_alloc();
  return d;
}

namespace {

template <class T>
T* calloc_one() {
  auto* p = static_cast<T*>(calloc(1, sizeof(T)));
  if (!p) throw std::bad_alloc();
  return p;
}

void* mem_dup(const void* src, size_t len) {
  if (!src || !len) return nullptr;
  void* d = malloc(len);
  if (!d) throw std::bad_alloc();
  memcpy(d, src, len);
  return d;
}

template <class T>
T* dup_attr(const T* src) {
  if (!src) return nullptr;
  T* d = calloc_one<T>();
  *d = *src;
  return d;
}

// Domain attributes are allocated in the newest layout; `size` bytes of the
// source are read (its own layout's), the rest stays zero.
fi_domain_attr* alloc_domain_attr() noexcept {
  return static_cast<fi_domain_attr*>(calloc(1, domain_attr_wide));
}

void free_nic(fid_nic* nic) noexcept {
  if (!nic) return;
  if (nic->device_attr) {
    free(nic->device_attr->name);
    free(nic->device_attr->device_id);
    free(nic->device_attr->device_version);
    free(nic->device_attr->vendor_id);
    free(nic->device_attr->driver);
    free(nic->device_attr->firmware);
    free(nic->device_attr);
  }
  free(nic->bus_attr);
  if (nic->link_attr) {
    free(nic->link_attr->address);
    free(nic->link_attr->network_type);
    free(nic->link_attr);
  }
  free(nic);
}

// A deep copy of a NIC description. Copies are plain data: their fid has
// no ops (weft never hands out live NIC objects).
fid_nic* dup_nic(const fid_nic* src) {
  if (!src) return nullptr;
  fid_nic* d = calloc_one<fid_nic>();
  try {
    d->fid.fclass = FI_CLASS_NIC;
    if (src->device_attr) {
      d->device_attr = calloc_one<fi_device_attr>();
      d->device_attr->name = dup_cstr(src->device_attr->name);
      d->device_attr->device_id = dup_cstr(src->device_attr->device_id);
      d->device_attr->device_version = dup_cstr(src->device_attr->device_version);
      d->device_attr->vendor_id = dup_cstr(src->device_attr->vendor_id);
      d->device_attr->driver = dup_cstr(src->device_attr->driver);
      d->device_attr->firmware = dup_cstr(src->device_attr->firmware);
    }
    d->bus_attr = dup_attr(src->bus_attr);
    if (src->link_attr) {
      d->link_attr = calloc_one<fi_link_attr>();
      *d->link_attr = *src->link_attr;
      d->link_attr->address = dup_cstr(src->link_attr->address);
      d->link_attr->network_type = dup_cstr(src->link_attr->network_type);
    }
  } catch (...) {
    free_nic(d);
    throw;
  }
  return d;
}

void free_one(fi_info* i) noexcept {
  free(i->src_addr);
  free(i->dest_addr);
  free(i->tx_attr);
  free(i->rx_attr);
  if (i->ep_attr) {
    free(i->ep_attr->auth_key);
    free(i->ep_attr);
  }
  if (i->domain_attr) {
    free(i->domain_attr->name);
    free(i->domain_attr->auth_key);
    free(i->domain_attr);
  }
  if (i->fabric_attr) {
    free(i->fabric_attr->name);
    free(i->fabric_attr->prov_name);
    free(i->fabric_attr);
  }
  free_nic(i->nic);
  free(i);
}

}  // namespace

fi_info* info_alloc() noexcept {
  fi_info* i = static_cast<fi_info*>(calloc(1, sizeof(fi_info)));
  if (!i) return nullptr;
  i->tx_attr = static_cast<fi_tx_attr*>(calloc(1, sizeof(fi_tx_attr)));
  i->rx_attr = static_cast<fi_rx_attr*>(calloc(1, sizeof(fi_rx_attr)));
  i->ep_attr = static_cast<fi_ep_attr*>(calloc(1, sizeof(fi_ep_attr)));
  i->domain_attr = alloc_domain_attr();
  i->fabric_attr = static_cast<fi_fabric_attr*>(calloc(1, sizeof(fi_fabric_attr)));
  if (!i->tx_attr || !i->rx_attr || !i->ep_attr || !i->domain_attr || !i->fabric_attr) {
    free_one(i);
    return nullptr;
  }
  return i;
}

fi_info* info_dup(const fi_info* src, size_t domain_attr_size) noexcept {
  if (!src) return info_alloc();
  fi_info* d = static_cast<fi_info*>(calloc(1, sizeof(fi_info)));
  if (!d) return nullptr;
  try {
    d->caps = src->caps;
    d->mode = src->mode;
    d->addr_format = src->addr_format;
    d->handle = src->handle;
    if (src->src_addr && src->src_addrlen) {
      d->src_addr = mem_dup(src->src_addr, src->src_addrlen);
      d->src_addrlen = src->src_addrlen;
    }
    if (src->dest_addr && src->dest_addrlen) {
      d->dest_addr = mem_dup(src->dest_addr, src->dest_addrlen);
      d->dest_addrlen = src->dest_addrlen;
    }
    d->tx_attr = dup_attr(src->tx_attr);
    d->rx_attr = dup_attr(src->rx_attr);
    if (src->ep_attr) {
      d->ep_attr = dup_attr(src->ep_attr);
      d->ep_attr->auth_key = nullptr;
      if (src->ep_attr->auth_key && src->ep_attr->auth_key_size)
        d->ep_attr->auth_key =
            static_cast<uint8_t*>(mem_dup(src->ep_attr->auth_key, src->ep_attr->auth_key_size));
    }
    if (src->domain_attr) {
      d->domain_attr = alloc_domain_attr();
      if (!d->domain_attr) throw std::bad_alloc();
      memcpy(d->domain_attr, src->domain_attr, domain_attr_size < domain_attr_wide ? domain_attr_size : domain_attr_wide);
      d->domain_attr->name = nullptr;
      d->domain_attr->auth_key = nullptr;
      d->domain_attr->name = dup_cstr(src->domain_attr->name);
      if (src->domain_attr->auth_key && src->domain_attr->auth_key_size)
        d->domain_attr->auth_key =
            static_cast<uint8_t*>(mem_dup(src->domain_attr->auth_key, src->domain_attr->auth_key_size));
    }
    if (src->fabric_attr) {
      d->fabric_attr = dup_attr(src->fabric_attr);
      d->fabric_attr->name = nullptr;
      d->fabric_attr->prov_name = nullptr;
      d->fabric_attr->name = dup_cstr(src->fabric_attr->name);
      d->fabric_attr->prov_name = dup_cstr(src->fabric_attr->prov_name);
    }
    d->nic = dup_nic(src->nic);
  } catch (...) {
    free_one(d);
    return nullptr;
  }
  return d;
}

void info_free(fi_info* info) noexcept {
  while (info) {
    fi_info* next = info->next;
    free_one(info);
    info = next;
  }
}

}  // namespace weft
