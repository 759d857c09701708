// ibverbs.h: the trampolines of ibverbs.c, called from ibverbs_cgo.go.
#pragma once

#include "weft_ibverbs.h"

typedef struct weft_ibv_lib weft_ibv_lib;

// weft_wr is one work request in a flat form that Go fills: an RDMA write
// (with or without immediate) of len bytes from laddr/lkey to raddr/rkey,
// or a fetch-and-add of add at raddr/rkey returning the old value into the
// 8 bytes at laddr/lkey.
typedef struct {
  uint64_t wr_id;
  uint64_t laddr;
  uint64_t raddr;
  uint64_t add;
  uint32_t len;
  uint32_t lkey;
  uint32_t rkey;
  uint32_t imm;  // host order; sent big-endian
  int32_t opcode;
  uint32_t flags;
} weft_wr;

int weft_ibv_open(const char* path, weft_ibv_lib** out, char* msg, int msglen);
int weft_ibv_has_dmabuf(weft_ibv_lib* l);
int weft_ibv_device_names(weft_ibv_lib* l, char* names, int max, int* n);
int weft_ibv_open_device(weft_ibv_lib* l, const char* name, struct ibv_context** out);
int weft_ibv_close_device(weft_ibv_lib* l, struct ibv_context* c);
int weft_ibv_query_device(weft_ibv_lib* l, struct ibv_context* c, struct ibv_device_attr* a);
int weft_ibv_query_port(weft_ibv_lib* l, struct ibv_context* c, int port, struct ibv_port_attr* a);
int weft_ibv_query_gid(weft_ibv_lib* l, struct ibv_context* c, int port, int index, uint8_t* gid);
int weft_ibv_alloc_pd(weft_ibv_lib* l, struct ibv_context* c, struct ibv_pd** out);
int weft_ibv_dealloc_pd(weft_ibv_lib* l, struct ibv_pd* pd);
int weft_ibv_reg_mr(weft_ibv_lib* l, struct ibv_pd* pd, uint64_t addr, uint64_t len, int access, struct ibv_mr** out);
int weft_ibv_reg_dmabuf_mr(weft_ibv_lib* l, struct ibv_pd* pd, uint64_t off, uint64_t len, uint64_t iova, int fd,
                           int access, struct ibv_mr** out);
int weft_ibv_dereg_mr(weft_ibv_lib* l, struct ibv_mr* mr);
int weft_ibv_create_cq(weft_ibv_lib* l, struct ibv_context* c, int cqe, struct ibv_cq** out);
int weft_ibv_destroy_cq(weft_ibv_lib* l, struct ibv_cq* cq);
int weft_ibv_create_rc_qp(weft_ibv_lib* l, struct ibv_pd* pd, struct ibv_cq* scq, struct ibv_cq* rcq,
                          uint32_t max_send_wr, uint32_t max_recv_wr, struct ibv_qp** out);
int weft_ibv_destroy_qp(weft_ibv_lib* l, struct ibv_qp* qp);
int weft_ibv_qp_init(weft_ibv_lib* l, struct ibv_qp* qp, int port, int access);
int weft_ibv_qp_rtr(weft_ibv_lib* l, struct ibv_qp* qp, int port, uint32_t dest_qpn, uint32_t rq_psn, int mtu,
                    uint16_t dlid, int is_global, const uint8_t* dgid, int sgid_index, int max_dest_rd_atomic);
int weft_ibv_qp_rts(weft_ibv_lib* l, struct ibv_qp* qp, uint32_t sq_psn, int timeout, int retry_cnt, int rnr_retry,
                    int max_rd_atomic);
int weft_ibv_qp_state(weft_ibv_lib* l, struct ibv_qp* qp, int state);
int weft_ibv_post_send(struct ibv_qp* qp, const weft_wr* wrs, int n, int* posted);
int weft_ibv_post_recv(struct ibv_qp* qp, const uint64_t* wr_ids, const uint64_t* addrs, uint32_t len, uint32_t lkey,
                       int n, int* posted);
int weft_ibv_poll_cq(struct ibv_cq* cq, struct ibv_wc* wc, int n);
const char* weft_ibv_wc_status_str(weft_ibv_lib* l, int status);
