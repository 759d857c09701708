// weft_ibverbs.h: the part of libibverbs that weft uses, written for weft.
//
// Layouts and values follow rdma-core's libibverbs/verbs.h as of rdma-core
// v44 (the library installed on weft's CI images is libibverbs.so.1.14.44)
// and were checked against linux-rdma/rdma-core commit 00b335ca30c6. Every
// structure below has kept this layout since rdma-core v13; the
// _Static_asserts at the end pin the x86-64/arm64 (LP64) offsets weft
// depends on, so an edit that moves a field fails to compile.
//
// Three verbs of the data path are static inline functions in verbs.h, not
// library symbols: ibv_post_send, ibv_post_recv and ibv_poll_cq call through
// the provider's function table in struct ibv_context (ops.post_send,
// ops.post_recv, ops.poll_cq). That table is reproduced here in full up to
// the last entry weft calls, with the unused entries as opaque pointers.
// Only the leading fields of ibv_qp and ibv_cq that weft reads are named;
// those objects are always allocated by the provider, never by weft.
//
// ibv_query_port is also an inline wrapper in verbs.h; when the provider
// has no extended query_port it zeroes the attribute and calls the library
// symbol ibv_query_port, which is what weft does (with the full-size
// structure below).
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ibv_device;  // opaque: weft only asks for its name
struct ibv_context;
struct ibv_pd;
struct ibv_cq;
struct ibv_qp;
struct ibv_comp_channel;
struct ibv_send_wr;
struct ibv_recv_wr;
struct ibv_wc;

union ibv_gid {
  uint8_t raw[16];
  struct {
    uint64_t subnet_prefix;  // big-endian
    uint64_t interface_id;   // big-endian
  } global;
};

// enum ibv_port_state
enum { IBV_PORT_NOP = 0, IBV_PORT_DOWN = 1, IBV_PORT_INIT = 2, IBV_PORT_ARMED = 3, IBV_PORT_ACTIVE = 4 };
// link_layer of ibv_port_attr
enum { IBV_LINK_LAYER_UNSPECIFIED = 0, IBV_LINK_LAYER_INFINIBAND = 1, IBV_LINK_LAYER_ETHERNET = 2 };
// enum ibv_mtu
enum { IBV_MTU_256 = 1, IBV_MTU_512 = 2, IBV_MTU_1024 = 3, IBV_MTU_2048 = 4, IBV_MTU_4096 = 5 };

struct ibv_device_attr {
  char fw_ver[64];
  uint64_t node_guid;       // big-endian
  uint64_t sys_image_guid;  // big-endian
  uint64_t max_mr_size;
  uint64_t page_size_cap;
  uint32_t vendor_id;
  uint32_t vendor_part_id;
  uint32_t hw_ver;
  int max_qp;
  int max_qp_wr;
  unsigned int device_cap_flags;
  int max_sge;
  int max_sge_rd;
  int max_cq;
  int max_cqe;
  int max_mr;
  int max_pd;
  int max_qp_rd_atom;
  int max_ee_rd_atom;
  int max_res_rd_atom;
  int max_qp_init_rd_atom;
  int max_ee_init_rd_atom;
  int atomic_cap;  // enum ibv_atomic_cap: 0 none, 1 HCA, 2 global
  int max_ee;
  int max_rdd;
  int max_mw;
  int max_raw_ipv6_qp;
  int max_raw_ethy_qp;
  int max_mcast_grp;
  int max_mcast_qp_attach;
  int max_total_mcast_qp_attach;
  int max_ah;
  int max_fmr;
  int max_map_per_fmr;
  int max_srq;
  int max_srq_wr;
  int max_srq_sge;
  uint16_t max_pkeys;
  uint8_t local_ca_ack_delay;
  uint8_t phys_port_cnt;
};

struct ibv_port_attr {
  int state;       // enum ibv_port_state
  int max_mtu;     // enum ibv_mtu
  int active_mtu;  // enum ibv_mtu
  int gid_tbl_len;
  uint32_t port_cap_flags;
  uint32_t max_msg_sz;
  uint32_t bad_pkey_cntr;
  uint32_t qkey_viol_cntr;
  uint16_t pkey_tbl_len;
  uint16_t lid;
  uint16_t sm_lid;
  uint8_t lmc;
  uint8_t max_vl_num;
  uint8_t sm_sl;
  uint8_t subnet_timeout;
  uint8_t init_type_reply;
  uint8_t active_width;
  uint8_t active_speed;
  uint8_t phys_state;
  uint8_t link_layer;
  uint8_t flags;
  uint16_t port_cap_flags2;
};

// enum ibv_access_flags
enum {
  IBV_ACCESS_LOCAL_WRITE = 1,
  IBV_ACCESS_REMOTE_WRITE = 1 << 1,
  IBV_ACCESS_REMOTE_READ = 1 << 2,
  IBV_ACCESS_REMOTE_ATOMIC = 1 << 3,
};

struct ibv_pd {
  struct ibv_context* context;
  uint32_t handle;
};

struct ibv_mr {
  struct ibv_context* context;
  struct ibv_pd* pd;
  void* addr;
  size_t length;
  uint32_t handle;
  uint32_t lkey;
  uint32_t rkey;
};

// Leading fields of struct ibv_cq (a pthread mutex, a condition variable
// and two event counters follow; the provider allocates the object).
struct ibv_cq {
  struct ibv_context* context;
  struct ibv_comp_channel* channel;
  void* cq_context;
  uint32_t handle;
  int cqe;
};

// enum ibv_qp_type
enum { IBV_QPT_RC = 2 };
// enum ibv_qp_state
enum { IBV_QPS_RESET = 0, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQE, IBV_QPS_ERR };

// Leading fields of struct ibv_qp (a pthread mutex, a condition variable
// and an event counter follow; the provider allocates the object).
struct ibv_qp {
  struct ibv_context* context;
  void* qp_context;
  struct ibv_pd* pd;
  struct ibv_cq* send_cq;
  struct ibv_cq* recv_cq;
  void* srq;
  uint32_t handle;
  uint32_t qp_num;
  int state;    // enum ibv_qp_state
  int qp_type;  // enum ibv_qp_type
};

struct ibv_qp_cap {
  uint32_t max_send_wr;
  uint32_t max_recv_wr;
  uint32_t max_send_sge;
  uint32_t max_recv_sge;
  uint32_t max_inline_data;
};

struct ibv_qp_init_attr {
  void* qp_context;
  struct ibv_cq* send_cq;
  struct ibv_cq* recv_cq;
  void* srq;
  struct ibv_qp_cap cap;
  int qp_type;  // enum ibv_qp_type
  int sq_sig_all;
};

struct ibv_global_route {
  union ibv_gid dgid;
  uint32_t flow_label;
  uint8_t sgid_index;
  uint8_t hop_limit;
  uint8_t traffic_class;
};

struct ibv_ah_attr {
  struct ibv_global_route grh;
  uint16_t dlid;
  uint8_t sl;
  uint8_t src_path_bits;
  uint8_t static_rate;
  uint8_t is_global;
  uint8_t port_num;
};

// enum ibv_qp_attr_mask
enum {
  IBV_QP_STATE = 1 << 0,
  IBV_QP_ACCESS_FLAGS = 1 << 3,
  IBV_QP_PKEY_INDEX = 1 << 4,
  IBV_QP_PORT = 1 << 5,
  IBV_QP_AV = 1 << 7,
  IBV_QP_PATH_MTU = 1 << 8,
  IBV_QP_TIMEOUT = 1 << 9,
  IBV_QP_RETRY_CNT = 1 << 10,
  IBV_QP_RNR_RETRY = 1 << 11,
  IBV_QP_RQ_PSN = 1 << 12,
  IBV_QP_MAX_QP_RD_ATOMIC = 1 << 13,
  IBV_QP_MIN_RNR_TIMER = 1 << 15,
  IBV_QP_SQ_PSN = 1 << 16,
  IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
  IBV_QP_DEST_QPN = 1 << 20,
};

struct ibv_qp_attr {
  int qp_state;        // enum ibv_qp_state
  int cur_qp_state;    // enum ibv_qp_state
  int path_mtu;        // enum ibv_mtu
  int path_mig_state;  // enum ibv_mig_state
  uint32_t qkey;
  uint32_t rq_psn;
  uint32_t sq_psn;
  uint32_t dest_qp_num;
  unsigned int qp_access_flags;
  struct ibv_qp_cap cap;
  struct ibv_ah_attr ah_attr;
  struct ibv_ah_attr alt_ah_attr;
  uint16_t pkey_index;
  uint16_t alt_pkey_index;
  uint8_t en_sqd_async_notify;
  uint8_t sq_draining;
  uint8_t max_rd_atomic;
  uint8_t max_dest_rd_atomic;
  uint8_t min_rnr_timer;
  uint8_t port_num;
  uint8_t timeout;
  uint8_t retry_cnt;
  uint8_t rnr_retry;
  uint8_t alt_port_num;
  uint8_t alt_timeout;
  uint32_t rate_limit;
};

// enum ibv_wr_opcode (the ones weft posts)
enum { IBV_WR_RDMA_WRITE = 0, IBV_WR_RDMA_WRITE_WITH_IMM = 1, IBV_WR_ATOMIC_FETCH_AND_ADD = 6 };
// enum ibv_send_flags
enum { IBV_SEND_FENCE = 1 << 0, IBV_SEND_SIGNALED = 1 << 1, IBV_SEND_SOLICITED = 1 << 2, IBV_SEND_INLINE = 1 << 3 };

struct ibv_sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

struct ibv_send_wr {
  uint64_t wr_id;
  struct ibv_send_wr* next;
  struct ibv_sge* sg_list;
  int num_sge;
  int opcode;  // enum ibv_wr_opcode
  unsigned int send_flags;
  uint32_t imm_data;  // big-endian
  union {
    struct {
      uint64_t remote_addr;
      uint32_t rkey;
    } rdma;
    struct {
      uint64_t remote_addr;
      uint64_t compare_add;
      uint64_t swap;
      uint32_t rkey;
    } atomic;
    struct {
      void* ah;
      uint32_t remote_qpn;
      uint32_t remote_qkey;
    } ud;
  } wr;
  uint32_t xrc_remote_srqn;  // union qp_type
  // union of bind_mw and tso: unused by weft, kept for the size.
  union {
    struct {
      void* mw;
      uint32_t rkey;
      struct {
        void* mr;
        uint64_t addr;
        uint64_t length;
        unsigned int mw_access_flags;
      } bind_info;
    } bind_mw;
    struct {
      void* hdr;
      uint16_t hdr_sz;
      uint16_t mss;
    } tso;
  };
};

struct ibv_recv_wr {
  uint64_t wr_id;
  struct ibv_recv_wr* next;
  struct ibv_sge* sg_list;
  int num_sge;
};

// enum ibv_wc_status
enum {
  IBV_WC_SUCCESS = 0,
  IBV_WC_LOC_LEN_ERR,
  IBV_WC_LOC_QP_OP_ERR,
  IBV_WC_LOC_EEC_OP_ERR,
  IBV_WC_LOC_PROT_ERR,
  IBV_WC_WR_FLUSH_ERR,
  IBV_WC_MW_BIND_ERR,
  IBV_WC_BAD_RESP_ERR,
  IBV_WC_LOC_ACCESS_ERR,
  IBV_WC_REM_INV_REQ_ERR,
  IBV_WC_REM_ACCESS_ERR,
  IBV_WC_REM_OP_ERR,
  IBV_WC_RETRY_EXC_ERR,
  IBV_WC_RNR_RETRY_EXC_ERR,
  IBV_WC_LOC_RDD_VIOL_ERR,
  IBV_WC_REM_INV_RD_REQ_ERR,
  IBV_WC_REM_ABORT_ERR,
  IBV_WC_INV_EECN_ERR,
  IBV_WC_INV_EEC_STATE_ERR,
  IBV_WC_FATAL_ERR,
  IBV_WC_RESP_TIMEOUT_ERR,
  IBV_WC_GENERAL_ERR,
};
// enum ibv_wc_opcode (the ones weft sees)
enum { IBV_WC_RDMA_WRITE = 1, IBV_WC_FETCH_ADD = 4, IBV_WC_RECV = 1 << 7, IBV_WC_RECV_RDMA_WITH_IMM = (1 << 7) + 1 };
// enum ibv_wc_flags
enum { IBV_WC_WITH_IMM = 1 << 1 };

struct ibv_wc {
  uint64_t wr_id;
  int status;  // enum ibv_wc_status
  int opcode;  // enum ibv_wc_opcode
  uint32_t vendor_err;
  uint32_t byte_len;
  uint32_t imm_data;  // big-endian; union with invalidated_rkey
  uint32_t qp_num;
  uint32_t src_qp;
  unsigned int wc_flags;
  uint16_t pkey_index;
  uint16_t slid;
  uint8_t sl;
  uint8_t dlid_path_bits;
};

// struct ibv_context_ops: the provider's function table. Entries weft
// never calls are opaque; their count and order are verbs.h's.
struct ibv_context_ops {
  void* compat_query_device;
  void* compat_query_port;
  void* compat_alloc_pd;
  void* compat_dealloc_pd;
  void* compat_reg_mr;
  void* compat_rereg_mr;
  void* compat_dereg_mr;
  void* alloc_mw;
  void* bind_mw;
  void* dealloc_mw;
  void* compat_create_cq;
  int (*poll_cq)(struct ibv_cq* cq, int num_entries, struct ibv_wc* wc);
  void* req_notify_cq;
  void* compat_cq_event;
  void* compat_resize_cq;
  void* compat_destroy_cq;
  void* compat_create_srq;
  void* compat_modify_srq;
  void* compat_query_srq;
  void* compat_destroy_srq;
  void* post_srq_recv;
  void* compat_create_qp;
  void* compat_query_qp;
  void* compat_modify_qp;
  void* compat_destroy_qp;
  int (*post_send)(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad_wr);
  int (*post_recv)(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad_wr);
  void* compat_create_ah;
  void* compat_destroy_ah;
  void* compat_attach_mcast;
  void* compat_detach_mcast;
  void* compat_async_event;
};

// Leading fields of struct ibv_context (a pthread mutex and a pointer
// follow; the library allocates the object).
struct ibv_context {
  struct ibv_device* device;
  struct ibv_context_ops ops;
  int cmd_fd;
  int async_fd;
  int num_comp_vectors;
};

// The library's symbols that weft resolves with dlsym (the declarations are
// verbs.h's; ibv_reg_dmabuf_mr exists from rdma-core v34 on and is
// optional).
typedef struct ibv_device** (*weft_ibv_get_device_list_fn)(int* num_devices);
typedef void (*weft_ibv_free_device_list_fn)(struct ibv_device** list);
typedef const char* (*weft_ibv_get_device_name_fn)(struct ibv_device* device);
typedef struct ibv_context* (*weft_ibv_open_device_fn)(struct ibv_device* device);
typedef int (*weft_ibv_close_device_fn)(struct ibv_context* context);
typedef int (*weft_ibv_query_device_fn)(struct ibv_context* context, struct ibv_device_attr* attr);
typedef int (*weft_ibv_query_port_fn)(struct ibv_context* context, uint8_t port_num, struct ibv_port_attr* attr);
typedef int (*weft_ibv_query_gid_fn)(struct ibv_context* context, uint8_t port_num, int index, union ibv_gid* gid);
typedef struct ibv_pd* (*weft_ibv_alloc_pd_fn)(struct ibv_context* context);
typedef int (*weft_ibv_dealloc_pd_fn)(struct ibv_pd* pd);
typedef struct ibv_mr* (*weft_ibv_reg_mr_fn)(struct ibv_pd* pd, void* addr, size_t length, int access);
typedef struct ibv_mr* (*weft_ibv_reg_dmabuf_mr_fn)(struct ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova,
                                                    int fd, int access);
typedef int (*weft_ibv_dereg_mr_fn)(struct ibv_mr* mr);
typedef struct ibv_cq* (*weft_ibv_create_cq_fn)(struct ibv_context* context, int cqe, void* cq_context,
                                                struct ibv_comp_channel* channel, int comp_vector);
typedef int (*weft_ibv_destroy_cq_fn)(struct ibv_cq* cq);
typedef struct ibv_qp* (*weft_ibv_create_qp_fn)(struct ibv_pd* pd, struct ibv_qp_init_attr* attr);
typedef int (*weft_ibv_modify_qp_fn)(struct ibv_qp* qp, struct ibv_qp_attr* attr, int attr_mask);
typedef int (*weft_ibv_destroy_qp_fn)(struct ibv_qp* qp);
typedef const char* (*weft_ibv_wc_status_str_fn)(int status);

#if defined(__LP64__)
_Static_assert(sizeof(union ibv_gid) == 16, "ibv_gid");
_Static_assert(sizeof(struct ibv_device_attr) == 232, "ibv_device_attr");
_Static_assert(offsetof(struct ibv_device_attr, phys_port_cnt) == 227, "ibv_device_attr.phys_port_cnt");
_Static_assert(sizeof(struct ibv_port_attr) == 52, "ibv_port_attr");
_Static_assert(offsetof(struct ibv_port_attr, lid) == 34, "ibv_port_attr.lid");
_Static_assert(offsetof(struct ibv_port_attr, link_layer) == 46, "ibv_port_attr.link_layer");
_Static_assert(offsetof(struct ibv_mr, lkey) == 36 && offsetof(struct ibv_mr, rkey) == 40, "ibv_mr keys");
_Static_assert(offsetof(struct ibv_cq, cqe) == 28, "ibv_cq.cqe");
_Static_assert(offsetof(struct ibv_qp, qp_num) == 52 && offsetof(struct ibv_qp, state) == 56, "ibv_qp.qp_num");
_Static_assert(sizeof(struct ibv_qp_init_attr) == 64, "ibv_qp_init_attr");
_Static_assert(sizeof(struct ibv_ah_attr) == 32, "ibv_ah_attr");
_Static_assert(offsetof(struct ibv_qp_attr, ah_attr) == 56, "ibv_qp_attr.ah_attr");
_Static_assert(offsetof(struct ibv_qp_attr, max_rd_atomic) == 126, "ibv_qp_attr.max_rd_atomic");
_Static_assert(offsetof(struct ibv_qp_attr, rate_limit) == 136 && sizeof(struct ibv_qp_attr) == 144, "ibv_qp_attr");
_Static_assert(offsetof(struct ibv_send_wr, wr.rdma.remote_addr) == 40, "ibv_send_wr.wr");
_Static_assert(offsetof(struct ibv_send_wr, wr.atomic.rkey) == 64, "ibv_send_wr.wr.atomic.rkey");
_Static_assert(sizeof(struct ibv_send_wr) == 128, "ibv_send_wr");
_Static_assert(sizeof(struct ibv_recv_wr) == 32, "ibv_recv_wr");
_Static_assert(sizeof(struct ibv_wc) == 48 && offsetof(struct ibv_wc, qp_num) == 28, "ibv_wc");
_Static_assert(offsetof(struct ibv_context, ops.poll_cq) == 8 + 11 * 8, "ibv_context.ops.poll_cq");
_Static_assert(offsetof(struct ibv_context, ops.post_send) == 8 + 25 * 8, "ibv_context.ops.post_send");
_Static_assert(offsetof(struct ibv_context, cmd_fd) == 8 + 32 * 8, "ibv_context.cmd_fd");
#endif

#ifdef __cplusplus
}
#endif
