/*
 * hm_nccl_replay - replay of the verbs sequence NCCL's IB transport issues
 * (net_ib, GDR off, one QP per connection, no adaptive routing unless a
 * message takes that form below), between two processes, without NCCL.
 *
 * Start-up as NCCL's ncclIbInit / ncclIbGetProperties: ibv_fork_init, the
 * device list, ibv_open_device, ibv_query_device / port / every GID, and the
 * sysfs reads NCCL makes: the realpath of /sys/class/infiniband/DEV/device
 * (the NIC's PCI path), the same function found NCCL's way through
 * /sys/class/pci_bus/<bus>/../../<BDF>, its numa_node and class, and the GID's
 * type in ports/1/gid_attrs/types/<i> ("RoCE v2").
 *
 * Each process plays both NCCL roles, as two ranks do:
 *   - a "send comm": QP with max_send_wr 512 and max_recv_wr 0 on a 256-entry
 *     CQ; it never receives, it is only the target of the peer's CTS writes;
 *   - a "recv comm": QP with max_send_wr 512 and max_recv_wr 256 on a
 *     512-entry CQ; it posts zero-SGE receives and writes "clear to send"
 *     (CTS) entries into the peer's FIFO; and, as NCCL's GPU flush, a QP
 *     connected to itself on the same CQ that RDMA_READs one byte of every
 *     received message into host memory.
 * The send QP of one process is connected to the recv QP of the other; every
 * PSN starts at 0; each side queries its QPs' ECE, sends it with the
 * connection info and sets the peer's on the QP it connects to
 * (ibv_set_ece), as NCCL does before RTR. The CTS FIFO and the flush byte
 * are registered with ibv_reg_mr (the IBVERBS_1.1 symbol NCCL binds), the
 * data buffers with ibv_reg_mr_iova2 (iova = address) and
 * IBV_ACCESS_RELAXED_ORDERING.
 *
 * Per iteration the receiver posts one zero-SGE receive and one RDMA_WRITE
 * CTS of 1 to 4 FIFO entries (requests: address, rkey, size; signaled when
 * its FIFO slot is 0, inline with -I); the sender, once every entry of the
 * slot arrived, posts what ncclIbMultiSend posts:
 *   - one request (the default): a single signaled RDMA_WRITE_WITH_IMM of
 *     the data, imm = size (every 7th iteration the size is 0: no SGE);
 *   - every 5th iteration, the adaptive-routing form: the data as an
 *     unsignaled RDMA_WRITE, then a signaled zero-length
 *     RDMA_WRITE_WITH_IMM with address 0 and rkey 0, imm = size;
 *   - every 6th iteration, a multi-receive of 2 to 4 requests: one
 *     unsignaled RDMA_WRITE per request (an empty request's has no SGE), then
 *     the zero-length RDMA_WRITE_WITH_IMM with address 0 and rkey 0, imm = a
 *     bit per non-empty request.
 * The immediate is the host-order value (NCCL neither swaps it nor expects
 * it swapped). Every byte of every request is verified, and the flush's byte.
 *
 * Usage: server: hm_nccl_replay [opts]       client: hm_nccl_replay [opts] HOST
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>

#include "hm_common.h"

#define DEFAULT_PORT 18516
#define MAGIC 0x4e43434cu /* "NCCL" */
#define VERSION 2

#define SEND_CQE 256
#define RECV_CQE 512
#define QP_SEND_WR 512
#define QP_RECV_WR 256
#define MAX_DEPTH 64
#define MAX_RECVS 4 /* requests per CTS slot (NCCL_NET_IB_MAX_RECVS is 8) */
#define MAX_CHAIN (MAX_RECVS + 1) /* a WRITE per request + the WRITE_WITH_IMM */
#define MAX_DETAIL_FAILS 20

/* wr_id tags: the top 16 bits say what the WR was */
#define TAG_MASK 0xffff000000000000ull
#define TAG_DATA 0x5e00000000000000ull   /* signaled final WRITE_WITH_IMM */
#define TAG_UNSIG 0xbad0000000000000ull  /* unsignaled chain RDMA_WRITE   */
#define TAG_RECV 0x7ec0000000000000ull   /* zero-SGE receive              */
#define TAG_CTS 0xc750000000000000ull    /* CTS RDMA_WRITE                */
#define TAG_EXTRA 0xe7e0000000000000ull  /* final zero-length write test  */
#define TAG_FLUSH 0xf1f0000000000000ull  /* the flush RDMA_READ           */

/* One CTS FIFO entry (one request), written by the receiver into the sender's
 * memory; a slot holds MAX_RECVS of them, nreqs used. */
struct cts_elem {
	uint64_t addr;  /* where to write the request's data */
	uint32_t rkey;
	uint32_t size;  /* bytes the receiver can take */
	uint32_t nreqs; /* requests in the slot */
	uint32_t iter;
	uint32_t pad;
	uint32_t idx;   /* iter + 1: what the sender waits for */
};

/* Connection info exchanged over TCP (network byte order on the wire). */
struct conn_info {
	uint32_t magic, version;
	uint32_t send_qpn, recv_qpn;
	uint32_t send_psn, recv_psn;
	uint32_t iters, size, depth, role;
	uint64_t fifo_addr;
	uint32_t fifo_rkey, pad;
	uint8_t gid[16];
	/* ECE of the send and the recv QP (ibv_query_ece), ece_ok 0 when the
	 * provider has none */
	uint32_t ece_vendor[2], ece_options[2], ece_ok[2];
};

static struct {
	const char *dev;
	int gidx;
	int port;
	int iters;
	size_t size;
	int tclass;
	int use_inline;
	int events;
	int depth;
	const char *host;
} opt = { NULL, 0, DEFAULT_PORT, 50, 65536, 0, 0, 0, 4, NULL };

static struct ibv_context *ctx;
static struct ibv_comp_channel *chan;
static struct ibv_cq *scq, *rcq;
static struct ibv_qp *sqp, *rqp, *fqp; /* send, recv, flush (self-connected) */
static int role; /* 0 server, 1 client */
static int async_events;
static int detail_fails;
static int cq_events;
static int scq_armed, rcq_armed;

static void usage(void)
{
	fprintf(stderr,
		HM_USAGE_PAIR
		"  -n ITERS   iterations (default 50)\n"
		"  -s SIZE    message size in bytes (default 65536)\n"
		"  -T TCLASS  GRH traffic class (NCCL_IB_TC, default 0)\n"
		"  -q DEPTH   messages in flight per direction (default 4, max %d)\n"
		"  -I         send the CTS RDMA_WRITE inline (NCCL_IB_USE_INLINE)\n"
		"  -e         completion channel + ibv_req_notify_cq mode\n",
		hm_prog, DEFAULT_PORT, MAX_DEPTH);
	exit(2);
}

/* ------------------------------------------------------------------ */

/* NCCL expects no async event at all */
static void on_async_event(const struct ibv_async_event *ev)
{
	__atomic_add_fetch(&async_events, 1, __ATOMIC_SEQ_CST);
	hm_fail("async_event", "unexpected event %s (%d)",
		ibv_event_type_str(ev->event_type), ev->event_type);
}

/* ------------------------------------------------------------------ */
/* data pattern: depends on direction (sender role), iteration and offset */

static inline uint8_t pat(int dir, int iter, size_t k)
{
	return (uint8_t)(k * 131u + (k >> 8) * 7u + (unsigned)iter * 29u +
			 (unsigned)dir * 101u + 1u);
}

static void fill_pattern(uint8_t *p, size_t len, int dir, int iter)
{
	for (size_t k = 0; k < len; k++)
		p[k] = pat(dir, iter, k);
}

/* Shape of iteration i's message (identical on both sides): the requests of
 * ncclIbMultiSend. Request r of a slot goes to offset r * cap of the slot's
 * receive buffer and comes from the same offset of the send buffer. */
struct shape {
	int nreqs;               /* requests (1: the default; 2..4: a multi-receive) */
	int ar;                  /* adaptive-routing form (one request)          */
	size_t cap;              /* bytes each request's buffer holds           */
	size_t len[MAX_RECVS];   /* bytes of each request                       */
	size_t total;            /* all of them                                 */
	uint32_t imm;            /* size, or a bit per non-empty request         */
	size_t final_len;        /* bytes the WRITE_WITH_IMM carries            */
	int last;                /* the last non-empty request (what the flush reads) */
	int zero_final;          /* it is the zero-length one (address 0, rkey 0) */
};

static void iter_shape(int i, size_t size, struct shape *s)
{
	int n = i + 1; /* 1-based: "every 5th", "every 6th", "every 7th" */

	memset(s, 0, sizeof(*s));
	if (n % 6 == 0 && size >= MAX_RECVS) {
		s->nreqs = 2 + (n / 6) % (MAX_RECVS - 1);
		s->cap = size / (size_t)s->nreqs;
		for (int r = 0; r < s->nreqs; r++)
			s->len[r] = s->cap;
		if (n % 12 == 0)
			s->len[s->nreqs - 1] = 0; /* an empty request */
		for (int r = 0; r < s->nreqs; r++)
			s->imm |= (s->len[r] ? 1u : 0u) << r;
		s->zero_final = 1;
	} else {
		s->nreqs = 1;
		s->cap = size;
		s->len[0] = n % 7 == 0 ? 0 : size;
		s->ar = n % 5 == 0 && s->len[0] > 0;
		s->imm = (uint32_t)s->len[0];
		s->zero_final = s->ar;
		s->final_len = s->ar ? 0 : s->len[0];
	}
	for (int r = 0; r < s->nreqs; r++) {
		s->total += s->len[r];
		if (s->len[r])
			s->last = r;
	}
}

/* ------------------------------------------------------------------ */
/* event mode: wait on the completion channel for a short while        */

static void arm_cqs(void)
{
	if (!scq_armed) {
		if (ibv_req_notify_cq(scq, 0))
			hm_fatal("req_notify_cq", "send CQ: %s",
				 strerror(errno));
		scq_armed = 1;
	}
	if (!rcq_armed) {
		if (ibv_req_notify_cq(rcq, 0))
			hm_fatal("req_notify_cq", "recv CQ: %s",
				 strerror(errno));
		rcq_armed = 1;
	}
}

/* returns the CQ that fired, or NULL when nothing came within ms */
static struct ibv_cq *wait_event(int ms)
{
	struct pollfd p = { .fd = chan->fd, .events = POLLIN };
	struct ibv_cq *ev_cq = NULL;
	void *ev_ctx = NULL;
	int r = poll(&p, 1, ms);

	if (r < 0 && errno != EINTR)
		hm_fatal("comp_channel", "poll on channel fd: %s",
			 strerror(errno));
	if (r <= 0)
		return NULL;
	if (ibv_get_cq_event(chan, &ev_cq, &ev_ctx))
		hm_fatal("get_cq_event", "%s", strerror(errno));
	ibv_ack_cq_events(ev_cq, 1);
	cq_events++;
	if (ev_cq == scq) {
		scq_armed = 0;
		if (ev_ctx != (void *)scq)
			hm_fail("cq_event_context",
				"send CQ event cq_context=%p expected %p",
				ev_ctx, (void *)scq);
	} else if (ev_cq == rcq) {
		rcq_armed = 0;
		if (ev_ctx != (void *)rcq)
			hm_fail("cq_event_context",
				"recv CQ event cq_context=%p expected %p",
				ev_ctx, (void *)rcq);
	} else {
		hm_fail("cq_event", "event for unknown CQ %p", (void *)ev_cq);
	}
	return ev_cq;
}

/* ------------------------------------------------------------------ */

static void detail_fail(const char *name, const char *fmt, ...)
	HM_PRINTF(2, 3);
static void detail_fail(const char *name, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (++detail_fails <= MAX_DETAIL_FAILS)
		hm_fail(name, "%s", buf);
	else
		__atomic_add_fetch(&hm_nfail, 1, __ATOMIC_SEQ_CST);
}

/* the data path's poll: up to 16 CQEs into wc (fatal: name on a poll
 * error); any CQE sets *progress */
static int poll_batch(struct ibv_cq *cq, struct ibv_wc *wc, const char *name,
		      int *progress)
{
	int n = ibv_poll_cq(cq, 16, wc);

	if (n < 0)
		hm_fatal(name, "rc=%d", n);
	if (n > 0)
		*progress = 1;
	return n;
}

/* a data buffer, as ncclIbRegMrDmaBuf registers one: ibv_reg_mr_iova2 with
 * iova = address, relaxed ordering asked for */
static struct ibv_mr *reg_buf(struct ibv_pd *pd, void *buf, size_t len,
			      const char *name)
{
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_RELAXED_ORDERING;
	struct ibv_mr *mr;
	char cname[64];

	snprintf(cname, sizeof(cname), "reg_mr_iova2.%s", name);
	hm_step(cname);
	mr = ibv_reg_mr_iova2(pd, buf, len, (uint64_t)(uintptr_t)buf, acc);
	if (!mr)
		hm_fatal(cname, "ibv_reg_mr_iova2(len=%zu, access=0x%x): %s",
			 len, acc, strerror(errno));
	if (mr->addr != buf || mr->length != len || mr->pd != pd ||
	    mr->context != ctx)
		hm_fail(cname, "mr fields addr=%p/%p length=%zu/%zu pd/ctx ok=%d",
			mr->addr, buf, mr->length, len,
			mr->pd == pd && mr->context == ctx);
	else
		hm_ok(cname, "len=%zu lkey=0x%x rkey=0x%x", len, mr->lkey,
		      mr->rkey);
	return mr;
}

/* the CTS FIFO, its source and the flush byte, as NCCL registers them:
 * through the IBVERBS_1.1 symbol ibv_reg_mr (the parentheses keep verbs.h's
 * macro, which may pick ibv_reg_mr_iova2, out of the way) */
static struct ibv_mr *reg_v11(struct ibv_pd *pd, void *buf, size_t len,
			      int acc, const char *name)
{
	char cname[64];
	struct ibv_mr *mr;

	snprintf(cname, sizeof(cname), "reg_mr.%s", name);
	hm_step(cname);
	mr = (ibv_reg_mr)(pd, buf, len, acc);
	if (!mr)
		hm_fatal(cname, "ibv_reg_mr(len=%zu, access=0x%x): %s", len,
			 acc, strerror(errno));
	hm_check(mr->addr == buf && mr->length == len && mr->pd == pd, cname,
		 "len=%zu lkey=0x%x rkey=0x%x", len, mr->lkey, mr->rkey);
	return mr;
}

/* the first line of a small sysfs file, without its newline ("" when unreadable) */
static void read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	buf[0] = 0;
	if (f) {
		if (!fgets(buf, (int)len, f))
			buf[0] = 0;
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = 0;
}

/* NCCL's sysfs reads for the device (ncclIbGetPciPath, the topology's
 * getPciPath, ncclIbGetGidIndex): under /sys/class when it shows the device
 * (hematite-run's overlay, as root), else under $SYSFS_PATH/class */
static void nccl_sysfs(const char *dev, int gidx)
{
	char base[512], p[1024], q[1100], t[64];
	char *pci = NULL, *via = NULL;
	const char *sp = getenv("SYSFS_PATH");
	int numa = -2, ok;

	hm_step("sysfs reads");
	snprintf(base, sizeof(base), "/sys/class");
	snprintf(p, sizeof(p), "%s/infiniband/%s/device", base, dev);
	if (access(p, F_OK) && sp) {
		snprintf(base, sizeof(base), "%s/class", sp);
		snprintf(p, sizeof(p), "%s/infiniband/%s/device", base, dev);
	}
	pci = realpath(p, NULL);
	if (!pci)
		hm_fatal("sysfs.pci_path", "realpath(%s): %s", p, strerror(errno));
	const char *bdf = strrchr(pci, '/') ? strrchr(pci, '/') + 1 : pci;
	unsigned dom, bus, sl, fn;
	ok = strlen(bdf) == 12 && sscanf(bdf, "%4x:%2x:%2x.%1x", &dom, &bus, &sl, &fn) == 4;
	if (ok) {
		/* the topology's lookup: /sys/class/pci_bus/<domain:bus>/../../<BDF> */
		snprintf(q, sizeof(q), "%s/pci_bus/%.7s/../../%s", base, bdf, bdf);
		via = realpath(q, NULL);
	}
	snprintf(q, sizeof(q), "%s/numa_node", pci);
	read_line(q, t, sizeof(t));
	if (sscanf(t, "%d", &numa) != 1)
		numa = -2;
	hm_check(ok && via && strcmp(via, pci) == 0 && numa >= -1, "sysfs.pci_path",
		 "realpath of %s is %s (BDF %s), found again through pci_bus: %s, numa_node %d",
		 p, pci, ok ? bdf : "malformed", via ? (strcmp(via, pci) ? via : "yes") : "no", numa);
	snprintf(q, sizeof(q), "%s/class", pci);
	read_line(q, t, sizeof(t));
	hm_check(strncmp(t, "0x02", 4) == 0, "sysfs.class", "%s: %.8s (a network controller)", q, t);
	snprintf(q, sizeof(q), "%s/infiniband/%s/ports/1/gid_attrs/types/%d", base, dev, gidx);
	read_line(q, t, sizeof(t));
	hm_check(strcmp(t, "RoCE v2") == 0, "sysfs.gid_type", "%s: %s", q, t);
	free(pci);
	free(via);
}

/* a CQ on the completion channel (if any) whose cq_context is itself, as
 * wait_event checks */
static struct ibv_cq *create_cq(int cqe, const char *cname)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, cqe, NULL, chan, 0);

	if (!cq)
		hm_fatal(cname, "cqe=%d: %s", cqe, strerror(errno));
	cq->cq_context = cq;
	hm_check(cq->cqe >= cqe, cname, "cqe=%d", cq->cqe);
	return cq;
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_cq *cq,
				uint32_t recv_wr, uint32_t inl,
				const char *name)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	char cname[64];

	snprintf(cname, sizeof(cname), "create_qp.%s", name);
	ia = hm_qp_attr(cq, cq, IBV_QPT_RC, QP_SEND_WR, recv_wr, 1, 1, inl);
	hm_step(cname);
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		hm_fatal(cname, "ibv_create_qp(send_wr=%u recv_wr=%u sge=1 "
			 "inline=%u): %s", QP_SEND_WR, recv_wr, inl,
			 strerror(errno));
	if (qp->qp_num == 0 || qp->qp_num > 0xffffff || qp->state != IBV_QPS_RESET ||
	    qp->qp_type != IBV_QPT_RC || qp->send_cq != cq || qp->recv_cq != cq ||
	    qp->pd != pd || qp->context != ctx ||
	    ia.cap.max_send_wr < QP_SEND_WR || ia.cap.max_recv_wr < recv_wr ||
	    ia.cap.max_inline_data < inl)
		hm_fail(cname, "bad QP fields: qp_num=0x%x state=%d type=%d "
			"cqs_ok=%d pd_ok=%d ctx_ok=%d cap.send_wr=%u "
			"cap.recv_wr=%u cap.inline=%u", qp->qp_num, qp->state,
			qp->qp_type, qp->send_cq == cq && qp->recv_cq == cq,
			qp->pd == pd, qp->context == ctx, ia.cap.max_send_wr,
			ia.cap.max_recv_wr, ia.cap.max_inline_data);
	else
		hm_ok(cname, "qpn=0x%x max_send_wr=%u max_recv_wr=%u "
		      "max_inline_data=%u", qp->qp_num, ia.cap.max_send_wr,
		      ia.cap.max_recv_wr, ia.cap.max_inline_data);
	return qp;
}

static void connect_qp(struct ibv_qp *qp, const char *name, enum ibv_mtu mtu,
		       uint32_t dqpn, uint32_t rq_psn, uint32_t sq_psn,
		       const union ibv_gid *dgid)
{
	struct hm_rtr_args r;
	char cname[64];
	int rc;

	r = hm_rtr_to(mtu, dqpn, rq_psn, dgid, opt.gidx, 1);
	r.hop_limit = 255;
	r.traffic_class = (uint8_t)opt.tclass;
	snprintf(cname, sizeof(cname), "modify_qp.rtr.%s", name);
	hm_step(cname);
	rc = hm_qp_rtr(qp, &r);
	if (rc)
		hm_fatal(cname, "INIT->RTR (dest_qpn=0x%x mtu=%d): %s", dqpn,
			 hm_mtu_bytes(mtu), strerror(rc));
	hm_ok(cname, "dest_qpn=0x%x rq_psn=0x%x", dqpn, rq_psn);

	snprintf(cname, sizeof(cname), "modify_qp.rts.%s", name);
	hm_step(cname);
	rc = hm_qp_rts(qp, sq_psn, 20, 7, 7, 1);
	if (rc)
		hm_fatal(cname, "RTR->RTS: %s", strerror(rc));
	hm_ok(cname, "sq_psn=0x%x", sq_psn);
}

int main(int argc, char **argv)
{
	struct ibv_device **devlist;
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	union ibv_gid my_gid, peer_gid;
	struct ibv_pd *pd;
	struct ibv_mr *sbuf_mr, *rbuf_mr, *fifo_mr, *cts_mr, *flush_mr;
	uint8_t *sbuf, *rbuf, *flush_buf;
	struct cts_elem *fifo, *ctsbuf;
	size_t slot_sz, sbuf_len, rbuf_len, fifo_len;
	struct conn_info me, peer;
	pthread_t athr;
	int c, fd, rc, n, i;
	char gs[64];
	uint32_t send_psn, recv_psn;
	unsigned qp_access;

	hm_init_common(argv[0]);
	while ((c = getopt(argc, argv, "d:g:p:t:n:s:T:q:Ieh")) != -1) {
		if (hm_common_opt(c, &opt.dev, &opt.gidx, &opt.port))
			continue;
		switch (c) {
		case 'n': opt.iters = atoi(optarg); break;
		case 's': opt.size = (size_t)strtoull(optarg, NULL, 0); break;
		case 'T': opt.tclass = atoi(optarg); break;
		case 'q': opt.depth = atoi(optarg); break;
		case 'I': opt.use_inline = 1; break;
		case 'e': opt.events = 1; break;
		default: usage();
		}
	}
	if (optind < argc)
		opt.host = argv[optind++];
	if (optind < argc || opt.iters < 1 || opt.depth < 1 ||
	    opt.depth > MAX_DEPTH || hm_timeout_s < 1 || opt.tclass < 0 ||
	    opt.tclass > 255 || opt.size > (1u << 30))
		usage();
	role = opt.host ? 1 : 0;
	hm_info("%s role=%s dev=%s gidx=%d iters=%d size=%zu depth=%d inline=%d "
		"events=%d tclass=%d", hm_prog, role ? "client" : "server",
		opt.dev ? opt.dev : "(first)", opt.gidx, opt.iters, opt.size,
		opt.depth, opt.use_inline, opt.events, opt.tclass);

	/* --- ncclIbInit: fork protection, device discovery --- */
	hm_step("ibv_fork_init");
	rc = ibv_fork_init();
	hm_check(rc == 0, "fork_init", "ibv_fork_init: %s", rc ? strerror(rc) : "0");
	ctx = hm_open_device(opt.dev, &devlist);
	hm_ok("open_device", "name=%s", ibv_get_device_name(ctx->device));

	memset(&dattr, 0, sizeof(dattr));
	hm_step("ibv_query_device");
	rc = ibv_query_device(ctx, &dattr);
	if (rc)
		hm_fatal("query_device", "ibv_query_device: %s", strerror(rc));
	hm_check(dattr.max_qp > 0 && dattr.max_qp_wr >= QP_SEND_WR &&
			 dattr.max_cqe >= RECV_CQE && dattr.max_sge >= 1 &&
			 dattr.phys_port_cnt >= 1,
		 "query_device",
		 "max_qp=%d max_qp_wr=%d max_cqe=%d max_sge=%d "
		 "max_qp_rd_atom=%d atomic_cap=%d phys_port_cnt=%u "
		 "sys_image_guid=0x%016llx vendor_id=0x%x vendor_part_id=0x%x",
		 dattr.max_qp, dattr.max_qp_wr, dattr.max_cqe, dattr.max_sge,
		 dattr.max_qp_rd_atom, dattr.atomic_cap, dattr.phys_port_cnt,
		 (unsigned long long)be64toh(dattr.sys_image_guid),
		 dattr.vendor_id, dattr.vendor_part_id);

	memset(&pattr, 0, sizeof(pattr));
	hm_step("ibv_query_port");
	rc = ibv_query_port(ctx, 1, &pattr);
	if (rc)
		hm_fatal("query_port", "ibv_query_port(1): %s", strerror(rc));
	if (pattr.state != IBV_PORT_ACTIVE ||
	    pattr.link_layer != IBV_LINK_LAYER_ETHERNET)
		hm_fatal("query_port", "port 1 state=%s link_layer=%d: NCCL "
			 "needs an ACTIVE Ethernet port",
			 ibv_port_state_str(pattr.state), pattr.link_layer);
	hm_ok("query_port", "state=ACTIVE link_layer=Ethernet active_mtu=%d "
	      "max_mtu=%d gid_tbl_len=%d active_speed=%u active_width=%u",
	      hm_mtu_bytes(pattr.active_mtu), hm_mtu_bytes(pattr.max_mtu),
	      pattr.gid_tbl_len, pattr.active_speed, pattr.active_width);

	/* NCCL queries every GID index below gid_tbl_len */
	{
		int bad = 0, nonzero = 0;

		if (pattr.gid_tbl_len < 1)
			hm_fatal("query_gid", "gid_tbl_len=%d", pattr.gid_tbl_len);
		for (i = 0; i < pattr.gid_tbl_len; i++) {
			union ibv_gid g;

			hm_step("ibv_query_gid");
			rc = ibv_query_gid(ctx, 1, i, &g);
			if (rc) {
				bad++;
				hm_fail("query_gid", "index %d: rc=%d errno=%s",
					i, rc, hm_errname(errno));
				continue;
			}
			if (!hm_gid_is_zero(&g))
				nonzero++;
			hm_info("gid[%d]=%s", i, hm_gid_str(&g, gs, sizeof(gs)));
		}
		if (!bad)
			hm_ok("query_gid", "count=%d nonzero=%d",
			      pattr.gid_tbl_len, nonzero);
		if (opt.gidx < 0 || opt.gidx >= pattr.gid_tbl_len)
			hm_fatal("gid_index", "-g %d outside gid_tbl_len %d",
				 opt.gidx, pattr.gid_tbl_len);
		if (ibv_query_gid(ctx, 1, opt.gidx, &my_gid) ||
		    hm_gid_is_zero(&my_gid))
			hm_fatal("gid_index", "GID %d is empty or unreadable",
				 opt.gidx);
		hm_ok("gid_index", "gidx=%d gid=%s", opt.gidx,
		      hm_gid_str(&my_gid, gs, sizeof(gs)));
	}
	nccl_sysfs(ibv_get_device_name(ctx->device), opt.gidx);

	/* the async thread NCCL keeps on ibv_get_async_event */
	athr = hm_start_async(ctx, on_async_event, 1);

	hm_step("ibv_alloc_pd");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		hm_fatal("alloc_pd", "%s", strerror(errno));
	hm_ok("alloc_pd", "%s", "");

	/* --- reg.cc: page-aligned buffers, reg_mr_iova2 with iova=addr --- */
	slot_sz = opt.size ? opt.size : 1;
	sbuf_len = hm_page_round(slot_sz * (size_t)opt.depth);
	rbuf_len = sbuf_len;
	sbuf = hm_alloc_pages(sbuf_len);
	rbuf = hm_alloc_pages(rbuf_len);
	fifo_len = hm_page_round(sizeof(struct cts_elem) * MAX_RECVS * MAX_DEPTH);
	fifo = hm_alloc_pages(fifo_len);
	ctsbuf = hm_alloc_pages(fifo_len);
	flush_buf = hm_alloc_pages(MAX_DEPTH);
	sbuf_mr = reg_buf(pd, sbuf, sbuf_len, "send_buf");
	rbuf_mr = reg_buf(pd, rbuf, rbuf_len, "recv_buf");
	fifo_mr = reg_v11(pd, fifo, fifo_len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ, "cts_fifo");
	cts_mr = reg_v11(pd, ctsbuf, fifo_len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_REMOTE_READ, "cts_src");
	flush_mr = reg_v11(pd, flush_buf, MAX_DEPTH, IBV_ACCESS_LOCAL_WRITE, "flush_host");

	/* NCCL probes DMA-BUF support with fd -1: it must fail */
	{
		struct ibv_mr *dm;

		errno = 0;
		hm_step("ibv_reg_dmabuf_mr");
		dm = ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1,
				       IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_WRITE |
					       IBV_ACCESS_REMOTE_READ);
		if (dm) {
			hm_fail("reg_dmabuf_mr_probe",
				"ibv_reg_dmabuf_mr(fd=-1) succeeded");
			ibv_dereg_mr(dm);
		} else {
			hm_ok("reg_dmabuf_mr_probe", "errno=%s",
			      hm_errname(errno));
		}
	}

	/* --- connect.cc: CQs, QPs, INIT --- */
	if (opt.events) {
		hm_step("ibv_create_comp_channel");
		chan = ibv_create_comp_channel(ctx);
		if (!chan)
			hm_fatal("create_comp_channel", "%s (the provider "
				 "must be LD_PRELOADed for comp channels)",
				 strerror(errno));
		hm_ok("create_comp_channel", "fd=%d", chan->fd);
	}
	hm_step("ibv_create_cq");
	scq = create_cq(SEND_CQE, "create_cq.send");
	rcq = create_cq(RECV_CQE, "create_cq.recv");

	sqp = create_qp(pd, scq, 0, 0, "send");
	rqp = create_qp(pd, rcq, QP_RECV_WR,
			opt.use_inline ? (uint32_t)(sizeof(struct cts_elem) * MAX_RECVS) : 0,
			"recv");
	fqp = create_qp(pd, rcq, 0, 0, "flush");

	hm_step("ibv_modify_qp (INIT)");
	qp_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		    IBV_ACCESS_REMOTE_READ;
	for (i = 0; i < 2; i++) {
		const char *cname = i ? "modify_qp.init.recv" :
					"modify_qp.init.send";

		rc = hm_qp_init(i ? rqp : sqp, qp_access);
		if (rc)
			hm_fatal(cname, "RESET->INIT: %s", strerror(rc));
		hm_ok(cname, "%s", "");
	}
	rc = hm_qp_init(fqp, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	if (rc)
		hm_fatal("modify_qp.init.flush", "RESET->INIT: %s", strerror(rc));
	hm_ok("modify_qp.init.flush", "%s", "");

	/* --- exchange: PSN 0 (as NCCL), the QPs' ECE --- */
	send_psn = 0;
	recv_psn = 0;
	memset(&me, 0, sizeof(me));
	me.magic = htonl(MAGIC);
	me.version = htonl(VERSION);
	me.send_qpn = htonl(sqp->qp_num);
	me.recv_qpn = htonl(rqp->qp_num);
	me.send_psn = htonl(send_psn);
	me.recv_psn = htonl(recv_psn);
	me.iters = htonl((uint32_t)opt.iters);
	me.size = htonl((uint32_t)opt.size);
	me.depth = htonl((uint32_t)opt.depth);
	me.role = htonl((uint32_t)role);
	me.fifo_addr = htobe64((uint64_t)(uintptr_t)fifo);
	me.fifo_rkey = htonl(fifo_mr->rkey);
	memcpy(me.gid, my_gid.raw, 16);
	for (i = 0; i < 2; i++) {
		struct ibv_ece e;

		memset(&e, 0, sizeof(e));
		hm_step("ibv_query_ece");
		rc = ibv_query_ece(i ? rqp : sqp, &e);
		if (rc && rc != EOPNOTSUPP)
			hm_fatal("query_ece", "%s QP: %s", i ? "recv" : "send", strerror(rc));
		me.ece_ok[i] = htonl(rc == 0);
		me.ece_vendor[i] = htonl(e.vendor_id);
		me.ece_options[i] = htonl(e.options);
	}

	fd = role ? hm_tcp_connect(opt.host, opt.port) : hm_tcp_accept(opt.port);
	hm_tcp_send(fd, &me, sizeof(me), "connection info");
	hm_tcp_recv(fd, &peer, sizeof(peer), "peer connection info");
	if (ntohl(peer.magic) != MAGIC || ntohl(peer.version) != VERSION)
		hm_fatal("exchange", "peer is not hm_nccl_replay v%d", VERSION);
	if (ntohl(peer.iters) != (uint32_t)opt.iters ||
	    ntohl(peer.size) != (uint32_t)opt.size ||
	    ntohl(peer.depth) != (uint32_t)opt.depth)
		hm_fatal("exchange", "peer runs -n %u -s %u -q %u, we run -n %d "
			 "-s %zu -q %d", ntohl(peer.iters), ntohl(peer.size),
			 ntohl(peer.depth), opt.iters, opt.size, opt.depth);
	if (ntohl(peer.role) == (uint32_t)role)
		hm_fatal("exchange", "both sides are %s",
			 role ? "clients" : "servers");
	memcpy(peer_gid.raw, peer.gid, 16);
	hm_ok("exchange", "peer_send_qpn=0x%x peer_recv_qpn=0x%x peer_gid=%s",
	      ntohl(peer.send_qpn), ntohl(peer.recv_qpn),
	      hm_gid_str(&peer_gid, gs, sizeof(gs)));

	/* the peer's ECE on the QP connected to it (its recv QP's on my send QP,
	 * and the other way), then the options left: those both support */
	{
		int bad = 0, set = 0;
		uint32_t vend = 0, opts = 0;

		for (i = 0; i < 2; i++) {
			struct ibv_qp *q = i ? rqp : sqp;
			int pi = !i;
			struct ibv_ece e;

			if (!ntohl(peer.ece_ok[pi]))
				continue;
			memset(&e, 0, sizeof(e));
			e.vendor_id = ntohl(peer.ece_vendor[pi]);
			e.options = ntohl(peer.ece_options[pi]);
			hm_step("ibv_set_ece");
			rc = ibv_set_ece(q, &e);
			if (rc && rc != EOPNOTSUPP) {
				bad++;
				hm_info("ibv_set_ece: %s", strerror(rc));
				continue;
			}
			set += rc == 0;
			rc = ibv_query_ece(q, &e);
			bad += rc != 0 || e.vendor_id != dattr.vendor_id;
			vend = e.vendor_id;
			opts |= e.options;
		}
		hm_check(!bad && set == 2 && opts == 0, "ece",
			 "ibv_query_ece / ibv_set_ece on both QPs: vendor 0x%x, options after the exchange 0x%x (none in common)",
			 vend, opts);
	}

	/* my send QP <-> peer recv QP, my recv QP <-> peer send QP, the flush QP
	 * to itself */
	connect_qp(sqp, "send", pattr.active_mtu, ntohl(peer.recv_qpn),
		   ntohl(peer.recv_psn), send_psn, &peer_gid);
	connect_qp(rqp, "recv", pattr.active_mtu, ntohl(peer.send_qpn),
		   ntohl(peer.send_psn), recv_psn, &peer_gid);
	connect_qp(fqp, "flush", pattr.active_mtu, fqp->qp_num, 0, 0, &my_gid);
	{
		enum ibv_qp_state st1 = IBV_QPS_UNKNOWN, st2 = IBV_QPS_UNKNOWN;
		int q1 = hm_query_qp_state(sqp, &st1);
		int q2 = hm_query_qp_state(rqp, &st2);

		hm_check(!q1 && !q2 && st1 == IBV_QPS_RTS && st2 == IBV_QPS_RTS,
			 "query_qp.rts", "send=%s recv=%s rc=%d/%d",
			 hm_qp_state_str(st1), hm_qp_state_str(st2), q1, q2);
	}
	hm_barrier(fd, 0x10, "peer QPs in RTS");

	/* --- p2p: data path (ncclIbIrecv / ncclIbPostFifo, ncclIbIsend /
	 * ncclIbMultiSend, ncclIbIflush, ncclIbTest) --- */
	{
		uint64_t peer_fifo = be64toh(peer.fifo_addr);
		uint32_t peer_fifo_rkey = ntohl(peer.fifo_rkey);
		int s_posted = 0, s_done = 0; /* sender side */
		int r_posted = 0, r_done = 0; /* receiver side: posted, verified */
		int r_freed = 0;              /* slots given back (verified and flushed) */
		int f_posted = 0, f_done = 0, f_expected = 0, flush_bad = 0;
		static int flushed[MAX_DEPTH]; /* per slot: its flush completed */
		static int need_flush[MAX_DEPTH];
		int cts_expected = 0, cts_done = 0;
		int peer_dir = !role;
		uint64_t t0, t1, dl, bytes = 0, unsig_posted = 0;
		unsigned empty = 0;
		int unsig_cqe = 0, recv_bad = 0, send_bad = 0, data_bad = 0;
		int n_multi = 0, n_ar = 0, n_empty = 0;

		for (i = 0; i < opt.iters; i++) {
			struct shape sh;

			iter_shape(i, opt.size, &sh);
			cts_expected += i % opt.depth == 0;
			f_expected += sh.total > 0;
			n_multi += sh.nreqs > 1;
			n_ar += sh.ar;
			n_empty += sh.total == 0;
		}

		if (opt.events)
			arm_cqs();
		t0 = hm_now_us();
		dl = hm_deadline();
		while (s_done < opt.iters || r_freed < opt.iters ||
		       cts_done < cts_expected) {
			struct ibv_wc wc[16];
			int progress = 0;

			hm_step("data path (ibv_post_send/ibv_post_recv/"
				"ibv_poll_cq)");

			/* receiver: a slot is given back once verified and flushed */
			while (r_freed < r_done) {
				int sl = r_freed % opt.depth;

				if (need_flush[sl] && !flushed[sl])
					break;
				r_freed++;
				progress = 1;
			}

			/* receiver: post a receive + the CTS of the slot's requests */
			while (r_posted < opt.iters &&
			       r_posted - r_freed < opt.depth) {
				int it = r_posted, slot = it % opt.depth;
				struct ibv_recv_wr rwr, *bad_rwr = NULL;
				struct ibv_send_wr swr, *bad_swr = NULL;
				struct ibv_sge sge;
				struct cts_elem *ce = &ctsbuf[slot * MAX_RECVS];
				struct shape sh;
				int sig = slot == 0;

				iter_shape(it, opt.size, &sh);
				memset(rbuf + (size_t)slot * slot_sz, 0xee, slot_sz);
				memset(&rwr, 0, sizeof(rwr));
				rwr.wr_id = TAG_RECV | (uint64_t)it;
				rwr.sg_list = NULL;
				rwr.num_sge = 0;
				rc = ibv_post_recv(rqp, &rwr, &bad_rwr);
				if (rc)
					hm_fatal("post_recv", "iteration %d "
						 "zero-SGE receive: %s", it,
						 strerror(rc));
				for (int r = 0; r < sh.nreqs; r++) {
					ce[r].addr = (uint64_t)(uintptr_t)(rbuf + (size_t)slot * slot_sz + (size_t)r * sh.cap);
					ce[r].rkey = rbuf_mr->rkey;
					ce[r].size = (uint32_t)sh.cap;
					ce[r].nreqs = (uint32_t)sh.nreqs;
					ce[r].iter = (uint32_t)it;
					ce[r].idx = (uint32_t)it + 1;
				}
				sge.addr = (uint64_t)(uintptr_t)ce;
				sge.length = (uint32_t)(sizeof(*ce) * (size_t)sh.nreqs);
				sge.lkey = cts_mr->lkey;
				memset(&swr, 0, sizeof(swr));
				swr.wr_id = TAG_CTS | (uint64_t)it;
				swr.sg_list = &sge;
				swr.num_sge = 1;
				swr.opcode = IBV_WR_RDMA_WRITE;
				swr.send_flags = (sig ? IBV_SEND_SIGNALED : 0) |
						 (opt.use_inline ? IBV_SEND_INLINE : 0);
				swr.wr.rdma.remote_addr = peer_fifo +
					(uint64_t)slot * MAX_RECVS * sizeof(struct cts_elem);
				swr.wr.rdma.rkey = peer_fifo_rkey;
				rc = ibv_post_send(rqp, &swr, &bad_swr);
				if (rc)
					hm_fatal("post_send.cts", "iteration %d: %s",
						 it, strerror(rc));
				if (!sig)
					unsig_posted++;
				need_flush[slot] = sh.total > 0;
				flushed[slot] = 0;
				r_posted++;
				progress = 1;
			}

			/* sender: every request of the slot arrived? then post them */
			if (s_posted < opt.iters && s_posted - s_done < opt.depth) {
				int it = s_posted, slot = it % opt.depth;
				volatile struct cts_elem *ce = &fifo[slot * MAX_RECVS];
				struct shape sh;
				int all = ce[0].idx == (uint32_t)it + 1;

				iter_shape(it, opt.size, &sh);
				for (int r = 1; all && r < sh.nreqs; r++)
					all = ce[r].idx == (uint32_t)it + 1;
				if (all) {
					struct ibv_send_wr wr[MAX_CHAIN], *bad = NULL, *last;
					struct ibv_sge sg[MAX_CHAIN];
					uint8_t *src = sbuf + (size_t)slot * slot_sz;
					int nwr;

					__atomic_thread_fence(__ATOMIC_ACQUIRE);
					if (ce[0].nreqs != (uint32_t)sh.nreqs)
						detail_fail("cts_content", "iteration %d: %u requests, want %d",
							    it, ce[0].nreqs, sh.nreqs);
					fill_pattern(src, sh.cap * (size_t)sh.nreqs, role, it);
					memset(wr, 0, sizeof(wr));
					for (int r = 0; r < sh.nreqs; r++) {
						if (ce[r].size < sh.len[r] || ce[r].iter != (uint32_t)it ||
						    !ce[r].addr || !ce[r].rkey)
							detail_fail("cts_content", "iteration %d request %d: size %u (need %zu) iter %u addr %s rkey %s",
								    it, r, ce[r].size, sh.len[r], ce[r].iter,
								    ce[r].addr ? "set" : "0", ce[r].rkey ? "set" : "0");
						wr[r].wr_id = TAG_UNSIG | ((uint64_t)it << 8) | (uint64_t)r;
						wr[r].opcode = IBV_WR_RDMA_WRITE;
						wr[r].send_flags = 0;
						wr[r].wr.rdma.remote_addr = ce[r].addr;
						wr[r].wr.rdma.rkey = ce[r].rkey;
						wr[r].next = &wr[r + 1];
						if (sh.len[r]) {
							sg[r].addr = (uint64_t)(uintptr_t)(src + (size_t)r * sh.cap);
							sg[r].length = (uint32_t)sh.len[r];
							sg[r].lkey = sbuf_mr->lkey;
							wr[r].sg_list = &sg[r];
							wr[r].num_sge = 1;
						} else {
							wr[r].sg_list = NULL;
							wr[r].num_sge = 0;
						}
					}
					last = &wr[sh.nreqs - 1];
					if (sh.zero_final) {
						/* the zero-length WRITE_WITH_IMM: no SGE, address 0, rkey 0 */
						last++;
						memset(last, 0, sizeof(*last));
						unsig_posted += (uint64_t)sh.nreqs;
					}
					last->wr_id = TAG_DATA | (uint64_t)it;
					last->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
					last->imm_data = sh.imm;
					last->next = NULL;
					last->send_flags = IBV_SEND_SIGNALED;
					nwr = (int)(last - wr) + 1;
					rc = ibv_post_send(sqp, &wr[0], &bad);
					if (rc)
						hm_fatal("post_send.data",
							 "iteration %d, %d WRs: %s "
							 "(bad_wr index %ld)", it,
							 nwr, strerror(rc),
							 bad ? (long)(bad - wr) : -1L);
					bytes += sh.total;
					s_posted++;
					progress = 1;
				}
			}

			/* sender completions */
			n = poll_batch(scq, wc, "poll_cq.send", &progress);
			for (int j = 0; j < n; j++) {
				struct ibv_wc *w = &wc[j];

				if ((w->wr_id & TAG_MASK) == TAG_UNSIG) {
					unsig_cqe++;
					detail_fail("unsignaled_cqe",
						    "send CQ returned a CQE for "
						    "unsignaled wr_id=0x%llx "
						    "status=%s",
						    (unsigned long long)w->wr_id,
						    ibv_wc_status_str(w->status));
					continue;
				}
				if (w->status != IBV_WC_SUCCESS ||
				    w->opcode != IBV_WC_RDMA_WRITE ||
				    w->wr_id != (TAG_DATA | (uint64_t)s_done) ||
				    w->qp_num != sqp->qp_num) {
					send_bad++;
					detail_fail("send_completion",
						    "expected iteration %d: "
						    "status=%s opcode=%d (want %d) "
						    "wr_id=0x%llx (want 0x%llx) "
						    "qp_num=0x%x (want 0x%x) "
						    "vendor_err=0x%x", s_done,
						    ibv_wc_status_str(w->status),
						    w->opcode, IBV_WC_RDMA_WRITE,
						    (unsigned long long)w->wr_id,
						    (unsigned long long)(TAG_DATA | (uint64_t)s_done),
						    w->qp_num, sqp->qp_num,
						    w->vendor_err);
					if (w->status != IBV_WC_SUCCESS)
						hm_fatal("send_completion",
							 "error completion, "
							 "QP is dead");
				}
				s_done++;
			}

			/* receiver CQ: data arrivals, CTS writes and flushes */
			n = poll_batch(rcq, wc, "poll_cq.recv", &progress);
			for (int j = 0; j < n; j++) {
				struct ibv_wc *w = &wc[j];

				if (w->status != IBV_WC_SUCCESS)
					hm_fatal("recv_cq_completion",
						 "status=%s wr_id=0x%llx "
						 "opcode=%d vendor_err=0x%x",
						 ibv_wc_status_str(w->status),
						 (unsigned long long)w->wr_id,
						 w->opcode, w->vendor_err);
				if ((w->wr_id & TAG_MASK) == TAG_CTS) {
					uint64_t want = TAG_CTS | (uint64_t)(cts_done * opt.depth);

					if (w->opcode != IBV_WC_RDMA_WRITE ||
					    w->wr_id != want ||
					    w->qp_num != rqp->qp_num) {
						unsig_cqe += w->wr_id != want;
						detail_fail("cts_completion",
							    "opcode=%d wr_id=0x%llx "
							    "(want 0x%llx: only the CTS "
							    "of slot 0 is signaled) "
							    "qp_num=0x%x",
							    w->opcode,
							    (unsigned long long)w->wr_id,
							    (unsigned long long)want,
							    w->qp_num);
					}
					cts_done++;
					continue;
				}
				if ((w->wr_id & TAG_MASK) == TAG_FLUSH) {
					int it = (int)(w->wr_id & 0xffffffffu), slot = it % opt.depth;
					struct shape sh;
					int last;

					iter_shape(it, opt.size, &sh);
					last = sh.last;
					if (w->opcode != IBV_WC_RDMA_READ || w->byte_len != 1 ||
					    w->qp_num != fqp->qp_num || it >= r_done ||
					    flush_buf[slot] != pat(peer_dir, it, (size_t)last * sh.cap)) {
						flush_bad++;
						detail_fail("flush", "iteration %d: opcode %d byte_len %u qp 0x%x (want 0x%x), byte 0x%02x (want 0x%02x)",
							    it, w->opcode, w->byte_len, w->qp_num, fqp->qp_num,
							    flush_buf[slot], pat(peer_dir, it, (size_t)last * sh.cap));
					}
					flushed[slot] = 1;
					f_done++;
					continue;
				}
				{
					int it = r_done, slot = it % opt.depth;
					struct shape sh;
					const uint8_t *dst = rbuf + (size_t)slot * slot_sz;
					long bad_off = -1;

					iter_shape(it, opt.size, &sh);
					if (w->opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
					    !(w->wc_flags & IBV_WC_WITH_IMM) ||
					    w->imm_data != sh.imm ||
					    w->qp_num != rqp->qp_num ||
					    w->wr_id != (TAG_RECV | (uint64_t)it) ||
					    w->byte_len != sh.final_len) {
						recv_bad++;
						detail_fail("recv_completion",
							    "iteration %d: opcode=%d "
							    "(want %d) wc_flags=0x%x "
							    "imm=%u (want %u) "
							    "qp_num=0x%x (want 0x%x) "
							    "wr_id=0x%llx (want 0x%llx) "
							    "byte_len=%u (want %zu, the "
							    "WRITE_WITH_IMM's)",
							    it, w->opcode,
							    IBV_WC_RECV_RDMA_WITH_IMM,
							    w->wc_flags, w->imm_data,
							    sh.imm, w->qp_num,
							    rqp->qp_num,
							    (unsigned long long)w->wr_id,
							    (unsigned long long)(TAG_RECV | (uint64_t)it),
							    w->byte_len, sh.final_len);
					}
					/* each request's bytes, and nothing beyond them */
					for (size_t k = 0; k < slot_sz && bad_off < 0; k++) {
						size_t r = sh.cap ? k / sh.cap : 0;
						int in = r < (size_t)sh.nreqs && k - r * sh.cap < sh.len[r];
						uint8_t want = in ? pat(peer_dir, it, k) : 0xee;

						if (dst[k] != want)
							bad_off = (long)k;
					}
					if (bad_off >= 0) {
						size_t r = sh.cap ? (size_t)bad_off / sh.cap : 0;
						int in = r < (size_t)sh.nreqs && (size_t)bad_off - r * sh.cap < sh.len[r];

						data_bad++;
						detail_fail("data_verify",
							    "iteration %d (%d requests, %zu bytes): "
							    "byte %ld is 0x%02x, want 0x%02x",
							    it, sh.nreqs, sh.total, bad_off,
							    dst[bad_off], in ? pat(peer_dir, it, (size_t)bad_off) : 0xee);
					}
					r_done++;
					/* the flush: one byte of the last non-empty request, read
					 * back through the QP connected to itself */
					if (sh.total) {
						struct ibv_send_wr fw, *fbad = NULL;
						struct ibv_sge fs;

						flush_buf[slot] = 0;
						fs.addr = (uint64_t)(uintptr_t)&flush_buf[slot];
						fs.length = 1;
						fs.lkey = flush_mr->lkey;
						memset(&fw, 0, sizeof(fw));
						fw.wr_id = TAG_FLUSH | (uint64_t)it;
						fw.sg_list = &fs;
						fw.num_sge = 1;
						fw.opcode = IBV_WR_RDMA_READ;
						fw.send_flags = IBV_SEND_SIGNALED;
						fw.wr.rdma.remote_addr = (uint64_t)(uintptr_t)(dst + (size_t)sh.last * sh.cap);
						fw.wr.rdma.rkey = rbuf_mr->rkey;
						rc = ibv_post_send(fqp, &fw, &fbad);
						if (rc)
							hm_fatal("post_send.flush", "iteration %d: %s", it, strerror(rc));
						f_posted++;
					}
				}
			}

			if (progress) {
				empty = 0;
				dl = hm_deadline();
				continue;
			}
			if (hm_now_us() >= dl) {
				if (s_posted < opt.iters && s_posted == s_done)
					hm_timeout("CTS from peer for iteration "
						   "%d (sender side)", s_posted);
				if (s_done < s_posted)
					hm_timeout("send completion of iteration "
						   "%d", s_done);
				if (r_done < opt.iters)
					hm_timeout("RECV_RDMA_WITH_IMM for "
						   "iteration %d", r_done);
				if (f_done < f_posted)
					hm_timeout("flush READ of iteration %d", r_freed);
				hm_timeout("signaled CTS completion %d of %d",
					   cts_done + 1, cts_expected);
			}
			if (opt.events) {
				/* arm, re-poll (race), then sleep on the channel;
				 * the CTS slot is memory, so do not block long */
				if (scq_armed && rcq_armed)
					(void)wait_event(1);
				else
					arm_cqs();
			} else if (++empty > 32) {
				hm_sleep_us(50);
			}
		}
		t1 = hm_now_us();

		hm_check(!send_bad, "send_completions", "count=%d bad=%d",
			 s_done, send_bad);
		hm_check(!recv_bad, "recv_completions", "count=%d bad=%d",
			 r_done, recv_bad);
		hm_check(!data_bad, "data_verify", "iters=%d bad=%d (%d multi-receives, %d adaptive-routing form, %d empty)",
			 r_done, data_bad, n_multi, n_ar, n_empty);
		hm_check(!flush_bad && f_done == f_expected, "flush",
			 "%d of %d RDMA_READ flushes through the self-connected QP, %d bad", f_done, f_expected, flush_bad);
		hm_check(cts_done == cts_expected, "cts_completions",
			 "signaled=%d of posted=%d", cts_done, r_posted);

		/* unsignaled WRs must never produce a CQE, even late */
		{
			struct ibv_wc w;
			int extra = hm_poll_cq_quiet(scq, 300000, &w);
			int extra2 = hm_poll_cq_quiet(rcq, 300000, &w);

			if (extra || extra2)
				unsig_cqe += extra + extra2;
			hm_check(unsig_cqe == 0, "no_unsignaled_cqe",
				 "unsignaled_posted=%llu stray_cqes=%d",
				 (unsigned long long)unsig_posted, unsig_cqe);
		}

		{
			double secs = (double)(t1 - t0) / 1e6;

			hm_ok("data_path", "iters=%d size=%zu bytes=%llu "
			      "wall_ms=%.1f MBps=%.2f depth=%d inline=%d "
			      "events=%d", opt.iters, opt.size,
			      (unsigned long long)bytes, secs * 1e3,
			      secs > 0 ? (double)bytes / secs / 1e6 : 0.0,
			      opt.depth, opt.use_inline, opt.events);
		}

		/* A final signaled zero-length RDMA_WRITE (num_sge 0).  In -e
		 * mode the send CQ is armed first and we block on the channel:
		 * the completion must raise an event. */
		{
			struct ibv_send_wr wr, *bad = NULL;
			struct ibv_wc w;

			if (opt.events) {
				/* drain pending events, then arm the send CQ */
				while (wait_event(0))
					;
				arm_cqs();
			}
			memset(&wr, 0, sizeof(wr));
			wr.wr_id = TAG_EXTRA;
			wr.opcode = IBV_WR_RDMA_WRITE;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.sg_list = NULL;
			wr.num_sge = 0;
			wr.wr.rdma.remote_addr = peer_fifo;
			wr.wr.rdma.rkey = peer_fifo_rkey;
			rc = ibv_post_send(sqp, &wr, &bad);
			if (rc) {
				hm_fail("zero_len_write", "post: %s", strerror(rc));
			} else {
				if (opt.events) {
					uint64_t edl = hm_deadline();
					struct ibv_cq *got = NULL;

					hm_step("completion event for the send CQ");
					while (!got) {
						hm_step(hm_step_what);
						if (hm_now_us() >= edl)
							hm_timeout("completion event "
								   "for the send CQ");
						got = wait_event(100);
						if (got && got != scq)
							got = NULL;
					}
					hm_ok("cq_event_blocking", "events=%d",
					      cq_events);
				}
				n = hm_poll_cq_wait(scq, &w, 1,
						    "zero-length RDMA_WRITE");
				hm_check(w.status == IBV_WC_SUCCESS &&
						 w.opcode == IBV_WC_RDMA_WRITE &&
						 w.wr_id == TAG_EXTRA &&
						 w.qp_num == sqp->qp_num,
					 "zero_len_write",
					 "status=%s opcode=%d wr_id_ok=%d",
					 ibv_wc_status_str(w.status), w.opcode,
					 w.wr_id == TAG_EXTRA);
			}
		}
		if (opt.events)
			hm_check(cq_events > 0, "comp_events", "events=%d",
				 cq_events);
	}

	hm_barrier(fd, 0x20, "peer finished the data path");
	if (opt.events)
		while (wait_event(0))
			;

	/* --- teardown: QPs, CQs, MRs, PD, channel, device --- */
	HM_TEARDOWN("ibv_destroy_qp(send)", "destroy_qp.send", ibv_destroy_qp(sqp));
	HM_TEARDOWN("ibv_destroy_qp(recv)", "destroy_qp.recv", ibv_destroy_qp(rqp));
	HM_TEARDOWN("ibv_destroy_qp(flush)", "destroy_qp.flush", ibv_destroy_qp(fqp));
	HM_TEARDOWN("ibv_destroy_cq(send)", "destroy_cq.send", ibv_destroy_cq(scq));
	HM_TEARDOWN("ibv_destroy_cq(recv)", "destroy_cq.recv", ibv_destroy_cq(rcq));
	HM_TEARDOWN("ibv_dereg_mr", "dereg_mr",
		    ibv_dereg_mr(sbuf_mr) | ibv_dereg_mr(rbuf_mr) |
			    ibv_dereg_mr(fifo_mr) | ibv_dereg_mr(cts_mr) |
			    ibv_dereg_mr(flush_mr));
	HM_TEARDOWN("ibv_dealloc_pd", "dealloc_pd", ibv_dealloc_pd(pd));
	if (chan)
		HM_TEARDOWN("ibv_destroy_comp_channel", "destroy_comp_channel",
			    ibv_destroy_comp_channel(chan));
	hm_check(__atomic_load_n(&async_events, __ATOMIC_SEQ_CST) == 0,
		 "async_events", "count=%d", async_events);
	hm_close_device(athr, ctx, devlist);
	close(fd);
	free(sbuf);
	free(rbuf);
	free(fifo);
	free(ctsbuf);
	free(flush_buf);

	hm_summary();
	return hm_exit_code();
}
