/* hm_multi_ctx: one process opens the same device many times (issue 22: many contexts per
 * function), as rdma-core's pyverbs tests and libraries inside one program do.
 *
 * One process, one NIC (-d, default hematite0), N contexts (-n, default 16):
 *   - open_contexts: N ibv_open_device of the same device all succeed;
 *   - ring: context i has its own PD, MR, CQ and QP; QP i is connected (through the port's
 *     loopback) to QP i+1 of the next context, and writes a 64 KiB pattern into context
 *     i+1's memory (RDMA WRITE), then SENDs it 4 KiB with immediate data. Every byte is
 *     verified. Even contexts wait for the receive through a completion channel of their own
 *     (ibv_get_cq_event must return their CQ); odd ones poll;
 *   - cross_context_cq: a QP of context 0's PD with a CQ of context 1: EINVAL;
 *   - cross_context_lkey: a WRITE from context 0's QP whose SGE names context 1's MR: the
 *     completion is IBV_WC_LOC_PROT_ERR and the target memory does not change;
 *   - close_with_objects: a context that creates a PD, an MR, a CQ and a QP (brought to RTS)
 *     and is closed without destroying them: the device's resources (hematite_query_resources,
 *     QUERY_RESOURCES) are back where they were before it;
 *   - fork_after_open: a child forked while the contexts are open opens the device itself and
 *     gets EBUSY (another process), not a share of the parent's device;
 *   - context_limit: contexts opened until one fails: MAX (256, docs/verbs-provider.md) in
 *     all, the next one ENOMEM; closing one lets one more open;
 *   - every object destroyed and every context closed with success.
 *
 *   hm_multi_ctx [-d DEV] [-n N] [-t SECS]     (under hematite-run: it preloads the provider)
 */
#include "hm_common.h"
#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define MAXN 64
#define WBYTES 65536
#define SBYTES 4096
#define CTX_LIMIT 256

typedef int (*qres_fn)(struct ibv_context *, uint32_t *);

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *buf; /* [0, W): WRITE source, [W, 2W): WRITE target, then SEND source and target */
};

static unsigned char pat(int ctx, size_t i)
{
	return (unsigned char)((i * 131u) ^ ((unsigned)ctx * 29u + 7u) ^ (i >> 9));
}

static struct ibv_device *find_dev(const char *name)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list)
		hm_fatal("get_device_list", "%s", strerror(errno));
	for (int i = 0; i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0)
			return list[i]; /* the list stays allocated: the device must outlive the contexts */
	hm_fatal("get_device_list", "device %s not found", name);
}

static void resources(qres_fn q, struct ibv_context *ctx, uint32_t out[4], const char *what)
{
	int e = q(ctx, out);

	if (e)
		hm_fatal("resources", "hematite_query_resources (%s): %s", what, strerror(e));
}

int main(int argc, char **argv)
{
	const char *name = "hematite0";
	int n = 16, c;

	hm_init_common("hm_multi_ctx");
	while ((c = getopt(argc, argv, "d:n:t:")) != -1) {
		switch (c) {
		case 'd': name = optarg; break;
		case 'n': n = atoi(optarg); break;
		case 't': hm_timeout_s = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: hm_multi_ctx [-d DEV] [-n N] [-t SECS]\n");
			return 2;
		}
	}
	if (n < 2 || n > MAXN)
		hm_fatal("options", "-n 2..%d", MAXN);
	qres_fn qres = (qres_fn)dlsym(RTLD_DEFAULT, "hematite_query_resources");
	if (!qres)
		hm_fatal("provider", "hematite_query_resources not found (run under hematite-run, which preloads the provider)");
	/* every context has an async pipe (two descriptors) */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	hm_start_watchdog();
	struct ibv_device *dev = find_dev(name);

	/* ---- N contexts of one device */
	static struct side s[MAXN];
	int opened = 0;
	hm_step("ibv_open_device N times");
	for (int i = 0; i < n; i++) {
		s[i].ctx = ibv_open_device(dev);
		if (!s[i].ctx) {
			hm_fail("open_contexts", "open %d of %d: %s", i + 1, n, strerror(errno));
			break;
		}
		opened++;
	}
	if (opened < n)
		hm_fatal("open_contexts", "only %d of %d contexts", opened, n);
	hm_ok("open_contexts", "%d contexts of %s in one process", n, name);
	uint32_t base[4];
	resources(qres, s[0].ctx, base, "before any object");

	struct ibv_port_attr pa;
	union ibv_gid gid;
	if (ibv_query_port(s[0].ctx, 1, &pa) || ibv_query_gid(s[0].ctx, 1, 0, &gid))
		hm_fatal("query_port", "ibv_query_port / ibv_query_gid failed");

	/* ---- objects per context */
	hm_step("objects per context");
	size_t blen = 2 * WBYTES + 2 * SBYTES;
	for (int i = 0; i < n; i++) {
		struct side *x = &s[i];
		x->buf = hm_alloc_pages(blen);
		for (size_t k = 0; k < WBYTES; k++)
			x->buf[k] = pat(i, k);
		for (size_t k = 0; k < SBYTES; k++)
			x->buf[2 * WBYTES + k] = pat(i + 1000, k);
		x->pd = ibv_alloc_pd(x->ctx);
		if (!x->pd)
			hm_fatal("setup", "context %d: alloc_pd: %s", i, strerror(errno));
		x->mr = ibv_reg_mr(x->pd, x->buf, blen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (!x->mr)
			hm_fatal("setup", "context %d: reg_mr: %s", i, strerror(errno));
		if (i % 2 == 0) {
			x->ch = ibv_create_comp_channel(x->ctx);
			if (!x->ch)
				hm_fatal("setup", "context %d: create_comp_channel: %s", i, strerror(errno));
		}
		x->cq = ibv_create_cq(x->ctx, 16, NULL, x->ch, 0);
		if (!x->cq)
			hm_fatal("setup", "context %d: create_cq: %s", i, strerror(errno));
		struct ibv_qp_init_attr ia = hm_qp_attr(x->cq, x->cq, IBV_QPT_RC, 8, 8, 1, 1, 0);
		x->qp = ibv_create_qp(x->pd, &ia);
		if (!x->qp)
			hm_fatal("setup", "context %d: create_qp: %s", i, strerror(errno));
	}
	/* an RC QP has one peer, so the ring is made of pairs: QP i (context i) and a second QP,
	 * peer[i], of context i+1 */
	static struct ibv_qp *peer[MAXN];
	for (int i = 0; i < n; i++) {
		struct side *y = &s[(i + 1) % n];
		struct ibv_qp_init_attr ia = hm_qp_attr(y->cq, y->cq, IBV_QPT_RC, 8, 8, 1, 1, 0);
		peer[i] = ibv_create_qp(y->pd, &ia);
		if (!peer[i])
			hm_fatal("setup", "context %d: create_qp (peer): %s", (i + 1) % n, strerror(errno));
	}
	for (int i = 0; i < n; i++) {
		uint32_t pa_psn = hm_rand_psn(), pb_psn = hm_rand_psn();
		struct hm_rtr_args r = hm_rtr_to(pa.active_mtu, peer[i]->qp_num, pb_psn, &gid, 0, 1);
		if (hm_qp_init(s[i].qp, IBV_ACCESS_REMOTE_WRITE) || hm_qp_rtr(s[i].qp, &r) ||
		    hm_qp_rts(s[i].qp, pa_psn, 14, 7, 7, 1))
			hm_fatal("connect", "context %d: INIT/RTR/RTS: %s", i, strerror(errno));
		r = hm_rtr_to(pa.active_mtu, s[i].qp->qp_num, pa_psn, &gid, 0, 1);
		if (hm_qp_init(peer[i], IBV_ACCESS_REMOTE_WRITE) || hm_qp_rtr(peer[i], &r) ||
		    hm_qp_rts(peer[i], pb_psn, 14, 7, 7, 1))
			hm_fatal("connect", "context %d (peer): INIT/RTR/RTS: %s", (i + 1) % n, strerror(errno));
	}

	/* ---- ring: WRITE and SEND from context i into context i+1 */
	hm_step("ring: receives, WRITEs and SENDs");
	for (int i = 0; i < n; i++) {
		struct side *y = &s[(i + 1) % n];
		struct ibv_sge sg = { .addr = (uintptr_t)y->buf + 2 * WBYTES + SBYTES, .length = SBYTES, .lkey = y->mr->lkey };
		struct ibv_recv_wr w = { .wr_id = 0x5000 + (uint64_t)i, .sg_list = &sg, .num_sge = 1 }, *bad;
		if (ibv_post_recv(peer[i], &w, &bad))
			hm_fatal("post_recv", "context %d: %s", (i + 1) % n, strerror(errno));
		if (y->ch && ibv_req_notify_cq(y->cq, 0))
			hm_fatal("req_notify_cq", "context %d: %s", (i + 1) % n, strerror(errno));
	}
	for (int i = 0; i < n; i++) {
		struct side *x = &s[i], *y = &s[(i + 1) % n];
		struct ibv_sge ws = { .addr = (uintptr_t)x->buf, .length = WBYTES, .lkey = x->mr->lkey };
		struct ibv_sge ss = { .addr = (uintptr_t)x->buf + 2 * WBYTES, .length = SBYTES, .lkey = x->mr->lkey };
		struct ibv_send_wr sw = { .wr_id = 0x3000 + (uint64_t)i, .sg_list = &ss, .num_sge = 1,
					  .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
					  .imm_data = htonl(0xC0DE0000u + (uint32_t)i) };
		struct ibv_send_wr ww = { .wr_id = 0x2000 + (uint64_t)i, .sg_list = &ws, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED, .next = &sw }, *bad;
		ww.wr.rdma.remote_addr = (uintptr_t)y->buf + WBYTES;
		ww.wr.rdma.rkey = y->mr->rkey;
		if (ibv_post_send(x->qp, &ww, &bad))
			hm_fatal("post_send", "context %d: %s", i, strerror(errno));
	}
	/* completions: context i sees its two sends (QP i) and, from QP peer[i-1], the receive */
	int bad_wc = 0, wrong_chan = 0, events = 0;
	for (int i = 0; i < n; i++) {
		struct side *x = &s[i];
		int want_send = 2, want_recv = 1, got_send = 0, got_recv = 0;
		uint64_t dl = hm_deadline();
		if (x->ch) {
			struct ibv_cq *ecq = NULL;
			void *ectx;
			hm_step("ibv_get_cq_event of a context's own channel");
			if (ibv_get_cq_event(x->ch, &ecq, &ectx))
				hm_fatal("get_cq_event", "context %d: %s", i, strerror(errno));
			wrong_chan += ecq != x->cq;
			ibv_ack_cq_events(ecq, 1);
			events++;
		}
		while (got_send < want_send || got_recv < want_recv) {
			struct ibv_wc wc[4];
			int k = hm_poll_cq(x->cq, 4, wc, "ring completions");
			for (int j = 0; j < k; j++) {
				if (wc[j].status != IBV_WC_SUCCESS) {
					bad_wc++;
					hm_info("context %d: wr_id %#llx %s", i, (unsigned long long)wc[j].wr_id,
						ibv_wc_status_str(wc[j].status));
				}
				if (wc[j].opcode == IBV_WC_RECV) {
					int from = (i + n - 1) % n;
					got_recv++;
					bad_wc += wc[j].wr_id != 0x5000 + (uint64_t)from || wc[j].byte_len != SBYTES ||
						  !(wc[j].wc_flags & IBV_WC_WITH_IMM) ||
						  ntohl(wc[j].imm_data) != 0xC0DE0000u + (uint32_t)from;
				} else {
					got_send++;
					bad_wc += wc[j].qp_num != x->qp->qp_num;
				}
			}
			if (!k) {
				if (hm_now_us() > dl)
					hm_timeout("ring completions of context %d (%d sends, %d receives)", i, got_send, got_recv);
				hm_sleep_us(200);
			}
		}
	}
	size_t wrong = 0;
	for (int i = 0; i < n; i++) {
		int from = (i + n - 1) % n;
		for (size_t k = 0; k < WBYTES; k++)
			wrong += s[i].buf[WBYTES + k] != pat(from, k);
		for (size_t k = 0; k < SBYTES; k++)
			wrong += s[i].buf[2 * WBYTES + SBYTES + k] != pat(from + 1000, k);
	}
	hm_check(bad_wc == 0 && wrong == 0 && wrong_chan == 0, "ring",
		 "%d contexts: %d x 64 KiB WRITE + 4 KiB SEND with immediate between QPs of neighbouring contexts, "
		 "%zu bytes wrong, %d bad completions; %d completion events, %d on another context's CQ",
		 n, n, wrong, bad_wc, events, wrong_chan);

	/* ---- a CQ of another context */
	hm_step("cross-context CQ");
	{
		struct ibv_qp_init_attr ia = hm_qp_attr(s[1].cq, s[1].cq, IBV_QPT_RC, 4, 4, 1, 1, 0);
		errno = 0;
		struct ibv_qp *q = ibv_create_qp(s[0].pd, &ia);
		hm_check(!q && errno == EINVAL, "cross_context_cq", "create_qp with context 0's PD and context 1's CQ: %s (%s)",
			 q ? "created" : "refused", hm_errname(errno));
		if (q)
			ibv_destroy_qp(q);
	}

	/* ---- an lkey of another context (its PD): a local protection error, nothing written */
	hm_step("cross-context lkey");
	{
		struct side *x = &s[0], *y = &s[1];
		memset(y->buf + WBYTES, 0x5A, WBYTES);
		struct ibv_sge sg = { .addr = (uintptr_t)s[2].buf, .length = 256, .lkey = s[2].mr->lkey };
		struct ibv_send_wr w = hm_send_wr(0x7000, IBV_WR_RDMA_WRITE, &sg, 1), *bad;
		w.wr.rdma.remote_addr = (uintptr_t)y->buf + WBYTES;
		w.wr.rdma.rkey = y->mr->rkey;
		struct ibv_wc wc;
		memset(&wc, 0, sizeof(wc));
		int pe = ibv_post_send(x->qp, &w, &bad);
		if (!pe)
			hm_poll_cq_wait(x->cq, &wc, 1, "the cross-context lkey's completion");
		size_t changed = 0;
		for (size_t k = 0; k < WBYTES; k++)
			changed += y->buf[WBYTES + k] != 0x5A;
		hm_check(!pe && wc.wr_id == 0x7000 && wc.status == IBV_WC_LOC_PROT_ERR && changed == 0, "cross_context_lkey",
			 "WRITE from context 0 with context 2's lkey: post %s, completion %s, %zu target bytes changed",
			 hm_errname(pe), ibv_wc_status_str(wc.status), changed);
	}

	/* ---- a context closed with its objects: the device takes them back */
	hm_step("close_with_objects");
	{
		uint32_t before[4], during[4], after[4];
		resources(qres, s[0].ctx, before, "before the extra context");
		struct ibv_context *e = ibv_open_device(dev);
		if (!e)
			hm_fatal("close_with_objects", "open: %s", strerror(errno));
		unsigned char *eb = hm_alloc_pages(8192);
		struct ibv_pd *pd = ibv_alloc_pd(e);
		struct ibv_mr *mr = pd ? ibv_reg_mr(pd, eb, 8192, IBV_ACCESS_LOCAL_WRITE) : NULL;
		struct ibv_cq *cq = ibv_create_cq(e, 8, NULL, NULL, 0);
		struct ibv_qp_init_attr ia = hm_qp_attr(cq, cq, IBV_QPT_RC, 4, 4, 1, 1, 0);
		struct ibv_qp *qp = pd && cq ? ibv_create_qp(pd, &ia) : NULL;
		if (!mr || !qp)
			hm_fatal("close_with_objects", "objects: %s", strerror(errno));
		struct hm_rtr_args r = hm_rtr_to(pa.active_mtu, qp->qp_num, 0x100, &gid, 0, 1);
		if (hm_qp_init(qp, 0) || hm_qp_rtr(qp, &r) || hm_qp_rts(qp, 0x100, 14, 7, 7, 1))
			hm_fatal("close_with_objects", "INIT/RTR/RTS: %s", strerror(errno));
		resources(qres, s[0].ctx, during, "with the extra context's objects");
		int rc = ibv_close_device(e);
		resources(qres, s[0].ctx, after, "after closing it");
		hm_check(rc == 0 && during[0] == before[0] + 1 && during[1] == before[1] + 1 && during[2] == before[2] + 1 &&
			 during[3] == before[3] + 1 && memcmp(before, after, sizeof(before)) == 0,
			 "close_with_objects", "PD CQ MR QP %u %u %u %u, with the context's objects %u %u %u %u, after its close "
			 "(rc %d) %u %u %u %u", before[0], before[1], before[2], before[3], during[0], during[1], during[2],
			 during[3], rc, after[0], after[1], after[2], after[3]);
	}

	/* ---- a child forked now is another process: EBUSY, the parent's contexts untouched */
	hm_step("fork_after_open");
	{
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0)
			hm_fatal("fork", "%s", strerror(errno));
		if (pid == 0) {
			errno = 0;
			struct ibv_context *cc = ibv_open_device(dev);
			_exit(cc ? 1 : errno == EBUSY ? 0 : 2);
		}
		int st = 0;
		waitpid(pid, &st, 0);
		uint32_t r[4];
		resources(qres, s[0].ctx, r, "after the child");
		hm_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork_after_open",
			 "the child's ibv_open_device: %s; the parent's context still answers (%u QPs)",
			 !WIFEXITED(st) ? "crashed" : WEXITSTATUS(st) == 0 ? "EBUSY" : WEXITSTATUS(st) == 1 ? "succeeded" : "another error",
			 r[3]);
	}

	/* ---- the limit */
	hm_step("context_limit");
	{
		static struct ibv_context *more[CTX_LIMIT + 1];
		int k = 0, err = 0;
		while (k < CTX_LIMIT + 1) {
			more[k] = ibv_open_device(dev);
			if (!more[k]) {
				err = errno;
				break;
			}
			k++;
		}
		int total = k + n;
		int again = 0;
		if (k > 0) {
			ibv_close_device(more[--k]);
			more[k] = ibv_open_device(dev);
			again = more[k] != NULL;
			k += again;
		}
		int closed = 0;
		for (int j = 0; j < k; j++)
			closed += ibv_close_device(more[j]) == 0;
		hm_check(total == CTX_LIMIT && err == ENOMEM && again && closed == k, "context_limit",
			 "%d contexts open at once, the next: %s; after closing one, another opens: %s; %d closed",
			 total, hm_errname(err), again ? "yes" : "no", closed);
	}

	/* ---- teardown */
	int bad_td = 0;
	for (int i = 0; i < n; i++) {
		hm_step("teardown");
		bad_td += ibv_destroy_qp(s[i].qp) != 0;
		bad_td += ibv_destroy_qp(peer[i]) != 0;
	}
	for (int i = 0; i < n; i++) {
		bad_td += ibv_destroy_cq(s[i].cq) != 0;
		if (s[i].ch)
			bad_td += ibv_destroy_comp_channel(s[i].ch) != 0;
		bad_td += ibv_dereg_mr(s[i].mr) != 0;
		bad_td += ibv_dealloc_pd(s[i].pd) != 0;
	}
	uint32_t end[4];
	resources(qres, s[0].ctx, end, "after teardown");
	for (int i = 0; i < n; i++)
		bad_td += ibv_close_device(s[i].ctx) != 0;
	hm_check(bad_td == 0 && memcmp(base, end, sizeof(base)) == 0, "teardown",
		 "%d failed calls; resources %u %u %u %u, at the start %u %u %u %u", bad_td, end[0], end[1], end[2], end[3],
		 base[0], base[1], base[2], base[3]);
	hm_summary();
	return hm_exit_code();
}
