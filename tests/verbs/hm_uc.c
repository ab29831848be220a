/* hm_uc: UC queue pairs (IBV_QPT_UC, issue 26) on one NIC, two UC QPs connected through the
 * port's loopback. What a user of UC on a ConnectX card relies on:
 *   - creation and the state machine: ibv_create_qp with IBV_QPT_UC; UC's attribute masks
 *     (RTR: AV, PATH_MTU, DEST_QPN, RQ_PSN; RTS: SQ_PSN) are taken, RC's reliability
 *     attributes (MAX_DEST_RD_ATOMIC, MIN_RNR_TIMER, TIMEOUT, RETRY_CNT, RNR_RETRY,
 *     MAX_QP_RD_ATOMIC) refused with EINVAL; ibv_query_qp reports the type and state;
 *   - traffic: SEND, SEND with immediate, RDMA WRITE and WRITE with immediate, one packet and
 *     several, every byte verified, each completion's opcode, length and immediate;
 *   - no reliability: a SEND with no receive posted, a WRITE with a wrong rkey, and a WRITE to
 *     a QP without REMOTE_WRITE complete successfully at the sender (UC has no ACK or NAK) and
 *     are dropped at the receiver (nothing written, no completion); the QPs stay in RTS and the
 *     next message lands (in the receive WQE the dropped SEND did not take);
 *   - what UC does not offer: RDMA READ, atomics and SEND with invalidate are refused by
 *     ibv_post_send (EINVAL), and by ibv_create_qp_ex's send_ops_flags (EOPNOTSUPP);
 *   - a receive error: a SEND longer than the receive buffer completes the receive with
 *     IBV_WC_LOC_LEN_ERR and moves the receiving QP to ERR; the sender still sees success.
 *
 *   hm_uc [-d DEV] [-t SECS]     (under hematite-run, which preloads the provider)
 */
#include "hm_common.h"

#define BUF (1 << 20)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cqa, *cqb;
static struct ibv_qp *qa, *qb;
static struct ibv_port_attr pa;
static union ibv_gid gid;
static struct ibv_mr *ma, *mb;
static uint8_t *a, *b;
static uint32_t psn = 0x300;
static const int qacc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

static int rtr_uc(struct ibv_qp *q, uint32_t dest, uint32_t rq_psn, int mask_extra)
{
	struct ibv_qp_attr r;
	memset(&r, 0, sizeof(r));
	r.qp_state = IBV_QPS_RTR;
	r.path_mtu = pa.active_mtu;
	r.dest_qp_num = dest;
	r.rq_psn = rq_psn;
	r.max_dest_rd_atomic = 1;
	r.min_rnr_timer = 12;
	r.ah_attr.is_global = 1;
	r.ah_attr.grh.dgid = gid;
	r.ah_attr.grh.hop_limit = 64;
	r.ah_attr.port_num = 1;
	return ibv_modify_qp(q, &r, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					    mask_extra);
}

static int rts_uc(struct ibv_qp *q, uint32_t sq_psn, int mask_extra)
{
	struct ibv_qp_attr r;
	memset(&r, 0, sizeof(r));
	r.qp_state = IBV_QPS_RTS;
	r.sq_psn = sq_psn;
	r.timeout = 14;
	r.retry_cnt = 7;
	r.rnr_retry = 7;
	r.max_rd_atomic = 1;
	return ibv_modify_qp(q, &r, IBV_QP_STATE | IBV_QP_SQ_PSN | mask_extra);
}

/* both QPs to RESET and back to RTS with UC's masks, connected to each other */
static void connect_pair(void)
{
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };
	if (ibv_modify_qp(qa, &r, IBV_QP_STATE) || ibv_modify_qp(qb, &r, IBV_QP_STATE))
		hm_fatal("connect", "to RESET: %s", strerror(errno));
	uint32_t pa_psn = psn, pb_psn = psn + 0x1000;
	psn += 0x2000;
	int rc;
	if ((rc = hm_qp_init(qa, qacc)) || (rc = hm_qp_init(qb, qacc)) || (rc = rtr_uc(qa, qb->qp_num, pb_psn, 0)) ||
	    (rc = rtr_uc(qb, qa->qp_num, pa_psn, 0)) || (rc = rts_uc(qa, pa_psn, 0)) || (rc = rts_uc(qb, pb_psn, 0)))
		hm_fatal("connect", "RESET -> RTS with UC's masks: %s", hm_errname(rc));
}

static void post_recv(struct ibv_qp *q, uint64_t id, void *buf, uint32_t len, uint32_t lkey)
{
	struct ibv_sge s = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bw;
	if (ibv_post_recv(q, &w, &bw))
		hm_fatal("post_recv", "%s", strerror(errno));
}

/* one signalled WR from qa, waited for: its completion */
static struct ibv_wc send_one(uint64_t id, enum ibv_wr_opcode op, const void *src, uint32_t len, uint64_t raddr,
			      uint32_t rkey, uint32_t imm, const char *what)
{
	struct ibv_sge s = { .addr = (uintptr_t)src, .length = len, .lkey = ma->lkey };
	struct ibv_send_wr w = hm_send_wr(id, op, &s, 1);
	struct ibv_wc wc;
	w.wr.rdma.remote_addr = raddr;
	w.wr.rdma.rkey = rkey;
	w.imm_data = htonl(imm);
	hm_post_wait(qa, &w, cqa, &wc, what, what);
	return wc;
}

static enum ibv_qp_state state_of(struct ibv_qp *q)
{
	enum ibv_qp_state s = IBV_QPS_UNKNOWN;
	hm_query_qp_state(q, &s);
	return s;
}

int main(int argc, char **argv)
{
	ctx = hm_loopback_start("hm_uc", argc, argv, &pa, &gid);
	pd = ibv_alloc_pd(ctx);
	cqa = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	cqb = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!pd || !cqa || !cqb)
		hm_fatal("setup", "PD / CQ: %s", strerror(errno));
	a = hm_alloc_pages(BUF);
	b = hm_alloc_pages(BUF);
	for (int i = 0; i < BUF; i++)
		a[i] = (uint8_t)(i * 13 + 5);
	memset(b, 0x5a, BUF);
	ma = ibv_reg_mr(pd, a, BUF, IBV_ACCESS_LOCAL_WRITE);
	mb = ibv_reg_mr(pd, b, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ma || !mb)
		hm_fatal("setup", "MR: %s", strerror(errno));
	int mtu = hm_mtu_bytes(pa.active_mtu);

	/* ---- creation and the state machine */
	struct ibv_qp_init_attr ia = hm_qp_attr(cqa, cqa, IBV_QPT_UC, 32, 32, 1, 1, 64);
	qa = ibv_create_qp(pd, &ia);
	ia = hm_qp_attr(cqb, cqb, IBV_QPT_UC, 32, 32, 1, 1, 64);
	qb = ibv_create_qp(pd, &ia);
	if (!qa || !qb)
		hm_fatal("create_qp.uc", "ibv_create_qp(IBV_QPT_UC): %s", strerror(errno));
	{
		struct ibv_qp_attr qat;
		struct ibv_qp_init_attr qi;
		int rc = ibv_query_qp(qa, &qat, IBV_QP_STATE, &qi);
		hm_check(qa->qp_type == IBV_QPT_UC && rc == 0 && qi.qp_type == IBV_QPT_UC && qat.qp_state == IBV_QPS_RESET,
			 "create_qp.uc", "qp_type %d, query: rc %d, type %d, state %s", qa->qp_type, rc, qi.qp_type,
			 hm_qp_state_str(qat.qp_state));
	}
	{
		int e_init = hm_qp_init(qa, qacc) | hm_qp_init(qb, qacc);
		int e_rtr_rc = rtr_uc(qa, qb->qp_num, 0, IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
		int e_rtr_rc1 = rtr_uc(qa, qb->qp_num, 0, IBV_QP_MIN_RNR_TIMER);
		int e_rtr = rtr_uc(qa, qb->qp_num, 0x1000, 0) | rtr_uc(qb, qa->qp_num, 0x2000, 0);
		int bits[] = { IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY, IBV_QP_MAX_QP_RD_ATOMIC };
		int refused = 0;
		for (unsigned i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
			refused += rts_uc(qa, 0x2000, bits[i]) == EINVAL;
		int e_rts = rts_uc(qa, 0x2000, 0) | rts_uc(qb, 0x1000, 0);
		hm_check(e_init == 0 && e_rtr_rc == EINVAL && e_rtr_rc1 == EINVAL && e_rtr == 0 && refused == 4 && e_rts == 0 &&
				 state_of(qa) == IBV_QPS_RTS && state_of(qb) == IBV_QPS_RTS,
			 "modify_qp.uc_masks", "INIT %d, RTR with RC's masks %s / %s (want EINVAL), UC's %d, RTS with a "
			 "reliability attribute refused %d of 4, UC's %d; states %s / %s", e_init, hm_errname(e_rtr_rc),
			 hm_errname(e_rtr_rc1), e_rtr, refused, e_rts, hm_qp_state_str(state_of(qa)),
			 hm_qp_state_str(state_of(qb)));
	}
	connect_pair();

	/* ---- traffic: each operation at one packet and at several */
	const uint32_t lens[] = { 1, (uint32_t)mtu, (uint32_t)(3 * mtu + 17) };
	for (unsigned k = 0; k < 3; k++) {
		uint32_t len = lens[k];
		char nm[64];
		/* SEND, then SEND with immediate */
		for (int imm = 0; imm < 2; imm++) {
			memset(b, 0x5a, 4 * (size_t)mtu + 64);
			post_recv(qb, 100 + k, b, 4 * mtu + 64, mb->lkey);
			struct ibv_wc ws = send_one(10 + k, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, a + 3 * k, len, 0, 0,
						    0xC0DE0000u + k, "UC SEND");
			struct ibv_wc wr;
			hm_poll_cq_wait(cqb, &wr, 1, "UC SEND receive");
			snprintf(nm, sizeof(nm), "%s.%u", imm ? "send_imm" : "send", len);
			hm_check(ws.status == IBV_WC_SUCCESS && ws.opcode == IBV_WC_SEND && wr.status == IBV_WC_SUCCESS &&
					 wr.opcode == IBV_WC_RECV && wr.byte_len == len && wr.wr_id == 100 + k &&
					 ((wr.wc_flags & IBV_WC_WITH_IMM) != 0) == imm &&
					 (!imm || ntohl(wr.imm_data) == 0xC0DE0000u + k) && hm_differ(a + 3 * k, b, len) == 0 &&
					 hm_not_fill(b + len, 0x5a, 64) == 0,
				 nm, "sender %s, receiver %s opcode %d, %u bytes, imm %s %#x, %zu bytes wrong", hm_wc_str(ws.status),
				 hm_wc_str(wr.status), wr.opcode, wr.byte_len, (wr.wc_flags & IBV_WC_WITH_IMM) ? "yes" : "no",
				 ntohl(wr.imm_data), hm_differ(a + 3 * k, b, len));
		}
		/* WRITE, then WRITE with immediate (which takes a receive WQE) */
		for (int imm = 0; imm < 2; imm++) {
			memset(b, 0x5a, 4 * (size_t)mtu + 64);
			if (imm)
				post_recv(qb, 200 + k, b + 8 * mtu, 64, mb->lkey);
			struct ibv_wc ws = send_one(20 + k, imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, a + 5 * k, len,
						    (uintptr_t)b + 9, mb->rkey, 0xBEEF00u + k, "UC WRITE");
			struct ibv_wc wr = { .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV_RDMA_WITH_IMM, .wr_id = 200 + k,
					     .imm_data = htonl(0xBEEF00u + k) };
			if (imm)
				hm_poll_cq_wait(cqb, &wr, 1, "UC WRITE with immediate receive");
			else {
				/* a plain WRITE completes nothing at the receiver: let it land */
				int stray = hm_poll_cq_quiet(cqb, 20000, NULL);
				wr.status = stray ? IBV_WC_GENERAL_ERR : IBV_WC_SUCCESS;
			}
			snprintf(nm, sizeof(nm), "%s.%u", imm ? "write_imm" : "write", len);
			hm_check(ws.status == IBV_WC_SUCCESS && ws.opcode == IBV_WC_RDMA_WRITE && wr.status == IBV_WC_SUCCESS &&
					 wr.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wr.wr_id == 200 + k &&
					 ntohl(wr.imm_data) == 0xBEEF00u + k && hm_differ(a + 5 * k, b + 9, len) == 0 &&
					 hm_not_fill(b, 0x5a, 9) == 0 && hm_not_fill(b + 9 + len, 0x5a, 64) == 0,
				 nm, "sender %s, receiver %s%s (opcode %d, imm %#x), %zu bytes wrong", hm_wc_str(ws.status), hm_wc_str(wr.status),
				 imm ? "" : ": no completion, as a plain WRITE has none", wr.opcode, ntohl(wr.imm_data),
				 hm_differ(a + 5 * k, b + 9, len));
		}
	}

	/* ---- no reliability: dropped messages, and the QPs go on */
	{
		memset(b, 0x5a, BUF);
		struct ibv_wc w1 = send_one(30, IBV_WR_SEND, a + 100, 300, 0, 0, 0, "SEND with no receive posted");
		int stray = hm_poll_cq_quiet(cqb, 50000, NULL);
		post_recv(qb, 301, b, 4096, mb->lkey);
		struct ibv_wc w2 = send_one(31, IBV_WR_SEND, a + 200, 77, 0, 0, 0, "SEND after a receive was posted");
		struct ibv_wc wr;
		hm_poll_cq_wait(cqb, &wr, 1, "the second SEND");
		hm_check(w1.status == IBV_WC_SUCCESS && stray == 0 && w2.status == IBV_WC_SUCCESS && wr.wr_id == 301 &&
				 wr.byte_len == 77 && hm_differ(a + 200, b, 77) == 0 && hm_not_fill(b + 77, 0x5a, 300) == 0,
			 "drop.no_receive", "sender %s, %d completions at the receiver meanwhile; then %s, received %u bytes "
			 "into WQE %llu, %zu bytes wrong", hm_wc_str(w1.status), stray, hm_wc_str(w2.status), wr.byte_len,
			 (unsigned long long)wr.wr_id, hm_differ(a + 200, b, 77));

		memset(b, 0x5a, BUF);
		struct ibv_wc w3 = send_one(32, IBV_WR_RDMA_WRITE, a, 2 * mtu, (uintptr_t)b, mb->rkey ^ 0x100, 0,
					    "WRITE with a wrong rkey");
		stray = hm_poll_cq_quiet(cqb, 20000, NULL);
		struct ibv_wc w4 = send_one(33, IBV_WR_RDMA_WRITE, a, 2 * mtu, (uintptr_t)b + 4096, mb->rkey, 0, "WRITE");
		hm_poll_cq_quiet(cqb, 20000, NULL);
		hm_check(w3.status == IBV_WC_SUCCESS && stray == 0 && hm_not_fill(b, 0x5a, 4096) == 0 &&
				 w4.status == IBV_WC_SUCCESS && hm_differ(a, b + 4096, 2 * mtu) == 0 &&
				 state_of(qa) == IBV_QPS_RTS && state_of(qb) == IBV_QPS_RTS,
			 "drop.bad_rkey", "sender %s, %zu target bytes changed; the next WRITE %s, %zu bytes wrong; states "
			 "%s / %s", hm_wc_str(w3.status), hm_not_fill(b, 0x5a, 4096), hm_wc_str(w4.status), hm_differ(a, b + 4096, 2 * mtu),
			 hm_qp_state_str(state_of(qa)), hm_qp_state_str(state_of(qb)));

		/* the receiving QP without REMOTE_WRITE (RTS -> RTS), then with it again */
		memset(b, 0x5a, BUF);
		struct ibv_qp_attr acc = { .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
		int rc = ibv_modify_qp(qb, &acc, IBV_QP_ACCESS_FLAGS);
		struct ibv_wc w5 = send_one(34, IBV_WR_RDMA_WRITE, a, 512, (uintptr_t)b, mb->rkey, 0,
					    "WRITE to a QP without REMOTE_WRITE");
		hm_poll_cq_quiet(cqb, 20000, NULL);
		size_t changed = hm_not_fill(b, 0x5a, 512);
		acc.qp_access_flags = qacc;
		int rc2 = ibv_modify_qp(qb, &acc, IBV_QP_ACCESS_FLAGS);
		struct ibv_wc w6 = send_one(35, IBV_WR_RDMA_WRITE, a, 512, (uintptr_t)b, mb->rkey, 0, "WRITE with it");
		hm_poll_cq_quiet(cqb, 20000, NULL);
		hm_check(rc == 0 && w5.status == IBV_WC_SUCCESS && changed == 0 && rc2 == 0 && w6.status == IBV_WC_SUCCESS &&
				 hm_differ(a, b, 512) == 0,
			 "drop.no_remote_write", "access to LOCAL_WRITE: rc %d; a WRITE %s, %zu bytes changed; REMOTE_WRITE "
			 "again: rc %d, a WRITE %s, %zu bytes wrong", rc, hm_wc_str(w5.status), changed, rc2, hm_wc_str(w6.status),
			 hm_differ(a, b, 512));
	}

	/* ---- what UC does not offer */
	{
		struct ibv_sge s = { .addr = (uintptr_t)a, .length = 8, .lkey = ma->lkey };
		enum ibv_wr_opcode ops[] = { IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
					     IBV_WR_SEND_WITH_INV };
		int refused = 0;
		for (unsigned i = 0; i < 4; i++) {
			struct ibv_send_wr w = hm_send_wr(40 + i, ops[i], &s, 1), *bad = NULL;
			w.wr.rdma.remote_addr = (uintptr_t)b;
			w.wr.rdma.rkey = mb->rkey;
			w.wr.atomic.remote_addr = (uintptr_t)b;
			w.wr.atomic.rkey = mb->rkey;
			int rc = ibv_post_send(qa, &w, &bad);
			refused += rc == EINVAL && bad == &w;
		}
		int stray = hm_poll_cq_quiet(cqa, 20000, NULL);
		memset(b, 0x5a, 64);
		struct ibv_wc w = send_one(45, IBV_WR_RDMA_WRITE, a + 1, 64, (uintptr_t)b, mb->rkey, 0, "WRITE after");
		hm_poll_cq_quiet(cqb, 20000, NULL);
		hm_check(refused == 4 && stray == 0 && w.status == IBV_WC_SUCCESS && hm_differ(a + 1, b, 64) == 0,
			 "post_send.refused", "READ, CMP_AND_SWP, FETCH_AND_ADD, SEND_WITH_INV: %d of 4 refused with EINVAL, "
			 "%d completions; a WRITE after %s", refused, stray, hm_wc_str(w.status));

		struct ibv_qp_init_attr_ex ex;
		memset(&ex, 0, sizeof(ex));
		ex.send_cq = ex.recv_cq = cqa;
		ex.cap.max_send_wr = ex.cap.max_recv_wr = 4;
		ex.cap.max_send_sge = ex.cap.max_recv_sge = 1;
		ex.qp_type = IBV_QPT_UC;
		ex.pd = pd;
		ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ex.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ;
		struct ibv_qp *x1 = ibv_create_qp_ex(ctx, &ex);
		int e1 = x1 ? 0 : errno;
		ex.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
				    IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
		struct ibv_qp *x2 = ibv_create_qp_ex(ctx, &ex);
		int e2 = x2 ? 0 : errno;
		hm_check(!x1 && e1 == EOPNOTSUPP && x2 && x2->qp_type == IBV_QPT_UC, "create_qp_ex.uc",
			 "with RDMA_READ: %s (want EOPNOTSUPP); SEND and WRITE only: %s", x1 ? "created" : hm_errname(e1),
			 x2 ? "created" : hm_errname(e2));
		if (x1)
			ibv_destroy_qp(x1);
		if (x2)
			ibv_destroy_qp(x2);
	}

	/* ---- a receive error: the message is longer than the receive buffer */
	{
		post_recv(qb, 500, b, 64, mb->lkey);
		post_recv(qb, 501, b + 4096, 64, mb->lkey);
		struct ibv_wc ws = send_one(50, IBV_WR_SEND, a, 200, 0, 0, 0, "SEND longer than the receive buffer");
		struct ibv_wc wr[2];
		int got = 0;
		while (got < 2)
			got += hm_poll_cq_wait(cqb, wr + got, 2 - got, "the receive error and the flush");
		hm_check(ws.status == IBV_WC_SUCCESS && wr[0].wr_id == 500 && wr[0].status == IBV_WC_LOC_LEN_ERR &&
				 wr[1].wr_id == 501 && wr[1].status == IBV_WC_WR_FLUSH_ERR && state_of(qb) == IBV_QPS_ERR &&
				 state_of(qa) == IBV_QPS_RTS,
			 "recv.len_err", "sender %s; receiver: %llu %s, %llu %s; states %s / %s", hm_wc_str(ws.status),
			 (unsigned long long)wr[0].wr_id, hm_wc_str(wr[0].status), (unsigned long long)wr[1].wr_id, hm_wc_str(wr[1].status),
			 hm_qp_state_str(state_of(qa)), hm_qp_state_str(state_of(qb)));
	}

	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	ibv_destroy_cq(cqa);
	ibv_destroy_cq(cqb);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	hm_summary();
	return hm_exit_code();
}
