// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A provider as the core sees it. Providers register themselves
// (WEFT_REGISTER_PROVIDER in their own folder); the core names none of them.
//
// A provider declares its FI_<PROV>_* parameters, builds its fi_info
// templates from their current values (rebuilt only when a value changed),
// resolves node/service into its addresses, and opens its part of each
// domain (prov_domain), which creates endpoints and hears about memory
// registrations.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/info.hpp"
#include "core/params.hpp"

namespace weft {

struct domain;  // src/util/domain.hpp
struct fabric;  // src/util/fabric.hpp
class av;       // src/util/av.hpp

// The provider's part of one open domain: made at fi_domain, destroyed at
// its fi_close, called from any thread (it locks what it shares).
class prov_domain {
public:
  virtual ~prov_domain() = default;
  virtual int endpoint(fi_info*, fid_ep**, void*) { return -FI_ENOSYS; }
  virtual int scalable_ep(fi_info*, fid_ep**, void*) { return -FI_ENOSYS; }
  virtual int stx_ctx(fi_tx_attr*, fid_stx**, void*) { return -FI_ENOSYS; }
  virtual int srx_ctx(fi_rx_attr*, fid_ep**, void*) { return -FI_ENOSYS; }
  virtual int query_atomic(fi_datatype, fi_op, fi_atomic_attr*, uint64_t) { return -FI_ENOSYS; }
  // After every change to the domain's registration map (insert, erase,
  // flags) with the key concerned, outside the map's lock.
  virtual void mr_changed(uint64_t /*key*/) noexcept {}
  // The domain's address vectors, for a provider that keeps state per entry
  // (the linked provider: a path per peer). av_opened may refuse an AV
  // (throws); av_filled hears of each entry about to be filled, under the
  // AV's lock, and may refuse the address (a positive FI_E*); av_emptied of
  // each entry removed; av_closed of the AV's close.
  virtual void av_opened(av&) {}
  virtual int av_filled(av&, uint64_t /*index*/, const void* /*addr*/, size_t /*len*/) noexcept { return 0; }
  virtual void av_emptied(av&, uint64_t /*index*/) noexcept {}
  virtual void av_closed(av&) noexcept {}
};

class provider {
public:
  // A row of the table of settings (params.hpp): FI_<PROV>_<NAME>.
  using param = param_spec;
  using info_list = std::vector<info_ptr>;

  virtual ~provider() = default;
  virtual const char* name() const noexcept = 0;
  virtual uint32_t version() const noexcept = 0;  // prov_version
  virtual std::span<const param> params() const noexcept { return {}; }
  // A provider made of others: their names joined by '+' ("shm+tcp").
  virtual const char* links() const noexcept { return nullptr; }
  // Largest auth_key (domain and endpoint attributes) the provider checks
  // between peers; 0: it has none, and hints with a key find nothing.
  virtual size_t auth_key_max() const noexcept { return 0; }

  // Fully populated fi_info entries (newest API), best first, from the
  // parameters' current values. The core duplicates, filters and adapts them.
  std::shared_ptr<const info_list> templates();
  // What the templates are built from (parameter values, template_key):
  // they are rebuilt when it changes.
  std::string template_inputs() const;
  // Why the latest templates are none, when a setting left the provider
  // nothing to offer (offers_nothing); empty otherwise. fi_getinfo says it.
  std::string nothing_offered() const;

  // Fills info->src_addr / dest_addr from node/service/flags (man
  // fi_getinfo). Returns 0, or -FI_ENODATA when they name nothing this
  // provider can reach.
  virtual int resolve(fi_info* info, const char* node, const char* service, uint64_t flags) const = 0;

  // The provider's part of a new domain (throws on failure).
  virtual std::unique_ptr<prov_domain> open_domain(domain& dom) = 0;
  virtual int passive_ep(fabric&, fi_info*, fid_pep**, void*) { return -FI_ENOSYS; }

protected:
  virtual info_list build_templates() const = 0;
  // What the templates depend on besides the parameters (the network
  // interfaces, say): a change rebuilds them.
  virtual std::string template_key() const { return {}; }
  // From build_templates: the setting that leaves the provider nothing.
  void offers_nothing(std::string why) const { why_empty_ = std::move(why); }

private:
  mutable std::mutex mutex_;
  mutable std::string why_empty_;  // guarded by mutex_ (build_templates runs under it)
  std::string built_from_;  // the parameter values the cached templates were built from
  std::shared_ptr<const info_list> cache_;
};

// Registered providers in preference order (lower rank first).
const std::vector<provider*>& providers();
// The provider an application names (fi_info's prov_name, a fabric's name).
provider* find_provider(const char* name);
// The provider whose own name() is `own` (a provider made of others finds
// its parts so, whatever prefix applications see).
provider* provider_named(const char* own) noexcept;
void register_provider(provider* p, int rank);

// The name applications know a provider by (fi_info's prov_name, FI_PROVIDER,
// FI_LOG_PROV, its FI_<PROV>_* variables) is its own name() behind a prefix:
// none in weft's libfabric.so.1; "weft_" when the provider is a plugin of
// another libfabric (src/plugin), so "weft_shm" lives beside that library's
// own "shm". Addresses, wire formats and shared-memory names keep name().
// Set once, before anything else runs.
void set_name_prefix(const char* prefix) noexcept;
const char* name_prefix() noexcept;
// Whether an application's `prov_name` names the provider whose own name is `own`.
bool names_provider(const char* prov_name, const char* own) noexcept;
// The offered providers made of the one whose own name is `own`, by the
// names applications know them by ("lnx"), comma separated; empty if none.
std::string providers_linking(const char* own);
// Every registered provider's own name, comma separated ("lnx, shm, tcp, udp").
std::string provider_names();
// A plugin answers for one provider: fi_getinfo then offers that one only
// (the others it carries may serve it as parts). nullptr: all.
void offer_only(const provider* p) noexcept;
bool offered(const provider* p) noexcept;

template <class P>
struct provider_registrar {
  explicit provider_registrar(int rank) {
    static P instance;
    register_provider(&instance, rank);
  }
};
// At namespace scope in the provider's own file. The library's objects are
// linked whole (never through an archive that could drop this file).
#define WEFT_REGISTER_PROVIDER(type, rank)                               \
  static const ::weft::provider_registrar<type> weft_registered_##type { \
    rank                                                                 \
  }

}  // namespace weft
