/* hm_verbs_ex: the extended verbs API (issue 26 item 4) on one NIC, two QPs connected through
 * the port's loopback:
 *   - ibv_create_cq_ex (IBV_WC_STANDARD_FLAGS, one with a completion channel) polled with
 *     ibv_start_poll / ibv_next_poll / ibv_end_poll and the ibv_wc_read_* accessors;
 *   - ibv_create_qp_ex with send_ops_flags, ibv_qp_to_qp_ex, and one ibv_wr_start ..
 *     ibv_wr_complete batch of RDMA WRITE (one SGE), WRITE with immediate (an SGE list), SEND
 *     with inline data (the buffer changed after the setter: it must have been copied), SEND
 *     with immediate, RDMA READ and both atomics; every completion read back and every byte
 *     verified;
 *   - what is refused: a completion timestamp (EOPNOTSUPP), an unknown comp_mask bit (EINVAL),
 *     memory windows in send_ops_flags (EOPNOTSUPP), ibv_qp_to_qp_ex of a plain QP (NULL); and
 *     batches that post nothing at all: too many SGEs (EINVAL), more WRs than the send queue
 *     holds (ENOMEM), a bind_mw builder (EOPNOTSUPP), a WR the post refuses behind a valid one
 *     (an inline RDMA READ: EINVAL, the valid WRITE before it not posted either), a QP before
 *     RTS (EINVAL), ibv_wr_abort; an empty CQ's ibv_start_poll is ENOENT.
 *
 *   hm_verbs_ex [-d DEV] [-t SECS]     (under hematite-run, which preloads the provider)
 */
#include "hm_common.h"

#define BUF 65536

static struct ibv_cq_ex *mk_cq(struct ibv_context *ctx, struct ibv_comp_channel *ch, uint64_t wc_flags,
			       uint32_t comp_mask)
{
	struct ibv_cq_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.cqe = 64;
	a.channel = ch;
	a.wc_flags = wc_flags;
	a.comp_mask = comp_mask;
	errno = 0;
	return ibv_create_cq_ex(ctx, &a);
}

static struct ibv_qp_cap granted; /* what the last mk_qp was given */

static struct ibv_qp *mk_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq_ex *cq, uint64_t ops,
			    uint32_t swr)
{
	struct ibv_qp_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.send_cq = ibv_cq_ex_to_cq(cq);
	a.recv_cq = ibv_cq_ex_to_cq(cq);
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = swr;
	a.cap.max_recv_wr = 8;
	a.cap.max_send_sge = 2;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = 64;
	a.pd = pd;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | (ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0);
	a.send_ops_flags = ops;
	errno = 0;
	struct ibv_qp *q = ibv_create_qp_ex(ctx, &a);
	granted = a.cap;
	return q;
}

struct got {
	uint64_t wr_id;
	int status, opcode;
	uint32_t byte_len, qp_num, imm;
	unsigned flags;
};

/* every completion the CQ has within quiet_us of the last one (at least until want came) */
static int drain(struct ibv_cq_ex *cq, struct got *g, int max, int want, unsigned quiet_us)
{
	int n = 0;
	uint64_t dl = hm_deadline(), last = hm_now_us();
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };

	for (;;) {
		hm_step("ibv_start_poll");
		int r = ibv_start_poll(cq, &pa);
		if (r == 0) {
			do {
				if (n < max) {
					g[n].wr_id = cq->wr_id;
					g[n].status = cq->status;
					g[n].opcode = ibv_wc_read_opcode(cq);
					g[n].byte_len = ibv_wc_read_byte_len(cq);
					g[n].qp_num = ibv_wc_read_qp_num(cq);
					g[n].flags = ibv_wc_read_wc_flags(cq);
					g[n].imm = ntohl(ibv_wc_read_imm_data(cq));
				}
				n++;
				r = ibv_next_poll(cq);
			} while (r == 0);
			ibv_end_poll(cq);
			last = hm_now_us();
			if (r != ENOENT)
				hm_fatal("next_poll", "%s", strerror(r));
		} else if (r != ENOENT) {
			hm_fatal("start_poll", "%s", strerror(r));
		}
		if (n >= want && hm_now_us() - last > quiet_us)
			return n;
		if (hm_now_us() > dl)
			hm_timeout("%d completions (have %d)", want, n);
		hm_sleep_us(200);
	}
}

int main(int argc, char **argv)
{
	struct ibv_port_attr pa;
	union ibv_gid gid;
	struct ibv_context *ctx = hm_loopback_start("hm_verbs_ex", argc, argv, &pa, &gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	uint8_t *a = hm_alloc_pages(BUF), *b = hm_alloc_pages(BUF);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_mr *ma = pd ? ibv_reg_mr(pd, a, BUF, acc) : NULL, *mb = pd ? ibv_reg_mr(pd, b, BUF, acc) : NULL;
	if (!ma || !mb)
		hm_fatal("setup", "PD / MR: %s", strerror(errno));

	/* ---- refused at creation */
	struct ibv_cq_ex *x = mk_cq(ctx, NULL, IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, 0);
	hm_check(!x && errno == EOPNOTSUPP, "cq_ex.timestamp", "a completion timestamp: %s", x ? "created" : hm_errname(errno));
	x = mk_cq(ctx, NULL, IBV_WC_STANDARD_FLAGS, 1u << 7);
	hm_check(!x && errno == EINVAL, "cq_ex.comp_mask", "an unknown comp_mask bit: %s", x ? "created" : hm_errname(errno));

	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq_ex *cqa = mk_cq(ctx, NULL, IBV_WC_STANDARD_FLAGS, 0), *cqb = mk_cq(ctx, ch, IBV_WC_STANDARD_FLAGS, 0);
	if (!ch || !cqa || !cqb)
		hm_fatal("cq_ex", "ibv_create_cq_ex: %s", strerror(errno));
	hm_ok("cq_ex.create", "two CQs, %d entries, one on a completion channel", ibv_cq_ex_to_cq(cqa)->cqe);

	struct ibv_qp *bad = mk_qp(ctx, pd, cqa, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_BIND_MW, 8);
	hm_check(!bad && errno == EOPNOTSUPP, "qp_ex.bind_mw", "send_ops_flags with BIND_MW: %s", bad ? "created" : hm_errname(errno));
	uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
		       IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
		       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	struct ibv_qp *qa = mk_qp(ctx, pd, cqa, ops, 16);
	struct ibv_qp_cap qa_cap = granted;
	struct ibv_qp *qb = mk_qp(ctx, pd, cqb, ops, 16), *plain = mk_qp(ctx, pd, cqa, 0, 4);
	if (!qa || !qb || !plain)
		hm_fatal("qp_ex", "ibv_create_qp_ex: %s", strerror(errno));
	struct ibv_qp_ex *xa = ibv_qp_to_qp_ex(qa), *xb = ibv_qp_to_qp_ex(qb);
	hm_check(xa && xb && !ibv_qp_to_qp_ex(plain), "qp_ex.to_qp_ex", "extended QPs %s, a plain QP %s",
		 xa && xb ? "converted" : "NOT converted", ibv_qp_to_qp_ex(plain) ? "converted (wrong)" : "NULL");
	if (!xa || !xb)
		hm_fatal("qp_ex", "no ibv_qp_ex");
	if (qa_cap.max_send_sge + 1 > 32 || qa_cap.max_send_wr > 4096)
		hm_fatal("qp_ex", "granted %u SGEs, %u WRs: more than this test builds", qa_cap.max_send_sge, qa_cap.max_send_wr);

	/* before RTS: refused, nothing posted */
	ibv_wr_start(xb);
	xb->wr_id = 99;
	xb->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(xb);
	ibv_wr_set_sge(xb, mb->lkey, (uintptr_t)b, 8);
	int rc = ibv_wr_complete(xb);
	hm_check(rc == EINVAL, "wr.before_rts", "ibv_wr_complete in RESET: %s", hm_errname(rc));

	/* connect qa <-> qb through the loopback */
	struct hm_rtr_args r = hm_rtr_to(pa.active_mtu, qb->qp_num, 0x10, &gid, 0, 1);
	if (hm_qp_init(qa, acc) || hm_qp_rtr(qa, &r) || hm_qp_rts(qa, 0x20, 14, 7, 7, 1))
		hm_fatal("connect", "qa: %s", strerror(errno));
	r = hm_rtr_to(pa.active_mtu, qa->qp_num, 0x20, &gid, 0, 1);
	if (hm_qp_init(qb, acc) || hm_qp_rtr(qb, &r) || hm_qp_rts(qb, 0x10, 14, 7, 7, 1))
		hm_fatal("connect", "qb: %s", strerror(errno));

	struct got g[32];
	int n = drain(cqa, g, 32, 0, 300000);
	hm_check(n == 0, "cq_ex.empty", "an empty CQ: ibv_start_poll ENOENT, %d completions", n);

	/* ---- one batch of every operation */
	for (int i = 0; i < BUF; i++) {
		a[i] = (uint8_t)(i * 7 + 1);
		b[i] = (uint8_t)(i * 13 + 5);
	}
	uint64_t *acnt = (uint64_t *)(b + 60000), *res = (uint64_t *)(a + 61000), *res2 = (uint64_t *)(a + 61008);
	*acnt = 1000;
	for (int k = 0; k < 3; k++) {
		struct ibv_sge s = { .addr = (uintptr_t)b + 40000 + (size_t)k * 1024, .length = 1024, .lkey = mb->lkey };
		struct ibv_recv_wr w = { .wr_id = 500 + (uint64_t)k, .sg_list = &s, .num_sge = 1 }, *bw;
		if (ibv_post_recv(qb, &w, &bw))
			hm_fatal("post_recv", "%s", strerror(errno));
	}
	uint8_t inl[64];
	memset(inl, 0x3c, sizeof(inl));
	struct ibv_sge two[2] = { { (uintptr_t)a + 8192, 1000, ma->lkey }, { (uintptr_t)a + 12288, 500, ma->lkey } };
	ibv_wr_start(xa);
	xa->wr_flags = IBV_SEND_SIGNALED;
	xa->wr_id = 1;
	ibv_wr_rdma_write(xa, mb->rkey, (uintptr_t)b);
	ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a, 4096);
	xa->wr_id = 2;
	ibv_wr_rdma_write_imm(xa, mb->rkey, (uintptr_t)b + 16384, htonl(0xabcd0002));
	ibv_wr_set_sge_list(xa, 2, two);
	xa->wr_id = 3;
	ibv_wr_send(xa);
	ibv_wr_set_inline_data(xa, inl, sizeof(inl));
	memset(inl, 0x99, sizeof(inl)); /* the setter copied it */
	xa->wr_id = 4;
	ibv_wr_send_imm(xa, htonl(0xabcd0004));
	ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a + 20000, 300);
	xa->wr_id = 5;
	ibv_wr_rdma_read(xa, mb->rkey, (uintptr_t)b + 30000);
	ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a + 50000, 2048);
	xa->wr_id = 6;
	ibv_wr_atomic_fetch_add(xa, mb->rkey, (uintptr_t)acnt, 5);
	ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)res, 8);
	xa->wr_id = 7;
	ibv_wr_atomic_cmp_swp(xa, mb->rkey, (uintptr_t)acnt, 1005, 77);
	ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)res2, 8);
	if (ibv_req_notify_cq(ibv_cq_ex_to_cq(cqb), 0))
		hm_fatal("req_notify_cq", "%s", strerror(errno));
	rc = ibv_wr_complete(xa);
	hm_check(rc == 0, "wr.complete", "7 WRs in one batch: %s", hm_errname(rc));

	n = drain(cqa, g, 32, 7, 100000);
	static const int want_op[7] = { IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_SEND, IBV_WC_SEND,
					IBV_WC_RDMA_READ, IBV_WC_FETCH_ADD, IBV_WC_COMP_SWAP };
	int badc = n != 7;
	for (int k = 0; k < n && k < 7; k++)
		badc += g[k].wr_id != (uint64_t)k + 1 || g[k].status != IBV_WC_SUCCESS || g[k].opcode != want_op[k] ||
			g[k].qp_num != qa->qp_num;
	hm_check(!badc, "cq_ex.send_completions", "%d completions read with ibv_wc_read_*: wr_id 1..7, opcodes, QP; %d wrong",
		 n, badc);
	/* the channel: an event for cqb */
	{
		struct ibv_cq *ecq = NULL;
		void *ectx = NULL;
		hm_step("ibv_get_cq_event of the extended CQ");
		rc = ibv_get_cq_event(ch, &ecq, &ectx);
		hm_check(rc == 0 && ecq == ibv_cq_ex_to_cq(cqb), "cq_ex.event", "completion event for the extended CQ: %s",
			 rc ? strerror(errno) : ecq == ibv_cq_ex_to_cq(cqb) ? "yes" : "another CQ");
		if (!rc)
			ibv_ack_cq_events(ecq, 1);
	}
	n = drain(cqb, g, 32, 3, 100000);
	badc = n != 3;
	if (n == 3) {
		badc += g[0].wr_id != 500 || g[0].opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(g[0].flags & IBV_WC_WITH_IMM) ||
			g[0].imm != 0xabcd0002 || g[0].byte_len != 1500;
		badc += g[1].wr_id != 501 || g[1].opcode != IBV_WC_RECV || g[1].byte_len != 64 || (g[1].flags & IBV_WC_WITH_IMM);
		badc += g[2].wr_id != 502 || g[2].opcode != IBV_WC_RECV || g[2].byte_len != 300 ||
			!(g[2].flags & IBV_WC_WITH_IMM) || g[2].imm != 0xabcd0004;
		for (int k = 0; k < 3; k++)
			badc += g[k].status != IBV_WC_SUCCESS || g[k].qp_num != qb->qp_num;
	}
	hm_check(!badc, "cq_ex.recv_completions", "%d receive completions: WRITE_WITH_IMM (1500 B, imm), inline SEND (64 B), "
		 "SEND with imm (300 B); %d wrong", n, badc);
	size_t wrong = 0;
	for (int i = 0; i < 4096; i++)
		wrong += b[i] != (uint8_t)(i * 7 + 1);
	for (int i = 0; i < 1000; i++)
		wrong += b[16384 + i] != (uint8_t)((8192 + i) * 7 + 1);
	for (int i = 0; i < 500; i++)
		wrong += b[17384 + i] != (uint8_t)((12288 + i) * 7 + 1);
	for (int i = 0; i < 64; i++)
		wrong += b[41024 + i] != 0x3c;
	for (int i = 0; i < 300; i++)
		wrong += b[42048 + i] != (uint8_t)((20000 + i) * 7 + 1);
	for (int i = 0; i < 2048; i++)
		wrong += a[50000 + i] != (uint8_t)((30000 + i) * 13 + 5);
	hm_check(wrong == 0 && *res == 1000 && *res2 == 1005 && *acnt == 77, "wr.data",
		 "WRITE, WRITE_WITH_IMM (2 SGEs), inline SEND (copied at the setter), SEND_WITH_IMM, READ: %zu bytes wrong; "
		 "FETCH_ADD returned %llu, CMP_SWAP %llu, target %llu (want 1000, 1005, 77)", wrong,
		 (unsigned long long)*res, (unsigned long long)*res2, (unsigned long long)*acnt);

	/* ---- batches that post nothing: the target stays, no completion comes */
	memset(b + 8192, 0x11, 4096);
	struct { const char *name; int want; } cases[5] = {
		{ "wr.too_many_sges", EINVAL }, { "wr.queue_overflow", ENOMEM }, { "wr.bind_mw", EOPNOTSUPP },
		{ "wr.refused_by_post", EINVAL }, { "wr.abort", 0 },
	};
	for (int k = 0; k < 5; k++) {
		ibv_wr_start(xa);
		xa->wr_flags = IBV_SEND_SIGNALED;
		xa->wr_id = 100 + (uint64_t)k;
		/* a valid WRITE first: it must not reach the wire either */
		ibv_wr_rdma_write(xa, mb->rkey, (uintptr_t)b + 8192);
		ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a, 4096);
		if (k == 0) {
			/* one SGE more than the QP was given */
			struct ibv_sge many[32];
			for (int i = 0; i < 32; i++)
				many[i] = two[i & 1];
			ibv_wr_send(xa);
			ibv_wr_set_sge_list(xa, qa_cap.max_send_sge + 1, many);
		} else if (k == 1) {
			/* one WR more than the send queue holds */
			for (uint32_t i = 0; i < qa_cap.max_send_wr; i++) {
				ibv_wr_rdma_write(xa, mb->rkey, (uintptr_t)b + 8192);
				ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a, 16);
			}
		} else if (k == 2) {
			xa->wr_bind_mw(xa, NULL, 0, NULL);
		} else if (k == 3) {
			xa->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE; /* an inline READ: the post refuses it */
			ibv_wr_rdma_read(xa, mb->rkey, (uintptr_t)b);
			ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a + 100, 16);
		}
		if (k == 4) {
			ibv_wr_abort(xa);
			rc = 0;
		} else {
			rc = ibv_wr_complete(xa);
		}
		int m = drain(cqa, g, 32, 0, 300000);
		size_t changed = 0;
		for (int i = 0; i < 4096; i++)
			changed += b[8192 + i] != 0x11;
		hm_check(rc == cases[k].want && m == 0 && changed == 0, cases[k].name,
			 "ibv_wr_complete %s, %d completions, %zu target bytes changed (nothing posted)",
			 k == 4 ? "not called (ibv_wr_abort)" : hm_errname(rc), m, changed);
	}
	/* and the QP still works */
	ibv_wr_start(xa);
	xa->wr_flags = IBV_SEND_SIGNALED;
	xa->wr_id = 200;
	ibv_wr_rdma_write(xa, mb->rkey, (uintptr_t)b + 8192);
	ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a, 4096);
	rc = ibv_wr_complete(xa);
	n = drain(cqa, g, 32, 1, 100000);
	size_t wrong2 = 0;
	for (int i = 0; i < 4096; i++)
		wrong2 += b[8192 + i] != (uint8_t)(i * 7 + 1);
	hm_check(rc == 0 && n == 1 && g[0].wr_id == 200 && g[0].status == IBV_WC_SUCCESS && wrong2 == 0, "wr.after_refusals",
		 "a WRITE after the refused batches: %s, %d completion(s), %zu bytes wrong", hm_errname(rc), n, wrong2);

	/* ---- teardown */
	int td = 0, e;
	const char *first = "";
#define TD(name, call) do { e = (call); if (e && !td++) first = name; } while (0)
	TD("destroy_qp", ibv_destroy_qp(qa));
	TD("destroy_qp", ibv_destroy_qp(qb));
	TD("destroy_qp", ibv_destroy_qp(plain));
	TD("destroy_cq", ibv_destroy_cq(ibv_cq_ex_to_cq(cqa)));
	TD("destroy_cq (channel)", ibv_destroy_cq(ibv_cq_ex_to_cq(cqb)));
	TD("destroy_comp_channel", ibv_destroy_comp_channel(ch));
	TD("dereg_mr", ibv_dereg_mr(ma));
	TD("dereg_mr", ibv_dereg_mr(mb));
	TD("dealloc_pd", ibv_dealloc_pd(pd));
	TD("close_device", ibv_close_device(ctx));
	hm_check(td == 0, "teardown", "%d failed calls%s%s (the channel destroyed after its CQ: its reference count was kept)",
		 td, td ? ", the first " : "", first);
	hm_summary();
	return hm_exit_code();
}
