/*
 * hm_verbs_errors - bad arguments to the verbs, one process, one device.
 *
 * Each check expects the failure a kernel-backed provider (mlx5, rxe) gives:
 * NULL with errno for the constructors, the errno value as the return value
 * for the int verbs (ibv_modify_qp, ibv_post_send, ibv_dealloc_pd, ...).
 * Two checks fork a child: a second ibv_open_device of the same device while
 * this process holds it (EBUSY), and ibv_reg_mr beyond RLIMIT_MEMLOCK
 * (ENOMEM).  Everything created is destroyed at the end; each destroy must
 * return 0.
 *
 * Usage: hm_verbs_errors [-d DEV] [-g GIDX] [-t SECS]
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/capability.h>

#include "hm_common.h"

static struct {
	const char *dev;
	int gidx;
} opt = { NULL, 0 };

static void usage(void)
{
	fprintf(stderr,
		"usage: %s [-d DEV] [-g GIDX] [-t SECS]\n"
		"  -d DEV   device name (default: first device)\n"
		"  -g GIDX  GID index for the loopback QPs (default 0)\n"
		"  -t SECS  timeout of every blocking step (default 120)\n",
		hm_prog);
	exit(2);
}

/* ------------------------------------------------------------------ */
/* expectation helpers                                                 */

/* int verbs: return value must be the errno value (want1 or want2). */
static int expect_rc(const char *name, int rc, int want1, int want2)
{
	int e = errno;

	if (rc == want1 || (want2 && rc == want2)) {
		hm_ok(name, "rc=%s", hm_errname(rc));
		return 1;
	}
	if (rc == 0)
		hm_fail(name, "succeeded, expected %s%s%s", hm_errname(want1),
			want2 ? " or " : "", want2 ? hm_errname(want2) : "");
	else if (rc == -1 && (e == want1 || (want2 && e == want2)))
		hm_fail(name, "returned -1 with errno=%s: verbs must return "
			"the errno value itself", hm_errname(e));
	else
		hm_fail(name, "rc=%d (%s) errno=%s, expected %s%s%s", rc,
			rc > 0 ? hm_errname(rc) : "-", hm_errname(e),
			hm_errname(want1), want2 ? " or " : "",
			want2 ? hm_errname(want2) : "");
	return 0;
}

/* constructors: NULL with errno want1 or want2 */
static int expect_null(const char *name, const void *p, int want1, int want2)
{
	int e = errno;

	if (!p && (e == want1 || (want2 && e == want2))) {
		hm_ok(name, "errno=%s", hm_errname(e));
		return 1;
	}
	if (p)
		hm_fail(name, "succeeded, expected NULL with errno %s%s%s",
			hm_errname(want1), want2 ? " or " : "",
			want2 ? hm_errname(want2) : "");
	else
		hm_fail(name, "NULL with errno=%s, expected %s%s%s",
			hm_errname(e), hm_errname(want1), want2 ? " or " : "",
			want2 ? hm_errname(want2) : "");
	return 0;
}

static void must_zero(const char *name, int rc)
{
	if (rc == 0)
		hm_ok(name, "%s", "");
	else
		hm_fail(name, "rc=%d (%s) errno=%s", rc,
			rc > 0 ? hm_errname(rc) : "-", hm_errname(errno));
}

/* fn(obj), the watchdog's step "fn (name)", must return 0 (must_zero) */
#define MUST_ZERO_STEP(fn, name, obj)                 \
	do {                                    \
		hm_step(#fn " (" name ")");     \
		must_zero(name, fn(obj));       \
	} while (0)

/* ------------------------------------------------------------------ */
/* child processes                                                     */

struct child_report {
	int stage;   /* how far the child got: 1 opened, 2 pd, 3 limit, 4 reg */
	int got;     /* the verb under test returned non-NULL */
	int err;     /* errno from it */
	int cap_dropped;
	int extra;
};

static struct ibv_device *find_dev(struct ibv_device **list, int n)
{
	for (int i = 0; i < n; i++)
		if (!opt.dev || !strcmp(ibv_get_device_name(list[i]), opt.dev))
			return list[i];
	return NULL;
}

/* Drop CAP_IPC_LOCK from the effective set so RLIMIT_MEMLOCK applies even
 * to root (mlock and the kernel's ib_umem_get both bypass the limit with
 * CAP_IPC_LOCK). */
static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data))
		return -1;
	data[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	data[CAP_TO_INDEX(CAP_IPC_LOCK)].permitted &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	data[CAP_TO_INDEX(CAP_IPC_LOCK)].inheritable &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	if (syscall(SYS_capset, &hdr, data))
		return -1;
	return 0;
}

static void child_memlock(int wfd)
{
	struct child_report r = { 0, 0, 0, 0, 0 };
	struct ibv_device **list;
	struct ibv_device *dev;
	struct ibv_context *c;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct rlimit rl = { 64 * 1024, 64 * 1024 };
	size_t len = 16u << 20;
	void *buf;
	int n = 0;

	list = ibv_get_device_list(&n);
	dev = list ? find_dev(list, n) : NULL;
	c = dev ? ibv_open_device(dev) : NULL;
	if (!c) {
		r.err = errno;
		goto out;
	}
	r.stage = 1;
	pd = ibv_alloc_pd(c);
	if (!pd) {
		r.err = errno;
		goto out;
	}
	r.stage = 2;
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		r.err = errno;
		goto out;
	}
	memset(buf, 1, len);
	r.cap_dropped = drop_ipc_lock() == 0;
	if (setrlimit(RLIMIT_MEMLOCK, &rl)) {
		r.err = errno;
		goto out;
	}
	r.stage = 3;
	errno = 0;
	mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
	r.err = errno;
	r.got = mr != NULL;
	r.stage = 4;
	if (mr)
		ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(c);
out:
	if (write(wfd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(5);
	_exit(0);
}

static void child_second_open(int rfd, int wfd)
{
	struct child_report r = { 0, 0, 0, 0, 0 };
	struct ibv_device **list;
	struct ibv_device *dev;
	struct ibv_context *c;
	struct pollfd p = { .fd = rfd, .events = POLLIN };
	char go;
	int n = 0;

	/* wait (bounded) until the parent holds the device open */
	if (poll(&p, 1, hm_timeout_s * 1000) <= 0 || read(rfd, &go, 1) != 1)
		_exit(4);
	list = ibv_get_device_list(&n);
	dev = list ? find_dev(list, n) : NULL;
	if (!dev) {
		r.err = errno;
		r.extra = -1;
	} else {
		r.stage = 1;
		errno = 0;
		c = ibv_open_device(dev);
		r.err = errno;
		r.got = c != NULL;
		if (c)
			ibv_close_device(c);
	}
	if (write(wfd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(5);
	_exit(0);
}

/* read the child's report and reap it, both bounded */
static int collect_child(pid_t pid, int rfd, struct child_report *r,
			 const char *what)
{
	uint64_t dl = hm_deadline();
	size_t got = 0;
	int status = 0;

	while (got < sizeof(*r)) {
		struct pollfd p = { .fd = rfd, .events = POLLIN };
		uint64_t now = hm_now_us();
		ssize_t n;

		hm_step(what);
		if (now >= dl) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			hm_timeout("%s (child pid %d)", what, (int)pid);
		}
		if (poll(&p, 1, (int)((dl - now) / 1000) + 1) <= 0)
			continue;
		n = read(rfd, (char *)r + got, sizeof(*r) - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			break;
		hm_step(what);
		if (hm_now_us() >= dl) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			hm_timeout("%s: child pid %d to exit", what, (int)pid);
		}
		hm_sleep_us(10000);
	}
	if (got < sizeof(*r)) {
		hm_fail(what, "child died without a report (status 0x%x%s%s)",
			status, WIFSIGNALED(status) ? ", signal " : "",
			WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "");
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq,
			      enum ibv_qp_type type, uint32_t swr, uint32_t rwr,
			      uint32_t ssge, uint32_t rsge, uint32_t inl,
			      struct ibv_qp_cap *cap_out)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	ia = hm_qp_attr(cq, cq, type, swr, rwr, ssge, rsge, inl);
	errno = 0;
	qp = ibv_create_qp(pd, &ia);
	if (qp && cap_out)
		*cap_out = ia.cap;
	return qp;
}

/* RTR arguments of a QP on the loopback port (GID `gid`, index -g) towards `dest_qpn` */
static struct hm_rtr_args loop_rtr(enum ibv_mtu mtu, const union ibv_gid *gid,
				   uint32_t dest_qpn, uint32_t rq_psn)
{
	return hm_rtr_to(mtu, dest_qpn, rq_psn, gid, opt.gidx, 1);
}

/* INIT->RTR attributes with a full AV towards dest_qpn on the loopback
 * port; dgid NULL leaves the destination GID zero (an invalid AV) */
static void rtr_attr(struct ibv_qp_attr *a, enum ibv_mtu mtu, uint32_t dest_qpn,
		     const union ibv_gid *dgid)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = mtu;
	a->dest_qp_num = dest_qpn;
	a->rq_psn = 0;
	a->max_dest_rd_atomic = 1;
	a->min_rnr_timer = 12;
	a->ah_attr.is_global = 1;
	if (dgid)
		a->ah_attr.grh.dgid = *dgid;
	a->ah_attr.grh.sgid_index = (uint8_t)opt.gidx;
	a->ah_attr.grh.hop_limit = 64;
	a->ah_attr.port_num = 1;
}

#define RTR_MASK                                                           \
	(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |    \
	 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)

/* a signaled RDMA WRITE of sg[0 .. num_sge-1] to raddr / rkey */
static struct ibv_send_wr write_wr(uint64_t wr_id, struct ibv_sge *sg,
				   int num_sge, uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr = hm_send_wr(wr_id, IBV_WR_RDMA_WRITE, sg,
					   num_sge);

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return wr;
}

/* a refused post: rc must be want1 or want2 (expect_rc, as name); then
 * "<name>.bad_wr <details>" checks that bad_wr pointed at the WR (bad_ok) */
static HM_PRINTF(6, 7) void expect_refused(const char *name, int rc, int want1,
					   int want2, int bad_ok,
					   const char *fmt, ...)
{
	char bname[96], det[256];
	va_list ap;

	if (!expect_rc(name, rc, want1, want2))
		return;
	va_start(ap, fmt);
	vsnprintf(det, sizeof(det), fmt, ap);
	va_end(ap);
	snprintf(bname, sizeof(bname), "%s.bad_wr", name);
	hm_check(bad_ok, bname, "%s", det);
}

/* ibv_post_send(qp, wr) must be refused with want1 or want2 and point
 * bad_wr at wr ("<name>.bad_wr bad_wr_ok=1") */
static void post_refused(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 const char *name, int want1, int want2)
{
	struct ibv_send_wr *bad_wr = NULL;
	int rc = ibv_post_send(qp, wr, &bad_wr);

	expect_refused(name, rc, want1, want2, bad_wr == wr, "bad_wr_ok=%d",
		       bad_wr == wr);
}

/* fork, stdout flushed first (the child must not repeat buffered lines) */
static pid_t fork_child(void)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		hm_fatal("fork", "%s", strerror(errno));
	return pid;
}

int main(int argc, char **argv)
{
	struct ibv_device **devlist;
	struct ibv_context *ctx;
	struct ibv_device_attr da;
	struct ibv_device_attr_ex dax;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	struct ibv_pd *pd, *pd2;
	struct ibv_cq *cq, *cq2;
	struct ibv_mr *mr, *mr2;
	struct ibv_qp *qa, *qb;
	struct ibv_qp_cap capa, capb;
	void *buf, *buf2;
	size_t buflen = 1 << 16;
	int c, rc;
	char gs[64];

	hm_init_common(argv[0]);
	while ((c = getopt(argc, argv, "d:g:t:h")) != -1) {
		if (!hm_common_opt(c, &opt.dev, &opt.gidx, NULL))
			usage();
	}
	if (optind != argc || hm_timeout_s < 1)
		usage();

	/* ---- child 1: RLIMIT_MEMLOCK (before we open the device) ---- */
	{
		int p[2];
		pid_t pid;
		struct child_report r;

		if (pipe(p))
			hm_fatal("pipe", "%s", strerror(errno));
		pid = fork_child();
		if (pid == 0) {
			close(p[0]);
			child_memlock(p[1]);
		}
		close(p[1]);
		if (collect_child(pid, p[0], &r, "memlock_reg_mr") == 0) {
			if (r.stage < 3)
				hm_fail("memlock_reg_mr", "child setup failed at "
					"stage %d: %s", r.stage,
					hm_errname(r.err));
			else if (!r.got && r.err == ENOMEM)
				hm_ok("memlock_reg_mr", "len=16MiB "
				      "memlock=64KiB errno=ENOMEM cap_ipc_lock_"
				      "dropped=%d", r.cap_dropped);
			else
				hm_fail("memlock_reg_mr", "ibv_reg_mr(16 MiB) "
					"with RLIMIT_MEMLOCK 64 KiB: %s errno=%s "
					"(expected NULL with ENOMEM) "
					"cap_ipc_lock_dropped=%d",
					r.got ? "succeeded" : "NULL",
					hm_errname(r.err), r.cap_dropped);
		}
		close(p[0]);
	}

	/* ---- child 2: second open while we hold the device ---- */
	{
		int go[2], rep[2];
		pid_t pid;
		struct child_report r;

		if (pipe(go) || pipe(rep))
			hm_fatal("pipe", "%s", strerror(errno));
		pid = fork_child();
		if (pid == 0) {
			close(go[1]);
			close(rep[0]);
			child_second_open(go[0], rep[1]);
		}
		close(go[0]);
		close(rep[1]);
		ctx = hm_open_device(opt.dev, &devlist);
		hm_ok("open_device", "name=%s", ibv_get_device_name(ctx->device));
		if (write(go[1], "g", 1) != 1)
			hm_fatal("pipe", "write: %s", strerror(errno));
		if (collect_child(pid, rep[0], &r, "second_open_busy") == 0) {
			if (r.stage < 1)
				hm_fail("second_open_busy", "child could not "
					"find the device: %s", hm_errname(r.err));
			else if (!r.got && r.err == EBUSY)
				hm_ok("second_open_busy", "errno=EBUSY");
			else
				hm_fail("second_open_busy", "ibv_open_device in "
					"a second process: %s errno=%s "
					"(expected NULL with EBUSY)",
					r.got ? "succeeded" : "NULL",
					hm_errname(r.err));
		}
		close(go[1]);
		close(rep[0]);
	}

	/* ---- device and port queries ---- */
	hm_step("device and port queries");
	memset(&da, 0, sizeof(da));
	rc = ibv_query_device(ctx, &da);
	if (rc)
		hm_fatal("query_device", "rc=%d", rc);
	hm_ok("query_device", "max_qp_wr=%d max_sge=%d max_cqe=%d "
	      "max_qp_rd_atom=%d num_comp_vectors=%d", da.max_qp_wr,
	      da.max_sge, da.max_cqe, da.max_qp_rd_atom, ctx->num_comp_vectors);

	memset(&dax, 0, sizeof(dax));
	rc = ibv_query_device_ex(ctx, NULL, &dax);
	if (rc)
		hm_fail("query_device_ex", "rc=%d (%s)", rc, hm_errname(rc));
	else
		hm_check(dax.orig_attr.max_cqe >= 512 &&
				 dax.orig_attr.max_qp_rd_atom >= 1 &&
				 dax.orig_attr.phys_port_cnt == 1 &&
				 dax.phys_port_cnt_ex == 1 &&
				 dax.orig_attr.max_qp_wr == da.max_qp_wr &&
				 dax.orig_attr.max_cqe == da.max_cqe,
			 "query_device_ex",
			 "max_cqe=%d max_qp_rd_atom=%d phys_port_cnt=%u "
			 "phys_port_cnt_ex=%u max_qp_wr=%d/%d",
			 dax.orig_attr.max_cqe, dax.orig_attr.max_qp_rd_atom,
			 dax.orig_attr.phys_port_cnt, dax.phys_port_cnt_ex,
			 dax.orig_attr.max_qp_wr, da.max_qp_wr);

	memset(&pa, 0, sizeof(pa));
	rc = ibv_query_port(ctx, 1, &pa);
	if (rc)
		hm_fatal("query_port.1", "rc=%d (%s)", rc, hm_errname(rc));
	hm_ok("query_port.1", "state=%s gid_tbl_len=%d active_mtu=%d",
	      ibv_port_state_str(pa.state), pa.gid_tbl_len,
	      hm_mtu_bytes(pa.active_mtu));
	{
		struct ibv_port_attr bad;

		errno = 0;
		rc = ibv_query_port(ctx, 0, &bad);
		expect_rc("query_port.0", rc, EINVAL, 0);
		errno = 0;
		rc = ibv_query_port(ctx, 2, &bad);
		expect_rc("query_port.2", rc, EINVAL, 0);
	}

	rc = ibv_query_gid(ctx, 1, pa.gid_tbl_len, &gid);
	hm_check(rc != 0, "query_gid.out_of_range", "index=%d rc=%d",
		 pa.gid_tbl_len, rc);
	if (opt.gidx >= pa.gid_tbl_len || ibv_query_gid(ctx, 1, opt.gidx, &gid))
		hm_fatal("query_gid", "GID index %d unreadable", opt.gidx);
	hm_ok("query_gid", "gidx=%d gid=%s", opt.gidx,
	      hm_gid_str(&gid, gs, sizeof(gs)));

	pd = ibv_alloc_pd(ctx);
	if (!pd)
		hm_fatal("alloc_pd", "%s", strerror(errno));
	hm_ok("alloc_pd", "%s", "");

	/* ---- CQ creation ---- */
	hm_step("ibv_create_cq error checks");
	{
		struct ibv_cq *bad;

		if (da.max_cqe < 0x7fffffff) {
			errno = 0;
			bad = ibv_create_cq(ctx, da.max_cqe + 1, NULL, NULL, 0);
			if (!expect_null("create_cq.cqe_above_max", bad, EINVAL, 0) &&
			    bad)
				ibv_destroy_cq(bad);
		}
		errno = 0;
		bad = ibv_create_cq(ctx, 0, NULL, NULL, 0);
		if (!expect_null("create_cq.cqe_zero", bad, EINVAL, 0) && bad)
			ibv_destroy_cq(bad);
		errno = 0;
		bad = ibv_create_cq(ctx, -1, NULL, NULL, 0);
		if (!expect_null("create_cq.cqe_negative", bad, EINVAL, 0) && bad)
			ibv_destroy_cq(bad);
		errno = 0;
		bad = ibv_create_cq(ctx, 16, NULL, NULL, ctx->num_comp_vectors);
		if (!expect_null("create_cq.comp_vector", bad, EINVAL, 0) && bad)
			ibv_destroy_cq(bad);
	}
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!cq)
		hm_fatal("create_cq", "cqe=64: %s", strerror(errno));
	hm_ok("create_cq", "cqe=%d", cq->cqe);
	cq2 = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	if (!cq2)
		hm_fatal("create_cq.2", "cqe=32: %s", strerror(errno));

	/* resize: EOPNOTSUPP, or success with the new size */
	hm_step("ibv_resize_cq");
	errno = 0;
	rc = ibv_resize_cq(cq2, 128);
	if (rc == EOPNOTSUPP)
		hm_ok("resize_cq", "rc=EOPNOTSUPP");
	else if (rc == 0)
		hm_check(cq2->cqe >= 128, "resize_cq", "supported: cqe=%d "
			 "(asked 128)", cq2->cqe);
	else
		hm_fail("resize_cq", "rc=%d (%s) errno=%s, expected "
			"EOPNOTSUPP or success", rc,
			rc > 0 ? hm_errname(rc) : "-", hm_errname(errno));

	/* ---- MR registration ---- */
	hm_step("ibv_reg_mr error checks");
	buf = hm_alloc_pages(buflen);
	buf2 = hm_alloc_pages(4096);
	{
		struct ibv_mr *bad;

		errno = 0;
		bad = ibv_reg_mr(pd, buf, buflen, IBV_ACCESS_REMOTE_WRITE);
		if (!expect_null("reg_mr.remote_write_no_local_write", bad,
				 EINVAL, 0) && bad)
			ibv_dereg_mr(bad);
		errno = 0;
		bad = ibv_reg_mr(pd, buf, buflen, IBV_ACCESS_REMOTE_ATOMIC);
		if (!expect_null("reg_mr.remote_atomic_no_local_write", bad,
				 EINVAL, 0) && bad)
			ibv_dereg_mr(bad);
		errno = 0;
		bad = ibv_reg_mr(pd, buf, buflen,
				 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC |
					 IBV_ACCESS_REMOTE_READ);
		if (!expect_null("reg_mr.remote_all_no_local_write", bad,
				 EINVAL, 0) && bad)
			ibv_dereg_mr(bad);
		errno = 0;
		bad = ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE);
		if (!expect_null("reg_mr.length_zero", bad, EINVAL, 0) && bad)
			ibv_dereg_mr(bad);
		/* memory that is not mapped: the kernel cannot pin it (EFAULT);
		 * found by hm_verbs_fuzz (the provider registered it) */
		errno = 0;
		bad = ibv_reg_mr(pd, NULL, 4096, IBV_ACCESS_LOCAL_WRITE);
		if (!expect_null("reg_mr.null_address", bad, EFAULT, 0) && bad)
			ibv_dereg_mr(bad);
		{
			void *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (m == MAP_FAILED)
				hm_fatal("mmap", "%s", strerror(errno));
			/* a hole in the middle of the range */
			munmap((char *)m + 4096, 4096);
			errno = 0;
			bad = ibv_reg_mr(pd, m, 3 * 4096, IBV_ACCESS_LOCAL_WRITE);
			if (!expect_null("reg_mr.unmapped_page", bad, EFAULT, 0) && bad)
				ibv_dereg_mr(bad);
			errno = 0;
			bad = ibv_reg_mr(pd, buf, (size_t)1 << 44, IBV_ACCESS_LOCAL_WRITE);
			if (!expect_null("reg_mr.length_16TiB", bad, EFAULT, ENOMEM) && bad)
				ibv_dereg_mr(bad);
			munmap(m, 4096);
			munmap((char *)m + 8192, 4096);
		}
		errno = 0;
		bad = ibv_reg_mr(pd, buf, buflen,
				 IBV_ACCESS_LOCAL_WRITE | (1u << 30));
		if (!expect_null("reg_mr.unknown_access_bit30", bad, EINVAL, 0) &&
		    bad)
			ibv_dereg_mr(bad);
	}
	mr = ibv_reg_mr(pd, buf, buflen,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ);
	if (!mr)
		hm_fatal("reg_mr", "%s", strerror(errno));
	hm_ok("reg_mr", "lkey=0x%x rkey=0x%x", mr->lkey, mr->rkey);

	/* ---- unsupported object types ---- */
	hm_step("unsupported object types (srq, ah, mw, UD/UC QP)");
	{
		struct ibv_srq_init_attr sa;
		struct ibv_ah_attr aa;
		struct ibv_srq *srq;
		struct ibv_ah *ah;
		struct ibv_mw *mw;
		struct ibv_qp *bad;

		memset(&sa, 0, sizeof(sa));
		sa.attr.max_wr = 16;
		sa.attr.max_sge = 1;
		errno = 0;
		srq = ibv_create_srq(pd, &sa);
		if (!expect_null("create_srq", srq, EOPNOTSUPP, ENOSYS) && srq)
			ibv_destroy_srq(srq);

		memset(&aa, 0, sizeof(aa));
		aa.is_global = 1;
		aa.grh.dgid = gid;
		aa.grh.sgid_index = (uint8_t)opt.gidx;
		aa.grh.hop_limit = 64;
		aa.port_num = 1;
		errno = 0;
		ah = ibv_create_ah(pd, &aa);
		if (!expect_null("create_ah", ah, EOPNOTSUPP, 0) && ah)
			ibv_destroy_ah(ah);

		errno = 0;
		mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
		if (!expect_null("alloc_mw.type1", mw, EOPNOTSUPP, 0) && mw)
			ibv_dealloc_mw(mw);
		errno = 0;
		mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
		if (!expect_null("alloc_mw.type2", mw, EOPNOTSUPP, 0) && mw)
			ibv_dealloc_mw(mw);

		bad = make_qp(pd, cq, IBV_QPT_UD, 16, 16, 1, 1, 0, NULL);
		if (!expect_null("create_qp.ud", bad, EOPNOTSUPP, EINVAL) && bad)
			ibv_destroy_qp(bad);
		bad = make_qp(pd, cq, IBV_QPT_RAW_PACKET, 16, 16, 1, 1, 0, NULL);
		if (!expect_null("create_qp.raw_packet", bad, EOPNOTSUPP, EINVAL) && bad)
			ibv_destroy_qp(bad);
	}

	/* ---- QP capabilities beyond the device limits ---- */
	hm_step("ibv_create_qp capability checks");
	{
		struct ibv_qp *bad;

		if (da.max_qp_wr < 0x7fffffff) {
			bad = make_qp(pd, cq, IBV_QPT_RC, (uint32_t)da.max_qp_wr + 1,
				      16, 1, 1, 0, NULL);
			if (!expect_null("create_qp.send_wr_above_max", bad,
					 EINVAL, 0) && bad)
				ibv_destroy_qp(bad);
			bad = make_qp(pd, cq, IBV_QPT_RC, 16,
				      (uint32_t)da.max_qp_wr + 1, 1, 1, 0, NULL);
			if (!expect_null("create_qp.recv_wr_above_max", bad,
					 EINVAL, 0) && bad)
				ibv_destroy_qp(bad);
		}
		bad = make_qp(pd, cq, IBV_QPT_RC, 16, 16,
			      (uint32_t)da.max_sge + 1, 1, 0, NULL);
		if (!expect_null("create_qp.send_sge_above_max", bad, EINVAL, 0) &&
		    bad)
			ibv_destroy_qp(bad);
		bad = make_qp(pd, cq, IBV_QPT_RC, 16, 16, 1,
			      (uint32_t)da.max_sge + 1, 0, NULL);
		if (!expect_null("create_qp.recv_sge_above_max", bad, EINVAL, 0) &&
		    bad)
			ibv_destroy_qp(bad);
		bad = make_qp(pd, cq, IBV_QPT_RC, 16, 16, 1, 1, 1u << 20, NULL);
		if (!expect_null("create_qp.inline_1MiB", bad, EINVAL, 0) && bad)
			ibv_destroy_qp(bad);
	}

	/* ---- a QP pair on this device: state machine errors ---- */
	hm_step("QP state machine errors");
	qa = make_qp(pd, cq, IBV_QPT_RC, 16, 16, 2, 2, 64, &capa);
	if (!qa) {
		/* inline support is optional: retry without */
		qa = make_qp(pd, cq, IBV_QPT_RC, 16, 16, 2, 2, 0, &capa);
		if (!qa)
			hm_fatal("create_qp.a", "%s", strerror(errno));
	}
	hm_ok("create_qp.a", "qpn=0x%x max_send_sge=%u max_recv_sge=%u "
	      "max_inline_data=%u", qa->qp_num, capa.max_send_sge,
	      capa.max_recv_sge, capa.max_inline_data);
	qb = make_qp(pd, cq, IBV_QPT_RC, 16, 16, 2, 2, 0, &capb);
	if (!qb)
		hm_fatal("create_qp.b", "%s", strerror(errno));
	hm_ok("create_qp.b", "qpn=0x%x", qb->qp_num);

	{
		struct ibv_qp_attr a;
		struct ibv_send_wr wr, *bad_wr;
		struct ibv_sge sge;
		enum ibv_qp_state st = IBV_QPS_UNKNOWN;

		/* RESET -> RTR directly */
		rtr_attr(&a, pa.active_mtu, qb->qp_num, &gid);
		rc = ibv_modify_qp(qa, &a, RTR_MASK);
		expect_rc("modify_qp.reset_to_rtr", rc, EINVAL, 0);

		/* RESET -> INIT on port 2 */
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 2;
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		rc = ibv_modify_qp(qa, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
		expect_rc("modify_qp.init_bad_port", rc, EINVAL, 0);

		rc = hm_query_qp_state(qa, &st);
		hm_check(rc == 0 && st == IBV_QPS_RESET && qa->state == IBV_QPS_RESET,
			 "query_qp.still_reset", "rc=%d state=%s qp->state=%s", rc,
			 hm_qp_state_str(st), hm_qp_state_str(qa->state));

		/* post_send while in RESET */
		sge.addr = (uintptr_t)buf;
		sge.length = 8;
		sge.lkey = mr->lkey;
		wr = write_wr(1, &sge, 1, (uintptr_t)buf + 4096, mr->rkey);
		bad_wr = NULL;
		rc = ibv_post_send(qa, &wr, &bad_wr);
		expect_refused("post_send.reset_qp", rc, EINVAL, 0, bad_wr == &wr,
			       "bad_wr=%p wr=%p", (void *)bad_wr, (void *)&wr);

		/* proper INIT, then INIT -> RTR without the required bits */
		rc = hm_qp_init(qa, IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_WRITE |
					    IBV_ACCESS_REMOTE_READ);
		must_zero("modify_qp.init.a", rc);
		rc = hm_qp_init(qb, IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_WRITE |
					    IBV_ACCESS_REMOTE_READ);
		must_zero("modify_qp.init.b", rc);
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		rc = ibv_modify_qp(qa, &a, IBV_QP_STATE);
		expect_rc("modify_qp.rtr_missing_mask", rc, EINVAL, 0);
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = pa.active_mtu;
		a.dest_qp_num = qb->qp_num;
		rc = ibv_modify_qp(qa, &a, IBV_QP_STATE | IBV_QP_PATH_MTU |
					   IBV_QP_DEST_QPN);
		expect_rc("modify_qp.rtr_missing_av", rc, EINVAL, 0);
		/* a zero destination GID is an invalid AV (found by
		 * hm_verbs_fuzz: the provider said EOPNOTSUPP) */
		rtr_attr(&a, pa.active_mtu, qb->qp_num, NULL);
		rc = ibv_modify_qp(qa, &a, RTR_MASK);
		expect_rc("modify_qp.rtr_zero_dgid", rc, EINVAL, 0);
		rc = hm_query_qp_state(qa, &st);
		hm_check(rc == 0 && st == IBV_QPS_INIT, "query_qp.still_init",
			 "rc=%d state=%s", rc, hm_qp_state_str(st));
	}

	/* connect qa <-> qb (loopback through the port) to RTS */
	hm_step("ibv_modify_qp to RTS (loopback pair)");
	{
		struct hm_rtr_args r;

		r = loop_rtr(pa.active_mtu, &gid, qb->qp_num, 0x222);
		rc = hm_qp_rtr(qa, &r);
		must_zero("modify_qp.rtr.a", rc);
		r.dest_qpn = qa->qp_num;
		r.rq_psn = 0x111;
		rc = hm_qp_rtr(qb, &r);
		must_zero("modify_qp.rtr.b", rc);
		/* HEMATITE_ACK_TIMER (docs/transport-engine.md): a value
		 * the provider does not know is refused, the QP stays in
		 * RTR; "standard" is taken */
		setenv("HEMATITE_ACK_TIMER", "fast", 1);
		rc = hm_qp_rts(qa, 0x111, 14, 7, 7, 1);
		expect_rc("modify_qp.rts_unknown_ack_timer", rc, EINVAL, 0);
		{
			enum ibv_qp_state st = IBV_QPS_UNKNOWN;

			rc = hm_query_qp_state(qa, &st);
			hm_check(rc == 0 && st == IBV_QPS_RTR,
				 "query_qp.still_rtr", "rc=%d state=%s", rc,
				 hm_qp_state_str(st));
		}
		setenv("HEMATITE_ACK_TIMER", "standard", 1);
		rc = hm_qp_rts(qa, 0x111, 14, 7, 7, 1);
		must_zero("modify_qp.rts.a (HEMATITE_ACK_TIMER=standard)", rc);
		unsetenv("HEMATITE_ACK_TIMER");
		rc = hm_qp_rts(qb, 0x222, 14, 7, 7, 1);
		must_zero("modify_qp.rts.b", rc);
	}

	/* ---- post errors on an RTS QP: nothing here may reach the wire ---- */
	hm_step("ibv_post_send/ibv_post_recv error checks");
	{
		struct ibv_send_wr wr, *bad_wr;
		struct ibv_recv_wr rwr, *bad_rwr;
		struct ibv_sge *sges;
		uint32_t nsge = capa.max_send_sge + 1, k;
		uint32_t nrsge = capa.max_recv_sge + 1;
		uint32_t inl = capa.max_inline_data + 1;
		struct ibv_mw fake_mw;
		uint8_t tso_hdr[64];

		if (nrsge > nsge)
			nsge = nrsge;
		sges = calloc(nsge, sizeof(*sges));
		if (!sges)
			hm_fatal("alloc", "sges");
		for (k = 0; k < nsge; k++) {
			sges[k].addr = (uintptr_t)buf + k * 16;
			sges[k].length = 16;
			sges[k].lkey = mr->lkey;
		}

		wr = write_wr(2, sges, (int)capa.max_send_sge + 1,
			      (uintptr_t)buf + 8192, mr->rkey);
		bad_wr = NULL;
		rc = ibv_post_send(qa, &wr, &bad_wr);
		expect_refused("post_send.too_many_sge", rc, EINVAL, 0,
			       bad_wr == &wr, "num_sge=%d bad_wr=%p wr=%p",
			       wr.num_sge, (void *)bad_wr, (void *)&wr);

		/* inline beyond max_inline_data */
		if (inl > buflen / 2)
			inl = (uint32_t)(buflen / 2);
		sges[0].addr = (uintptr_t)buf;
		sges[0].length = inl;
		wr = write_wr(3, sges, 1, (uintptr_t)buf + buflen / 2, mr->rkey);
		wr.send_flags |= IBV_SEND_INLINE;
		bad_wr = NULL;
		rc = ibv_post_send(qa, &wr, &bad_wr);
		expect_refused("post_send.inline_too_long", rc, EINVAL, 0,
			       bad_wr == &wr, "len=%u max_inline_data=%u "
			       "bad_wr_ok=%d", inl, capa.max_inline_data,
			       bad_wr == &wr);
		sges[0].length = 16;

		/* receive with too many SGEs */
		memset(&rwr, 0, sizeof(rwr));
		rwr.wr_id = 4;
		rwr.sg_list = sges;
		rwr.num_sge = (int)nrsge;
		bad_rwr = NULL;
		rc = ibv_post_recv(qa, &rwr, &bad_rwr);
		expect_refused("post_recv.too_many_sge", rc, EINVAL, 0,
			       bad_rwr == &rwr, "num_sge=%d bad_wr=%p wr=%p",
			       rwr.num_sge, (void *)bad_rwr, (void *)&rwr);

		/* opcodes the device does not implement */
		wr = hm_send_wr(5, IBV_WR_LOCAL_INV, NULL, 0);
		wr.invalidate_rkey = 0xdeadbe00u;
		post_refused(qa, &wr, "post_send.opcode_local_inv", EINVAL, EOPNOTSUPP);

		memset(&fake_mw, 0, sizeof(fake_mw));
		fake_mw.context = ctx;
		fake_mw.pd = pd;
		fake_mw.rkey = 0xdeadbf00u;
		fake_mw.type = IBV_MW_TYPE_2;
		wr = hm_send_wr(6, IBV_WR_BIND_MW, NULL, 0);
		wr.bind_mw.mw = &fake_mw;
		wr.bind_mw.rkey = 0xdeadbf01u;
		wr.bind_mw.bind_info.mr = mr;
		wr.bind_mw.bind_info.addr = (uintptr_t)buf;
		wr.bind_mw.bind_info.length = 64;
		wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
		post_refused(qa, &wr, "post_send.opcode_bind_mw", EINVAL, EOPNOTSUPP);

		memset(tso_hdr, 0, sizeof(tso_hdr));
		wr = hm_send_wr(7, IBV_WR_TSO, sges, 1);
		wr.tso.hdr = tso_hdr;
		wr.tso.hdr_sz = 0;
		wr.tso.mss = 0;
		post_refused(qa, &wr, "post_send.opcode_tso", EINVAL, EOPNOTSUPP);

		wr = hm_send_wr(8, (enum ibv_wr_opcode)0x7f, sges, 1);
		post_refused(qa, &wr, "post_send.opcode_garbage", EINVAL, EOPNOTSUPP);
		free(sges);

		/* nothing of the above may have produced a completion */
		{
			struct ibv_wc w;
			int stray = hm_poll_cq_quiet(cq, 200000, &w);

			if (stray > 0)
				hm_fail("no_completion_for_rejected_wr",
					"%d CQE(s), first wr_id=%llu status=%s",
					stray, (unsigned long long)w.wr_id,
					ibv_wc_status_str(w.status));
			else
				hm_ok("no_completion_for_rejected_wr", "%s", "");
		}
	}

	/* ---- ECE: the QP's vendor id and no options (Hematite implements no
	 * enhancement yet); a peer's options reduce to the common set (none);
	 * another vendor's ECE EOPNOTSUPP, a comp_mask EINVAL, a change after
	 * INIT EINVAL (docs/verbs-provider.md, ECE). ---- */
	hm_step("ECE (ibv_query_ece / ibv_set_ece)");
	{
		struct ibv_qp *eq = make_qp(pd, cq, IBV_QPT_RC, 4, 4, 1, 1, 0, NULL);
		struct ibv_ece e, got;
		struct hm_rtr_args r;

		if (!eq)
			hm_fatal("ece.create_qp", "%s", strerror(errno));
		memset(&got, 0xff, sizeof(got));
		rc = ibv_query_ece(eq, &got);
		hm_check(rc == 0 && got.vendor_id == da.vendor_id && got.options == 0 && got.comp_mask == 0,
			 "ece.query", "rc=%s vendor_id %#x (device %#x) options %#x comp_mask %#x",
			 hm_errname(rc), got.vendor_id, da.vendor_id, got.options, got.comp_mask);
		e = got;
		e.comp_mask = 1;
		expect_rc("ece.set_comp_mask", ibv_set_ece(eq, &e), EINVAL, 0);
		e = got;
		e.vendor_id = 0x15b3; /* another vendor's */
		e.options = 0x1;
		expect_rc("ece.set_other_vendor", ibv_set_ece(eq, &e), EOPNOTSUPP, 0);
		e = got;
		e.options = 0xffffffffu; /* every option: the QP keeps those it supports */
		must_zero("ece.set_own_vendor", ibv_set_ece(eq, &e));
		memset(&got, 0xff, sizeof(got));
		rc = ibv_query_ece(eq, &got);
		hm_check(rc == 0 && got.options == 0, "ece.reduced",
			 "after set_ece with options 0xffffffff: rc=%s options %#x (supported: none)",
			 hm_errname(rc), got.options);
		r = loop_rtr(pa.active_mtu, &gid, eq->qp_num, 0x444);
		must_zero("ece.qp_init", hm_qp_init(eq, 0));
		e.options = 0;
		must_zero("ece.set_in_init", ibv_set_ece(eq, &e));
		must_zero("ece.qp_rtr", hm_qp_rtr(eq, &r));
		expect_rc("ece.set_after_init", ibv_set_ece(eq, &e), EINVAL, 0);
		must_zero("ece.destroy_qp", ibv_destroy_qp(eq));
	}

	/* ---- CQ overrun: more completions than the CQ holds, nobody polling.
	 * The device must say so (IBV_EVENT_CQ_ERR on the async fd, as mlx5
	 * and rxe do) instead of overwriting entries or dropping them quietly.
	 * A QP connected to itself posts cqe + 2 signaled WRITEs. ---- */
	hm_step("CQ overrun (IBV_EVENT_CQ_ERR)");
	{
		struct ibv_cq *ocq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		struct ibv_qp *oqp = NULL;
		struct ibv_qp_cap ocap;
		struct hm_rtr_args r;
		int n, posted = 0, seen = 0, other = 0;
		uint64_t dl;

		if (!ocq)
			hm_fatal("cq_overrun.create_cq", "%s", strerror(errno));
		n = ocq->cqe;
		oqp = make_qp(pd, ocq, IBV_QPT_RC, (uint32_t)n + 4, 1, 1, 1, 0, &ocap);
		if (!oqp)
			hm_fatal("cq_overrun.create_qp", "%s", strerror(errno));
		r = loop_rtr(pa.active_mtu, &gid, oqp->qp_num, 0x333);
		must_zero("cq_overrun.qp_init",
			  hm_qp_init(oqp, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE));
		must_zero("cq_overrun.qp_rtr", hm_qp_rtr(oqp, &r));
		must_zero("cq_overrun.qp_rts", hm_qp_rts(oqp, 0x333, 14, 7, 7, 1));
		for (int k = 0; k < n + 2; k++) {
			struct ibv_sge sg = { .addr = (uintptr_t)buf + (size_t)k * 16,
					      .length = 16, .lkey = mr->lkey };
			struct ibv_send_wr w, *bw = NULL;

			memset(&w, 0, sizeof(w));
			w.wr_id = 0x0ce0 + (uint64_t)k;
			w.sg_list = &sg;
			w.num_sge = 1;
			w.opcode = IBV_WR_RDMA_WRITE;
			w.send_flags = IBV_SEND_SIGNALED;
			w.wr.rdma.remote_addr = (uintptr_t)buf + 4096 + (size_t)k * 16;
			w.wr.rdma.rkey = mr->rkey;
			if (ibv_post_send(oqp, &w, &bw) == 0)
				posted++;
		}
		hm_check(posted == n + 2, "cq_overrun.posted", "%d of %d WRITEs posted (CQ of %d)",
			 posted, n + 2, n);
		fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
		dl = hm_deadline();
		while (!seen && hm_now_us() < dl) {
			struct ibv_async_event ev;

			if (ibv_get_async_event(ctx, &ev) == 0) {
				if (ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == ocq)
					seen = 1;
				else if (ev.event_type != IBV_EVENT_PORT_ACTIVE)
					other++;
				ibv_ack_async_event(&ev);
			} else {
				hm_sleep_us(1000);
			}
		}
		hm_check(seen, "cq_overrun.event", "IBV_EVENT_CQ_ERR for a CQ of %d after %d WRITEs "
			 "(%d other events)", n, posted, other);
		must_zero("cq_overrun.destroy_qp", ibv_destroy_qp(oqp));
		must_zero("cq_overrun.destroy_cq", ibv_destroy_cq(ocq));
	}

	/* ---- destroy while in use ---- */
	hm_step("destroy while in use");
	pd2 = ibv_alloc_pd(ctx);
	if (!pd2)
		hm_fatal("alloc_pd.2", "%s", strerror(errno));
	mr2 = ibv_reg_mr(pd2, buf2, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!mr2)
		hm_fatal("reg_mr.2", "%s", strerror(errno));
	rc = ibv_dealloc_pd(pd2);
	expect_rc("dealloc_pd.mr_in_use", rc, EBUSY, 0);
	rc = ibv_destroy_cq(cq);
	expect_rc("destroy_cq.qp_in_use", rc, EBUSY, 0);

	/* ---- teardown in order; every destroy must return 0 ---- */
	MUST_ZERO_STEP(ibv_destroy_qp, "destroy_qp.a", qa);
	MUST_ZERO_STEP(ibv_destroy_qp, "destroy_qp.b", qb);
	MUST_ZERO_STEP(ibv_destroy_cq, "destroy_cq", cq);
	MUST_ZERO_STEP(ibv_destroy_cq, "destroy_cq.2", cq2);
	MUST_ZERO_STEP(ibv_dereg_mr, "dereg_mr", mr);
	MUST_ZERO_STEP(ibv_dereg_mr, "dereg_mr.2", mr2);
	MUST_ZERO_STEP(ibv_dealloc_pd, "dealloc_pd.2", pd2);
	MUST_ZERO_STEP(ibv_dealloc_pd, "dealloc_pd", pd);
	MUST_ZERO_STEP(ibv_close_device, "close_device", ctx);
	ibv_free_device_list(devlist);
	free(buf);
	free(buf2);

	hm_summary();
	return hm_exit_code();
}
