/*
 * mockverbs.c - a stand-in for libibverbs + a provider, for checking the
 * test programs themselves when no RDMA device is at hand.  NOT a model of
 * Hematite: it implements the verbs the tests use, with the error behaviour
 * a kernel provider has, on top of a unix datagram socket per process.
 *
 * Devices: mock0 and mock1 (exclusive open per device, via flock).  The GID
 * carries the owner's pid, so a QP finds its peer's socket from the AV.
 * RC semantics: in-order execution per QP, RNR waits forever (requests wait
 * at the responder until a receive is posted), remote access errors NAK
 * and move both QPs to ERR, later WRs flush.  MRs are mlock()ed, so
 * RLIMIT_MEMLOCK applies.
 *
 * Build: gcc -shared -fPIC -O2 -o libmockverbs.so mockverbs.c -lpthread
 * Link a test against it instead of -libverbs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <endian.h>

#include <infiniband/verbs.h>

#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_get_device_list
#undef ibv_query_port

#define EXPORT __attribute__((visibility("default")))

#define NDEV 2
#define MAX_CQE 4096
#define MAX_QP_WR 1024
#define MAX_SGE 30
#define MAX_INLINE 480
#define MAX_MSG (1u << 20)
#define GID_TBL_LEN 2

enum { M_REQ = 1, M_RESP = 2 };

struct msg {
	uint32_t type, src_pid, src_qpn, dst_qpn;
	uint64_t seq;
	uint32_t opcode, rkey;
	uint64_t raddr, cmp, swap;
	uint32_t imm, len, status, pad;
	uint8_t data[];
};

struct mdev {
	struct ibv_device dev;
	int idx;
};

struct mctx {
	struct verbs_context vc;
	int lockfd;
	int apipe[2];
	int sock;
	pthread_t thr, sthr;
	volatile int stop;
	int ndevs_open;
};

struct mpd {
	struct ibv_pd pd;
	int refs;
};

struct mmr {
	struct ibv_mr mr;
	uint64_t iova;
	int access;
	int valid;
	struct mpd *pd;
};

struct mcq {
	struct ibv_cq cq;
	struct ibv_wc *ring;
	int size, head, count;
	int armed;
	int refs;
};

struct swr {           /* outstanding send WR */
	uint64_t wr_id;
	uint64_t seq;
	int opcode;
	int signaled;
	int done;
	uint32_t status;
	int nsge;
	struct ibv_sge sge[MAX_SGE];
	uint32_t len;
};

struct rwr {
	uint64_t wr_id;
	int nsge;
	struct ibv_sge sge[MAX_SGE];
};

struct pend {           /* request waiting at the responder */
	struct pend *next;
	struct msg *m;
	size_t n;
};

struct mqp {
	struct ibv_qp qp;
	struct ibv_qp_cap cap;
	int access;
	uint32_t dest_qpn;
	uint32_t dest_pid;
	uint64_t next_seq;
	struct swr *sq;   /* ring of max_send_wr */
	int sq_head, sq_count;
	struct rwr *rq;
	int rq_head, rq_count;
	struct pend *ph, *pt;
	int sq_sig_all;
};

static pthread_mutex_t big = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static struct mdev devs[NDEV];
static struct ibv_device *devlist[NDEV + 1];
static struct mmr *mrs[4096];
static struct mqp *qps[4096];
static uint32_t qpn_next = 0x40;
static struct mctx *the_ctx;
static pthread_mutex_t olk = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ocv = PTHREAD_COND_INITIALIZER;

/* MOCK_BUG=name injects a provider fault, to check that the tests see it */
static int bug(const char *name)
{
	const char *b = getenv("MOCK_BUG");

	return b && strstr(b, name) != NULL;
}

#define L() pthread_mutex_lock(&big)
#define U() pthread_mutex_unlock(&big)

/* ------------------------------------------------------------------ */

EXPORT void ibv_static_providers(void *unused, ...)
{
	(void)unused;
}

EXPORT struct ibv_device **ibv_get_device_list(int *n)
{
	for (int i = 0; i < NDEV; i++) {
		memset(&devs[i], 0, sizeof(devs[i]));
		snprintf(devs[i].dev.name, sizeof(devs[i].dev.name), "mock%d", i);
		snprintf(devs[i].dev.dev_name, sizeof(devs[i].dev.dev_name),
			 "uverbs%d", i);
		devs[i].dev.node_type = IBV_NODE_CA;
		devs[i].dev.transport_type = IBV_TRANSPORT_IB;
		devs[i].idx = i;
		devlist[i] = &devs[i].dev;
	}
	devlist[NDEV] = NULL;
	if (n)
		*n = NDEV;
	return devlist;
}

EXPORT void ibv_free_device_list(struct ibv_device **l)
{
	(void)l;
}

EXPORT const char *ibv_get_device_name(struct ibv_device *d)
{
	return d->name;
}

static void async_push(enum ibv_event_type t, void *elem)
{
	struct { void *e; uint32_t t, r; } rec = { elem, t, 0 };

	if (the_ctx && write(the_ctx->apipe[1], &rec, sizeof(rec)) < 0)
		perror("mock async");
}

EXPORT int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
	struct { void *e; uint32_t t, r; } rec;
	ssize_t n = read(c->async_fd, &rec, sizeof(rec));

	if (n != sizeof(rec)) {
		errno = n < 0 ? errno : EIO;
		return -1;
	}
	ev->event_type = rec.t;
	ev->element.qp = rec.e;
	return 0;
}

EXPORT void ibv_ack_async_event(struct ibv_async_event *ev)
{
	(void)ev;
}

/* ------------------------------------------------------------------ */
/* CQ                                                                  */

static int mock_chan_w[1024];

static void cq_push(struct mcq *cq, const struct ibv_wc *wc)
{
	if (cq->count == cq->size) {
		fprintf(stderr, "mock: CQ overflow\n");
		async_push(IBV_EVENT_CQ_ERR, cq);
		return;
	}
	cq->ring[(cq->head + cq->count) % cq->size] = *wc;
	cq->count++;
	if (cq->armed && cq->cq.channel && !bug("no_event")) {
		struct ibv_cq *p = &cq->cq;

		cq->armed = 0;
		if (write(mock_chan_w[cq->cq.channel->fd], &p, sizeof(p)) < 0)
			perror("mock channel");
	}
}

static int m_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct mcq *cq = (struct mcq *)ibcq;
	int k = 0;

	L();
	while (k < n && cq->count) {
		wc[k++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->size;
		cq->count--;
	}
	U();
	return k;
}

static int m_req_notify(struct ibv_cq *ibcq, int solicited)
{
	(void)solicited;
	L();
	((struct mcq *)ibcq)->armed = 1;
	U();
	return 0;
}

EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cqctx,
				    struct ibv_comp_channel *ch, int vec)
{
	struct mcq *cq;

	if (cqe < 1 || cqe > MAX_CQE || vec < 0 || vec >= c->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	cq->size = cqe;
	cq->ring = calloc((size_t)cqe, sizeof(struct ibv_wc));
	cq->cq.context = c;
	cq->cq.channel = ch;
	cq->cq.cq_context = cqctx;
	cq->cq.cqe = cqe;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	if (ch)
		ch->refcnt++;
	return &cq->cq;
}

EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	(void)cq;
	(void)cqe;
	return EOPNOTSUPP;
}

EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct mcq *cq = (struct mcq *)ibcq;

	L();
	if (cq->refs && !bug("cq_not_busy")) {
		U();
		return EBUSY;
	}
	if (cq->refs) {
		U();
		return 0; /* leak it: the QP still points at it */
	}
	if (ibcq->channel)
		ibcq->channel->refcnt--;
	U();
	free(cq->ring);
	free(cq);
	return 0;
}

/* mock_chan_w: write end of a channel pipe, indexed by the read end */

EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	struct ibv_comp_channel *ch;
	int p[2];

	if (pipe(p))
		return NULL;
	ch = calloc(1, sizeof(*ch));
	ch->context = c;
	ch->fd = p[0];
	mock_chan_w[p[0]] = p[1];
	return ch;
}


EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	if (ch->refcnt)
		return EBUSY;
	close(mock_chan_w[ch->fd]);
	close(ch->fd);
	free(ch);
	return 0;
}

EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq,
			    void **cqctx)
{
	struct ibv_cq *p;

	if (read(ch->fd, &p, sizeof(p)) != sizeof(p))
		return -1;
	*cq = p;
	*cqctx = p->cq_context;
	return 0;
}

EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned n)
{
	(void)cq;
	(void)n;
}

/* ------------------------------------------------------------------ */
/* device                                                              */

static int m_query_port(struct ibv_context *c, uint8_t port,
			struct ibv_port_attr *a, size_t len)
{
	(void)c;
	if (port != 1)
		return EINVAL;
	memset(a, 0, len);
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_1024;
	a->gid_tbl_len = GID_TBL_LEN;
	a->max_msg_sz = 1u << 31;
	a->pkey_tbl_len = 1;
	a->active_width = 2;
	a->active_speed = 32;
	a->phys_state = 5;
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

EXPORT int ibv_query_port(struct ibv_context *c, uint8_t port,
			  struct _compat_ibv_port_attr *a)
{
	struct ibv_port_attr t;
	int rc = m_query_port(c, port, &t, sizeof(t));

	if (!rc)
		memcpy(a, &t, offsetof(struct ibv_port_attr, link_layer) + 2);
	return rc;
}

static void fill_dattr(struct ibv_device_attr *d)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->fw_ver, sizeof(d->fw_ver), "mock");
	d->sys_image_guid = htobe64(0x1234000000000000ull | (uint64_t)getpid());
	d->max_mr_size = 1ull << 40;
	d->vendor_id = 0x1234;
	d->vendor_part_id = 1;
	d->max_qp = 1024;
	d->max_qp_wr = MAX_QP_WR;
	d->max_sge = MAX_SGE;
	d->max_cq = 1024;
	d->max_cqe = MAX_CQE;
	d->max_mr = 4000;
	d->max_pd = 64;
	d->max_qp_rd_atom = 16;
	d->max_qp_init_rd_atom = 16;
	d->atomic_cap = IBV_ATOMIC_HCA;
	d->max_pkeys = 1;
	d->phys_port_cnt = 1;
}

EXPORT int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *d)
{
	(void)c;
	fill_dattr(d);
	return 0;
}

static int m_query_device_ex(struct ibv_context *c,
			     const struct ibv_query_device_ex_input *in,
			     struct ibv_device_attr_ex *a, size_t sz)
{
	struct ibv_device_attr_ex t;

	(void)c;
	(void)in;
	memset(&t, 0, sizeof(t));
	fill_dattr(&t.orig_attr);
	t.phys_port_cnt_ex = 1;
	memcpy(a, &t, sz < sizeof(t) ? sz : sizeof(t));
	return 0;
}

EXPORT int ibv_query_gid(struct ibv_context *c, uint8_t port, int idx,
			 union ibv_gid *g)
{
	struct mdev *d = (struct mdev *)c->device;
	uint32_t pid = htobe32((uint32_t)getpid());

	if (port != 1 || idx < 0 || idx >= GID_TBL_LEN)
		return -1;
	memset(g, 0, sizeof(*g));
	if (idx == 0) {
		g->raw[0] = 0xfe;
		g->raw[1] = 0x80;
		memcpy(&g->raw[8], &pid, 4);
		g->raw[15] = (uint8_t)(d->idx + 1);
	}
	return 0;
}

static void *progress(void *arg);
static void *sender(void *arg);
static int m_post_send(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
static int m_post_recv(struct ibv_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **);

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	struct mdev *d = (struct mdev *)dev;
	struct mctx *m;
	char path[128];
	struct sockaddr_un sa;
	int lfd, sz = 4 << 20;

	snprintf(path, sizeof(path), "/tmp/mockverbs-%s.lock", dev->name);
	lfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (lfd < 0)
		return NULL;
	if (flock(lfd, LOCK_EX | LOCK_NB)) {
		close(lfd);
		errno = EBUSY;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	m->lockfd = lfd;
	if (pipe(m->apipe))
		return NULL;
	m->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	setsockopt(m->sock, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(m->sock, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "mockverbs-%d",
		 (int)getpid());
	if (bind(m->sock, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("mock bind");
		return NULL;
	}
	m->vc.sz = sizeof(struct verbs_context);
	m->vc.query_port = m_query_port;
	m->vc.query_device_ex = m_query_device_ex;
	m->vc.context.device = dev;
	m->vc.context.cmd_fd = -1;
	m->vc.context.async_fd = m->apipe[0];
	m->vc.context.num_comp_vectors = 1;
	m->vc.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	pthread_mutex_init(&m->vc.context.mutex, NULL);
	m->vc.context.ops.poll_cq = m_poll_cq;
	m->vc.context.ops.req_notify_cq = m_req_notify;
	m->vc.context.ops.post_send = m_post_send;
	m->vc.context.ops.post_recv = m_post_recv;
	(void)d;
	the_ctx = m;
	pthread_create(&m->thr, NULL, progress, m);
	pthread_create(&m->sthr, NULL, sender, m);
	return &m->vc.context;
}

EXPORT int ibv_close_device(struct ibv_context *c)
{
	struct mctx *m = (struct mctx *)((char *)c -
					 offsetof(struct mctx, vc.context));

	m->stop = 1;
	pthread_join(m->thr, NULL);
	pthread_mutex_lock(&olk);
	pthread_cond_broadcast(&ocv);
	pthread_mutex_unlock(&olk);
	pthread_join(m->sthr, NULL);
	close(m->sock);
	close(m->apipe[0]);
	close(m->apipe[1]);
	close(m->lockfd);
	the_ctx = NULL;
	free(m);
	return 0;
}

/* ------------------------------------------------------------------ */
/* PD / MR                                                             */

EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	struct mpd *p = calloc(1, sizeof(*p));

	p->pd.context = c;
	p->pd.handle = 1;
	return &p->pd;
}

EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct mpd *p = (struct mpd *)pd;

	if (p->refs)
		return EBUSY;
	free(p);
	return 0;
}

#define KNOWN_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
		      IBV_ACCESS_RELAXED_ORDERING)

EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				       size_t len, uint64_t iova,
				       unsigned access)
{
	struct mmr *m;
	int i;

	if (!len || (access & ~(unsigned)KNOWN_ACCESS) ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE))) {
		errno = EINVAL;
		return NULL;
	}
	{
		/* memory that is not mapped cannot be pinned: EFAULT, as the
		 * kernel's ib_umem_get (mincore fails with ENOMEM on a hole) */
		uintptr_t p0 = (uintptr_t)addr & ~(uintptr_t)4095, e = (uintptr_t)addr + len;
		unsigned char v[256];

		for (; e > (uintptr_t)addr && p0 < e; p0 += 256 * 4096) {
			size_t n = e - p0 < 256 * 4096 ? e - p0 : 256 * 4096;

			if (mincore((void *)p0, n, v)) {
				errno = EFAULT;
				return NULL;
			}
		}
		if (e < (uintptr_t)addr) {
			errno = EINVAL;
			return NULL;
		}
	}
	if (!bug("no_mlock") && mlock(addr, len))
		return NULL; /* errno from mlock: ENOMEM over RLIMIT_MEMLOCK */
	L();
	for (i = 1; i < 4096 && mrs[i]; i++)
		;
	if (i == 4096) {
		U();
		errno = ENOMEM;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.lkey = (uint32_t)i << 8 | 0x11;
	m->mr.rkey = (uint32_t)i << 8 | 0x22;
	m->iova = iova;
	m->access = (int)access;
	m->valid = 1;
	m->pd = (struct mpd *)pd;
	m->pd->refs++;
	mrs[i] = m;
	U();
	return &m->mr;
}

EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
				 int access)
{
	return ibv_reg_mr_iova2(pd, addr, len, (uintptr_t)addr, (unsigned)access);
}

EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t len,
				      uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, len, iova, (unsigned)access);
}

EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off,
					size_t len, uint64_t iova, int fd,
					int access)
{
	(void)pd; (void)off; (void)len; (void)iova; (void)fd; (void)access;
	errno = EOPNOTSUPP;
	return NULL;
}

EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct mmr *m = (struct mmr *)mr;

	L();
	mrs[mr->lkey >> 8] = NULL;
	m->pd->refs--;
	U();
	munlock(mr->addr, mr->length);
	free(m);
	return 0;
}

static struct mmr *mr_by_key(uint32_t key, int remote)
{
	struct mmr *m = mrs[(key >> 8) & 4095];

	if (!m || !m->valid)
		return NULL;
	if ((remote ? m->mr.rkey : m->mr.lkey) != key)
		return NULL;
	return m;
}

/* ------------------------------------------------------------------ */
/* unsupported                                                         */

/* ibv_create_<obj> fails with errno EOPNOTSUPP, ibv_destroy_<obj> returns it */
#define UNSUPPORTED(obj, attr)                                                  \
	EXPORT struct ibv_##obj *ibv_create_##obj(struct ibv_pd *pd,            \
						  struct ibv_##attr *a)         \
	{                                                                       \
		(void)pd; (void)a;                                              \
		errno = EOPNOTSUPP;                                             \
		return NULL;                                                    \
	}                                                                       \
	EXPORT int ibv_destroy_##obj(struct ibv_##obj *o)                       \
	{                                                                       \
		(void)o;                                                        \
		return EOPNOTSUPP;                                              \
	}

UNSUPPORTED(srq, srq_init_attr)
UNSUPPORTED(ah, ah_attr)

/* ------------------------------------------------------------------ */
/* QP                                                                  */

EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct mqp *q;

	if (a->qp_type != IBV_QPT_RC) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->srq || !a->send_cq || !a->recv_cq ||
	    a->cap.max_send_wr > MAX_QP_WR || a->cap.max_recv_wr > MAX_QP_WR ||
	    a->cap.max_send_sge > MAX_SGE || a->cap.max_recv_sge > MAX_SGE ||
	    a->cap.max_inline_data > MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	q->cap = a->cap;
	if (!q->cap.max_send_wr)
		q->cap.max_send_wr = 1;
	q->sq = calloc(q->cap.max_send_wr, sizeof(struct swr));
	q->rq = calloc(q->cap.max_recv_wr + 1, sizeof(struct rwr));
	q->qp.context = pd->context;
	q->qp.qp_context = a->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = a->send_cq;
	q->qp.recv_cq = a->recv_cq;
	q->qp.qp_type = IBV_QPT_RC;
	q->qp.state = IBV_QPS_RESET;
	q->sq_sig_all = a->sq_sig_all;
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	L();
	q->qp.qp_num = qpn_next++;
	qps[q->qp.qp_num & 4095] = q;
	((struct mcq *)a->send_cq)->refs++;
	((struct mcq *)a->recv_cq)->refs++;
	((struct mpd *)pd)->refs++;
	U();
	return &q->qp;
}

static void flush_sq(struct mqp *q)
{
	while (q->sq_count) {
		struct swr *w = &q->sq[q->sq_head];
		struct ibv_wc wc;

		memset(&wc, 0, sizeof(wc));
		wc.wr_id = w->wr_id;
		wc.status = w->done && w->status ? w->status : IBV_WC_WR_FLUSH_ERR;
		wc.qp_num = q->qp.qp_num;
		cq_push((struct mcq *)q->qp.send_cq, &wc);
		q->sq_head = (q->sq_head + 1) % (int)q->cap.max_send_wr;
		q->sq_count--;
	}
}

static void flush_rq(struct mqp *q)
{
	while (q->rq_count) {
		struct ibv_wc wc;

		memset(&wc, 0, sizeof(wc));
		wc.wr_id = q->rq[q->rq_head].wr_id;
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.qp_num = q->qp.qp_num;
		cq_push((struct mcq *)q->qp.recv_cq, &wc);
		q->rq_head = (q->rq_head + 1) % ((int)q->cap.max_recv_wr + 1);
		q->rq_count--;
	}
}

static void qp_to_err(struct mqp *q)
{
	if (bug("no_flush")) {
		q->qp.state = IBV_QPS_ERR;
		q->sq_count = 0;
		return;
	}
	q->qp.state = IBV_QPS_ERR; /* the device moves it; the library's copy too */
	flush_sq(q);
	flush_rq(q);
}

EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
	struct mqp *q = (struct mqp *)ibqp;
	enum ibv_qp_state cur = ibqp->state, nxt;
	int req = 0;

	if (!(mask & IBV_QP_STATE))
		return EINVAL;
	if (bug("neg_rc") && a->qp_state == IBV_QPS_RTR && !(mask & IBV_QP_AV)) {
		errno = EINVAL;
		return -1;
	}
	nxt = a->qp_state;
	L();
	if (nxt == IBV_QPS_RESET) {
		q->sq_count = q->rq_count = 0;
		goto ok;
	}
	if (nxt == IBV_QPS_ERR) {
		qp_to_err(q);
		goto ok;
	}
	if (cur == IBV_QPS_RESET && nxt == IBV_QPS_INIT)
		req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	else if (cur == IBV_QPS_INIT && nxt == IBV_QPS_INIT)
		req = 0;
	else if (cur == IBV_QPS_INIT && nxt == IBV_QPS_RTR)
		req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
		      IBV_QP_MIN_RNR_TIMER;
	else if (cur == IBV_QPS_RTR && nxt == IBV_QPS_RTS)
		req = IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	else if (cur == IBV_QPS_RTS && nxt == IBV_QPS_RTS)
		req = 0;
	else
		goto bad;
	if ((mask & req) != req)
		goto bad;
	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		goto bad;
	if (mask & IBV_QP_ACCESS_FLAGS)
		q->access = (int)a->qp_access_flags;
	if (mask & IBV_QP_AV) {
		uint32_t pid;

		static const union ibv_gid zero;

		if (!a->ah_attr.is_global || a->ah_attr.port_num != 1 ||
		    a->ah_attr.grh.sgid_index >= GID_TBL_LEN ||
		    !memcmp(&a->ah_attr.grh.dgid, &zero, sizeof(zero)))
			goto bad;
		memcpy(&pid, &a->ah_attr.grh.dgid.raw[8], 4);
		q->dest_pid = be32toh(pid);
	}
	if (mask & IBV_QP_DEST_QPN)
		q->dest_qpn = a->dest_qp_num;
ok:
	ibqp->state = nxt;
	U();
	return 0;
bad:
	U();
	return EINVAL;
}

EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask,
			struct ibv_qp_init_attr *ia)
{
	struct mqp *q = (struct mqp *)ibqp;

	(void)mask;
	memset(a, 0, sizeof(*a));
	L();
	a->qp_state = ibqp->state;
	a->cap = q->cap;
	a->dest_qp_num = q->dest_qpn;
	if (ia) {
		memset(ia, 0, sizeof(*ia));
		ia->cap = q->cap;
		ia->send_cq = ibqp->send_cq;
		ia->recv_cq = ibqp->recv_cq;
		ia->qp_type = ibqp->qp_type;
	}
	U();
	return 0;
}

EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct mqp *q = (struct mqp *)ibqp;

	while (bug("hang_destroy"))
		sleep(1);

	L();
	qps[ibqp->qp_num & 4095] = NULL;
	((struct mcq *)ibqp->send_cq)->refs--;
	((struct mcq *)ibqp->recv_cq)->refs--;
	((struct mpd *)ibqp->pd)->refs--;
	while (q->ph) {
		struct pend *p = q->ph;

		q->ph = p->next;
		free(p->m);
		free(p);
	}
	U();
	free(q->sq);
	free(q->rq);
	free(q);
	return 0;
}

/* ------------------------------------------------------------------ */
/* data path                                                           */

/* Outgoing datagrams go through a FIFO drained by a sender thread, so that
 * neither the application nor the progress thread ever blocks in sendto()
 * while holding the big lock (two processes would deadlock). */
struct obox {
	struct obox *next;
	uint32_t pid;
	size_t n;
	struct msg m;
};
static struct obox *oh, *ot;

static void send_to(uint32_t pid, struct msg *m, size_t n)
{
	struct obox *o = malloc(offsetof(struct obox, m) + n);

	o->next = NULL;
	o->pid = pid;
	o->n = n;
	memcpy(&o->m, m, n);
	pthread_mutex_lock(&olk);
	if (ot)
		ot->next = o;
	else
		oh = o;
	ot = o;
	pthread_cond_signal(&ocv);
	pthread_mutex_unlock(&olk);
}

static void *sender(void *arg)
{
	struct mctx *c = arg;

	for (;;) {
		struct obox *o;
		struct sockaddr_un sa;

		pthread_mutex_lock(&olk);
		while (!oh && !c->stop)
			pthread_cond_wait(&ocv, &olk);
		o = oh;
		if (!o) {
			pthread_mutex_unlock(&olk);
			return NULL;
		}
		oh = o->next;
		if (!oh)
			ot = NULL;
		pthread_mutex_unlock(&olk);
		memset(&sa, 0, sizeof(sa));
		sa.sun_family = AF_UNIX;
		snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
			 "mockverbs-%d", (int)o->pid);
		for (;;) {
			if (sendto(c->sock, &o->m, o->n, 0,
				   (struct sockaddr *)&sa, sizeof(sa)) >= 0)
				break;
			if (errno == EAGAIN || errno == ENOBUFS) {
				usleep(1000);
				continue;
			}
			if (errno != ECONNREFUSED)
				fprintf(stderr, "mock sendto pid %u: %s\n",
					o->pid, strerror(errno));
			break; /* peer gone: like a lost packet */
		}
		free(o);
	}
}

static int m_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad)
{
	struct mqp *q = (struct mqp *)ibqp;
	int rc = 0;

	L();
	for (; wr; wr = wr->next) {
		struct swr *s;
		struct msg *m;
		size_t len = 0, off = 0;
		int i;

		if (ibqp->state != IBV_QPS_RTS && ibqp->state != IBV_QPS_ERR) {
			rc = EINVAL;
			break;
		}
		switch (wr->opcode) {
		case IBV_WR_SEND: case IBV_WR_SEND_WITH_IMM:
		case IBV_WR_SEND_WITH_INV: case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM: case IBV_WR_RDMA_READ:
		case IBV_WR_ATOMIC_CMP_AND_SWP: case IBV_WR_ATOMIC_FETCH_AND_ADD:
			break;
		default:
			rc = EINVAL;
			break;
		}
		if (rc)
			break;
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_send_sge ||
		    (wr->num_sge && !wr->sg_list)) {
			rc = EINVAL;
			break;
		}
		for (i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;
		if ((wr->send_flags & IBV_SEND_INLINE) &&
		    len > q->cap.max_inline_data) {
			rc = EINVAL;
			break;
		}
		if (q->sq_count == (int)q->cap.max_send_wr) {
			rc = ENOMEM;
			break;
		}
		s = &q->sq[(q->sq_head + q->sq_count) % (int)q->cap.max_send_wr];
		memset(s, 0, sizeof(*s));
		s->wr_id = wr->wr_id;
		s->opcode = wr->opcode;
		s->signaled = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
		s->nsge = wr->num_sge;
		memcpy(s->sge, wr->sg_list, sizeof(struct ibv_sge) * (size_t)wr->num_sge);
		s->len = (uint32_t)len;
		s->seq = ++q->next_seq;
		q->sq_count++;
		if (ibqp->state == IBV_QPS_ERR) {
			flush_sq(q);
			continue;
		}
		m = calloc(1, sizeof(*m) + len);
		m->type = M_REQ;
		m->src_pid = (uint32_t)getpid();
		m->src_qpn = ibqp->qp_num;
		m->dst_qpn = q->dest_qpn;
		m->seq = s->seq;
		m->opcode = wr->opcode;
		m->imm = wr->opcode == IBV_WR_SEND_WITH_INV ? wr->invalidate_rkey :
			 be32toh(wr->imm_data);
		if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		    wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			m->raddr = wr->wr.atomic.remote_addr;
			m->rkey = wr->wr.atomic.rkey;
			m->cmp = wr->wr.atomic.compare_add;
			m->swap = wr->wr.atomic.swap;
			m->len = 8;
		} else {
			m->raddr = wr->wr.rdma.remote_addr;
			m->rkey = wr->wr.rdma.rkey;
			m->len = (uint32_t)len;
		}
		if (wr->opcode != IBV_WR_RDMA_READ && m->type == M_REQ &&
		    wr->opcode != IBV_WR_ATOMIC_CMP_AND_SWP &&
		    wr->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) {
			for (i = 0; i < wr->num_sge; i++) {
				memcpy(m->data + off,
				       (void *)(uintptr_t)wr->sg_list[i].addr,
				       wr->sg_list[i].length);
				off += wr->sg_list[i].length;
			}
		}
		send_to(q->dest_pid, m, sizeof(*m) + off);
		free(m);
	}
	U();
	if (rc && bad)
		*bad = wr;
	return rc;
}

static int m_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad)
{
	struct mqp *q = (struct mqp *)ibqp;
	int rc = 0;
	void retry_pending(struct mqp *q);

	L();
	for (; wr; wr = wr->next) {
		struct rwr *r;

		if (ibqp->state == IBV_QPS_RESET || wr->num_sge < 0 ||
		    (uint32_t)wr->num_sge > q->cap.max_recv_sge ||
		    q->rq_count >= (int)q->cap.max_recv_wr) {
			rc = q->rq_count >= (int)q->cap.max_recv_wr &&
			     wr->num_sge <= (int)q->cap.max_recv_sge ? ENOMEM : EINVAL;
			break;
		}
		r = &q->rq[(q->rq_head + q->rq_count) % ((int)q->cap.max_recv_wr + 1)];
		r->wr_id = wr->wr_id;
		r->nsge = wr->num_sge;
		memcpy(r->sge, wr->sg_list, sizeof(struct ibv_sge) * (size_t)wr->num_sge);
		q->rq_count++;
	}
	retry_pending(q);
	U();
	if (rc && bad)
		*bad = wr;
	return rc;
}

static void respond(struct msg *req, uint32_t status, const void *data,
		    size_t n)
{
	struct msg *m = calloc(1, sizeof(*m) + n);

	m->type = M_RESP;
	m->src_pid = (uint32_t)getpid();
	m->dst_qpn = req->src_qpn;
	m->src_qpn = req->dst_qpn;
	m->seq = req->seq;
	m->status = status;
	m->len = (uint32_t)n;
	if (n)
		memcpy(m->data, data, n);
	send_to(req->src_pid, m, sizeof(*m) + n);
	free(m);
}

static void *remote_ptr(uint32_t rkey, uint64_t raddr, uint32_t len,
			int need, struct mqp *q)
{
	struct mmr *m;

	if (!(q->access & need))
		return NULL;
	if (len == 0 && need != IBV_ACCESS_REMOTE_ATOMIC)
		return (void *)1;
	m = mr_by_key(rkey, 1);
	if (!m || !(m->access & need))
		return NULL;
	if (bug("iova_as_va") && m->iova != (uintptr_t)m->mr.addr)
		return NULL;
	if (raddr < m->iova || raddr + len > m->iova + m->mr.length)
		return NULL;
	return (uint8_t *)m->mr.addr + (raddr - m->iova);
}

/* returns 0 when the request had to wait for a receive */
static int handle_req(struct mqp *q, struct msg *m)
{
	struct ibv_wc wc;
	void *p;
	int is_send = m->opcode == IBV_WR_SEND || m->opcode == IBV_WR_SEND_WITH_IMM ||
		      m->opcode == IBV_WR_SEND_WITH_INV;
	int consumes = is_send || m->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

	if (q->qp.state == IBV_QPS_ERR) {
		respond(m, IBV_WC_REM_OP_ERR, NULL, 0);
		return 1;
	}
	if (consumes && !q->rq_count)
		return 0; /* RNR: wait */
	memset(&wc, 0, sizeof(wc));
	wc.qp_num = q->qp.qp_num;
	switch (m->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		p = remote_ptr(m->rkey, m->raddr, m->len, IBV_ACCESS_REMOTE_WRITE, q);
		if (!p)
			goto access_err;
		if (m->len && !(bug("drop_write") && m->len > 1000))
			memcpy(p, m->data, m->len);
		break;
	case IBV_WR_RDMA_READ:
		p = remote_ptr(m->rkey, m->raddr, m->len, IBV_ACCESS_REMOTE_READ, q);
		if (!p)
			goto access_err;
		respond(m, 0, m->len ? p : NULL, m->len);
		return 1;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD: {
		uint64_t *w, old;

		p = remote_ptr(m->rkey, m->raddr, 8, IBV_ACCESS_REMOTE_ATOMIC, q);
		if (!p || (m->raddr & 7) ||
		    (bug("cas_err") && m->opcode == IBV_WR_ATOMIC_CMP_AND_SWP))
			goto access_err;
		w = p;
		old = *w;
		if (m->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
			*w = old + m->cmp;
		if (bug("faa_new") && m->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
			old = *w;
		else if (old == m->cmp)
			*w = m->swap;
		respond(m, 0, &old, 8);
		return 1;
	}
	default:
		break;
	}
	if (consumes) {
		struct rwr *r = &q->rq[q->rq_head];

		wc.wr_id = r->wr_id;
		wc.byte_len = m->len;
		if (is_send) {
			size_t off = 0;

			for (int i = 0; i < r->nsge && off < m->len; i++) {
				size_t take = r->sge[i].length;
				struct mmr *mr = mr_by_key(r->sge[i].lkey, 0);

				if (take > m->len - off)
					take = m->len - off;
				if (!mr) {
					wc.status = IBV_WC_LOC_PROT_ERR;
					break;
				}
				memcpy((void *)(uintptr_t)r->sge[i].addr,
				       m->data + off, take);
				off += take;
			}
			if (!wc.status && off < m->len)
				wc.status = IBV_WC_LOC_LEN_ERR;
			wc.opcode = IBV_WC_RECV;
			if (m->opcode == IBV_WR_SEND_WITH_IMM) {
				wc.wc_flags = IBV_WC_WITH_IMM;
				wc.imm_data = htobe32(m->imm);
			} else if (m->opcode == IBV_WR_SEND_WITH_INV) {
				struct mmr *mr = mr_by_key(m->imm, 1);

				if (bug("inv_reject")) {
					respond(m, IBV_WC_REM_INV_REQ_ERR, NULL, 0);
					qp_to_err(q);
					async_push(IBV_EVENT_QP_REQ_ERR, &q->qp);
					return 1;
				}

				if (mr)
					mr->valid = 0;
				wc.wc_flags = IBV_WC_WITH_INV;
				wc.invalidated_rkey = m->imm;
			}
		} else {
			wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
			wc.wc_flags = bug("no_imm_flag") ? 0 : IBV_WC_WITH_IMM;
			if (bug("byte_len"))
				wc.byte_len = 12345;
			wc.imm_data = htobe32(m->imm);
		}
		q->rq_head = (q->rq_head + 1) % ((int)q->cap.max_recv_wr + 1);
		q->rq_count--;
		cq_push((struct mcq *)q->qp.recv_cq, &wc);
	}
	respond(m, 0, NULL, 0);
	return 1;
access_err:
	respond(m, IBV_WC_REM_ACCESS_ERR, NULL, 0);
	qp_to_err(q);
	async_push(IBV_EVENT_QP_ACCESS_ERR, &q->qp);
	return 1;
}

void retry_pending(struct mqp *q)
{
	while (q->ph) {
		struct pend *p = q->ph;

		if (!handle_req(q, p->m))
			return;
		q->ph = p->next;
		if (!q->ph)
			q->pt = NULL;
		free(p->m);
		free(p);
	}
}

static void handle_resp(struct mqp *q, struct msg *m)
{
	int i;

	for (i = 0; i < q->sq_count; i++) {
		struct swr *s = &q->sq[(q->sq_head + i) % (int)q->cap.max_send_wr];

		if (s->seq != m->seq)
			continue;
		s->done = 1;
		s->status = m->status;
		if (!m->status && (s->opcode == IBV_WR_RDMA_READ ||
				   s->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
				   s->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)) {
			size_t off = 0;

			for (int k = 0; k < s->nsge && off < m->len; k++) {
				size_t take = s->sge[k].length;

				if (take > m->len - off)
					take = m->len - off;
				memcpy((void *)(uintptr_t)s->sge[k].addr,
				       m->data + off, take);
				off += take;
			}
		}
		break;
	}
	/* retire in order */
	while (q->sq_count && q->sq[q->sq_head].done) {
		struct swr *s = &q->sq[q->sq_head];
		struct ibv_wc wc;

		if (s->status) {
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = s->wr_id;
			wc.status = s->status;
			wc.qp_num = q->qp.qp_num;
			cq_push((struct mcq *)q->qp.send_cq, &wc);
			q->sq_head = (q->sq_head + 1) % (int)q->cap.max_send_wr;
			q->sq_count--;
			qp_to_err(q);
			return;
		}
		if (s->signaled || bug("unsig_cqe")) {
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = s->wr_id;
			wc.qp_num = q->qp.qp_num;
			wc.status = IBV_WC_SUCCESS;
			switch (s->opcode) {
			case IBV_WR_RDMA_WRITE:
			case IBV_WR_RDMA_WRITE_WITH_IMM:
				wc.opcode = IBV_WC_RDMA_WRITE;
				break;
			case IBV_WR_RDMA_READ:
				wc.opcode = IBV_WC_RDMA_READ;
				wc.byte_len = s->len;
				break;
			case IBV_WR_ATOMIC_CMP_AND_SWP:
				wc.opcode = IBV_WC_COMP_SWAP;
				wc.byte_len = 8;
				break;
			case IBV_WR_ATOMIC_FETCH_AND_ADD:
				wc.opcode = IBV_WC_FETCH_ADD;
				wc.byte_len = 8;
				break;
			default:
				wc.opcode = IBV_WC_SEND;
			}
			cq_push((struct mcq *)q->qp.send_cq, &wc);
		}
		q->sq_head = (q->sq_head + 1) % (int)q->cap.max_send_wr;
		q->sq_count--;
	}
}

static void *progress(void *arg)
{
	struct mctx *c = arg;
	uint8_t *buf = malloc(MAX_MSG + sizeof(struct msg));

	while (!c->stop) {
		struct pollfd p = { .fd = c->sock, .events = POLLIN };
		ssize_t n;
		struct msg *m = (struct msg *)buf;
		struct mqp *q;

		if (poll(&p, 1, 50) <= 0)
			continue;
		n = recv(c->sock, buf, MAX_MSG + sizeof(struct msg), 0);
		if (n < (ssize_t)sizeof(struct msg))
			continue;
		usleep(200); /* be a slow device */
		L();
		q = qps[m->dst_qpn & 4095];
		if (!q || q->qp.qp_num != m->dst_qpn) {
			U();
			continue;
		}
		if (m->type == M_RESP) {
			handle_resp(q, m);
		} else if (q->ph || !handle_req(q, m)) {
			struct pend *pe = calloc(1, sizeof(*pe));

			pe->m = malloc((size_t)n);
			memcpy(pe->m, m, (size_t)n);
			pe->n = (size_t)n;
			if (q->pt)
				q->pt->next = pe;
			else
				q->ph = pe;
			q->pt = pe;
			retry_pending(q);
		}
		U();
	}
	free(buf);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* strings                                                             */

EXPORT const char *ibv_wc_status_str(enum ibv_wc_status s)
{
	static const char *const t[] = {
		"success", "local length error", "local QP operation error",
		"local EE context operation error", "local protection error",
		"Work Request Flushed Error", "memory management operation error",
		"bad response error", "local access error",
		"remote invalid request error", "remote access error",
		"remote operation error", "transport retry counter exceeded",
		"RNR retry counter exceeded", "local RDD violation error",
		"remote invalid RD request", "aborted error",
		"invalid EE context number", "invalid EE context state",
		"fatal error", "response timeout error", "general error",
		"TM error", "TM rendezvous request error"
	};

	return (unsigned)s < sizeof(t) / sizeof(t[0]) ? t[s] : "unknown";
}

EXPORT const char *ibv_event_type_str(enum ibv_event_type e)
{
	static char b[32];

	snprintf(b, sizeof(b), "event%d", e);
	return b;
}

EXPORT const char *ibv_port_state_str(enum ibv_port_state s)
{
	return s == IBV_PORT_ACTIVE ? "PORT_ACTIVE" : "PORT_?";
}
