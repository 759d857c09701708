// weft_ucp.h: the part of UCX's UCP API (libucp, libucs) that weft uses,
// written for weft. Nothing here includes UCX's own headers, so weft builds
// where UCX is not installed; the libraries are opened with dlopen.
//
// Layouts and values follow UCX's public headers <ucp/api/ucp.h>,
// <ucp/api/ucp_def.h>, <ucs/type/status.h>, <ucs/memory/memory_type.h> and
// <ucs/type/thread_mode.h> as of UCX 1.13 (Debian 12's libucx-dev
// 1.13.1-1). The parameter structures are versioned by their field_mask:
// UCX reads only the fields whose bit is set, and new fields are appended,
// so the leading fields used here keep their offsets from UCX 1.12 on. The
// _Static_asserts at the end pin the LP64 (x86-64, arm64) offsets, which
// were checked against the installed 1.13.1 headers with offsetof.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_UCS_BIT(i) (1ull << (i))

// ucs_status_t is an enum declared __attribute__((packed)) in status.h: its
// values (-100 … 1) make it one signed byte wide.
typedef int8_t ucs_status_t;
typedef void* ucs_status_ptr_t;
enum {
  UCS_OK = 0,
  UCS_INPROGRESS = 1,
  UCS_ERR_NO_MESSAGE = -1,
  UCS_ERR_NO_RESOURCE = -2,
  UCS_ERR_IO_ERROR = -3,
  UCS_ERR_NO_MEMORY = -4,
  UCS_ERR_INVALID_PARAM = -5,
  UCS_ERR_UNREACHABLE = -6,
  UCS_ERR_INVALID_ADDR = -7,
  UCS_ERR_NOT_IMPLEMENTED = -8,
  UCS_ERR_BUSY = -15,
  UCS_ERR_CANCELED = -16,
  UCS_ERR_TIMED_OUT = -20,
  UCS_ERR_EXCEEDS_LIMIT = -21,
  UCS_ERR_UNSUPPORTED = -22,
  UCS_ERR_REJECTED = -23,
  UCS_ERR_NOT_CONNECTED = -24,
  UCS_ERR_CONNECTION_RESET = -25,
  UCS_ERR_ENDPOINT_TIMEOUT = -80,
  UCS_ERR_LAST = -100,
};
// UCS_PTR_IS_ERR / UCS_PTR_RAW_STATUS of status.h.
#define WEFT_UCS_PTR_IS_ERR(p) (((uintptr_t)(p)) >= ((uintptr_t)(intptr_t)UCS_ERR_LAST))
#define WEFT_UCS_PTR_STATUS(p) ((ucs_status_t)(intptr_t)(p))

// enum ucs_memory_type (memory_type.h) and ucs_thread_mode_t (thread_mode.h).
typedef enum { UCS_MEMORY_TYPE_HOST = 0, UCS_MEMORY_TYPE_CUDA = 1, UCS_MEMORY_TYPE_CUDA_MANAGED = 2,
               UCS_MEMORY_TYPE_ROCM = 3, UCS_MEMORY_TYPE_ROCM_MANAGED = 4 } ucs_memory_type_t;
typedef enum { UCS_THREAD_MODE_SINGLE = 0, UCS_THREAD_MODE_SERIALIZED = 1, UCS_THREAD_MODE_MULTI = 2 } ucs_thread_mode_t;

typedef struct ucp_context* ucp_context_h;
typedef struct ucp_config ucp_config_t;
typedef struct ucp_worker* ucp_worker_h;
typedef struct ucp_ep* ucp_ep_h;
typedef struct ucp_address ucp_address_t;
typedef struct ucp_rkey* ucp_rkey_h;
typedef struct ucp_mem* ucp_mem_h;
typedef uint64_t ucp_datatype_t;

// enum ucp_feature
enum { UCP_FEATURE_RMA = WEFT_UCS_BIT(1), UCP_FEATURE_AMO64 = WEFT_UCS_BIT(3), UCP_FEATURE_WAKEUP = WEFT_UCS_BIT(4),
       UCP_FEATURE_AM = WEFT_UCS_BIT(6) };
// enum ucp_params_field
enum { UCP_PARAM_FIELD_FEATURES = WEFT_UCS_BIT(0), UCP_PARAM_FIELD_MT_WORKERS_SHARED = WEFT_UCS_BIT(5), UCP_PARAM_FIELD_NAME = WEFT_UCS_BIT(8) };

typedef struct ucp_params {
  uint64_t field_mask;
  uint64_t features;
  size_t request_size;
  void (*request_init)(void*);
  void (*request_cleanup)(void*);
  uint64_t tag_sender_mask;
  int mt_workers_shared;
  size_t estimated_num_eps;
  size_t estimated_num_ppn;
  const char* name;
} ucp_params_t;

// enum ucp_context_attr_field
enum { UCP_ATTR_FIELD_MEMORY_TYPES = WEFT_UCS_BIT(2) };
typedef struct ucp_context_attr {
  uint64_t field_mask;
  size_t request_size;
  ucs_thread_mode_t thread_mode;
  uint64_t memory_types;  // bit i: ucs_memory_type_t i is supported
  char name[32];          // UCP_ENTITY_NAME_MAX
} ucp_context_attr_t;

// enum ucp_worker_params_field
enum { UCP_WORKER_PARAM_FIELD_THREAD_MODE = WEFT_UCS_BIT(0) };
typedef struct {
  unsigned long bits[1024 / (8 * sizeof(unsigned long))];  // ucs_cpu_set_t, UCS_CPU_SETSIZE 1024
} weft_ucs_cpu_set_t;
typedef struct ucp_worker_params {
  uint64_t field_mask;
  ucs_thread_mode_t thread_mode;
  weft_ucs_cpu_set_t cpu_mask;
  unsigned events;
  void* user_data;
  int event_fd;
  uint64_t flags;
  const char* name;
  size_t am_alignment;
  uint64_t client_id;
} ucp_worker_params_t;

// ucp_err_handling_mode_t and enum ucp_ep_params_field
enum { UCP_ERR_HANDLING_MODE_NONE = 0, UCP_ERR_HANDLING_MODE_PEER = 1 };
enum { UCP_EP_PARAM_FIELD_REMOTE_ADDRESS = WEFT_UCS_BIT(0), UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE = WEFT_UCS_BIT(1),
       UCP_EP_PARAM_FIELD_ERR_HANDLER = WEFT_UCS_BIT(2) };
typedef void (*ucp_err_handler_cb_t)(void* arg, ucp_ep_h ep, ucs_status_t status);
typedef struct {
  const void* addr;  // const struct sockaddr*
  unsigned addrlen;  // socklen_t
} weft_ucs_sock_addr_t;
typedef struct ucp_ep_params {
  uint64_t field_mask;
  const ucp_address_t* address;
  int err_mode;  // ucp_err_handling_mode_t
  struct {
    ucp_err_handler_cb_t cb;
    void* arg;
  } err_handler;
  void* user_data;
  unsigned flags;
  weft_ucs_sock_addr_t sockaddr;
  void* conn_request;
  const char* name;
  weft_ucs_sock_addr_t local_sockaddr;
} ucp_ep_params_t;

// enum ucp_ep_close_flags_t
enum { UCP_EP_CLOSE_FLAG_FORCE = WEFT_UCS_BIT(0) };

// enum ucp_mem_map_params_field
enum { UCP_MEM_MAP_PARAM_FIELD_ADDRESS = WEFT_UCS_BIT(0), UCP_MEM_MAP_PARAM_FIELD_LENGTH = WEFT_UCS_BIT(1),
       UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE = WEFT_UCS_BIT(4) };
typedef struct ucp_mem_map_params {
  uint64_t field_mask;
  void* address;
  size_t length;
  unsigned flags;
  unsigned prot;
  ucs_memory_type_t memory_type;
} ucp_mem_map_params_t;

// ucp_op_attr_t
enum { UCP_OP_ATTR_FIELD_FLAGS = WEFT_UCS_BIT(4), UCP_OP_ATTR_FIELD_MEMORY_TYPE = WEFT_UCS_BIT(6) };
// enum ucp_send_am_flags
enum { UCP_AM_SEND_FLAG_EAGER = WEFT_UCS_BIT(1) };
typedef struct {
  uint32_t op_attr_mask;
  uint32_t flags;
  void* request;
  void* cb;  // union of completion callbacks; weft polls requests instead
  ucp_datatype_t datatype;
  void* user_data;
  void* reply_buffer;
  ucs_memory_type_t memory_type;
  void* recv_info;
  ucp_mem_h memh;
} ucp_request_param_t;

// Active messages: enum ucp_am_handler_param_field, ucp_am_recv_attr_t.
enum { UCP_AM_HANDLER_PARAM_FIELD_ID = WEFT_UCS_BIT(0), UCP_AM_HANDLER_PARAM_FIELD_CB = WEFT_UCS_BIT(2),
       UCP_AM_HANDLER_PARAM_FIELD_ARG = WEFT_UCS_BIT(3) };
enum { UCP_AM_RECV_ATTR_FLAG_DATA = WEFT_UCS_BIT(16), UCP_AM_RECV_ATTR_FLAG_RNDV = WEFT_UCS_BIT(17) };
typedef struct ucp_am_recv_param {
  uint64_t recv_attr;
  ucp_ep_h reply_ep;
} ucp_am_recv_param_t;
typedef ucs_status_t (*ucp_am_recv_callback_t)(void* arg, const void* header, size_t header_length, void* data,
                                               size_t length, const ucp_am_recv_param_t* param);
typedef struct ucp_am_handler_param {
  uint64_t field_mask;
  unsigned id;
  uint32_t flags;
  ucp_am_recv_callback_t cb;
  void* arg;
} ucp_am_handler_param_t;

// The library functions weft resolves with dlsym (libucp unless noted).
typedef void (*weft_ucp_get_version_fn)(unsigned*, unsigned*, unsigned*);
typedef ucs_status_t (*weft_ucp_config_read_fn)(const char*, const char*, ucp_config_t**);
typedef void (*weft_ucp_config_release_fn)(ucp_config_t*);
typedef ucs_status_t (*weft_ucp_config_modify_fn)(ucp_config_t*, const char*, const char*);
typedef ucs_status_t (*weft_ucp_init_version_fn)(unsigned, unsigned, const ucp_params_t*, const ucp_config_t*,
                                                 ucp_context_h*);
typedef void (*weft_ucp_cleanup_fn)(ucp_context_h);
typedef ucs_status_t (*weft_ucp_context_query_fn)(ucp_context_h, ucp_context_attr_t*);
typedef ucs_status_t (*weft_ucp_worker_create_fn)(ucp_context_h, const ucp_worker_params_t*, ucp_worker_h*);
typedef void (*weft_ucp_worker_destroy_fn)(ucp_worker_h);
typedef ucs_status_t (*weft_ucp_worker_get_address_fn)(ucp_worker_h, ucp_address_t**, size_t*);
typedef void (*weft_ucp_worker_release_address_fn)(ucp_worker_h, ucp_address_t*);
typedef unsigned (*weft_ucp_worker_progress_fn)(ucp_worker_h);
typedef ucs_status_t (*weft_ucp_worker_get_efd_fn)(ucp_worker_h, int*);
typedef ucs_status_t (*weft_ucp_worker_arm_fn)(ucp_worker_h);
typedef ucs_status_t (*weft_ucp_worker_signal_fn)(ucp_worker_h);
typedef ucs_status_t (*weft_ucp_worker_set_am_recv_handler_fn)(ucp_worker_h, const ucp_am_handler_param_t*);
typedef void (*weft_ucp_am_data_release_fn)(ucp_worker_h, void*);
typedef ucs_status_t (*weft_ucp_ep_create_fn)(ucp_worker_h, const ucp_ep_params_t*, ucp_ep_h*);
typedef ucs_status_ptr_t (*weft_ucp_ep_close_nbx_fn)(ucp_ep_h, const ucp_request_param_t*);
typedef ucs_status_ptr_t (*weft_ucp_ep_flush_nbx_fn)(ucp_ep_h, const ucp_request_param_t*);
typedef ucs_status_t (*weft_ucp_mem_map_fn)(ucp_context_h, const ucp_mem_map_params_t*, ucp_mem_h*);
typedef ucs_status_t (*weft_ucp_mem_unmap_fn)(ucp_context_h, ucp_mem_h);
typedef ucs_status_t (*weft_ucp_rkey_pack_fn)(ucp_context_h, ucp_mem_h, void**, size_t*);
typedef void (*weft_ucp_rkey_buffer_release_fn)(void*);
typedef ucs_status_t (*weft_ucp_ep_rkey_unpack_fn)(ucp_ep_h, const void*, ucp_rkey_h*);
typedef void (*weft_ucp_rkey_destroy_fn)(ucp_rkey_h);
typedef ucs_status_ptr_t (*weft_ucp_put_nbx_fn)(ucp_ep_h, const void*, size_t, uint64_t, ucp_rkey_h,
                                                const ucp_request_param_t*);
typedef ucs_status_ptr_t (*weft_ucp_am_send_nbx_fn)(ucp_ep_h, unsigned, const void*, size_t, const void*, size_t,
                                                    const ucp_request_param_t*);
typedef ucs_status_t (*weft_ucp_request_check_status_fn)(void*);
typedef void (*weft_ucp_request_free_fn)(void*);
typedef const char* (*weft_ucs_status_string_fn)(ucs_status_t);  // libucs

#if defined(__LP64__)
_Static_assert(sizeof(ucs_status_t) == 1, "ucs_status_t is a packed enum");
_Static_assert(sizeof(ucp_params_t) == 80 && offsetof(ucp_params_t, features) == 8 &&
                   offsetof(ucp_params_t, name) == 72,
               "ucp_params_t");
_Static_assert(offsetof(ucp_context_attr_t, thread_mode) == 16 && offsetof(ucp_context_attr_t, memory_types) == 24 &&
                   sizeof(ucp_context_attr_t) == 64,
               "ucp_context_attr_t");
_Static_assert(sizeof(ucp_worker_params_t) == 200 && offsetof(ucp_worker_params_t, thread_mode) == 8 &&
                   offsetof(ucp_worker_params_t, cpu_mask) == 16 && offsetof(ucp_worker_params_t, events) == 144 &&
                   offsetof(ucp_worker_params_t, client_id) == 192,
               "ucp_worker_params_t");
_Static_assert(sizeof(ucp_ep_params_t) == 104 && offsetof(ucp_ep_params_t, address) == 8 &&
                   offsetof(ucp_ep_params_t, err_mode) == 16 && offsetof(ucp_ep_params_t, err_handler) == 24 &&
                   offsetof(ucp_ep_params_t, user_data) == 40 && offsetof(ucp_ep_params_t, sockaddr) == 56 &&
                   offsetof(ucp_ep_params_t, name) == 80 && offsetof(ucp_ep_params_t, local_sockaddr) == 88,
               "ucp_ep_params_t");
_Static_assert(sizeof(ucp_mem_map_params_t) == 40 && offsetof(ucp_mem_map_params_t, length) == 16 &&
                   offsetof(ucp_mem_map_params_t, prot) == 28 && offsetof(ucp_mem_map_params_t, memory_type) == 32,
               "ucp_mem_map_params_t");
_Static_assert(sizeof(ucp_request_param_t) == 72 && offsetof(ucp_request_param_t, flags) == 4 &&
                   offsetof(ucp_request_param_t, datatype) == 24 && offsetof(ucp_request_param_t, memory_type) == 48 &&
                   offsetof(ucp_request_param_t, memh) == 64,
               "ucp_request_param_t");
_Static_assert(sizeof(ucp_am_handler_param_t) == 32 && offsetof(ucp_am_handler_param_t, flags) == 12 &&
                   offsetof(ucp_am_handler_param_t, cb) == 16 && offsetof(ucp_am_handler_param_t, arg) == 24,
               "ucp_am_handler_param_t");
_Static_assert(sizeof(ucp_am_recv_param_t) == 16, "ucp_am_recv_param_t");
#endif

#ifdef __cplusplus
}
#endif
