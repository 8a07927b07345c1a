// SPDX-License-Identifier: BSD-3-Clause
/*
 * weft's ucp.h: the UCP API of Debian's libucx-dev (UCX 1.13, whose layouts
 * are the ABI libucp.so.0 keeps) plus the UCX 1.17 additions that weft's face
 * implements. Structures only grow at their end, behind field_mask, so a
 * program built with this header runs on any libucp of the same ABI and one
 * built with Debian's header runs on weft's.
 *
 * Additions over 1.13:
 *   - ucp_ep_attr_t.transports and UCP_EP_ATTR_FIELD_TRANSPORTS: the
 *     (transport, device) pairs an endpoint uses (ucp_ep_query);
 *   - ucp_memh_pack and ucp_memh_buffer_release (1.15; no export),
 *     ucp_rkey_compare (1.16) and ucp_dt_query (1.15), with their
 *     parameter structures, as UCX 1.18 declares them (ucp_1_18.h);
 *   - WEFT_UCP_API, defined: a program can tell this header from UCX's.
 *
 * The 1.13 declarations of ucp_ep_attr_t and ucp_ep_query are renamed out of
 * the way before Debian's header is read, and declared again below with the
 * grown structure.
 */
#ifndef WEFT_UCP_API
#define WEFT_UCP_API 1

#define ucp_ep_attr weft_ucp_ep_attr_1_13
#define ucp_ep_attr_t weft_ucp_ep_attr_1_13_t
#define ucp_ep_attr_field weft_ucp_ep_attr_field_1_13
#define UCP_EP_ATTR_FIELD_NAME WEFT_UCP_EP_ATTR_FIELD_NAME_1_13
#define UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR WEFT_UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR_1_13
#define UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR WEFT_UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR_1_13
#define ucp_ep_query weft_ucp_ep_query_1_13

#include_next <ucp/api/ucp.h>

#undef ucp_ep_attr
#undef ucp_ep_attr_t
#undef ucp_ep_attr_field
#undef UCP_EP_ATTR_FIELD_NAME
#undef UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR
#undef UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR
#undef ucp_ep_query

#include <sys/socket.h>

BEGIN_C_DECLS

/** Which fields of ucp_ep_attr_t are asked for. */
enum ucp_ep_attr_field {
    UCP_EP_ATTR_FIELD_NAME            = UCS_BIT(0), /**< endpoint name */
    UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR  = UCS_BIT(1), /**< local socket address */
    UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR = UCS_BIT(2), /**< remote socket address */
    UCP_EP_ATTR_FIELD_TRANSPORTS      = UCS_BIT(3)  /**< transports in use */
};

/** One transport an endpoint uses. */
typedef struct ucp_transport_entry {
    const char *transport_name; /**< "shm" or "tcp" */
    const char *device_name;    /**< "memory", or the network interface */
} ucp_transport_entry_t;

/**
 * The caller's array of transport entries: it sets num_entries to the
 * capacity and entry_size to sizeof(ucp_transport_entry_t) as it knows it;
 * ucp_ep_query fills at most num_entries entries, never writes past
 * entry_size in any of them, and sets num_entries to the number filled. The
 * names stay valid until the endpoint is closed.
 */
typedef struct ucp_transports {
    ucp_transport_entry_t *entries;
    unsigned              num_entries;
    size_t                entry_size;
} ucp_transports_t;

/** Endpoint attributes: the 1.13 layout, then the 1.17 transports. */
typedef struct ucp_ep_attr {
    uint64_t                field_mask;
    char                    name[UCP_ENTITY_NAME_MAX];
    struct sockaddr_storage local_sockaddr;
    struct sockaddr_storage remote_sockaddr;
    ucp_transports_t        transports;
} ucp_ep_attr_t;

ucs_status_t ucp_ep_query(ucp_ep_h ep, ucp_ep_attr_t *attr);

END_C_DECLS

#include "ucp_1_18.h"

#endif
