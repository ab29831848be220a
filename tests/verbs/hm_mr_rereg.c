/* hm_mr_rereg: ibv_rereg_mr (issue 26) on one NIC, two RC QPs connected through the port's
 * loopback. What each change must do on the wire, and what a refusal must leave:
 *   - access: an MR re-registered without REMOTE_WRITE refuses an RDMA WRITE (the requester's
 *     completion is IBV_WC_REM_ACCESS_ERR, the target untouched); given REMOTE_WRITE again it
 *     takes one (every byte verified);
 *   - keys: they stay (the MR is changed in place): the rkey a peer holds keeps working;
 *   - translation: the MR moved to other memory takes a WRITE there, and the old memory is left
 *     alone;
 *   - PD: an MR moved to another PD cannot be a receive buffer of a QP of the first PD (the
 *     sender's completion is IBV_WC_REM_OP_ERR, the receiver's IBV_WC_LOC_PROT_ERR); that PD
 *     cannot be deallocated while the MR is in it; moved back, a SEND lands;
 *   - RESET cleans the QP's completions (the flushes of ERR) from its CQ, and so does destroying
 *     a QP, leaving another QP's completion in the same CQ;
 *     (a control QP's flushes in the same CQ, neither reset nor destroyed, must be polled: they
 *     show that the flushes had arrived);
 *   - refusals, each with IBV_REREG_MR_ERR_CMD, the errno, and the MR unchanged (same keys, and a
 *     WRITE through them still lands): remote write without local write (EINVAL), a zero-based
 *     MR (EOPNOTSUPP), unmapped new memory (EFAULT), another context's PD (EINVAL), no flag
 *     (EINVAL); and libibverbs' own input checks (IBV_REREG_MR_ERR_INPUT).
 *
 *   hm_mr_rereg [-d DEV] [-t SECS]     (under hematite-run, which preloads the provider; without
 *   fork protection: with ibv_fork_init or RDMAV_FORK_SAFE, libibverbs refuses unmapped memory
 *   itself, with IBV_REREG_MR_ERR_DONT_FORK_NEW, before the provider sees it)
 */
#include "hm_common.h"
#include <sys/mman.h>

#define BUF 65536

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cqa, *cqb;
static struct ibv_qp *qa, *qb, *qd; /* qd: a control QP on cqb, never reset or destroyed while its flushes wait */
static struct ibv_port_attr pa;
static union ibv_gid gid;
static uint32_t psn = 0x100;
static const int qacc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

/* both QPs to RESET and back to RTS, connected to each other with fresh PSNs */
static void connect_pair(void)
{
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };
	if (ibv_modify_qp(qa, &r, IBV_QP_STATE) || ibv_modify_qp(qb, &r, IBV_QP_STATE))
		hm_fatal("connect", "to RESET: %s", strerror(errno));
	uint32_t pa_psn = psn, pb_psn = psn + 0x1000;
	psn += 0x2000;
	struct hm_rtr_args ra = hm_rtr_to(pa.active_mtu, qb->qp_num, pb_psn, &gid, 0, 1);
	struct hm_rtr_args rb = hm_rtr_to(pa.active_mtu, qa->qp_num, pa_psn, &gid, 0, 1);
	/* a short ACK timeout and no retries: an error completes at once */
	int rc, step = 0;
	if ((rc = hm_qp_init(qa, qacc)) || (++step, rc = hm_qp_rtr(qa, &ra)) || (++step, rc = hm_qp_rts(qa, pa_psn, 14, 7, 7, 1)) ||
	    (++step, rc = hm_qp_init(qb, qacc)) || (++step, rc = hm_qp_rtr(qb, &rb)) ||
	    (++step, rc = hm_qp_rts(qb, pb_psn, 14, 7, 7, 1)))
	{
		enum ibv_qp_state sa = IBV_QPS_UNKNOWN, sb = IBV_QPS_UNKNOWN;
		hm_query_qp_state(qa, &sa);
		hm_query_qp_state(qb, &sb);
		hm_fatal("connect", "RESET -> RTS, step %d of INIT/RTR/RTS (A then B): %s; A is in %s, B in %s", step,
			 hm_errname(rc), hm_qp_state_str(sa), hm_qp_state_str(sb));
	}
}

/* q from RESET to INIT, k receives posted, then ERR: k flushes will land in q's CQ */
static void flushes(struct ibv_qp *q, int k, uint32_t lkey, void *buf)
{
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };
	if (ibv_modify_qp(q, &r, IBV_QP_STATE) || hm_qp_init(q, qacc))
		hm_fatal("flushes", "QP %#x to INIT: %s", q->qp_num, strerror(errno));
	for (int j = 0; j < k; j++) {
		struct ibv_sge sg = { .addr = (uintptr_t)buf, .length = 64, .lkey = lkey };
		struct ibv_recv_wr w = { .wr_id = 900 + (uint64_t)j, .sg_list = &sg, .num_sge = 1 }, *bw;
		if (ibv_post_recv(q, &w, &bw))
			hm_fatal("post_recv", "QP %#x: %s", q->qp_num, strerror(errno));
	}
	r.qp_state = IBV_QPS_ERR;
	if (ibv_modify_qp(q, &r, IBV_QP_STATE))
		hm_fatal("flushes", "QP %#x to ERR: %s", q->qp_num, strerror(errno));
}

/* everything cqb holds within quiet_ms of the last: how many, how many are the control QP's
 * flushes, and how many are none of (control flush, a successful completion of qb) */
static int drain_b(struct ibv_wc *w, int max, int *ctl, int *other)
{
	int got = 0, idle = 0;
	*ctl = *other = 0;
	while (idle < 150 && got < max) {
		int k = hm_poll_cq(cqb, max - got, w + got, "cqb");
		got += k;
		idle = k ? 0 : idle + 1;
		hm_sleep_us(1000);
	}
	for (int j = 0; j < got; j++) {
		if (w[j].qp_num == qd->qp_num && w[j].status == IBV_WC_WR_FLUSH_ERR)
			(*ctl)++;
		else if (!(w[j].qp_num == qb->qp_num && w[j].status == IBV_WC_SUCCESS))
			(*other)++;
	}
	return got;
}

/* one signalled WR from qa; its completion's status */
static int send_one(enum ibv_wr_opcode op, void *src, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		    const char *what)
{
	struct ibv_sge s = { .addr = (uintptr_t)src, .length = len, .lkey = lkey };
	struct ibv_send_wr w = hm_send_wr(7, op, &s, 1);
	struct ibv_wc wc;
	w.wr.rdma.remote_addr = raddr;
	w.wr.rdma.rkey = rkey;
	hm_post_wait(qa, &w, cqa, &wc, what, what);
	return wc.status;
}

static void post_recv_b(void *buf, uint32_t len, uint32_t lkey)
{
	struct ibv_sge s = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_recv_wr w = { .wr_id = 9, .sg_list = &s, .num_sge = 1 }, *bw;
	if (ibv_post_recv(qb, &w, &bw))
		hm_fatal("post_recv", "%s", strerror(errno));
}

int main(int argc, char **argv)
{
	ctx = hm_loopback_start("hm_mr_rereg", argc, argv, &pa, &gid);
	const char *dev = ibv_get_device_name(ctx->device); /* for a second context of it */
	pd = ibv_alloc_pd(ctx);
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	cqa = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	cqb = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !pd2 || !cqa || !cqb)
		hm_fatal("setup", "PD / CQ: %s", strerror(errno));
	struct ibv_qp_init_attr ia = hm_qp_attr(cqa, cqa, IBV_QPT_RC, 8, 8, 1, 1, 0);
	qa = ibv_create_qp(pd, &ia);
	ia = hm_qp_attr(cqb, cqb, IBV_QPT_RC, 8, 8, 1, 1, 0);
	qb = ibv_create_qp(pd, &ia);
	qd = ibv_create_qp(pd, &ia);
	uint8_t *a = hm_alloc_pages(BUF), *b = hm_alloc_pages(BUF), *n = hm_alloc_pages(BUF);
	for (int i = 0; i < BUF; i++)
		a[i] = (uint8_t)(i * 7 + 3);
	memset(b, 0x5a, BUF);
	memset(n, 0x6b, BUF);
	struct ibv_mr *ma = ibv_reg_mr(pd, a, BUF, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mb = ibv_reg_mr(pd, b, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!qa || !qb || !qd || !ma || !mb)
		hm_fatal("setup", "QP / MR: %s", strerror(errno));
	connect_pair();

	int s = send_one(IBV_WR_RDMA_WRITE, a, 4096, ma->lkey, (uintptr_t)b, mb->rkey, "WRITE before rereg");
	hm_check(s == IBV_WC_SUCCESS && hm_differ(a, b, 4096) == 0, "write.before", "a WRITE into the MR: %s, %zu bytes wrong",
		 hm_wc_str(s), hm_differ(a, b, 4096));

	/* ---- access: no remote write, then remote write again */
	memset(b, 0x5a, BUF);
	uint32_t old_rkey = mb->rkey, old_lkey = mb->lkey;
	int rc = ibv_rereg_mr(mb, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE);
	hm_check(rc == 0 && mb->rkey == old_rkey && mb->lkey == old_lkey && mb->addr == b && mb->length == BUF,
		 "rereg.access", "to LOCAL_WRITE only: rc %d, keys %#x/%#x -> %#x/%#x, %p+%zu", rc, old_lkey, old_rkey,
		 mb->lkey, mb->rkey, mb->addr, mb->length);
	s = send_one(IBV_WR_RDMA_WRITE, a, 4096, ma->lkey, (uintptr_t)b, mb->rkey, "WRITE without remote write");
	hm_check(s == IBV_WC_REM_ACCESS_ERR && hm_not_fill(b, 0x5a, BUF) == 0, "rereg.access.refused",
		 "a WRITE into it: %s (want remote access error), %zu bytes changed", hm_wc_str(s), hm_not_fill(b, 0x5a, BUF));
	connect_pair();
	/* the peer keeps the rkey it was given before both reregs */
	rc = ibv_rereg_mr(mb, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	s = rc ? -1 : send_one(IBV_WR_RDMA_WRITE, a + 4096, 8192, ma->lkey, (uintptr_t)b + 100, old_rkey, "WRITE again");
	hm_check(rc == 0 && s == IBV_WC_SUCCESS && hm_differ(a + 4096, b + 100, 8192) == 0 && hm_not_fill(b, 0x5a, 100) == 0,
		 "rereg.access.restored", "REMOTE_WRITE again: rc %d, a WRITE with the rkey from before %s, %zu bytes wrong",
		 rc, s < 0 ? "-" : hm_wc_str(s), hm_differ(a + 4096, b + 100, 8192));

	/* ---- translation: the MR moves to n */
	memset(b, 0x5a, BUF);
	rc = ibv_rereg_mr(mb, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, n, BUF / 2, 0);
	s = rc ? -1 : send_one(IBV_WR_RDMA_WRITE, a, 16384, ma->lkey, (uintptr_t)n + 1000, mb->rkey, "WRITE into new memory");
	hm_check(rc == 0 && mb->addr == n && mb->length == BUF / 2 && mb->rkey == old_rkey && s == IBV_WC_SUCCESS &&
			 hm_differ(a, n + 1000, 16384) == 0 && hm_not_fill(b, 0x5a, BUF) == 0,
		 "rereg.translation", "moved to %p+%d: rc %d, rkey %s, a WRITE there %s, %zu bytes wrong, %zu bytes of the old "
		 "memory changed", (void *)n, BUF / 2, rc, mb->rkey == old_rkey ? "kept" : "CHANGED", s < 0 ? "-" : hm_wc_str(s),
		 hm_differ(a, n + 1000, 16384), hm_not_fill(b, 0x5a, BUF));
	/* the old memory is no longer the MR's */
	s = send_one(IBV_WR_RDMA_WRITE, a, 64, ma->lkey, (uintptr_t)b, mb->rkey, "WRITE into the old memory");
	hm_check(s == IBV_WC_REM_ACCESS_ERR && hm_not_fill(b, 0x5a, BUF) == 0, "rereg.translation.old_memory",
		 "a WRITE to the old address: %s, %zu bytes changed", hm_wc_str(s), hm_not_fill(b, 0x5a, BUF));
	connect_pair();
	s = send_one(IBV_WR_RDMA_WRITE, a, 64, ma->lkey, (uintptr_t)n + BUF / 2 - 32, mb->rkey, "WRITE past the new end");
	hm_check(s == IBV_WC_REM_ACCESS_ERR, "rereg.translation.bounds", "a WRITE across the new length's end: %s", hm_wc_str(s));
	connect_pair();

	/* ---- PD: the receive buffer's MR in another PD than the QP */
	rc = ibv_rereg_mr(mb, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0);
	int dp = ibv_dealloc_pd(pd2);
	hm_check(rc == 0 && mb->pd == pd2 && dp == EBUSY, "rereg.pd", "moved to a second PD: rc %d; deallocating that PD: %s",
		 rc, hm_errname(dp));
	memset(n, 0x6b, BUF);
	post_recv_b(n, 4096, mb->lkey);
	post_recv_b(n, 4096, mb->lkey); /* two more: flushed when the QP fails */
	post_recv_b(n, 4096, mb->lkey);
	s = send_one(IBV_WR_SEND, a, 1024, ma->lkey, 0, 0, "SEND into another PD's MR");
	struct ibv_wc wc;
	int got = hm_poll_cq(cqb, 1, &wc, "the receiver's completion");
	for (int k = 0; !got && k < 200; k++) {
		hm_sleep_us(1000);
		got = hm_poll_cq(cqb, 1, &wc, "the receiver's completion");
	}
	hm_check(s == IBV_WC_REM_OP_ERR && got == 1 && wc.status == IBV_WC_LOC_PROT_ERR && hm_not_fill(n, 0x6b, BUF) == 0,
		 "rereg.pd.refused", "a SEND: sender %s (want remote operation error), receiver %s (want local protection "
		 "error), %zu bytes changed", hm_wc_str(s), got ? hm_wc_str(wc.status) : "no completion", hm_not_fill(n, 0x6b, BUF));
	/* qb's two flushes land in cqb, unpolled, and so do two of the control QP's (which is not
	 * reset: they show that flushes arrive within the wait); RESET cleans qb's from it (as
	 * ConnectX providers do) */
	flushes(qd, 2, mb->lkey, n + 8192);
	hm_sleep_us(300000);
	connect_pair();
	{
		struct ibv_wc w[16];
		int ctl, other, all = drain_b(w, 16, &ctl, &other);
		hm_check(ctl == 2 && other == 0 && all == 2, "reset.cleans_cq",
			 "after the RESET of a QP with 2 flushes unpolled: %d completions polled, %d of them the control QP's "
			 "flushes (want 2), %d others (want 0: none of the reset QP's)", all, ctl, other);
	}
	rc = ibv_rereg_mr(mb, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, 0);
	post_recv_b(n + 512, 4096, mb->lkey);
	s = rc ? -1 : send_one(IBV_WR_SEND, a + 999, 3000, ma->lkey, 0, 0, "SEND after moving back");
	got = hm_poll_cq(cqb, 1, &wc, "the receiver's completion");
	for (int k = 0; !got && k < 200; k++) {
		hm_sleep_us(1000);
		got = hm_poll_cq(cqb, 1, &wc, "the receiver's completion");
	}
	dp = ibv_dealloc_pd(pd2);
	hm_check(rc == 0 && s == IBV_WC_SUCCESS && got == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 3000 &&
			 hm_differ(a + 999, n + 512, 3000) == 0 && dp == 0,
		 "rereg.pd.back", "moved back: rc %d, SEND %s, receive %s %u B, %zu bytes wrong; the second PD deallocated: %s",
		 rc, s < 0 ? "-" : hm_wc_str(s), got ? hm_wc_str(wc.status) : "none", got ? wc.byte_len : 0, hm_differ(a + 999, n + 512, 3000),
		 hm_errname(dp));

	/* ---- destroy: a QP's completions still in a shared CQ go with it, the others stay */
	{
		struct ibv_qp_init_attr ic = hm_qp_attr(cqb, cqb, IBV_QPT_RC, 4, 4, 1, 1, 0);
		struct ibv_qp *qc = ibv_create_qp(pd, &ic);
		if (!qc)
			hm_fatal("setup", "a third QP: %s", strerror(errno));
		flushes(qc, 3, mb->lkey, n);
		flushes(qd, 3, mb->lkey, n + 8192); /* the positive control: 3 flushes that stay */
		hm_sleep_us(300000); /* qc's 3 flushes and the control's 3 land in cqb, unpolled */
		post_recv_b(n + 4096, 256, mb->lkey);
		s = send_one(IBV_WR_SEND, a, 200, ma->lkey, 0, 0, "SEND behind the flushes");
		int dq = ibv_destroy_qp(qc);
		struct ibv_wc w2[16];
		int ctl, other, all = drain_b(w2, 16, &ctl, &other), recv_ok = 0;
		for (int j = 0; j < all; j++)
			recv_ok += w2[j].qp_num == qb->qp_num && w2[j].status == IBV_WC_SUCCESS && w2[j].byte_len == 200;
		hm_check(dq == 0 && s == IBV_WC_SUCCESS && all == 4 && ctl == 3 && recv_ok == 1 && other == 0,
			 "destroy.cleans_cq", "a QP destroyed with 3 flushes unpolled, in a CQ that also holds 3 flushes of "
			 "the control QP and a SEND's receive: %d completions polled after the destroy (want 4), %d control "
			 "flushes (want 3), %d receive (want 1), %d others (want 0: none of the destroyed QP's)", all, ctl,
			 recv_ok, other);
	}

	/* ---- refusals: the MR stays as it was */
	struct ibv_context *ctx2 = hm_open_device(dev, NULL);
	struct ibv_pd *opd = ibv_alloc_pd(ctx2);
	void *gone = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!opd || gone == MAP_FAILED)
		hm_fatal("setup", "second context / mmap: %s", strerror(errno));
	munmap(gone, BUF);
	struct {
		const char *name;
		int flags;
		struct ibv_pd *pd;
		void *addr;
		size_t len;
		int access, want_rc, want_errno;
	} bad[] = {
		{ "rereg.remote_without_local", IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE,
		  IBV_REREG_MR_ERR_CMD, EINVAL },
		{ "rereg.zero_based", IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
		  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED, IBV_REREG_MR_ERR_CMD, EOPNOTSUPP },
		{ "rereg.unmapped", IBV_REREG_MR_CHANGE_TRANSLATION, NULL, gone, BUF, 0, IBV_REREG_MR_ERR_CMD, EFAULT },
		{ "rereg.other_context_pd", IBV_REREG_MR_CHANGE_PD, opd, NULL, 0, 0, IBV_REREG_MR_ERR_CMD, EINVAL },
		{ "rereg.no_flag", 0, NULL, NULL, 0, 0, IBV_REREG_MR_ERR_CMD, EINVAL },
		{ "rereg.translation_no_length", IBV_REREG_MR_CHANGE_TRANSLATION, NULL, n, 0, 0, IBV_REREG_MR_ERR_INPUT,
		  EINVAL },
		{ "rereg.unknown_flag", 1 << 5, NULL, NULL, 0, 0, IBV_REREG_MR_ERR_INPUT, EINVAL },
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		uint32_t lk = mb->lkey, rk = mb->rkey;
		void *ad = mb->addr;
		errno = 0;
		rc = ibv_rereg_mr(mb, bad[k].flags, bad[k].pd, bad[k].addr, bad[k].len, bad[k].access);
		int e = errno;
		memset(n, 0x6b, BUF);
		s = send_one(IBV_WR_RDMA_WRITE, a + k * 64, 2048, ma->lkey, (uintptr_t)n + 64, mb->rkey, "WRITE after a refusal");
		hm_check(rc == bad[k].want_rc && e == bad[k].want_errno && mb->lkey == lk && mb->rkey == rk && mb->addr == ad &&
				 mb->pd == pd && s == IBV_WC_SUCCESS && hm_differ(a + k * 64, n + 64, 2048) == 0,
			 bad[k].name, "rc %d, errno %s (want %d, %s); keys %s, a WRITE through the MR %s", rc, hm_errname(e),
			 bad[k].want_rc, hm_errname(bad[k].want_errno),
			 mb->lkey == lk && mb->rkey == rk && mb->addr == ad ? "unchanged" : "CHANGED", hm_wc_str(s));
	}

	/* ---- teardown */
	int td = 0, e;
	const char *first = "";
#define TD(name, call) do { e = (call); if (e && !td++) first = name; } while (0)
	TD("dealloc_pd (other context)", ibv_dealloc_pd(opd));
	TD("close_device (other context)", ibv_close_device(ctx2));
	TD("destroy_qp", ibv_destroy_qp(qa));
	TD("destroy_qp", ibv_destroy_qp(qb));
	TD("destroy_qp (control)", ibv_destroy_qp(qd));
	TD("destroy_cq", ibv_destroy_cq(cqa));
	TD("destroy_cq", ibv_destroy_cq(cqb));
	TD("dereg_mr", ibv_dereg_mr(ma));
	TD("dereg_mr (re-registered)", ibv_dereg_mr(mb));
	TD("dealloc_pd", ibv_dealloc_pd(pd));
	TD("close_device", ibv_close_device(ctx));
	hm_check(td == 0, "teardown", "%d failed calls%s%s", td, td ? ", the first " : "", first);
	hm_summary();
	return hm_exit_code();
}
