/* Hematite's glue to libibverbs' provider interface (private ABI IBVERBS_PRIVATE_34, the
 * layout of rdma-core 36..56): registration, the device and context objects, and the verbs
 * ops table. Every op converts between libibverbs' objects and the Rust core (lib.rs), which
 * does the work through hostdrv.
 *
 * libibverbs-dev does not ship the provider header, so the few provider structures are
 * declared here from their documented layout (rdma-core v44 libibverbs/driver.h); their sizes
 * and the offsets libibverbs reads are asserted below. Only the public structures come from
 * <infiniband/verbs.h>. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "shim.h"

/* ---------------------------------------------------------------- provider-ABI structures */

struct hm_list_node { struct hm_list_node *next, *prev; };

struct hm_match_ent {                 /* verbs_match_ent */
	void *driver_data;
	union { const char *modalias; uint64_t driver_id; } u;
	uint16_t vendor;
	uint16_t device;
	uint8_t kind;
};
enum { HM_MATCH_SENTINEL = 0, HM_MATCH_MODALIAS = 2 };

struct hm_sysfs_dev {                 /* verbs_sysfs_dev */
	struct hm_list_node entry;
	void *provider_data;
	const struct hm_match_ent *match;
	unsigned int flags;
	char sysfs_name[IBV_SYSFS_NAME_MAX];
	dev_t sysfs_cdev;
	char ibdev_name[IBV_SYSFS_NAME_MAX];
	char ibdev_path[IBV_SYSFS_PATH_MAX];
	char modalias[512];
	uint64_t node_guid;
	uint32_t driver_id;
	enum ibv_node_type node_type;
	int ibdev_idx;
	uint32_t num_ports;
	uint32_t abi_ver;
	struct timespec time_created;
};

struct hm_verbs_device;
struct hm_device_ops {                /* verbs_device_ops */
	const char *name;
	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct hm_match_ent *match_table;
	const struct hm_device_ops **static_providers;
	bool (*match_device)(struct hm_sysfs_dev *sysfs_dev);
	struct verbs_context *(*alloc_context)(struct ibv_device *device, int cmd_fd, void *private_data);
	struct verbs_context *(*import_context)(struct ibv_device *device, int cmd_fd);
	struct hm_verbs_device *(*alloc_device)(struct hm_sysfs_dev *sysfs_dev);
	void (*uninit_device)(struct hm_verbs_device *device);
};

struct hm_verbs_device {              /* verbs_device */
	struct ibv_device device;
	const struct hm_device_ops *ops;
	atomic_int refcount;
	struct hm_list_node entry;
	struct hm_sysfs_dev *sysfs;
	uint64_t core_support;
};

struct hm_verbs_mr {                  /* verbs_mr */
	struct ibv_mr ibv_mr;
	int mr_type;
	int access;
};

struct hm_verbs_qp {                  /* verbs_qp */
	union { struct ibv_qp qp; struct ibv_qp_ex qp_ex; };
	uint32_t comp_mask;
	void *xrcd;
};

struct hm_verbs_cq {                  /* verbs_cq */
	union { struct ibv_cq cq; struct ibv_cq_ex cq_ex; };
};

/* verbs_context_ops: 76 entries in alphabetical order. Entries Hematite does not implement
 * stay NULL; verbs_set_ops() then keeps libibverbs' defaults, which fail with EOPNOTSUPP. */
typedef void (*hm_fn)(void);
struct hm_context_ops {
	hm_fn advise_mr, alloc_dm, alloc_mw, alloc_null_mr, alloc_parent_domain;
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	hm_fn alloc_td, async_event, attach_counters_point_flow, attach_mcast, bind_mw, close_xrcd, cq_event,
		create_ah, create_counters;
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel,
				    int comp_vector);
	struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr);
	hm_fn create_flow, create_flow_action_esp;
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);
	hm_fn create_rwq_ind_table, create_srq, create_srq_ex, create_wq, dealloc_mw;
	int (*dealloc_pd)(struct ibv_pd *pd);
	hm_fn dealloc_td;
	int (*dereg_mr)(struct hm_verbs_mr *vmr);
	hm_fn destroy_ah, destroy_counters;
	int (*destroy_cq)(struct ibv_cq *cq);
	hm_fn destroy_flow, destroy_flow_action;
	int (*destroy_qp)(struct ibv_qp *qp);
	hm_fn destroy_rwq_ind_table, destroy_srq, destroy_wq, detach_mcast;
	void (*free_context)(struct ibv_context *context);
	hm_fn free_dm, get_srq_num, import_dm, import_mr, import_pd, modify_cq, modify_flow_action_esp;
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
	hm_fn modify_qp_rate_limit, modify_srq, modify_wq, open_qp, open_xrcd;
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
	hm_fn post_srq_ops, post_srq_recv;
	int (*query_device_ex)(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr, size_t attr_size);
	int (*query_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	int (*query_port)(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			struct ibv_qp_init_attr *init_attr);
	hm_fn query_qp_data_in_order, query_rt_values, query_srq, read_counters, reg_dm_mr, reg_dmabuf_mr;
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va, int access);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*rereg_mr)(struct hm_verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access);
	int (*resize_cq)(struct ibv_cq *cq, int cqe);
	int (*set_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	hm_fn unimport_dm, unimport_mr, unimport_pd;
};

/* The layout facts libibverbs 36..56 relies on (x86_64 / aarch64, LP64). */
_Static_assert(sizeof(struct hm_context_ops) == 76 * sizeof(void *), "verbs_context_ops has 76 entries");
_Static_assert(offsetof(struct hm_context_ops, post_send) == 55 * sizeof(void *), "post_send is entry 55");
_Static_assert(offsetof(struct hm_context_ops, reg_mr) == 68 * sizeof(void *), "reg_mr is entry 68");
_Static_assert(offsetof(struct hm_sysfs_dev, ibdev_path) == 176, "verbs_sysfs_dev.ibdev_path");
_Static_assert(offsetof(struct hm_sysfs_dev, abi_ver) == 968, "verbs_sysfs_dev.abi_ver");
_Static_assert(sizeof(struct hm_sysfs_dev) == 992, "verbs_sysfs_dev size");
_Static_assert(offsetof(struct hm_verbs_device, ops) == sizeof(struct ibv_device), "verbs_device.ops");
_Static_assert(sizeof(struct hm_verbs_device) == sizeof(struct ibv_device) + 48, "verbs_device size");
_Static_assert(offsetof(struct hm_verbs_mr, access) == sizeof(struct ibv_mr) + 4, "verbs_mr");

/* libibverbs' provider entry points (IBVERBS_PRIVATE_34). */
void verbs_register_driver_34(const struct hm_device_ops *ops);
void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd, size_t alloc_size,
				    struct verbs_context *context_offset, uint32_t driver_id);
void verbs_uninit_context(struct verbs_context *context);
void verbs_set_ops(struct verbs_context *vctx, const struct hm_context_ops *ops);

/* ---------------------------------------------------------------- Hematite's objects */

struct hm_context {
	struct verbs_context vctx;     /* must be first: libibverbs allocates around it */
	void *rs;
	int async_wfd;
	struct hm_dev_attr attr;
};

struct hm_pd { struct ibv_pd pd; void *rs; };
struct hm_mr { struct hm_verbs_mr vmr; void *rs; };
struct hm_cq {
	struct hm_verbs_cq vcq;
	void *rs;
	struct ibv_wc cur; /* the extended API's current completion (ibv_start_poll / ibv_next_poll) */
};

/* The extended posting API's batch (ibv_wr_start .. ibv_wr_complete): the WRs built so far,
 * their SGEs and inline copies, and the first error a builder met (then nothing is posted). */
struct hm_wr_batch {
	pthread_mutex_t lock;          /* held from ibv_wr_start to ibv_wr_complete / ibv_wr_abort */
	struct ibv_send_wr *wr;        /* cap entries */
	struct ibv_sge *sge;           /* cap * nsge */
	uint8_t *inl;                  /* cap * max_inline bytes */
	uint32_t cap, nsge, max_inline, n;
	int err;
};
struct hm_qp {
	struct hm_verbs_qp vqp;
	void *rs;
	struct hm_qp_caps caps;
	int sq_sig_all;
	void *qp_context_user;
	uint32_t ece_options; /* the ECE options the QP uses (HM_ECE_SUPPORTED at most) */
	struct hm_wr_batch *batch; /* created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS */
};
#define HM_VERBS_QP_EX (1u << 1) /* verbs_qp.comp_mask: qp_ex is valid (libibverbs' VERBS_QP_EX) */

/* A completion channel made by ibv_create_comp_channel below: a pipe; an armed CQ's event
 * writes the CQ's pointer into it, which is what ibv_get_cq_event reads. */
#define HM_CHANNEL_MAGIC 0x484d4348u
struct hm_channel {
	struct ibv_comp_channel ch;
	uint32_t magic;
	int wfd;
};

static const struct hm_device_ops hm_dev_ops;

/* libibverbs hands out &vctx.context, the last member of struct verbs_context */
static inline struct hm_context *to_hctx(struct ibv_context *c)
{
	return (struct hm_context *)((char *)c - offsetof(struct hm_context, vctx.context));
}
static inline struct hm_qp *to_hqp(struct ibv_qp *q) { return (struct hm_qp *)q; }
static inline struct hm_cq *to_hcq(struct ibv_cq *c) { return (struct hm_cq *)c; }
static inline struct hm_pd *to_hpd(struct ibv_pd *p) { return (struct hm_pd *)p; }

static int is_hematite(struct ibv_context *context)
{
	if (!context || !context->device)
		return 0;
	return ((struct hm_verbs_device *)context->device)->ops == &hm_dev_ops;
}

/* ---------------------------------------------------------------- device */

static struct ibv_context *hm_ctx_of_pd(struct ibv_pd *pd) { return pd->context; }

static int hm_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct hm_context *ctx = to_hctx(context);
	struct ibv_device_attr_ex a;
	const struct hm_dev_attr *d = &ctx->attr;

	if (input && input->comp_mask)
		return EINVAL;
	if (attr_size < sizeof(a.orig_attr))
		return EINVAL;
	memset(&a, 0, sizeof(a));
	snprintf(a.orig_attr.fw_ver, sizeof(a.orig_attr.fw_ver), "%u.%u.%u", d->fw_ver >> 16,
		 (d->fw_ver >> 8) & 0xff, d->fw_ver & 0xff);
	a.orig_attr.node_guid = d->node_guid;
	a.orig_attr.sys_image_guid = d->node_guid;
	a.orig_attr.max_mr_size = d->max_mr_size;
	a.orig_attr.page_size_cap = d->page_size_cap;
	a.orig_attr.vendor_id = d->vendor_id;
	a.orig_attr.vendor_part_id = d->vendor_part_id;
	a.orig_attr.hw_ver = d->hw_ver;
	a.orig_attr.max_qp = d->max_qp;
	a.orig_attr.max_qp_wr = d->max_qp_wr;
	a.orig_attr.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
	a.orig_attr.max_sge = d->max_sge;
	a.orig_attr.max_sge_rd = d->max_sge;
	a.orig_attr.max_cq = d->max_cq;
	a.orig_attr.max_cqe = d->max_cqe;
	a.orig_attr.max_mr = d->max_mr;
	a.orig_attr.max_pd = d->max_pd;
	a.orig_attr.max_qp_rd_atom = d->max_qp_rd_atom;
	a.orig_attr.max_qp_init_rd_atom = d->max_qp_init_rd_atom;
	a.orig_attr.max_res_rd_atom = d->max_qp * d->max_qp_rd_atom;
	a.orig_attr.atomic_cap = d->atomic_cap ? IBV_ATOMIC_HCA : IBV_ATOMIC_NONE;
	a.orig_attr.max_pkeys = 1;
	a.orig_attr.local_ca_ack_delay = 15;
	a.orig_attr.phys_port_cnt = d->phys_port_cnt;
	a.phys_port_cnt_ex = d->phys_port_cnt;
	memcpy(attr, &a, attr_size < sizeof(a) ? attr_size : sizeof(a));
	return 0;
}

static int hm_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *pa)
{
	struct hm_port_attr p;
	int ret;

	if (port_num != 1)
		return EINVAL;
	ret = hm_rs_query_port(to_hctx(context)->rs, port_num, &p);
	if (ret)
		return ret;
	memset(pa, 0, sizeof(*pa));
	pa->state = p.state;
	pa->max_mtu = p.max_mtu;
	pa->active_mtu = p.active_mtu;
	pa->gid_tbl_len = p.gid_tbl_len;
	pa->port_cap_flags = p.port_cap_flags;
	pa->max_msg_sz = p.max_msg_sz;
	pa->pkey_tbl_len = p.pkey_tbl_len;
	pa->max_vl_num = 1;
	pa->active_width = p.active_width;
	pa->active_speed = p.active_speed;
	pa->phys_state = p.phys_state;
	pa->link_layer = p.link_layer;
	return 0;
}

/* ---------------------------------------------------------------- PD / MR */

static struct ibv_pd *hm_alloc_pd(struct ibv_context *context)
{
	struct hm_pd *pd = calloc(1, sizeof(*pd));
	int ret;

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	ret = hm_rs_alloc_pd(to_hctx(context)->rs, &pd->rs, &pd->pd.handle);
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	pd->pd.context = context;
	return &pd->pd;
}

static int hm_dealloc_pd(struct ibv_pd *ibpd)
{
	struct hm_pd *pd = to_hpd(ibpd);
	int ret = hm_rs_dealloc_pd(to_hctx(ibpd->context)->rs, pd->rs);

	if (ret)
		return ret;
	free(pd);
	return 0;
}

static struct ibv_mr *hm_reg_mr(struct ibv_pd *ibpd, void *addr, size_t length, uint64_t hca_va, int access)
{
	struct hm_mr *mr = calloc(1, sizeof(*mr));
	int ret;

	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	ret = hm_rs_reg_mr(to_hctx(hm_ctx_of_pd(ibpd))->rs, to_hpd(ibpd)->rs, (uintptr_t)addr, length, hca_va,
			   (uint32_t)access, &mr->rs, &mr->vmr.ibv_mr.lkey, &mr->vmr.ibv_mr.rkey);
	if (ret) {
		free(mr);
		errno = ret;
		return NULL;
	}
	mr->vmr.ibv_mr.context = ibpd->context;
	mr->vmr.ibv_mr.pd = ibpd;
	mr->vmr.ibv_mr.addr = addr;
	mr->vmr.ibv_mr.length = length;
	mr->vmr.ibv_mr.handle = mr->vmr.ibv_mr.lkey;
	mr->vmr.access = access;
	return &mr->vmr.ibv_mr;
}

static int hm_dereg_mr(struct hm_verbs_mr *vmr)
{
	struct hm_mr *mr = (struct hm_mr *)vmr;
	int ret = hm_rs_dereg_mr(to_hctx(vmr->ibv_mr.context)->rs, mr->rs);

	if (ret)
		return ret;
	free(mr);
	return 0;
}

/* ibv_rereg_mr: libibverbs has checked the flag combinations and records the new PD, address and
 * length on success; the keys are the provider's to update. A refusal leaves the MR as it was
 * and sets errno (libibverbs then returns IBV_REREG_MR_ERR_CMD). */
static int hm_rereg_mr(struct hm_verbs_mr *vmr, int flags, struct ibv_pd *ibpd, void *addr, size_t length, int access)
{
	struct hm_mr *mr = (struct hm_mr *)vmr;
	struct ibv_context *c = vmr->ibv_mr.context;
	int ret;

	if ((flags & IBV_REREG_MR_CHANGE_PD) && (!ibpd || ibpd->context != c)) {
		errno = EINVAL;
		return EINVAL;
	}
	ret = hm_rs_rereg_mr(to_hctx(c)->rs, mr->rs, (uint32_t)flags,
			     (flags & IBV_REREG_MR_CHANGE_PD) ? to_hpd(ibpd)->rs : NULL, (uintptr_t)addr, length,
			     (uint32_t)access, &vmr->ibv_mr.lkey, &vmr->ibv_mr.rkey);
	if (ret) {
		errno = ret;
		return ret;
	}
	vmr->ibv_mr.handle = vmr->ibv_mr.lkey;
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		vmr->access = access;
	return 0;
}

/* ---------------------------------------------------------------- CQ */

static struct ibv_cq *hm_create_cq(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel,
				   int comp_vector)
{
	struct hm_context *ctx = to_hctx(context);
	struct hm_cq *cq;
	uint32_t entries, cqn;
	int wfd = -1, ret;

	if (cqe < 1 || (uint32_t)cqe > ctx->attr.max_cqe || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	if (channel) {
		struct hm_channel *hc = (struct hm_channel *)channel;
		if (hc->magic != HM_CHANNEL_MAGIC || channel->context != context) {
			/* a channel libibverbs made through the kernel: cannot exist here */
			errno = EINVAL;
			return NULL;
		}
		wfd = hc->wfd;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	ret = hm_rs_create_cq(ctx->rs, cqe, comp_vector, &cq->vcq.cq, wfd, &cq->rs, &entries, &cqn);
	if (ret) {
		free(cq);
		errno = ret;
		return NULL;
	}
	cq->vcq.cq.context = context;
	cq->vcq.cq.cqe = (int)entries;
	cq->vcq.cq.handle = cqn;
	return &cq->vcq.cq;
}

static int hm_destroy_cq(struct ibv_cq *ibcq)
{
	int ret = hm_rs_destroy_cq(to_hctx(ibcq->context)->rs, to_hcq(ibcq)->rs);

	if (ret)
		return ret;
	free(to_hcq(ibcq));
	return 0;
}

static int hm_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	return hm_rs_poll_cq(to_hcq(ibcq)->rs, n, wc);
}

static int hm_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	return hm_rs_req_notify_cq(to_hcq(ibcq)->rs, solicited_only);
}

static int hm_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	(void)ibcq;
	(void)cqe;
	return EOPNOTSUPP;
}

/* ---------------------------------------------------------------- extended CQ
 *
 * ibv_create_cq_ex: the same CQ, polled one completion at a time through the extended API.
 * The work completion fields of IBV_WC_STANDARD_FLAGS are offered; the completion timestamps,
 * CVLAN, flow tag and tag matching are not (the device has no clock in its CQEs): EOPNOTSUPP,
 * as is IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN and a parent domain. */
static inline struct hm_cq *cqx_of(struct ibv_cq_ex *c) { return (struct hm_cq *)c; }

static int hm_cqx_take(struct ibv_cq_ex *c)
{
	struct hm_cq *cq = cqx_of(c);
	int n = hm_rs_poll_cq(cq->rs, 1, &cq->cur);

	if (n < 0)
		return EIO;
	if (n == 0)
		return ENOENT;
	c->status = cq->cur.status;
	c->wr_id = cq->cur.wr_id;
	return 0;
}

static int hm_cqx_start_poll(struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
	if (attr && attr->comp_mask)
		return EINVAL;
	return hm_cqx_take(c);
}

static int hm_cqx_next_poll(struct ibv_cq_ex *c) { return hm_cqx_take(c); }
static void hm_cqx_end_poll(struct ibv_cq_ex *c) { (void)c; }
static enum ibv_wc_opcode hm_cqx_opcode(struct ibv_cq_ex *c) { return cqx_of(c)->cur.opcode; }
static uint32_t hm_cqx_vendor_err(struct ibv_cq_ex *c) { return cqx_of(c)->cur.vendor_err; }
static uint32_t hm_cqx_byte_len(struct ibv_cq_ex *c) { return cqx_of(c)->cur.byte_len; }
static __be32 hm_cqx_imm_data(struct ibv_cq_ex *c) { return cqx_of(c)->cur.imm_data; }
static uint32_t hm_cqx_qp_num(struct ibv_cq_ex *c) { return cqx_of(c)->cur.qp_num; }
static uint32_t hm_cqx_src_qp(struct ibv_cq_ex *c) { return cqx_of(c)->cur.src_qp; }
static unsigned int hm_cqx_wc_flags(struct ibv_cq_ex *c) { return cqx_of(c)->cur.wc_flags; }
static uint32_t hm_cqx_slid(struct ibv_cq_ex *c) { return cqx_of(c)->cur.slid; }
static uint8_t hm_cqx_sl(struct ibv_cq_ex *c) { return cqx_of(c)->cur.sl; }
static uint8_t hm_cqx_dlid_path_bits(struct ibv_cq_ex *c) { return cqx_of(c)->cur.dlid_path_bits; }

static struct ibv_cq_ex *hm_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr)
{
	const uint32_t known = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;

	if (!attr || (attr->comp_mask & ~known) || attr->cqe > INT32_MAX ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	     (attr->flags & ~(uint32_t)(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)))) {
		errno = EINVAL;
		return NULL;
	}
	if ((attr->wc_flags & ~(uint64_t)IBV_WC_STANDARD_FLAGS) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (attr->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)) ||
	    (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	struct ibv_cq *ibcq = hm_create_cq(context, (int)attr->cqe, attr->channel, (int)attr->comp_vector);
	if (!ibcq)
		return NULL;
	struct hm_cq *cq = to_hcq(ibcq);
	struct ibv_cq_ex *c = &cq->vcq.cq_ex;
	/* libibverbs' ibv_create_cq_ex (verbs_init_cq) fills the channel (and its reference),
	 * cq_context, the event counters and the lock, as ibv_create_cq does */
	c->comp_mask = 0;
	c->start_poll = hm_cqx_start_poll;
	c->next_poll = hm_cqx_next_poll;
	c->end_poll = hm_cqx_end_poll;
	c->read_opcode = hm_cqx_opcode;
	c->read_vendor_err = hm_cqx_vendor_err;
	c->read_byte_len = hm_cqx_byte_len;
	c->read_imm_data = hm_cqx_imm_data;
	c->read_qp_num = hm_cqx_qp_num;
	c->read_src_qp = hm_cqx_src_qp;
	c->read_wc_flags = hm_cqx_wc_flags;
	c->read_slid = hm_cqx_slid;
	c->read_sl = hm_cqx_sl;
	c->read_dlid_path_bits = hm_cqx_dlid_path_bits;
	return c;
}

/* ---------------------------------------------------------------- QP */

static struct ibv_qp *hm_create_qp(struct ibv_pd *ibpd, struct ibv_qp_init_attr *init)
{
	struct ibv_context *context = ibpd->context;
	struct hm_context *ctx = to_hctx(context);
	struct hm_qp *qp;
	uint32_t qpn;
	int ret;

	if (!init->send_cq || !init->recv_cq || !is_hematite(init->send_cq->context) ||
	    init->send_cq->context != context || init->recv_cq->context != context) {
		errno = EINVAL;
		return NULL;
	}
	if ((init->qp_type != IBV_QPT_RC && init->qp_type != IBV_QPT_UC) || init->srq) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->caps.max_send_wr = init->cap.max_send_wr ? init->cap.max_send_wr : 1;
	qp->caps.max_recv_wr = init->cap.max_recv_wr;
	qp->caps.max_send_sge = init->cap.max_send_sge;
	qp->caps.max_recv_sge = init->cap.max_recv_sge;
	qp->caps.max_inline_data = init->cap.max_inline_data;
	qp->sq_sig_all = init->sq_sig_all;
	ret = hm_rs_create_qp(ctx->rs, to_hpd(ibpd)->rs, to_hcq(init->send_cq)->rs, to_hcq(init->recv_cq)->rs,
			      &qp->vqp.qp, init->qp_type, init->sq_sig_all ? 1 : 0, &qp->caps, &qp->rs, &qpn);
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	struct ibv_qp *q = &qp->vqp.qp;
	q->context = context;
	q->qp_context = init->qp_context;
	q->pd = ibpd;
	q->send_cq = init->send_cq;
	q->recv_cq = init->recv_cq;
	q->srq = NULL;
	q->handle = qpn;
	q->qp_num = qpn;
	q->state = IBV_QPS_RESET;
	q->qp_type = init->qp_type;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	q->events_completed = 0;
	init->cap.max_send_wr = qp->caps.max_send_wr;
	init->cap.max_recv_wr = qp->caps.max_recv_wr;
	init->cap.max_send_sge = qp->caps.max_send_sge;
	init->cap.max_recv_sge = qp->caps.max_recv_sge;
	init->cap.max_inline_data = qp->caps.max_inline_data;
	return q;
}

/* ---------------------------------------------------------------- extended QP (ibv_wr_*)
 *
 * Between ibv_wr_start and ibv_wr_complete the builders fill a batch of ibv_send_wr (the QP's
 * lock held); ibv_wr_complete posts the batch all or nothing (hm_rs_post_send_all): a builder
 * error (too many SGEs or inline bytes, more WRs than the send queue holds, an operation not
 * offered) or a refused WR posts none of them and is returned. ibv_wr_abort drops the batch. */
static inline struct hm_qp *qpx_of(struct ibv_qp_ex *q) { return (struct hm_qp *)q; }
static int hm_destroy_qp(struct ibv_qp *ibqp);

static struct ibv_send_wr *hm_wr_new(struct ibv_qp_ex *q, enum ibv_wr_opcode op)
{
	struct hm_wr_batch *b = qpx_of(q)->batch;
	struct ibv_send_wr *w;

	if (b->n >= b->cap) {
		if (!b->err)
			b->err = ENOMEM;
		return NULL;
	}
	w = &b->wr[b->n];
	memset(w, 0, sizeof(*w));
	w->wr_id = q->wr_id;
	w->send_flags = q->wr_flags;
	w->opcode = op;
	w->sg_list = &b->sge[(size_t)b->n * b->nsge];
	b->n++;
	return w;
}

/* the WR the SGE / inline setters apply to: the last one built */
static struct ibv_send_wr *hm_wr_cur(struct hm_wr_batch *b)
{
	if (!b->n) {
		if (!b->err)
			b->err = EINVAL;
		return NULL;
	}
	return &b->wr[b->n - 1];
}

static void hm_wr_fail(struct ibv_qp_ex *q, int e)
{
	struct hm_wr_batch *b = qpx_of(q)->batch;

	if (!b->err)
		b->err = e;
}

/* an RDMA WRITE / WRITE_WITH_IMM / READ to rkey / addr */
static struct ibv_send_wr *hm_wr_rdma(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr)
{
	struct ibv_send_wr *w = hm_wr_new(q, op);

	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = addr;
	}
	return w;
}

static void hm_wr_rdma_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	(void)hm_wr_rdma(q, IBV_WR_RDMA_WRITE, rkey, addr);
}

static void hm_wr_rdma_write_imm(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, __be32 imm)
{
	struct ibv_send_wr *w = hm_wr_rdma(q, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr);

	if (w)
		w->imm_data = imm;
}

static void hm_wr_rdma_read(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	(void)hm_wr_rdma(q, IBV_WR_RDMA_READ, rkey, addr);
}

static void hm_wr_send(struct ibv_qp_ex *q) { (void)hm_wr_new(q, IBV_WR_SEND); }

static void hm_wr_send_imm(struct ibv_qp_ex *q, __be32 imm)
{
	struct ibv_send_wr *w = hm_wr_new(q, IBV_WR_SEND_WITH_IMM);

	if (w)
		w->imm_data = imm;
}

static void hm_wr_send_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct ibv_send_wr *w = hm_wr_new(q, IBV_WR_SEND_WITH_INV);

	if (w)
		w->invalidate_rkey = rkey;
}

/* an atomic on the 8 bytes at rkey / addr: compare_add (the compare value or the addend), swap */
static void hm_wr_atomic(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr, uint64_t compare_add,
			 uint64_t swap)
{
	struct ibv_send_wr *w = hm_wr_new(q, op);

	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = addr;
		w->wr.atomic.compare_add = compare_add;
		w->wr.atomic.swap = swap;
	}
}

static void hm_wr_cmp_swp(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, uint64_t cmp, uint64_t swap)
{
	hm_wr_atomic(q, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, cmp, swap);
}

static void hm_wr_fetch_add(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, uint64_t add)
{
	hm_wr_atomic(q, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

/* operations the device does not offer (memory windows, local invalidate, TSO, UD, XRC) */
static void hm_wr_bind_mw(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *i)
{
	(void)mw;
	(void)rkey;
	(void)i;
	hm_wr_fail(q, EOPNOTSUPP);
}
static void hm_wr_local_inv(struct ibv_qp_ex *q, uint32_t rkey) { (void)rkey; hm_wr_fail(q, EOPNOTSUPP); }
static void hm_wr_send_tso(struct ibv_qp_ex *q, void *hdr, uint16_t sz, uint16_t mss)
{
	(void)hdr;
	(void)sz;
	(void)mss;
	hm_wr_fail(q, EOPNOTSUPP);
}
static void hm_wr_set_ud_addr(struct ibv_qp_ex *q, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	(void)ah;
	(void)qpn;
	(void)qkey;
	hm_wr_fail(q, EOPNOTSUPP);
}
static void hm_wr_set_xrc_srqn(struct ibv_qp_ex *q, uint32_t srqn) { (void)srqn; hm_wr_fail(q, EOPNOTSUPP); }

static void hm_wr_set_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct hm_wr_batch *b = qpx_of(q)->batch;
	struct ibv_send_wr *w = hm_wr_cur(b);

	if (!w)
		return;
	w->sg_list[0].addr = addr;
	w->sg_list[0].length = length;
	w->sg_list[0].lkey = lkey;
	w->num_sge = 1;
}

static void hm_wr_set_sge_list(struct ibv_qp_ex *q, size_t n, const struct ibv_sge *list)
{
	struct hm_wr_batch *b = qpx_of(q)->batch;
	struct ibv_send_wr *w = hm_wr_cur(b);

	if (!w)
		return;
	if (n > b->nsge || (n && !list)) {
		hm_wr_fail(q, EINVAL);
		return;
	}
	if (n)
		memcpy(w->sg_list, list, n * sizeof(*list));
	w->num_sge = (int)n;
}

static void hm_wr_set_inline_data_list(struct ibv_qp_ex *q, size_t n, const struct ibv_data_buf *bufs)
{
	struct hm_wr_batch *b = qpx_of(q)->batch;
	struct ibv_send_wr *w = hm_wr_cur(b);
	uint8_t *dst;
	size_t off = 0;

	if (!w)
		return;
	dst = b->inl + (size_t)(w - b->wr) * b->max_inline;
	for (size_t i = 0; i < n; i++) {
		if (bufs[i].length > b->max_inline - off) {
			hm_wr_fail(q, EINVAL);
			return;
		}
		/* copied now: the caller may reuse its buffers once the setter returns */
		memcpy(dst + off, bufs[i].addr, bufs[i].length);
		off += bufs[i].length;
	}
	w->sg_list[0].addr = (uintptr_t)dst;
	w->sg_list[0].length = (uint32_t)off;
	w->sg_list[0].lkey = 0;
	w->num_sge = 1;
	w->send_flags |= IBV_SEND_INLINE;
}

static void hm_wr_set_inline_data(struct ibv_qp_ex *q, void *addr, size_t length)
{
	struct ibv_data_buf d = { .addr = addr, .length = length };

	hm_wr_set_inline_data_list(q, 1, &d);
}

static void hm_wr_start(struct ibv_qp_ex *q)
{
	struct hm_wr_batch *b = qpx_of(q)->batch;

	pthread_mutex_lock(&b->lock);
	b->n = 0;
	b->err = 0;
}

static int hm_wr_complete(struct ibv_qp_ex *q)
{
	struct hm_wr_batch *b = qpx_of(q)->batch;
	struct ibv_send_wr *bad = NULL;
	int ret = b->err;

	if (!ret && b->n) {
		for (uint32_t i = 0; i + 1 < b->n; i++)
			b->wr[i].next = &b->wr[i + 1];
		b->wr[b->n - 1].next = NULL;
		ret = q->qp_base.state < IBV_QPS_RTS ? EINVAL : hm_rs_post_send_all(qpx_of(q)->rs, b->wr, &bad);
	}
	b->n = 0;
	b->err = 0;
	pthread_mutex_unlock(&b->lock);
	return ret;
}

static void hm_wr_abort(struct ibv_qp_ex *q)
{
	struct hm_wr_batch *b = qpx_of(q)->batch;

	b->n = 0;
	b->err = 0;
	pthread_mutex_unlock(&b->lock);
}

/* the send operations the extended API offers (the device's opcodes) */
#define HM_SEND_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
		     IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
		     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV)
/* UC: SEND and WRITE, with or without immediate */
#define HM_SEND_OPS_UC (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
			IBV_QP_EX_WITH_SEND_WITH_IMM)

static int hm_qp_ex_init(struct hm_qp *qp)
{
	struct hm_wr_batch *b = calloc(1, sizeof(*b));
	struct ibv_qp_ex *q = &qp->vqp.qp_ex;

	if (!b)
		return ENOMEM;
	b->cap = qp->caps.max_send_wr;
	b->nsge = qp->caps.max_send_sge ? qp->caps.max_send_sge : 1;
	b->max_inline = qp->caps.max_inline_data;
	b->wr = calloc(b->cap, sizeof(*b->wr));
	b->sge = calloc((size_t)b->cap * b->nsge, sizeof(*b->sge));
	b->inl = b->max_inline ? calloc(b->cap, b->max_inline) : NULL;
	if (!b->wr || !b->sge || (b->max_inline && !b->inl)) {
		free(b->wr);
		free(b->sge);
		free(b->inl);
		free(b);
		return ENOMEM;
	}
	pthread_mutex_init(&b->lock, NULL);
	qp->batch = b;
	q->wr_atomic_cmp_swp = hm_wr_cmp_swp;
	q->wr_atomic_fetch_add = hm_wr_fetch_add;
	q->wr_bind_mw = hm_wr_bind_mw;
	q->wr_local_inv = hm_wr_local_inv;
	q->wr_rdma_read = hm_wr_rdma_read;
	q->wr_rdma_write = hm_wr_rdma_write;
	q->wr_rdma_write_imm = hm_wr_rdma_write_imm;
	q->wr_send = hm_wr_send;
	q->wr_send_imm = hm_wr_send_imm;
	q->wr_send_inv = hm_wr_send_inv;
	q->wr_send_tso = hm_wr_send_tso;
	q->wr_set_ud_addr = hm_wr_set_ud_addr;
	q->wr_set_xrc_srqn = hm_wr_set_xrc_srqn;
	q->wr_set_inline_data = hm_wr_set_inline_data;
	q->wr_set_inline_data_list = hm_wr_set_inline_data_list;
	q->wr_set_sge = hm_wr_set_sge;
	q->wr_set_sge_list = hm_wr_set_sge_list;
	q->wr_start = hm_wr_start;
	q->wr_complete = hm_wr_complete;
	q->wr_abort = hm_wr_abort;
	qp->vqp.comp_mask |= HM_VERBS_QP_EX;
	return 0;
}

static void hm_qp_ex_free(struct hm_qp *qp)
{
	struct hm_wr_batch *b = qp->batch;

	if (!b)
		return;
	pthread_mutex_destroy(&b->lock);
	free(b->wr);
	free(b->sge);
	free(b->inl);
	free(b);
	qp->batch = NULL;
}

static struct ibv_qp *hm_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *ex)
{
	struct ibv_qp_init_attr init;

	if (ex->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
					IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((ex->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (ex->send_ops_flags & ~(uint64_t)(ex->qp_type == IBV_QPT_UC ? HM_SEND_OPS_UC : HM_SEND_OPS))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((ex->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ex->create_flags) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(ex->comp_mask & IBV_QP_INIT_ATTR_PD) || !ex->pd || ex->pd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	memset(&init, 0, sizeof(init));
	init.qp_context = ex->qp_context;
	init.send_cq = ex->send_cq;
	init.recv_cq = ex->recv_cq;
	init.srq = ex->srq;
	init.cap = ex->cap;
	init.qp_type = ex->qp_type;
	init.sq_sig_all = ex->sq_sig_all;
	struct ibv_qp *q = hm_create_qp(ex->pd, &init);
	if (!q)
		return NULL;
	ex->cap = init.cap;
	if (ex->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		int e = hm_qp_ex_init(to_hqp(q));
		if (e) {
			hm_destroy_qp(q);
			errno = e;
			return NULL;
		}
	}
	return q;
}

static int hm_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct hm_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = attr->qp_state;
	a.cur_qp_state = attr->cur_qp_state;
	a.qp_access_flags = (uint32_t)attr->qp_access_flags;
	a.pkey_index = attr->pkey_index;
	a.port_num = attr->port_num;
	a.path_mtu = attr->path_mtu;
	a.timeout = attr->timeout;
	a.retry_cnt = attr->retry_cnt;
	a.rnr_retry = attr->rnr_retry;
	a.rq_psn = attr->rq_psn;
	a.sq_psn = attr->sq_psn;
	a.max_rd_atomic = attr->max_rd_atomic;
	a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	a.min_rnr_timer = attr->min_rnr_timer;
	a.dest_qp_num = attr->dest_qp_num;
	a.is_global = attr->ah_attr.is_global;
	memcpy(a.dgid, attr->ah_attr.grh.dgid.raw, 16);
	a.sgid_index = attr->ah_attr.grh.sgid_index;
	a.hop_limit = attr->ah_attr.grh.hop_limit;
	a.traffic_class = attr->ah_attr.grh.traffic_class;
	a.flow_label = attr->ah_attr.grh.flow_label;
	return hm_rs_modify_qp(to_hctx(ibqp->context)->rs, to_hqp(ibqp)->rs, &a, (uint32_t)mask, ibqp->state);
}

static int hm_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init)
{
	struct hm_qp *qp = to_hqp(ibqp);
	struct hm_qp_attr a;
	struct hm_qp_caps caps;
	int ret;

	(void)mask;
	ret = hm_rs_query_qp(to_hctx(ibqp->context)->rs, qp->rs, &a, &caps);
	if (ret)
		return ret;
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = a.qp_state;
	attr->cur_qp_state = a.qp_state;
	attr->path_mtu = a.path_mtu;
	attr->qp_access_flags = (int)a.qp_access_flags;
	attr->pkey_index = (uint16_t)a.pkey_index;
	attr->port_num = (uint8_t)a.port_num;
	attr->timeout = (uint8_t)a.timeout;
	attr->retry_cnt = (uint8_t)a.retry_cnt;
	attr->rnr_retry = (uint8_t)a.rnr_retry;
	attr->rq_psn = a.rq_psn;
	attr->sq_psn = a.sq_psn;
	attr->max_rd_atomic = (uint8_t)a.max_rd_atomic;
	attr->max_dest_rd_atomic = (uint8_t)a.max_dest_rd_atomic;
	attr->min_rnr_timer = (uint8_t)a.min_rnr_timer;
	attr->dest_qp_num = a.dest_qp_num;
	attr->ah_attr.is_global = 1;
	attr->ah_attr.port_num = 1;
	memcpy(attr->ah_attr.grh.dgid.raw, a.dgid, 16);
	attr->ah_attr.grh.sgid_index = (uint8_t)a.sgid_index;
	attr->ah_attr.grh.hop_limit = (uint8_t)a.hop_limit;
	attr->ah_attr.grh.traffic_class = (uint8_t)a.traffic_class;
	attr->ah_attr.grh.flow_label = a.flow_label;
	attr->cap.max_send_wr = caps.max_send_wr;
	attr->cap.max_recv_wr = caps.max_recv_wr;
	attr->cap.max_send_sge = caps.max_send_sge;
	attr->cap.max_recv_sge = caps.max_recv_sge;
	attr->cap.max_inline_data = caps.max_inline_data;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = ibqp->qp_context;
		init->send_cq = ibqp->send_cq;
		init->recv_cq = ibqp->recv_cq;
		init->cap = attr->cap;
		init->qp_type = ibqp->qp_type;
		init->sq_sig_all = qp->sq_sig_all;
	}
	return 0;
}

/* ---------------------------------------------------------------- ECE
 *
 * Enhanced Connection Establishment (ibv_query_ece / ibv_set_ece): a QP advertises the
 * transport enhancements it supports (vendor id, options); the application exchanges them with
 * its peer and sets the peer's on its QP, which then uses the options both support. Hematite
 * implements no enhancement yet (selective repeat is planned as the first option bit), so
 * HM_ECE_SUPPORTED is 0: a QP answers its vendor id with no options, and a peer's options reduce
 * to none. Another vendor's ECE is EOPNOTSUPP (nothing in common; NCCL, for one, then treats ECE
 * as unsupported for that connection and goes on), a comp_mask EINVAL, and so is a change once
 * the QP has left INIT (the options act at its connection). */
#define HM_ECE_SUPPORTED 0u

static int hm_query_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
	if (!ece)
		return EINVAL;
	memset(ece, 0, sizeof(*ece));
	ece->vendor_id = to_hctx(ibqp->context)->attr.vendor_id;
	ece->options = to_hqp(ibqp)->ece_options;
	return 0;
}

static int hm_set_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
	if (!ece || ece->comp_mask)
		return EINVAL;
	if (ece->vendor_id != to_hctx(ibqp->context)->attr.vendor_id)
		return EOPNOTSUPP;
	if (ibqp->state != IBV_QPS_RESET && ibqp->state != IBV_QPS_INIT)
		return EINVAL;
	to_hqp(ibqp)->ece_options = ece->options & HM_ECE_SUPPORTED;
	return 0;
}

static int hm_destroy_qp(struct ibv_qp *ibqp)
{
	struct hm_qp *qp = to_hqp(ibqp);
	int ret = hm_rs_destroy_qp(to_hctx(ibqp->context)->rs, qp->rs);

	if (ret)
		return ret;
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	hm_qp_ex_free(qp);
	free(qp);
	return 0;
}

/* Posting is refused before the queue can carry work (RESET; and for sends INIT and RTR),
 * as the verbs specification says; in ERR, WRs are accepted and flushed by the engine. */
static int hm_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	if (__builtin_expect(ibqp->state < IBV_QPS_RTS, 0)) {
		*bad = wr;
		return EINVAL;
	}
	return hm_rs_post_send(to_hqp(ibqp)->rs, wr, bad);
}

static int hm_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	if (__builtin_expect(ibqp->state == IBV_QPS_RESET, 0)) {
		*bad = wr;
		return EINVAL;
	}
	return hm_rs_post_recv(to_hqp(ibqp)->rs, wr, bad);
}

/* ---------------------------------------------------------------- context */

static void hm_free_context(struct ibv_context *context)
{
	struct hm_context *ctx = to_hctx(context);

	hm_rs_close(ctx->rs);
	ctx->rs = NULL;
	if (ctx->async_wfd >= 0)
		close(ctx->async_wfd);
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

static const struct hm_context_ops hm_ctx_ops = {
	.alloc_pd = hm_alloc_pd,
	.create_cq = hm_create_cq,
	.create_cq_ex = hm_create_cq_ex,
	.create_qp = hm_create_qp,
	.create_qp_ex = hm_create_qp_ex,
	.dealloc_pd = hm_dealloc_pd,
	.dereg_mr = hm_dereg_mr,
	.rereg_mr = hm_rereg_mr,
	.destroy_cq = hm_destroy_cq,
	.destroy_qp = hm_destroy_qp,
	.free_context = hm_free_context,
	.modify_qp = hm_modify_qp,
	.poll_cq = hm_poll_cq,
	.post_recv = hm_post_recv,
	.post_send = hm_post_send,
	.query_device_ex = hm_query_device_ex,
	.query_ece = hm_query_ece,
	.query_port = hm_query_port,
	.query_qp = hm_query_qp,
	.reg_mr = hm_reg_mr,
	.req_notify_cq = hm_req_notify_cq,
	.resize_cq = hm_resize_cq,
	.set_ece = hm_set_ece,
};

static struct verbs_context *hm_alloc_context(struct ibv_device *ibdev, int cmd_fd, void *private_data)
{
	struct hm_context *ctx;
	int p[2] = { -1, -1 };
	int err = 0;

	(void)private_data;
	ctx = _verbs_init_and_alloc_context(ibdev, cmd_fd, sizeof(*ctx), &((struct hm_context *)0)->vctx, 0);
	if (!ctx)
		return NULL;
	ctx->async_wfd = -1;
	ctx->rs = hm_rs_open(ibdev->ibdev_path, &err);
	if (!ctx->rs)
		goto fail;
	err = hm_rs_query_device(ctx->rs, &ctx->attr);
	if (err)
		goto fail;
	if (pipe2(p, O_CLOEXEC)) {
		err = errno;
		goto fail;
	}
	/* the event thread never blocks on a program that does not read its events: a full
	 * pipe keeps them queued in the provider (events.rs) */
	if (fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK)) {
		err = errno;
		close(p[0]);
		close(p[1]);
		goto fail;
	}
	/* verbs_uninit_context closes async_fd (the read end); free_context the write end */
	ctx->vctx.context.async_fd = p[0];
	ctx->async_wfd = p[1];
	ctx->vctx.context.num_comp_vectors = (int)ctx->attr.num_comp_vectors;
	err = hm_rs_start_events(ctx->rs, p[1]);
	if (err)
		goto fail;
	verbs_set_ops(&ctx->vctx, &hm_ctx_ops);
	return &ctx->vctx;

fail:
	if (ctx->rs)
		hm_rs_close(ctx->rs);
	if (ctx->async_wfd >= 0)
		close(ctx->async_wfd);
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
	errno = err ? err : EIO;
	return NULL;
}

static struct hm_verbs_device *hm_alloc_device(struct hm_sysfs_dev *sysfs_dev)
{
	(void)sysfs_dev;
	return calloc(1, sizeof(struct hm_verbs_device));
}

static void hm_uninit_device(struct hm_verbs_device *dev)
{
	free(dev);
}

static const struct hm_match_ent hm_match_table[] = {
	{ .u.modalias = "rdma_device:*Nhematite*", .kind = HM_MATCH_MODALIAS },
	{ .u.modalias = "hematite:*", .kind = HM_MATCH_MODALIAS },
	{ .kind = HM_MATCH_SENTINEL },
};

static const struct hm_device_ops hm_dev_ops = {
	.name = "hematite",
	.match_min_abi_version = 1,
	.match_max_abi_version = 1,
	.match_table = hm_match_table,
	.alloc_device = hm_alloc_device,
	.uninit_device = hm_uninit_device,
	.alloc_context = hm_alloc_context,
};

/* rdma-core 36..56 keep this ops layout; 36 added ibv_query_qp_data_in_order@IBVERBS_1.14,
 * and a library outside the range has another private ABI, so this .so would not load. */
int hm_c_abi_ok(void)
{
	return dlvsym(RTLD_DEFAULT, "ibv_query_qp_data_in_order", "IBVERBS_1.14") != NULL;
}

__attribute__((constructor)) static void hm_register(void)
{
	if (!hm_c_abi_ok()) {
		fprintf(stderr, "hematite: this libibverbs lacks IBVERBS_1.14 (rdma-core < 36): provider not registered\n");
		return;
	}
	verbs_register_driver_34(&hm_dev_ops);
}

/* ---------------------------------------------------------------- completion channels */

typedef struct ibv_comp_channel *(*create_chan_fn)(struct ibv_context *);
typedef int (*destroy_chan_fn)(struct ibv_comp_channel *);

struct ibv_comp_channel *hm_c_create_comp_channel(struct ibv_context *context)
{
	struct hm_channel *hc;
	int p[2];

	if (!is_hematite(context)) {
		create_chan_fn next = (create_chan_fn)dlvsym(RTLD_NEXT, "ibv_create_comp_channel", "IBVERBS_1.0");
		if (!next) {
			errno = ENOSYS;
			return NULL;
		}
		return next(context);
	}
	hc = calloc(1, sizeof(*hc));
	if (!hc) {
		errno = ENOMEM;
		return NULL;
	}
	if (pipe2(p, O_CLOEXEC)) {
		free(hc);
		return NULL;
	}
	/* (the event thread's writes never block; see events.rs) */
	if (fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK)) {
		close(p[0]);
		close(p[1]);
		free(hc);
		return NULL;
	}
	hc->ch.context = context;
	hc->ch.fd = p[0];
	hc->ch.refcnt = 0;
	hc->magic = HM_CHANNEL_MAGIC;
	hc->wfd = p[1];
	return &hc->ch;
}

void *hm_c_rs_of(struct ibv_context *context)
{
	return context && is_hematite(context) ? to_hctx(context)->rs : NULL;
}

int hm_c_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct hm_channel *hc = (struct hm_channel *)channel;

	if (!is_hematite(channel->context) || hc->magic != HM_CHANNEL_MAGIC) {
		destroy_chan_fn next = (destroy_chan_fn)dlvsym(RTLD_NEXT, "ibv_destroy_comp_channel", "IBVERBS_1.0");
		if (!next)
			return ENOSYS;
		return next(channel);
	}
	pthread_mutex_lock(&channel->context->mutex);
	if (channel->refcnt) {
		pthread_mutex_unlock(&channel->context->mutex);
		return EBUSY;
	}
	pthread_mutex_unlock(&channel->context->mutex);
	hc->magic = 0;
	close(hc->ch.fd);
	close(hc->wfd);
	free(hc);
	return 0;
}

/* The public structures the Rust core reads and writes directly on the fast path
 * (lib.rs mirrors them with the same offsets and asserts them too). */
_Static_assert(sizeof(struct ibv_sge) == 16 && offsetof(struct ibv_sge, lkey) == 12, "ibv_sge");
_Static_assert(offsetof(struct ibv_send_wr, next) == 8 && offsetof(struct ibv_send_wr, sg_list) == 16 &&
	       offsetof(struct ibv_send_wr, num_sge) == 24 && offsetof(struct ibv_send_wr, opcode) == 28 &&
	       offsetof(struct ibv_send_wr, send_flags) == 32 && offsetof(struct ibv_send_wr, imm_data) == 36 &&
	       offsetof(struct ibv_send_wr, invalidate_rkey) == 36 &&
	       offsetof(struct ibv_send_wr, wr.rdma.remote_addr) == 40 && offsetof(struct ibv_send_wr, wr.rdma.rkey) == 48 &&
	       offsetof(struct ibv_send_wr, wr.atomic.remote_addr) == 40 &&
	       offsetof(struct ibv_send_wr, wr.atomic.compare_add) == 48 &&
	       offsetof(struct ibv_send_wr, wr.atomic.swap) == 56 && offsetof(struct ibv_send_wr, wr.atomic.rkey) == 64,
	       "ibv_send_wr");
_Static_assert(offsetof(struct ibv_recv_wr, next) == 8 && offsetof(struct ibv_recv_wr, sg_list) == 16 &&
	       offsetof(struct ibv_recv_wr, num_sge) == 24, "ibv_recv_wr");
_Static_assert(sizeof(struct ibv_wc) == 48 && offsetof(struct ibv_wc, status) == 8 &&
	       offsetof(struct ibv_wc, opcode) == 12 && offsetof(struct ibv_wc, vendor_err) == 16 &&
	       offsetof(struct ibv_wc, byte_len) == 20 && offsetof(struct ibv_wc, imm_data) == 24 &&
	       offsetof(struct ibv_wc, qp_num) == 28 && offsetof(struct ibv_wc, src_qp) == 32 &&
	       offsetof(struct ibv_wc, wc_flags) == 36 && offsetof(struct ibv_wc, pkey_index) == 40 &&
	       offsetof(struct ibv_wc, slid) == 42 && offsetof(struct ibv_wc, sl) == 44 &&
	       offsetof(struct ibv_wc, dlid_path_bits) == 45, "ibv_wc");
_Static_assert(sizeof(struct hm_dev_attr) == 96 && sizeof(struct hm_port_attr) == 48 &&
	       sizeof(struct hm_qp_caps) == 24 && sizeof(struct hm_qp_attr) == 96, "shim.h structs");
_Static_assert(IBV_WR_RDMA_WRITE == 0 && IBV_WR_RDMA_WRITE_WITH_IMM == 1 && IBV_WR_SEND == 2 &&
	       IBV_WR_SEND_WITH_IMM == 3 && IBV_WR_RDMA_READ == 4 && IBV_WR_ATOMIC_CMP_AND_SWP == 5 &&
	       IBV_WR_ATOMIC_FETCH_AND_ADD == 6 && IBV_WR_SEND_WITH_INV == 9, "ibv_wr_opcode");
_Static_assert(IBV_SEND_FENCE == 1 && IBV_SEND_SIGNALED == 2 && IBV_SEND_SOLICITED == 4 && IBV_SEND_INLINE == 8,
	       "ibv_send_flags");
_Static_assert(IBV_WC_SEND == 0 && IBV_WC_RDMA_WRITE == 1 && IBV_WC_RDMA_READ == 2 && IBV_WC_COMP_SWAP == 3 &&
	       IBV_WC_FETCH_ADD == 4 && IBV_WC_RECV == 128 && IBV_WC_RECV_RDMA_WITH_IMM == 129 &&
	       IBV_WC_WITH_IMM == 2 && IBV_WC_WITH_INV == 8, "ibv_wc_opcode / flags");
_Static_assert(IBV_WC_SUCCESS == 0 && IBV_WC_LOC_LEN_ERR == 1 && IBV_WC_LOC_QP_OP_ERR == 2 &&
	       IBV_WC_LOC_PROT_ERR == 4 && IBV_WC_WR_FLUSH_ERR == 5 && IBV_WC_REM_INV_REQ_ERR == 9 &&
	       IBV_WC_REM_ACCESS_ERR == 10 && IBV_WC_REM_OP_ERR == 11 && IBV_WC_RETRY_EXC_ERR == 12 &&
	       IBV_WC_RNR_RETRY_EXC_ERR == 13, "ibv_wc_status");
_Static_assert(IBV_EVENT_CQ_ERR == 0 && IBV_EVENT_QP_FATAL == 1 && IBV_EVENT_PORT_ACTIVE == 9 &&
	       IBV_EVENT_PORT_ERR == 10, "ibv_event_type");
