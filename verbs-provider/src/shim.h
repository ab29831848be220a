/* The interface between the provider's C glue (shim.c: libibverbs' provider structures) and
 * its Rust core (lib.rs: everything that talks to the device through hostdrv).
 *
 * Rust mirrors every struct here with #[repr(C)] and the same field order; both sides assert
 * the sizes (shim.c with _Static_assert, lib.rs with const assertions). Functions return 0 or
 * a positive errno. Handles are opaque pointers owned by the Rust side. */
#ifndef HM_SHIM_H
#define HM_SHIM_H

#include <stdint.h>
#include <infiniband/verbs.h>

struct hm_dev_attr {
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint64_t node_guid;          /* network byte order, as ibv_get_device_guid */
	uint32_t fw_ver;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_pd;
	uint32_t max_qp_rd_atom;
	uint32_t max_qp_init_rd_atom;
	uint32_t atomic_cap;
	uint32_t max_inline_data;
	uint32_t phys_port_cnt;
	uint32_t num_comp_vectors;
	uint32_t _pad;
};

struct hm_port_attr {
	uint32_t state;
	uint32_t max_mtu;
	uint32_t active_mtu;
	uint32_t gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t pkey_tbl_len;
	uint32_t link_layer;
	uint32_t active_speed;
	uint32_t active_width;
	uint32_t phys_state;
	uint32_t _pad;
};

/* QP capacities: asked for at creation, granted on return. */
struct hm_qp_caps {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
	uint32_t _pad;
};

/* The attributes of ibv_modify_qp / ibv_query_qp the device knows, flattened. */
struct hm_qp_attr {
	uint8_t dgid[16];
	uint32_t qp_state;
	uint32_t cur_qp_state;
	uint32_t qp_access_flags;
	uint32_t pkey_index;
	uint32_t port_num;
	uint32_t path_mtu;
	uint32_t timeout;
	uint32_t retry_cnt;
	uint32_t rnr_retry;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t max_rd_atomic;
	uint32_t max_dest_rd_atomic;
	uint32_t min_rnr_timer;
	uint32_t dest_qp_num;
	uint32_t sgid_index;
	uint32_t hop_limit;
	uint32_t traffic_class;
	uint32_t flow_label;
	uint32_t is_global;
};

/* Rust side (lib.rs). */
void *hm_rs_open(const char *ibdev_path, int *err);
void hm_rs_close(void *ctx);
int hm_rs_query_device(void *ctx, struct hm_dev_attr *out);
int hm_rs_query_port(void *ctx, uint32_t port, struct hm_port_attr *out);
int hm_rs_start_events(void *ctx, int async_wfd);
int hm_rs_alloc_pd(void *ctx, void **pd, uint32_t *handle);
int hm_rs_dealloc_pd(void *ctx, void *pd);
int hm_rs_reg_mr(void *ctx, void *pd, uint64_t addr, uint64_t len, uint64_t iova, uint32_t access,
		 void **mr, uint32_t *lkey, uint32_t *rkey);
int hm_rs_dereg_mr(void *ctx, void *mr);
int hm_rs_rereg_mr(void *ctx, void *mr, uint32_t flags, void *pd, uint64_t addr, uint64_t len, uint32_t access,
		   uint32_t *lkey, uint32_t *rkey);
int hm_rs_create_cq(void *ctx, int32_t cqe, int32_t vector, struct ibv_cq *ibcq, int chan_wfd,
		    void **cq, uint32_t *entries, uint32_t *cqn);
int hm_rs_destroy_cq(void *ctx, void *cq);
int hm_rs_req_notify_cq(void *cq, int solicited_only);
int hm_rs_poll_cq(void *cq, int n, struct ibv_wc *wc);
int hm_rs_create_qp(void *ctx, void *pd, void *scq, void *rcq, struct ibv_qp *ibqp, uint32_t qp_type,
		    uint32_t sq_sig_all, struct hm_qp_caps *caps, void **qp, uint32_t *qpn);
int hm_rs_modify_qp(void *ctx, void *qp, const struct hm_qp_attr *attr, uint32_t mask, uint32_t from_state);
int hm_rs_query_qp(void *ctx, void *qp, struct hm_qp_attr *out, struct hm_qp_caps *caps);
int hm_rs_destroy_qp(void *ctx, void *qp);
int hm_rs_post_send(void *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int hm_rs_post_send_all(void *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int hm_rs_post_recv(void *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

/* C side (shim.c), called from Rust. */
struct ibv_comp_channel *hm_c_create_comp_channel(struct ibv_context *context);
int hm_c_destroy_comp_channel(struct ibv_comp_channel *channel);
/* The Rust context of a Hematite context, NULL for another device's (hematite_query_*). */
void *hm_c_rs_of(struct ibv_context *context);
/* Checks, once, that this libibverbs has the ops layout the provider was built against. */
int hm_c_abi_ok(void);

#endif
