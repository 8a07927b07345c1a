// SPDX-License-Identifier: BSD-3-Clause
// One of weft's providers as a plugin of another libfabric (Debian 12's
// libfabric 1.17, Debian 13's 2.1): that library dlopens lib<name>-fi.so from FI_PROVIDER_PATH
// (default <libdir>/libfabric), calls fi_prov_ini, and from then on calls
// the returned struct fi_provider: getinfo for fi_getinfo, fabric for
// fi_fabric, cleanup at its exit. Every later call reaches weft through the
// ops tables of the objects weft hands out, as in weft's own libfabric.so.1.
//
// The plugin carries weft's core and all its providers (a provider may be
// built from others) and offers one, WEFT_PLUGIN_PROVIDER, under the name
// "weft_<name>": the host's own shm and tcp keep theirs. Only fi_prov_ini is
// exported (plugin.map); weft's own fi_* functions inside are local to it.
//
// The host hands over structures in its own layout and skips a provider
// whose fi_version is older than the version an application asks for: the
// plugin declares the host's own version (fi_version() of the library that
// loaded it), at most the API weft implements, and reads hints in the
// layout of that version.
#include <dlfcn.h>
#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#include <cstdio>
#include <cstdlib>

#include "common/object.hpp"
#include "core/fabric2.hpp"
#include "core/info.hpp"
#include "core/provider.hpp"
#include "util/fabric.hpp"

#ifndef WEFT_PLUGIN_PROVIDER
#error "WEFT_PLUGIN_PROVIDER names the provider this plugin offers"
#endif

namespace {

constexpr const char* plugin_prefix = "weft_";

// libfabric's internal fi_getinfo flags (ofi.h: OFI_GETINFO_INTERNAL,
// OFI_CORE_PROV_ONLY, OFI_GETINFO_HIDDEN, OFI_OFFLOAD_PROV_ONLY; bits 58-61):
// a utility provider (ofi_rxm, ofi_rxd) looking for a core provider to
// layer over. weft's providers offer their endpoint types themselves and
// take no layering: they answer such a request with nothing.
constexpr uint64_t host_internal_flags = 0xfULL << 58;

// The API of the libfabric that loaded the plugin (set by fi_prov_ini).
uint32_t host_version = FI_VERSION(1, 17);

int plugin_getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
                   const fi_info* hints, fi_info** info) {
  if (!info) return -FI_EINVAL;
  if (flags & host_internal_flags) return -FI_ENODATA;
  // The hints are the host's (fi_allocinfo): its layout, at most.
  const uint32_t layout = FI_VERSION_LT(version, host_version) ? version : host_version;
  weft::info_ptr wide;
  if (hints) {
    wide.reset(weft::info_dup(hints, weft::domain_attr_size_for(layout)));
    if (!wide) return -FI_ENOMEM;
  }
  int ret = weft::guard([&] { return weft::getinfo(version, node, service, flags, wide.get(), info); });
  if (ret) return ret;
  // The host names each entry itself (prov_name from our fi_provider); a
  // name already there would be taken for a layered one ("a;b").
  for (fi_info* i = *info; i; i = i->next) {
    free(i->fabric_attr->prov_name);
    i->fabric_attr->prov_name = nullptr;
  }
  return 0;
}

int plugin_fabric(fi_fabric_attr* attr, fid_fabric** fabric, void* context) {
  if (!attr) return -FI_EINVAL;
  return weft::guard([&] { return weft::fabric_open(attr, fabric, context, attr->api_version); });
}

// Nothing to release: the plugin stays loaded (-z nodelete), and objects an
// application left open are not ours to close behind its back.
void plugin_cleanup() {}

fi_provider plugin = {
    .version = 0,
    .fi_version = FI_VERSION(1, 17),
    .context = {},
    .name = nullptr,
    .getinfo = plugin_getinfo,
    .fabric = plugin_fabric,
    .cleanup = plugin_cleanup,
};

// What the plugin learns from the host, found through its already loaded
// libfabric.so.1 (this plugin's own copies of the symbols are weft's, and
// local): its API version, and its fi_param_define, to which it declares
// the provider's FI_WEFT_<NAME>_* parameters, so that the host's
// fi_getparams (fi_info -e) lists them.
void meet_host(const weft::provider& prov) {
  void* host = dlopen("libfabric.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!host) return;
  if (auto version = reinterpret_cast<uint32_t (*)()>(dlsym(host, "fi_version"))) {
    const uint32_t v = version();
    if (FI_MAJOR(v) >= 1) host_version = FI_VERSION_LT(weft::api_newest, v) ? weft::api_newest : v;
  }
  plugin.fi_version = host_version;
  using define_fn = int (*)(const fi_provider*, const char*, fi_param_type, const char*, ...);
  if (auto define = reinterpret_cast<define_fn>(dlsym(host, "fi_param_define")))
    for (const weft::provider::param& p : prov.params())
      define(&plugin, p.name, p.type, "%s", weft::param_help(p).c_str());
  dlclose(host);
}

}  // namespace

// NULL (the host then skips the file) if the provider is not in this build.
extern "C" __attribute__((visibility("default"))) fi_provider* fi_prov_ini(void) {
  static char name[64];
  if (plugin.name) return &plugin;  // called again: already set up
  snprintf(name, sizeof name, "%s%s", plugin_prefix, WEFT_PLUGIN_PROVIDER);
  weft::set_name_prefix(plugin_prefix);
  weft::provider* prov = weft::find_provider(name);
  if (!prov) return nullptr;
  weft::offer_only(prov);
  plugin.version = prov->version();
  plugin.name = name;
  meet_host(*prov);
  return &plugin;
}
