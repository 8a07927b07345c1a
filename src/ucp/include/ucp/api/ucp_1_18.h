/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The UCP calls of UCX 1.15 to 1.18 that weft's face implements, with their
 * parameter structures as UCX 1.18 lays them out; Debian 12's UCX 1.13
 * headers lack them. Included by weft's ucp/api/ucp.h after UCX's API.
 */
#ifndef WEFT_UCP_1_18_H
#define WEFT_UCP_1_18_H

#include <ucp/api/ucp_def.h>
#include <ucs/sys/compiler_def.h>
#include <stddef.h>
#include <stdint.h>

BEGIN_C_DECLS

/** Which fields of ucp_memh_pack_params_t are set. */
enum ucp_memh_pack_params_field {
    UCP_MEMH_PACK_PARAM_FIELD_FLAGS = UCS_BIT(0)
};

/** ucp_memh_pack flags. */
enum ucp_memh_pack_flags {
    UCP_MEMH_PACK_FLAG_EXPORT = UCS_BIT(0) /**< for another process's local use: not available */
};

typedef struct ucp_memh_pack_params {
    uint64_t field_mask;
    uint64_t flags;
} ucp_memh_pack_params_t;

typedef struct ucp_memh_buffer_release_params {
    uint64_t field_mask; /**< no field yet: 0 */
} ucp_memh_buffer_release_params_t;

/** Packs a memory handle as a remote key (ucp_ep_rkey_unpack reads it). */
ucs_status_t ucp_memh_pack(ucp_mem_h memh, const ucp_memh_pack_params_t *params,
                           void **buffer_p, size_t *buffer_size_p);

/** Releases a buffer ucp_memh_pack returned. */
void ucp_memh_buffer_release(void *buffer,
                             const ucp_memh_buffer_release_params_t *params);

typedef struct ucp_rkey_compare_params {
    uint64_t field_mask; /**< no field yet: 0 */
} ucp_rkey_compare_params_t;

/** Orders two remote keys of one worker: *result < 0, 0 or > 0. */
ucs_status_t ucp_rkey_compare(ucp_worker_h worker, ucp_rkey_h rkey1,
                              ucp_rkey_h rkey2,
                              const ucp_rkey_compare_params_t *params,
                              int *result);

/** Which fields of ucp_datatype_attr_t are asked for or set. */
enum ucp_datatype_attr_field {
    UCP_DATATYPE_ATTR_FIELD_PACKED_SIZE = UCS_BIT(0), /**< packed_size: asked for */
    UCP_DATATYPE_ATTR_FIELD_BUFFER      = UCS_BIT(1), /**< buffer: set */
    UCP_DATATYPE_ATTR_FIELD_COUNT       = UCS_BIT(2)  /**< count: set (default 1) */
};

typedef struct ucp_datatype_attr {
    uint64_t   field_mask;
    size_t     packed_size;
    const void *buffer;
    size_t     count;
} ucp_datatype_attr_t;

/** The packed size of count elements of a datatype in buffer. */
ucs_status_t ucp_dt_query(ucp_datatype_t datatype, ucp_datatype_attr_t *attr);

END_C_DECLS

#endif
