// SPDX-License-Identifier: BSD-3-Clause
// Atomics: 32- and 64-bit, onto fi_atomic (post), fi_fetch_atomic and
// fi_compare_atomic (fetch). Posted atomics complete at the target before a
// flush returns (FI_DELIVERY_COMPLETE).
#include "ucp_int.hpp"

namespace wucp {

namespace {
bool fi_op_of(ucp_atomic_op_t opc, uint32_t* op) {
  switch (opc) {
    case UCP_ATOMIC_OP_ADD:
      *op = FI_SUM;
      return true;
    case UCP_ATOMIC_OP_SWAP:
      *op = FI_ATOMIC_WRITE;
      return true;
    case UCP_ATOMIC_OP_CSWAP:
      *op = FI_CSWAP;
      return true;
    case UCP_ATOMIC_OP_AND:
      *op = FI_BAND;
      return true;
    case UCP_ATOMIC_OP_OR:
      *op = FI_BOR;
      return true;
    case UCP_ATOMIC_OP_XOR:
      *op = FI_BXOR;
      return true;
    default:
      return false;
  }
}
}  // namespace

// value: the operand (CSWAP: the value to compare); result: where the old
// value goes (CSWAP: holds the value to swap in on entry).
ucs_status_ptr_t amo_post(ucp_ep* ep, ucp_atomic_op_t opc, const void* value, size_t size, uint64_t raddr,
                          ucp_rkey_h rkey, void* result, const ucp_request_param_t* p, bool fetch) noexcept {
  if (!ep || !rkey || !value || (size != 4 && size != 8)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_worker* w = ep->w;
  uint64_t need = size == 4 ? UCP_FEATURE_AMO32 : UCP_FEATURE_AMO64;
  if (!(w->ctx->features & need)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  uint32_t fop;
  if (!fi_op_of(opc, &fop)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  if ((opc == UCP_ATOMIC_OP_SWAP || opc == UCP_ATOMIC_OP_CSWAP) && !fetch)
    return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  if (fetch && !result) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  if (raddr & (size - 1)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  worker_guard g(w);
  if (ep->state >= EP_FAILED)
    return UCS_STATUS_PTR(ep->state == EP_FAILED ? ep->fail_status : UCS_ERR_NOT_CONNECTED);
  if (rkey->ep != ep || !rkey->holds(raddr, size)) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  if (!ep->tp->d->atomics) return UCS_STATUS_PTR(UCS_ERR_UNSUPPORTED);
  op* o = op_alloc(w);
  if (!o) return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  o->type = fetch ? OP_FATOMIC : OP_ATOMIC;
  o->aop = fop;
  o->adt = size == 4 ? FI_UINT32 : FI_UINT64;
  o->operand = 0;
  o->compare = 0;
  o->result = 0;
  if (opc == UCP_ATOMIC_OP_CSWAP) {
    memcpy(&o->compare, value, size);
    memcpy(&o->operand, result, size);
  } else {
    memcpy(&o->operand, value, size);
  }
  o->raddr = rkey->virt ? raddr : raddr - rkey->base;
  o->rkey = rkey->key;
  o->dest = ep->dest;
  if (fetch) {
    o->result_ptr = result;
    o->result_size = size;
  }
  request* r = nullptr;
  if (fetch || (p && (p->op_attr_mask & UCP_OP_ATTR_FLAG_NO_IMM_CMPL))) {
    r = req_from_param(w, p);
    if (!r) {
      op_free(w, o);
      return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
    }
    r->kind = RK_ATOMIC;
    req_set_cb(r, p, CB_SEND_NBX);
  }
  op_attach(o, ep, r, true);
  int rc = issue_one_sided(w, ep, o);
  if (rc == -FI_EAGAIN) {
    enqueue(ep, o);
  } else if (rc < 0) {
    ucs_status_t st = from_fi(rc);
    op_finish(w, o, st);
    return r ? req_return(r) : UCS_STATUS_PTR(st);
  }
  return r ? req_return(r) : nullptr;
}

}  // namespace wucp

using namespace wucp;

UCP_EXPORT ucs_status_ptr_t ucp_atomic_op_nbx(ucp_ep_h ep, ucp_atomic_op_t opcode, const void* buffer,
                                              size_t count, uint64_t remote_addr, ucp_rkey_h rkey,
                                              const ucp_request_param_t* param) {
  if (!param || !(param->op_attr_mask & UCP_OP_ATTR_FIELD_DATATYPE) || count != 1)
    return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_datatype_t dt = param->datatype;
  if ((dt & UCP_DATATYPE_CLASS_MASK) != UCP_DATATYPE_CONTIG) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  size_t size = dt >> UCP_DATATYPE_SHIFT;
  bool fetch = (param->op_attr_mask & UCP_OP_ATTR_FIELD_REPLY_BUFFER) && param->reply_buffer;
  return amo_post(ep, opcode, buffer, size, remote_addr, rkey, fetch ? param->reply_buffer : nullptr, param,
                  fetch);
}

UCP_EXPORT ucs_status_t ucp_atomic_post(ucp_ep_h ep, ucp_atomic_post_op_t opcode, uint64_t value,
                                        size_t op_size, uint64_t remote_addr, ucp_rkey_h rkey) {
  static const ucp_atomic_op_t map[] = {UCP_ATOMIC_OP_ADD, UCP_ATOMIC_OP_AND, UCP_ATOMIC_OP_OR,
                                        UCP_ATOMIC_OP_XOR};
  if (opcode >= UCP_ATOMIC_POST_OP_LAST) return UCS_ERR_INVALID_PARAM;
  uint32_t v32 = static_cast<uint32_t>(value);
  const void* v = op_size == 4 ? static_cast<const void*>(&v32) : &value;
  ucs_status_ptr_t sp = amo_post(ep, map[opcode], v, op_size, remote_addr, rkey, nullptr, nullptr, false);
  return UCS_PTR_STATUS(sp);
}

UCP_EXPORT ucs_status_ptr_t ucp_atomic_fetch_nb(ucp_ep_h ep, ucp_atomic_fetch_op_t opcode, uint64_t value,
                                                void* result, size_t op_size, uint64_t remote_addr,
                                                ucp_rkey_h rkey, ucp_send_callback_t cb) {
  static const ucp_atomic_op_t map[] = {UCP_ATOMIC_OP_ADD, UCP_ATOMIC_OP_SWAP, UCP_ATOMIC_OP_CSWAP,
                                        UCP_ATOMIC_OP_AND, UCP_ATOMIC_OP_OR,   UCP_ATOMIC_OP_XOR};
  if (opcode >= UCP_ATOMIC_FETCH_OP_LAST) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  uint32_t v32 = static_cast<uint32_t>(value);
  const void* v = op_size == 4 ? static_cast<const void*>(&v32) : &value;
  ucs_status_ptr_t sp = amo_post(ep, map[opcode], v, op_size, remote_addr, rkey, result, nullptr, true);
  if (UCS_PTR_IS_PTR(sp)) {
    request* r = request::of(sp);
    r->cbk = cb ? CB_SEND_NB : CB_NONE;
    r->cb = reinterpret_cast<void*>(cb);
  }
  return sp;
}

namespace {
template <class T>
ucs_status_t blocking_fetch(ucp_ep_h ep, ucp_atomic_op_t opc, T value, uint64_t raddr, ucp_rkey_h rkey,
                            T* result) {
  if (!ep) return UCS_ERR_INVALID_PARAM;
  ucs_status_ptr_t sp = amo_post(ep, opc, &value, sizeof(T), raddr, rkey, result, nullptr, true);
  worker_guard g(ep->w);
  return wait_ptr(ep->w, sp);
}
// The value in *result on entry is the one swapped in (as UCP_ATOMIC_OP_CSWAP).
template <class T>
ucs_status_t blocking_cswap(ucp_ep_h ep, T compare, T swap, uint64_t raddr, ucp_rkey_h rkey, T* result) {
  if (!result) return UCS_ERR_INVALID_PARAM;
  *result = swap;
  return blocking_fetch<T>(ep, UCP_ATOMIC_OP_CSWAP, compare, raddr, rkey, result);
}
}  // namespace

UCP_EXPORT ucs_status_t ucp_atomic_add32(ucp_ep_h ep, uint32_t add, uint64_t remote_addr, ucp_rkey_h rkey) {
  return ucp_atomic_post(ep, UCP_ATOMIC_POST_OP_ADD, add, 4, remote_addr, rkey);
}

UCP_EXPORT ucs_status_t ucp_atomic_add64(ucp_ep_h ep, uint64_t add, uint64_t remote_addr, ucp_rkey_h rkey) {
  return ucp_atomic_post(ep, UCP_ATOMIC_POST_OP_ADD, add, 8, remote_addr, rkey);
}

UCP_EXPORT ucs_status_t ucp_atomic_fadd32(ucp_ep_h ep, uint32_t add, uint64_t remote_addr, ucp_rkey_h rkey,
                                          uint32_t* result) {
  return blocking_fetch<uint32_t>(ep, UCP_ATOMIC_OP_ADD, add, remote_addr, rkey, result);
}

UCP_EXPORT ucs_status_t ucp_atomic_fadd64(ucp_ep_h ep, uint64_t add, uint64_t remote_addr, ucp_rkey_h rkey,
                                          uint64_t* result) {
  return blocking_fetch<uint64_t>(ep, UCP_ATOMIC_OP_ADD, add, remote_addr, rkey, result);
}

UCP_EXPORT ucs_status_t ucp_atomic_swap32(ucp_ep_h ep, uint32_t swap, uint64_t remote_addr, ucp_rkey_h rkey,
                                          uint32_t* result) {
  return blocking_fetch<uint32_t>(ep, UCP_ATOMIC_OP_SWAP, swap, remote_addr, rkey, result);
}

UCP_EXPORT ucs_status_t ucp_atomic_swap64(ucp_ep_h ep, uint64_t swap, uint64_t remote_addr, ucp_rkey_h rkey,
                                          uint64_t* result) {
  return blocking_fetch<uint64_t>(ep, UCP_ATOMIC_OP_SWAP, swap, remote_addr, rkey, result);
}

UCP_EXPORT ucs_status_t ucp_atomic_cswap32(ucp_ep_h ep, uint32_t compare, uint32_t swap, uint64_t remote_addr,
                                           ucp_rkey_h rkey, uint32_t* result) {
  return blocking_cswap<uint32_t>(ep, compare, swap, remote_addr, rkey, result);
}

UCP_EXPORT ucs_status_t ucp_atomic_cswap64(ucp_ep_h ep, uint64_t compare, uint64_t swap, uint64_t remote_addr,
                                           ucp_rkey_h rkey, uint64_t* result) {
  return blocking_cswap<uint64_t>(ep, compare, swap, remote_addr, rkey, result);
}
