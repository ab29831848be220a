/*
 * hm_verbs_ops - every RC send opcode with data verification, both ways,
 * between two processes (server: no HOST argument, client: HOST).
 *
 * The two sides run in lock step over the TCP side channel.  For each test,
 * direction (c2s: client is the requester, s2c: server is the requester) and
 * size:
 *   responder: prepares (posts receives, fills memory), sends READY
 *   requester: posts the WR(s), checks its completions, sends DONE(status)
 *   responder: checks its completions and memory, sends VERDICT(status)
 * If either side saw its QP break (post failure, error completion), both
 * rebuild the main QP pair before the next test.  send_inv and bad_rkey run
 * on QP pairs of their own; bad_rkey always runs last.
 *
 * Usage: server: hm_verbs_ops [opts]       client: hm_verbs_ops [opts] HOST
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>

#include "hm_common.h"

#define DEFAULT_PORT 18517
#define MAGIC 0x4f505321u /* "OPS!" */
#define VERSION 1

#define CQ_SIZE 128
#define QP_WR 64
#define QP_SGE 3
#define WANT_INLINE 64
#define GUARD 64
#define IOVA_BASE 0x0000100000000000ull
#define IOFF 128
#define MAX_SIZES 16
#define INLINE_STACK 4096
#define WHY 256 /* bytes of a run's mismatch description */

enum test_id {
	T_SEND, T_SEND_IMM, T_WRITE, T_WRITE_IMM, T_READ, T_CAS, T_FAA,
	T_INLINE, T_SGE_SEND, T_SGE_WRITE, T_SEND_INV, T_IOVA, T_BAD_RKEY,
	T_COUNT
};

static const char *const tnames[T_COUNT] = {
	"send", "send_imm", "write", "write_imm", "read", "cas", "faa",
	"inline", "sge_send", "sge_write", "send_inv", "iova", "bad_rkey",
};

/* status codes carried by DONE / VERDICT */
enum { ST_OK = 0, ST_BAD = 1, ST_NOSEND = 2, ST_QPERR = 3 };
/* phase tags */
enum { PH_READY = 1, PH_DONE = 2, PH_VERDICT = 3, PH_CONN = 4, PH_UP = 5 };

struct xinfo {
	uint32_t magic, version, role, pad;
	uint64_t a_addr, i_iova, i_len, maxsz;
	uint32_t a_rkey, i_rkey;
	uint8_t gid[16];
	char sizes[128];
	char tests[256];
};

struct conn {
	struct ibv_qp *qp;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp_cap cap;
};

static struct {
	const char *dev;
	int gidx;
	int port;
	const char *sizes;
	const char *subset;
	const char *host;
} opt = { NULL, 0, DEFAULT_PORT, "1,64,4096,65536", NULL, NULL };

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_device_attr da;
static struct ibv_port_attr pa;
static union ibv_gid my_gid, peer_gid;
static int fd, role;
static uint8_t *A, *B, *I;
static struct ibv_mr *mrA, *mrB, *mrI;
static size_t maxsz, stride, LA, LB, LI;
static size_t A_SRC, A_DST, A_SINK, A_ATOM;
static size_t B_SRC, B_DST;
static uint64_t my_iova;
static uint64_t peerA, peerI;
static uint32_t peerA_rkey, peerI_rkey;
static struct conn mainc;
static struct ibv_qp *volatile main_qp;
static uint32_t run_ctr;
static size_t sizes[MAX_SIZES];
static int nsizes;
static int enabled[T_COUNT];
static uint8_t rd_atom = 1, dest_rd_atom = 1;

/* ------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr,
		HM_USAGE_PAIR
		"  -S LIST    message sizes, comma list (default 1,64,4096,65536)\n"
		"  -m SUBSET  tests to run, comma list of:\n"
		"             send,send_imm,write,write_imm,read,cas,faa,inline,\n"
		"             sge_send,sge_write,send_inv,iova,bad_rkey\n"
		"             (default all; bad_rkey always runs last)\n",
		hm_prog, DEFAULT_PORT);
	exit(2);
}

/* QP errors are expected on the error tests' own QPs, not on the main one */
static void on_async_event(const struct ibv_async_event *ev)
{
	if ((ev->event_type == IBV_EVENT_QP_FATAL ||
	     ev->event_type == IBV_EVENT_QP_REQ_ERR ||
	     ev->event_type == IBV_EVENT_QP_ACCESS_ERR ||
	     ev->event_type == IBV_EVENT_QP_LAST_WQE_REACHED) &&
	    ev->element.qp != main_qp)
		hm_info("async event %s on an error-test QP (expected)",
			ibv_event_type_str(ev->event_type));
	else
		hm_fail("async_event", "unexpected event %s (%d)",
			ibv_event_type_str(ev->event_type), ev->event_type);
}

/* ------------------------------------------------------------------ */
/* patterns                                                            */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static inline uint8_t pat(uint64_t seed, size_t k)
{
	return (uint8_t)((k * 151u) ^ (k >> 8) ^ (seed & 0xff) ^
			 ((seed >> 8) * (k & 7)));
}

static void fill_pat(uint8_t *p, size_t len, uint64_t seed, size_t msg_off)
{
	for (size_t k = 0; k < len; k++)
		p[k] = pat(seed, msg_off + k);
}

/* -1 if fine, else offset of the first wrong byte */
static long check_pat(const uint8_t *p, size_t len, uint64_t seed,
		      size_t msg_off)
{
	for (size_t k = 0; k < len; k++)
		if (p[k] != pat(seed, msg_off + k))
			return (long)k;
	return -1;
}

static long check_fill(const uint8_t *p, size_t len, uint8_t v)
{
	for (size_t k = 0; k < len; k++)
		if (p[k] != v)
			return (long)k;
	return -1;
}

/* ------------------------------------------------------------------ */
/* run bookkeeping                                                     */

struct run {
	int test;
	int dir;       /* 0: c2s (client requests), 1: s2c */
	size_t sz;
	int req;       /* this process is the requester */
	int peer_fail; /* responder reported it could not prepare */
	uint32_t tag;
	uint64_t seed;
	char name[96]; /* test.dir.size */
	char me[112];  /* name + .req / .resp */
};

static void run_init(struct run *r, int test, int dir, size_t sz,
		     const char *variant)
{
	memset(r, 0, sizeof(*r));
	r->test = test;
	r->dir = dir;
	r->sz = sz;
	r->req = (dir == 0) == (role == 1);
	r->tag = ++run_ctr << 8;
	r->seed = mix64(((uint64_t)test << 40) ^ ((uint64_t)dir << 32) ^
			(uint64_t)sz ^ ((uint64_t)run_ctr << 48));
	if (variant)
		snprintf(r->name, sizeof(r->name), "%s.%s%s%s", tnames[test],
			 dir ? "s2c" : "c2s", *variant ? "." : "", variant);
	else
		snprintf(r->name, sizeof(r->name), "%s.%s.%zu", tnames[test],
			 dir ? "s2c" : "c2s", sz);
	snprintf(r->me, sizeof(r->me), "%s.%s", r->name,
		 r->req ? "req" : "resp");
}

/* responder -> requester; a nonzero status means "could not prepare":
 * the requester then sends nothing (a SEND would only wait for RNR) */
static uint64_t ready(struct run *r, uint32_t status, uint64_t value)
{
	if (r->req) {
		struct hm_ctl m = hm_ctl_recv(fd, r->tag | PH_READY,
					      "READY from responder");

		r->peer_fail = m.status != 0;
		if (r->peer_fail)
			hm_fail(r->me, "responder could not prepare; nothing "
				"sent");
		return m.value;
	}
	hm_ctl_send(fd, r->tag | PH_READY, status, value);
	return value;
}

static uint32_t done(struct run *r, uint32_t st)
{
	if (r->req) {
		hm_ctl_send(fd, r->tag | PH_DONE, st, 0);
		return st;
	}
	return hm_ctl_recv(fd, r->tag | PH_DONE, "DONE from requester").status;
}

/* responder: READY (st: could it prepare), then the requester's DONE status */
static uint32_t ready_done(struct run *r, uint32_t st)
{
	ready(r, st, 0);
	return done(r, 0);
}

static uint32_t verdict(struct run *r, uint32_t st)
{
	if (!r->req) {
		hm_ctl_send(fd, r->tag | PH_VERDICT, st, 0);
		return st;
	}
	return hm_ctl_recv(fd, r->tag | PH_VERDICT, "VERDICT from responder").status;
}

/* ------------------------------------------------------------------ */
/* connections                                                         */

static void conn_up(struct conn *c, const char *name)
{
	struct ibv_qp_init_attr ia;
	struct hm_rtr_args ra;
	struct hm_ctl m;
	uint32_t psn = hm_rand_psn();
	int rc;

	memset(c, 0, sizeof(*c));
	hm_step("ibv_create_cq/ibv_create_qp/ibv_modify_qp (connection setup)");
	c->scq = ibv_create_cq(ctx, CQ_SIZE, NULL, NULL, 0);
	c->rcq = ibv_create_cq(ctx, CQ_SIZE, NULL, NULL, 0);
	if (!c->scq || !c->rcq)
		hm_fatal("create_cq", "%s: %s", name, strerror(errno));
	ia = hm_qp_attr(c->scq, c->rcq, IBV_QPT_RC, QP_WR, QP_WR, QP_SGE,
			QP_SGE, WANT_INLINE);
	c->qp = ibv_create_qp(pd, &ia);
	if (!c->qp) {
		hm_info("create_qp with max_inline_data=%d failed (%s); "
			"retrying with 0", WANT_INLINE, strerror(errno));
		ia.cap.max_inline_data = 0;
		c->qp = ibv_create_qp(pd, &ia);
	}
	if (!c->qp)
		hm_fatal("create_qp", "%s: %s", name, strerror(errno));
	c->cap = ia.cap;
	rc = hm_qp_init(c->qp, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_READ |
				       IBV_ACCESS_REMOTE_ATOMIC);
	if (rc)
		hm_fatal("modify_qp.init", "%s: %s", name, strerror(rc));

	hm_ctl_send(fd, PH_CONN, c->qp->qp_num, psn);
	m = hm_ctl_recv(fd, PH_CONN, "peer QP number");

	ra = hm_rtr_to(pa.active_mtu, m.status, (uint32_t)m.value, &peer_gid,
		       opt.gidx, dest_rd_atom);
	rc = hm_qp_rtr(c->qp, &ra);
	if (rc)
		hm_fatal("modify_qp.rtr", "%s: %s", name, strerror(rc));
	rc = hm_qp_rts(c->qp, psn, 14, 7, 7, rd_atom);
	if (rc)
		hm_fatal("modify_qp.rts", "%s: %s", name, strerror(rc));
	hm_barrier(fd, PH_UP, "peer QP in RTS");
	hm_info("%s connected: qpn=0x%x peer_qpn=0x%x max_inline_data=%u",
		name, c->qp->qp_num, m.status, c->cap.max_inline_data);
}

static void conn_down(struct conn *c, const char *name)
{
	struct ibv_wc wc[16];
	int rc;

	hm_step("draining CQs before destroy");
	while (ibv_poll_cq(c->scq, 16, wc) > 0)
		;
	while (ibv_poll_cq(c->rcq, 16, wc) > 0)
		;
	hm_step("ibv_destroy_qp");
	rc = ibv_destroy_qp(c->qp);
	if (rc)
		hm_fail("destroy_qp", "%s: rc=%d", name, rc);
	hm_step("ibv_destroy_cq");
	rc = ibv_destroy_cq(c->scq);
	if (rc)
		hm_fail("destroy_cq", "%s send: rc=%d", name, rc);
	rc = ibv_destroy_cq(c->rcq);
	if (rc)
		hm_fail("destroy_cq", "%s recv: rc=%d", name, rc);
	memset(c, 0, sizeof(*c));
}

static void finish_run(struct run *r, uint32_t my_st, uint32_t peer_st)
{
	(void)r;
	if (my_st >= ST_NOSEND || peer_st >= ST_NOSEND) {
		hm_info("rebuilding the main QP pair after %s", r->name);
		main_qp = NULL;
		conn_down(&mainc, "main");
		conn_up(&mainc, "main");
		main_qp = mainc.qp;
	}
}

/* the responder's end of a main-QP run: VERDICT, then finish_run */
static void resp_end(struct run *r, uint32_t st, uint32_t pst)
{
	verdict(r, st);
	finish_run(r, st, pst);
}

/* the requester's end of a main-QP run: DONE, the VERDICT, finish_run */
static void req_end(struct run *r, uint32_t st)
{
	done(r, st);
	finish_run(r, st, verdict(r, 0));
}

/* responder: 1 if the requester finished (DONE status pst), else a FAIL
 * and *st ST_BAD */
static int req_finished(struct run *r, uint32_t pst, uint32_t *st)
{
	if (pst < ST_NOSEND)
		return 1;
	hm_fail(r->me, "requester could not finish (status %u)", pst);
	*st = ST_BAD;
	return 0;
}

/* responder: 1 if there is something to check (*st: we prepared, pst: the
 * requester sent); else "FAIL <me>: nothing to check: post_recv failed" or
 * "...: the requester could not <verb>" and the run counts as not sent */
static int something_to_check(struct run *r, uint32_t *st, uint32_t pst,
			      const char *verb)
{
	if (*st == ST_OK && pst <= ST_BAD)
		return 1;
	hm_fail(r->me, "nothing to check: %s%s",
		*st ? "post_recv failed" : "the requester could not ",
		*st ? "" : verb);
	if (*st == ST_OK)
		*st = ST_NOSEND;
	return 0;
}

/* ------------------------------------------------------------------ */
/* verbs shorthands                                                    */

/* a signaled WR of opcode op on one SGE: len bytes at p in A */
static void wr1(struct ibv_send_wr *wr, struct ibv_sge *sg, const void *p,
		size_t len, uint64_t wr_id, enum ibv_wr_opcode op)
{
	sg->addr = (uintptr_t)p;
	sg->length = (uint32_t)len;
	sg->lkey = mrA->lkey;
	*wr = hm_send_wr(wr_id, op, sg, 1);
}

static int post_send1(struct conn *c, struct ibv_send_wr *wr, const char *name)
{
	struct ibv_send_wr *bad = NULL;
	int rc;

	hm_step("ibv_post_send");
	rc = ibv_post_send(c->qp, wr, &bad);

	if (rc)
		hm_fail(name, "ibv_post_send(opcode %d): %s", wr->opcode,
			strerror(rc));
	return rc;
}

static int post_recv1(struct conn *c, struct ibv_sge *sg, int nsge,
		      uint64_t wr_id, const char *name)
{
	struct ibv_recv_wr wr, *bad = NULL;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = nsge ? sg : NULL;
	wr.num_sge = nsge;
	hm_step("ibv_post_recv");
	rc = ibv_post_recv(c->qp, &wr, &bad);
	if (rc)
		hm_fail(name, "ibv_post_recv: %s", strerror(rc));
	return rc;
}

/* describe a completion mismatch into buf; returns 1 if all matched */
static int wc_match(const struct ibv_wc *w, struct conn *c, int opcode,
		    uint64_t wr_id, long byte_len, char *buf, size_t len)
{
	int ok = 1;
	size_t n = 0;

	buf[0] = 0;
#define ADD(...) n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__)
	if (w->status != IBV_WC_SUCCESS) {
		ADD("status=%s vendor_err=0x%x ", ibv_wc_status_str(w->status),
		    w->vendor_err);
		ok = 0;
	}
	if (w->status == IBV_WC_SUCCESS && (int)w->opcode != opcode) {
		ADD("opcode=%d want %d ", w->opcode, opcode);
		ok = 0;
	}
	if (w->wr_id != wr_id) {
		ADD("wr_id=0x%llx want 0x%llx ", (unsigned long long)w->wr_id,
		    (unsigned long long)wr_id);
		ok = 0;
	}
	if (w->qp_num != c->qp->qp_num) {
		ADD("qp_num=0x%x want 0x%x ", w->qp_num, c->qp->qp_num);
		ok = 0;
	}
	if (w->status == IBV_WC_SUCCESS && byte_len >= 0 &&
	    w->byte_len != (uint32_t)byte_len) {
		ADD("byte_len=%u want %ld ", w->byte_len, byte_len);
		ok = 0;
	}
#undef ADD
	return ok;
}

/* wait for the completion on cq and match it (wc_match, mismatches into
 * why[WHY]); an error status makes *st ST_QPERR */
static int wait_match(struct run *r, struct conn *c, struct ibv_cq *cq,
		      struct ibv_wc *w, int opcode, uint64_t wr_id,
		      long byte_len, char *why, uint32_t *st)
{
	hm_poll_cq_wait(cq, w, 1, r->name);
	if (w->status != IBV_WC_SUCCESS)
		*st = ST_QPERR;
	return wc_match(w, c, opcode, wr_id, byte_len, why, WHY);
}

/* a check of the run, "<me>" or "<me>.<sub>": ok_text if ok, else why; a
 * failure makes a run still ST_OK ST_BAD */
static void run_check(struct run *r, const char *sub, int ok,
		      const char *ok_text, const char *why, uint32_t *st)
{
	char nm[160];

	if (sub)
		snprintf(nm, sizeof(nm), "%s.%s", r->me, sub);
	else
		snprintf(nm, sizeof(nm), "%s", r->me);
	hm_check(ok, nm, "%s", ok ? ok_text : why);
	if (!ok && *st == ST_OK)
		*st = ST_BAD;
}

/* the responder's completion must carry IBV_WC_WITH_IMM and imm (else why) */
static int imm_ok(const struct ibv_wc *w, uint32_t imm, char *why)
{
	if ((w->wc_flags & IBV_WC_WITH_IMM) && ntohl(w->imm_data) == imm)
		return 1;
	snprintf(why, WHY, "wc_flags=0x%x imm=0x%x want IBV_WC_WITH_IMM imm=0x%x",
		 w->wc_flags, ntohl(w->imm_data), imm);
	return 0;
}

/* scatter list over (addr) pieces: verify a message of len bytes */
struct piece {
	uint8_t *p;
	size_t len;
};

static long check_pieces(const struct piece *pc, int n, size_t len,
			 uint64_t seed, char *why, size_t wlen)
{
	size_t off = 0;

	for (int i = 0; i < n; i++) {
		size_t take = pc[i].len;
		long b;

		if (take > len - off)
			take = len - off;
		b = check_pat(pc[i].p, take, seed, off);
		if (b >= 0) {
			snprintf(why, wlen, "SGE %d byte %ld (message byte %zu) "
				 "is 0x%02x want 0x%02x", i, b, off + (size_t)b,
				 pc[i].p[b], pat(seed, off + (size_t)b));
			return (long)(off + (size_t)b);
		}
		/* the rest of this SGE must be untouched */
		b = check_fill(pc[i].p + take, pc[i].len - take, 0xee);
		if (b >= 0) {
			snprintf(why, wlen, "SGE %d byte %zu past the message "
				 "was overwritten", i, take + (size_t)b);
			return (long)(off + take + (size_t)b);
		}
		off += take;
	}
	if (off != len) {
		snprintf(why, wlen, "pieces hold %zu of %zu bytes", off, len);
		return (long)off;
	}
	return -1;
}

static long check_msg(const uint8_t *p, size_t len, uint64_t seed, char *why,
		      size_t wlen)
{
	long b = check_pat(p, len, seed, 0);

	if (b >= 0) {
		snprintf(why, wlen, "byte %ld is 0x%02x want 0x%02x", b, p[b],
			 pat(seed, (size_t)b));
		return b;
	}
	b = check_fill(p + len, GUARD, 0xee);
	if (b >= 0) {
		snprintf(why, wlen, "guard byte %ld after the message was "
			 "overwritten (0x%02x)", b, p[len + (size_t)b]);
		return (long)len + b;
	}
	return -1;
}

/* split len into up to 3 requester pieces: A_SRC, B_SRC+17, A_SRC+l0+64 */
static int req_pieces(size_t len, struct ibv_sge *sg, uint64_t seed)
{
	size_t l[3];
	uint8_t *p[3];
	int n = len >= 3 ? 3 : (int)len;
	size_t off = 0;

	if (n == 3) {
		l[0] = len / 3;
		l[1] = len / 3;
		l[2] = len - l[0] - l[1];
	} else {
		l[0] = 1;
		l[1] = 1;
		l[2] = 0;
	}
	p[0] = A + A_SRC;
	p[1] = B + B_SRC + 17;
	p[2] = A + A_SRC + l[0] + 64;
	for (int i = 0; i < n; i++) {
		fill_pat(p[i], l[i], seed, off);
		sg[i].addr = (uintptr_t)p[i];
		sg[i].length = (uint32_t)l[i];
		sg[i].lkey = i == 1 ? mrB->lkey : mrA->lkey;
		off += l[i];
	}
	return n;
}

/* ------------------------------------------------------------------ */
/* tests                                                               */

/* send, send_imm, inline (and the responder half of sge_send) */
static void t_send(int test, int dir, size_t sz)
{
	struct run r;
	struct conn *c = &mainc;
	uint32_t st = ST_OK, pst;
	char why[WHY] = "";
	uint32_t imm = 0;

	run_init(&r, test, dir, sz, NULL);
	imm = (uint32_t)(r.seed >> 32) | 1;
	if (!r.req) {
		struct ibv_sge sg[3];
		struct piece pc[3];
		int nsg = 1;
		struct ibv_wc w;

		if (test == T_SGE_SEND) {
			size_t m0 = sz / 2 ? sz / 2 : 1, m1 = sz / 4 ? sz / 4 : 1;
			size_t m2 = (sz > m0 + m1 ? sz - m0 - m1 : 0) + GUARD;

			memset(A + A_DST, 0xee, stride);
			memset(B + B_DST, 0xee, stride);
			pc[0].p = A + A_DST;
			pc[0].len = m0;
			pc[1].p = B + B_DST + 33;
			pc[1].len = m1;
			pc[2].p = A + A_DST + m0 + 64;
			pc[2].len = m2;
			for (int i = 0; i < 3; i++) {
				sg[i].addr = (uintptr_t)pc[i].p;
				sg[i].length = (uint32_t)pc[i].len;
				sg[i].lkey = i == 1 ? mrB->lkey : mrA->lkey;
			}
			nsg = 3;
		} else {
			memset(A + A_DST, 0xee, sz + GUARD);
			sg[0].addr = (uintptr_t)(A + A_DST);
			sg[0].length = (uint32_t)(sz + GUARD);
			sg[0].lkey = mrA->lkey;
		}
		if (post_recv1(c, sg, nsg, r.tag | 0x11, r.me))
			st = ST_NOSEND;
		pst = ready_done(&r, st);
		if (something_to_check(&r, &st, pst, "send")) {
			int ok;

			ok = wait_match(&r, c, c->rcq, &w, IBV_WC_RECV,
					r.tag | 0x11, (long)sz, why, &st);
			if (ok && test == T_SEND_IMM)
				ok = imm_ok(&w, imm, why);
			if (ok && test != T_SEND_IMM &&
			    (w.wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV))) {
				ok = 0;
				snprintf(why, sizeof(why), "wc_flags=0x%x has "
					 "IMM/INV for a plain SEND", w.wc_flags);
			}
			if (ok) {
				if (test == T_SGE_SEND)
					ok = check_pieces(pc, 3, sz, r.seed, why,
							  sizeof(why)) < 0;
				else
					ok = check_msg(A + A_DST, sz, r.seed, why,
						       sizeof(why)) < 0;
			}
			run_check(&r, NULL, ok, test == T_SEND_IMM ? "imm ok" : "",
				  why, &st);
		}
		resp_end(&r, st, pst);
		return;
	}

	/* requester */
	{
		struct ibv_send_wr wr;
		struct ibv_sge sg[3];
		struct ibv_wc w;
		uint8_t stk[INLINE_STACK];
		int ok;

		ready(&r, 0, 0);
		wr1(&wr, &sg[0], A + A_SRC, sz, r.tag | 0x21,
		    test == T_SEND_IMM ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND);
		if (test == T_SEND_IMM)
			wr.imm_data = htonl(imm);
		if (test == T_INLINE) {
			/* unregistered stack memory, lkey meaningless */
			fill_pat(stk, sz, r.seed, 0);
			sg[0].addr = (uintptr_t)stk;
			sg[0].lkey = 0;
			wr.send_flags |= IBV_SEND_INLINE;
		} else if (test == T_SGE_SEND) {
			wr.num_sge = req_pieces(sz, sg, r.seed);
		} else {
			fill_pat(A + A_SRC, sz, r.seed, 0);
		}
		if (r.peer_fail || post_send1(c, &wr, r.me)) {
			st = ST_NOSEND;
		} else {
			if (test == T_INLINE)
				memset(stk, 0x5a, sizeof(stk)); /* data was copied */
			ok = wait_match(&r, c, c->scq, &w, IBV_WC_SEND,
					r.tag | 0x21, -1, why, &st);
			run_check(&r, NULL, ok,
				  test == T_SGE_SEND ? "num_sge=3" : "", why, &st);
		}
		req_end(&r, st);
	}
}

/* write, write_imm, sge_write */
static void t_write(int test, int dir, size_t sz)
{
	struct run r;
	struct conn *c = &mainc;
	uint32_t st = ST_OK, pst;
	char why[WHY] = "";
	uint32_t imm;

	run_init(&r, test, dir, sz, NULL);
	imm = (uint32_t)(r.seed >> 32) | 2;
	if (!r.req) {
		struct ibv_wc w;
		int ok = 1;

		memset(A + A_DST, 0xee, sz + GUARD);
		if (test == T_WRITE_IMM &&
		    post_recv1(c, NULL, 0, r.tag | 0x12, r.me))
			st = ST_NOSEND;
		pst = ready_done(&r, st);
		if (something_to_check(&r, &st, pst, "write")) {
			if (test == T_WRITE_IMM) {
				ok = wait_match(&r, c, c->rcq, &w,
						IBV_WC_RECV_RDMA_WITH_IMM,
						r.tag | 0x12, (long)sz, why, &st) &&
				     imm_ok(&w, imm, why);
			} else if (ibv_poll_cq(c->rcq, 1, &w) != 0) {
				ok = 0;
				snprintf(why, sizeof(why), "a plain RDMA_WRITE "
					 "produced a responder CQE (wr_id 0x%llx "
					 "status %s)", (unsigned long long)w.wr_id,
					 ibv_wc_status_str(w.status));
			}
			if (ok)
				ok = check_msg(A + A_DST, sz, r.seed, why,
					       sizeof(why)) < 0;
			run_check(&r, NULL, ok, "", why, &st);
		}
		resp_end(&r, st, pst);
		return;
	}
	{
		struct ibv_send_wr wr;
		struct ibv_sge sg[3];
		struct ibv_wc w;
		int ok;

		ready(&r, 0, 0);
		wr1(&wr, &sg[0], A + A_SRC, sz, r.tag | 0x22,
		    test == T_WRITE_IMM ? IBV_WR_RDMA_WRITE_WITH_IMM :
					  IBV_WR_RDMA_WRITE);
		wr.imm_data = htonl(imm);
		wr.wr.rdma.remote_addr = peerA + A_DST;
		wr.wr.rdma.rkey = peerA_rkey;
		if (test == T_SGE_WRITE)
			wr.num_sge = req_pieces(sz, sg, r.seed);
		else
			fill_pat(A + A_SRC, sz, r.seed, 0);
		if (r.peer_fail || post_send1(c, &wr, r.me)) {
			st = ST_NOSEND;
		} else {
			ok = wait_match(&r, c, c->scq, &w, IBV_WC_RDMA_WRITE,
					r.tag | 0x22, -1, why, &st);
			run_check(&r, NULL, ok, "", why, &st);
		}
		req_end(&r, st);
	}
}

static void t_read(int test, int dir, size_t sz)
{
	struct run r;
	struct conn *c = &mainc;
	uint32_t st = ST_OK, pst;

	run_init(&r, test, dir, sz, NULL);
	if (!r.req) {
		fill_pat(A + A_DST, sz, r.seed, 0);
		pst = ready_done(&r, st);
		/* the source must be left as it was */
		if (check_pat(A + A_DST, sz, r.seed, 0) >= 0) {
			st = ST_BAD;
			hm_fail(r.me, "RDMA_READ modified the source buffer");
		} else {
			hm_ok(r.me, "%s", "");
		}
		resp_end(&r, st, pst);
		return;
	}
	{
		struct ibv_send_wr wr;
		struct ibv_sge sg;
		struct ibv_wc w;
		char why[WHY] = "";
		int ok;

		ready(&r, 0, 0);
		memset(A + A_SINK, 0xee, sz + GUARD);
		wr1(&wr, &sg, A + A_SINK, sz, r.tag | 0x23, IBV_WR_RDMA_READ);
		wr.wr.rdma.remote_addr = peerA + A_DST;
		wr.wr.rdma.rkey = peerA_rkey;
		if (post_send1(c, &wr, r.me)) {
			st = ST_NOSEND;
		} else {
			ok = wait_match(&r, c, c->scq, &w, IBV_WC_RDMA_READ,
					r.tag | 0x23, (long)sz, why, &st);
			if (ok)
				ok = check_msg(A + A_SINK, sz, r.seed, why,
					       sizeof(why)) < 0;
			run_check(&r, NULL, ok, "", why, &st);
		}
		req_end(&r, st);
	}
}

/* one atomic (or the 8-byte read-back) and its completion */
static int atomic1(struct conn *c, struct run *r, enum ibv_wr_opcode op,
		   uint64_t cmp_or_add, uint64_t swap, int slot, uint64_t wr_id,
		   char *why, uint32_t *qperr)
{
	struct ibv_send_wr wr;
	struct ibv_sge sg;
	struct ibv_wc w;
	uint64_t *res = (uint64_t *)(A + A_ATOM + 64) + slot;
	int wop = op == IBV_WR_ATOMIC_CMP_AND_SWP ? IBV_WC_COMP_SWAP :
		  op == IBV_WR_ATOMIC_FETCH_AND_ADD ? IBV_WC_FETCH_ADD :
						      IBV_WC_RDMA_READ;

	*res = 0xeeeeeeeeeeeeeeeeull;
	wr1(&wr, &sg, res, 8, wr_id, op);
	if (op == IBV_WR_RDMA_READ) {
		wr.wr.rdma.remote_addr = peerA + A_ATOM;
		wr.wr.rdma.rkey = peerA_rkey;
	} else {
		wr.wr.atomic.remote_addr = peerA + A_ATOM;
		wr.wr.atomic.rkey = peerA_rkey;
		wr.wr.atomic.compare_add = cmp_or_add;
		wr.wr.atomic.swap = swap;
	}
	if (post_send1(c, &wr, r->me)) {
		*qperr = ST_NOSEND;
		snprintf(why, WHY, "post failed");
		return 0;
	}
	return wait_match(r, c, c->scq, &w, wop, wr_id, 8, why, qperr);
}

/* one step of a cas/faa run: an atomic (or the 8-byte read-back) whose
 * result word (slot) must hold want; "<me>.<name>" */
struct atom_step {
	const char *name;
	enum ibv_wr_opcode op;
	uint64_t cmp_or_add, swap;
	int slot;
	uint32_t wr_id;               /* low bits below the run's tag */
	uint64_t want;
	const char *got, *want_what;  /* "<got> 0x.. want <want_what>0x.." */
};

static void atom_check(struct conn *c, struct run *r,
		       const struct atom_step *s, uint32_t *qe, uint32_t *st)
{
	uint64_t *res = (uint64_t *)(A + A_ATOM + 64) + s->slot;
	char why[WHY] = "";
	int ok = atomic1(c, r, s->op, s->cmp_or_add, s->swap, s->slot,
			 r->tag | s->wr_id, why, qe);

	if (ok && *res != s->want) {
		ok = 0;
		snprintf(why, sizeof(why), "%s 0x%016llx want %s0x%016llx",
			 s->got, (unsigned long long)*res, s->want_what,
			 (unsigned long long)s->want);
	}
	run_check(r, s->name, ok, "", why, st);
}

/* responder of cas/faa: after the requester finished, the word must hold
 * want ("remote word 0x.. <after>, want 0x..") */
static void resp_word(struct run *r, uint32_t pst, volatile uint64_t *word,
		      uint64_t want, const char *after, uint32_t *st)
{
	if (!req_finished(r, pst, st))
		return;
	if (*word != want) {
		hm_fail(r->me, "remote word 0x%016llx %s, want 0x%016llx",
			(unsigned long long)*word, after,
			(unsigned long long)want);
		*st = ST_BAD;
	} else {
		hm_ok(r->me, "remote=0x%016llx", (unsigned long long)want);
	}
}

static void t_cas(int dir)
{
	struct run r;
	struct conn *c = &mainc;
	uint32_t st = ST_OK, pst;
	volatile uint64_t *word = (volatile uint64_t *)(A + A_ATOM);
	uint64_t v0, v1, v2;

	run_init(&r, T_CAS, dir, 8, "");
	v0 = mix64(r.seed + 1);
	v1 = mix64(r.seed + 2);
	v2 = mix64(r.seed + 3);
	if (!r.req) {
		*word = v0;
		pst = ready_done(&r, st);
		resp_word(&r, pst, word, v1, "after a successful and a failed CAS",
			  &st);
		resp_end(&r, st, pst);
		return;
	}
	{
		const struct atom_step steps[3] = {
			/* success: compare matches */
			{ "success", IBV_WR_ATOMIC_CMP_AND_SWP, v0, v1, 0, 0x31,
			  v0, "returned", "old value " },
			/* failure: compare is stale, swap must not happen */
			{ "failure", IBV_WR_ATOMIC_CMP_AND_SWP, v0, v2, 1, 0x32,
			  v1, "returned", "current value " },
			/* read back the remote word */
			{ "readback", IBV_WR_RDMA_READ, 0, 0, 2, 0x33, v1,
			  "remote word reads", "" },
		};
		uint32_t qe = ST_OK;

		ready(&r, 0, 0);
		if (da.atomic_cap == IBV_ATOMIC_NONE)
			hm_info("device reports atomic_cap=NONE; trying anyway");
		for (int k = 0; k < 3 && qe == ST_OK; k++)
			atom_check(c, &r, &steps[k], &qe, &st);
		if (qe != ST_OK)
			st = qe;
		req_end(&r, st);
	}
}

static void t_faa(int dir)
{
	static const uint64_t adds[5] = { 1, 0x100, 0xffffffffull,
					  0x123456789ull,
					  0xffffffffffffffffull };
	struct run r;
	struct conn *c = &mainc;
	uint32_t st = ST_OK, pst;
	char why[WHY] = "";
	volatile uint64_t *word = (volatile uint64_t *)(A + A_ATOM);
	uint64_t v0, sum = 0;

	run_init(&r, T_FAA, dir, 8, "");
	v0 = mix64(r.seed + 7) | 0xffffffffull; /* carries across 32 bits */
	for (int k = 0; k < 5; k++)
		sum += adds[k];
	if (!r.req) {
		*word = v0;
		pst = ready_done(&r, st);
		resp_word(&r, pst, word, v0 + sum, "after 5 adds", &st);
		resp_end(&r, st, pst);
		return;
	}
	{
		struct ibv_send_wr wr[5], *bad = NULL;
		struct ibv_sge sg[5];
		uint64_t *res = (uint64_t *)(A + A_ATOM + 64);
		uint64_t expect = v0;
		int ok = 1, k, rc;
		uint32_t qe = ST_OK;

		ready(&r, 0, 0);
		for (k = 0; k < 5; k++) {
			res[k] = 0xeeeeeeeeeeeeeeeeull;
			wr1(&wr[k], &sg[k], &res[k], 8, r.tag | (uint64_t)(0x40 + k),
			    IBV_WR_ATOMIC_FETCH_AND_ADD);
			wr[k].wr.atomic.remote_addr = peerA + A_ATOM;
			wr[k].wr.atomic.rkey = peerA_rkey;
			wr[k].wr.atomic.compare_add = adds[k];
			wr[k].next = k < 4 ? &wr[k + 1] : NULL;
		}
		rc = ibv_post_send(c->qp, wr, &bad);
		if (rc) {
			hm_fail(r.me, "ibv_post_send(chain of 5 FETCH_AND_ADD): %s",
				strerror(rc));
			st = ST_NOSEND;
		} else {
			for (k = 0; k < 5; k++) {
				struct ibv_wc w;

				hm_poll_cq_wait(c->scq, &w, 1, r.name);
				if (w.status != IBV_WC_SUCCESS)
					qe = ST_QPERR;
				if (!wc_match(&w, c, IBV_WC_FETCH_ADD,
					      r.tag | (uint64_t)(0x40 + k), 8, why,
					      sizeof(why))) {
					ok = 0;
					if (qe)
						break;
				}
			}
			for (k = 0; ok && k < 5; k++) {
				if (res[k] != expect) {
					ok = 0;
					snprintf(why, sizeof(why), "add %d returned "
						 "0x%016llx want 0x%016llx", k,
						 (unsigned long long)res[k],
						 (unsigned long long)expect);
				}
				expect += adds[k];
			}
			run_check(&r, "returned", ok, "adds=5", why, &st);
			if (qe == ST_OK) {
				const struct atom_step rd = {
					"sum", IBV_WR_RDMA_READ, 0, 0, 5, 0x4f,
					v0 + sum, "remote word reads", ""
				};

				atom_check(c, &r, &rd, &qe, &st);
			}
			if (qe != ST_OK)
				st = qe;
		}
		req_end(&r, st);
	}
}

/* a run of up to 64 bytes on a QP pair of its own (t), named after the
 * test; returns the size */
static size_t own_pair_run(struct run *r, struct conn *t, int test, int dir,
			   const char *variant)
{
	size_t sz = maxsz < 64 ? maxsz : 64;

	run_init(r, test, dir, sz, variant);
	conn_up(t, tnames[test]);
	return sz;
}

static void t_send_inv(int dir)
{
	struct run r;
	struct conn t;
	size_t sz = own_pair_run(&r, &t, T_SEND_INV, dir, NULL);
	uint32_t st = ST_OK, pst;
	char why[WHY] = "";

	if (!r.req) {
		uint8_t *ibuf = hm_alloc_pages(4096);
		struct ibv_mr *imr;
		struct ibv_sge sg;
		struct ibv_wc w;
		int ok, rc;

		imr = ibv_reg_mr(pd, ibuf, 4096, IBV_ACCESS_LOCAL_WRITE |
						 IBV_ACCESS_REMOTE_WRITE |
						 IBV_ACCESS_REMOTE_READ);
		if (!imr)
			hm_fatal(r.me, "ibv_reg_mr for the MR to invalidate: %s",
				 strerror(errno));
		memset(A + A_DST, 0xee, sz + GUARD);
		sg.addr = (uintptr_t)(A + A_DST);
		sg.length = (uint32_t)(sz + GUARD);
		sg.lkey = mrA->lkey;
		if (post_recv1(&t, &sg, 1, r.tag | 0x15, r.me))
			st = ST_NOSEND;
		ready(&r, st, imr->rkey);
		pst = done(&r, 0);
		if (pst == ST_OK && st == ST_OK) {
			ok = wait_match(&r, &t, t.rcq, &w, IBV_WC_RECV,
					r.tag | 0x15, (long)sz, why, &st);
			if (ok && (!(w.wc_flags & IBV_WC_WITH_INV) ||
				   w.invalidated_rkey != imr->rkey)) {
				ok = 0;
				snprintf(why, sizeof(why), "wc_flags=0x%x "
					 "invalidated_rkey=0x%x want "
					 "IBV_WC_WITH_INV rkey=0x%x", w.wc_flags,
					 w.invalidated_rkey, imr->rkey);
			}
			if (ok)
				ok = check_msg(A + A_DST, sz, r.seed, why,
					       sizeof(why)) < 0;
			run_check(&r, NULL, ok, "", why, &st);
		} else if (pst >= 0x100) {
			/* the requester got a clean error completion */
			struct ibv_wc first;
			int n = hm_poll_cq_quiet(t.rcq, 2000000, &first);

			/* Hematite implements SEND_WITH_INV: an error
			 * completion is a failure, never a skip */
			hm_fail(r.me, "send_with_inv: requester status=%s; "
				"responder saw %d CQE(s)%s%s",
				ibv_wc_status_str((enum ibv_wc_status)(pst - 0x100)),
				n, n > 0 ? ", first status=" : "",
				n > 0 ? ibv_wc_status_str(first.status) : "");
			st = ST_BAD;
		} else {
			hm_fail(r.me, "nothing to check (post_recv %s, "
				"requester status %u)", st ? "failed" : "ok", pst);
			st = ST_BAD;
		}
		rc = ibv_dereg_mr(imr);
		if (rc)
			hm_fail("dereg_mr.send_inv", "rc=%d", rc);
		free(ibuf);
		verdict(&r, st);
	} else {
		struct ibv_send_wr wr;
		struct ibv_sge sg;
		struct ibv_wc w;
		uint32_t rkey = (uint32_t)ready(&r, 0, 0);

		fill_pat(A + A_SRC, sz, r.seed, 0);
		wr1(&wr, &sg, A + A_SRC, sz, r.tag | 0x25, IBV_WR_SEND_WITH_INV);
		wr.invalidate_rkey = rkey;
		if (r.peer_fail || post_send1(&t, &wr, r.me)) {
			st = ST_NOSEND;
		} else {
			hm_poll_cq_wait(t.scq, &w, 1, r.name);
			if (w.status != IBV_WC_SUCCESS) {
				hm_fail(r.me, "send_with_inv: status=%s "
					"vendor_err=0x%x (an error completion "
					"for SEND_WITH_INV)",
					ibv_wc_status_str(w.status),
					w.vendor_err);
				st = 0x100u + (uint32_t)w.status;
			} else {
				int ok = wc_match(&w, &t, IBV_WC_SEND, r.tag | 0x25,
						  -1, why, sizeof(why));

				hm_check(ok, r.me, "invalidate_rkey=0x%x%s%s",
					 rkey, ok ? "" : " ", ok ? "" : why);
				/* the data went through, a bad CQE field
				 * is a check failure only */
			}
		}
		done(&r, st);
		pst = verdict(&r, 0);
		(void)pst;
	}
	conn_down(&t, "send_inv");
}

static void t_iova(int test, int dir, size_t sz)
{
	struct run r;
	struct conn *c = &mainc;
	uint32_t st = ST_OK, pst;
	char why[WHY] = "";

	run_init(&r, test, dir, sz, NULL);
	if (!r.req) {
		int ok;

		memset(I, 0xee, LI);
		pst = ready_done(&r, st);
		if (req_finished(&r, pst, &st)) {
			ok = check_msg(I + IOFF, sz, r.seed, why, sizeof(why)) < 0 &&
			     check_fill(I, IOFF, 0xee) < 0;
			if (!ok && !why[0])
				snprintf(why, sizeof(why), "bytes before the "
					 "target offset were overwritten");
			hm_check(ok, r.me, "iova=0x%llx addr=%p%s%s",
				 (unsigned long long)my_iova, (void *)I,
				 ok ? "" : " ", ok ? "" : why);
			if (!ok)
				st = ST_BAD;
		}
		resp_end(&r, st, pst);
		return;
	}
	{
		struct ibv_send_wr wr;
		struct ibv_sge sg;
		struct ibv_wc w;
		int ok = 1;

		ready(&r, 0, 0);
		fill_pat(A + A_SRC, sz, r.seed, 0);
		wr1(&wr, &sg, A + A_SRC, sz, r.tag | 0x26, IBV_WR_RDMA_WRITE);
		wr.wr.rdma.remote_addr = peerI + IOFF;
		wr.wr.rdma.rkey = peerI_rkey;
		if (post_send1(c, &wr, r.me)) {
			st = ST_NOSEND;
			goto out;
		}
		ok = wait_match(&r, c, c->scq, &w, IBV_WC_RDMA_WRITE,
				r.tag | 0x26, -1, why, &st);
		run_check(&r, "write", ok, "", why, &st);
		if (st == ST_QPERR)
			goto out;

		memset(A + A_SINK, 0xee, sz + GUARD);
		sg.addr = (uintptr_t)(A + A_SINK);
		wr.wr_id = r.tag | 0x27;
		wr.opcode = IBV_WR_RDMA_READ;
		if (post_send1(c, &wr, r.me)) {
			st = ST_NOSEND;
			goto out;
		}
		ok = wait_match(&r, c, c->scq, &w, IBV_WC_RDMA_READ,
				r.tag | 0x27, (long)sz, why, &st);
		if (ok)
			ok = check_msg(A + A_SINK, sz, r.seed, why,
				       sizeof(why)) < 0;
		run_check(&r, "read", ok, "", why, &st);
out:
		req_end(&r, st);
	}
}

static void t_bad_rkey(int dir)
{
	struct run r;
	struct conn t;
	size_t sz = own_pair_run(&r, &t, T_BAD_RKEY, dir, "");
	uint32_t st = ST_OK;

	if (!r.req) {
		enum ibv_qp_state s = IBV_QPS_UNKNOWN;

		memset(A + A_DST, 0xee, 3 * (sz + GUARD));
		ready_done(&r, st);
		/* nothing may land with a wrong key (the two good writes
		 * behind it are flushed) */
		if (check_fill(A + A_DST, 3 * (sz + GUARD), 0xee) >= 0) {
			hm_fail(r.me, "target memory changed although the "
				"first WRITE had a wrong rkey and the rest "
				"must be flushed");
			st = ST_BAD;
		} else {
			hm_ok(r.me, "target untouched");
		}
		if (!hm_query_qp_state(t.qp, &s))
			hm_info("responder QP state after a remote access "
				"error: %s", hm_qp_state_str(s));
		verdict(&r, st);
	} else {
		struct ibv_send_wr wr[3], *bad = NULL;
		struct ibv_sge sg[3];
		struct ibv_wc w;
		uint32_t badkey = peerA_rkey ^ 0xa5u;
		enum ibv_qp_state s = IBV_QPS_UNKNOWN;
		char nm[160], why[WHY];
		int k, rc, ok;

		if (badkey == peerI_rkey)
			badkey ^= 0x5a00u;
		ready(&r, 0, 0);
		fill_pat(A + A_SRC, sz, r.seed, 0);
		for (k = 0; k < 3; k++) {
			wr1(&wr[k], &sg[k], A + A_SRC, sz,
			    r.tag | (uint64_t)(0x50 + k), IBV_WR_RDMA_WRITE);
			wr[k].wr.rdma.remote_addr = peerA + A_DST +
						    (uint64_t)k * (sz + GUARD);
			wr[k].wr.rdma.rkey = k == 0 ? badkey : peerA_rkey;
			wr[k].next = k < 2 ? &wr[k + 1] : NULL;
		}
		rc = ibv_post_send(t.qp, wr, &bad);
		if (rc) {
			hm_fail(r.me, "ibv_post_send: %s", strerror(rc));
			st = ST_NOSEND;
		} else {
			hm_poll_cq_wait(t.scq, &w, 1, "REM_ACCESS_ERR completion");
			snprintf(nm, sizeof(nm), "%s.rem_access_err", r.me);
			hm_check(w.status == IBV_WC_REM_ACCESS_ERR &&
					 w.wr_id == wr[0].wr_id &&
					 w.qp_num == t.qp->qp_num,
				 nm, "status=%s wr_id_ok=%d rkey=0x%x (valid 0x%x)",
				 ibv_wc_status_str(w.status),
				 w.wr_id == wr[0].wr_id, badkey, peerA_rkey);
			for (k = 1; k < 3; k++) {
				hm_poll_cq_wait(t.scq, &w, 1, "WR_FLUSH_ERR completion");
				snprintf(nm, sizeof(nm), "%s.flush%d", r.me, k);
				hm_check(w.status == IBV_WC_WR_FLUSH_ERR &&
						 w.wr_id == wr[k].wr_id,
					 nm, "status=%s wr_id_ok=%d",
					 ibv_wc_status_str(w.status),
					 w.wr_id == wr[k].wr_id);
			}
			rc = hm_query_qp_state(t.qp, &s);
			snprintf(nm, sizeof(nm), "%s.qp_err", r.me);
			hm_check(rc == 0 && s == IBV_QPS_ERR, nm,
				 "rc=%d state=%s", rc, hm_qp_state_str(s));

			/* a WR posted to a QP in ERR: refused, or flushed */
			wr[1].next = NULL;
			wr[1].wr_id = r.tag | 0x5f;
			bad = NULL;
			rc = ibv_post_send(t.qp, &wr[1], &bad);
			snprintf(nm, sizeof(nm), "%s.post_after_err", r.me);
			if (rc) {
				hm_ok(nm, "refused rc=%s", hm_errname(rc));
			} else {
				hm_poll_cq_wait(t.scq, &w, 1,
						"flush of a WR posted in ERR");
				ok = w.status == IBV_WC_WR_FLUSH_ERR &&
				     w.wr_id == (r.tag | 0x5f);
				snprintf(why, sizeof(why), "status=%s",
					 ibv_wc_status_str(w.status));
				hm_check(ok, nm, "flushed %s", why);
			}
		}
		done(&r, st);
		verdict(&r, 0);
	}
	conn_down(&t, "bad_rkey");
}

/* inline, direction d: 1, the -S sizes up to the smaller max_inline_data
 * of the two sides (at most INLINE_STACK), and that maximum */
static void t_inline(int d)
{
	size_t cap = mainc.cap.max_inline_data;
	size_t list[MAX_SIZES + 3];
	int i, n = 0;
	struct hm_ctl m;

	/* both sides must walk the same size list */
	hm_ctl_send(fd, 0x7, 0, cap);
	m = hm_ctl_recv(fd, 0x7, "peer max_inline_data");
	if (m.value < cap)
		cap = (size_t)m.value;

	if (cap > INLINE_STACK)
		cap = INLINE_STACK;
	if (cap == 0) {
		/* keep both sides in step: no traffic */
		hm_fail("inline", "%s: QP has max_inline_data=0 (create_qp "
			"with %d was refused)", d ? "s2c" : "c2s", WANT_INLINE);
		return;
	}
	list[n++] = 1;
	for (i = 0; i < nsizes; i++)
		if (sizes[i] <= cap && sizes[i] > 1)
			list[n++] = sizes[i];
	if (list[n - 1] != cap)
		list[n++] = cap;
	for (i = 0; i < n; i++)
		t_send(T_INLINE, d, list[i]);
}

/* the tests run once per -S size, and those without a size (inline:
 * t_inline, bad_rkey: last, on its own) */
static void (*const sized_test[T_COUNT])(int test, int dir, size_t sz) = {
	[T_SEND] = t_send,   [T_SEND_IMM] = t_send,   [T_SGE_SEND] = t_send,
	[T_WRITE] = t_write, [T_WRITE_IMM] = t_write, [T_SGE_WRITE] = t_write,
	[T_READ] = t_read,   [T_IOVA] = t_iova,
};
static void (*const plain_test[T_COUNT])(int dir) = {
	[T_CAS] = t_cas, [T_FAA] = t_faa, [T_SEND_INV] = t_send_inv,
};

/* ------------------------------------------------------------------ */

static int parse_sizes(const char *s)
{
	char *dup = strdup(s), *tok, *save = NULL;

	nsizes = 0;
	for (tok = strtok_r(dup, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long long v = strtoull(tok, &end, 0);

		if (*end || v < 1 || v > (1u << 28) || nsizes >= MAX_SIZES) {
			free(dup);
			return -1;
		}
		sizes[nsizes++] = (size_t)v;
	}
	free(dup);
	return nsizes ? 0 : -1;
}

static int parse_subset(const char *s)
{
	char *dup, *tok, *save = NULL;

	if (!s) {
		for (int i = 0; i < T_COUNT; i++)
			enabled[i] = 1;
		return 0;
	}
	dup = strdup(s);
	for (tok = strtok_r(dup, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int i;

		for (i = 0; i < T_COUNT; i++)
			if (!strcmp(tok, tnames[i]))
				break;
		if (i == T_COUNT) {
			fprintf(stderr, "unknown test '%s'\n", tok);
			free(dup);
			return -1;
		}
		enabled[i] = 1;
	}
	free(dup);
	return 0;
}

static struct ibv_mr *reg(void *buf, size_t len, const char *name)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, len,
				       IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_WRITE |
					       IBV_ACCESS_REMOTE_READ |
					       IBV_ACCESS_REMOTE_ATOMIC);

	if (!mr)
		hm_fatal("reg_mr", "%s (%zu bytes): %s", name, len,
			 strerror(errno));
	return mr;
}

int main(int argc, char **argv)
{
	struct ibv_device **devlist;
	struct xinfo me, peer;
	pthread_t athr;
	int c, rc, i, d;
	char gs[64];
	const char *subset_str;

	hm_init_common(argv[0]);
	while ((c = getopt(argc, argv, "d:g:p:t:S:m:h")) != -1) {
		if (hm_common_opt(c, &opt.dev, &opt.gidx, &opt.port))
			continue;
		switch (c) {
		case 'S': opt.sizes = optarg; break;
		case 'm': opt.subset = optarg; break;
		default: usage();
		}
	}
	if (optind < argc)
		opt.host = argv[optind++];
	if (optind < argc || hm_timeout_s < 1 || parse_sizes(opt.sizes) ||
	    parse_subset(opt.subset) || strlen(opt.sizes) >= sizeof(me.sizes) ||
	    (opt.subset && strlen(opt.subset) >= sizeof(me.tests)))
		usage();
	subset_str = opt.subset ? opt.subset : "all";
	role = opt.host ? 1 : 0;
	maxsz = 0;
	for (i = 0; i < nsizes; i++)
		if (sizes[i] > maxsz)
			maxsz = sizes[i];
	if (maxsz < 64)
		maxsz = 64;
	stride = (maxsz + 2 * GUARD + 63) & ~(size_t)63;
	A_SRC = 0;
	A_DST = stride;
	A_SINK = 5 * stride; /* A_DST..: room for bad_rkey's 3 targets */
	A_ATOM = 6 * stride;
	LA = hm_page_round(6 * stride + 256);
	B_SRC = 0;
	B_DST = stride;
	LB = hm_page_round(2 * stride);
	LI = hm_page_round(maxsz + IOFF + GUARD);
	hm_info("%s role=%s dev=%s gidx=%d sizes=%s tests=%s", hm_prog,
		role ? "client" : "server", opt.dev ? opt.dev : "(first)",
		opt.gidx, opt.sizes, subset_str);

	ctx = hm_open_device(opt.dev, &devlist);
	hm_ok("open_device", "name=%s", ibv_get_device_name(ctx->device));
	hm_step("ibv_query_device/ibv_query_port/ibv_query_gid");
	rc = ibv_query_device(ctx, &da);
	if (rc)
		hm_fatal("query_device", "%s", strerror(rc));
	rc = ibv_query_port(ctx, 1, &pa);
	if (rc)
		hm_fatal("query_port", "%s", strerror(rc));
	if (pa.state != IBV_PORT_ACTIVE)
		hm_fatal("query_port", "port 1 is %s",
			 ibv_port_state_str(pa.state));
	if (ibv_query_gid(ctx, 1, opt.gidx, &my_gid) || hm_gid_is_zero(&my_gid))
		hm_fatal("query_gid", "GID index %d empty or unreadable",
			 opt.gidx);
	rd_atom = (uint8_t)(da.max_qp_init_rd_atom < 1 ? 1 :
			    da.max_qp_init_rd_atom > 4 ? 4 : da.max_qp_init_rd_atom);
	dest_rd_atom = (uint8_t)(da.max_qp_rd_atom < 1 ? 1 :
				 da.max_qp_rd_atom > 4 ? 4 : da.max_qp_rd_atom);
	hm_ok("device", "active_mtu=%d gid=%s atomic_cap=%d max_qp_rd_atom=%d "
	      "max_sge=%d", hm_mtu_bytes(pa.active_mtu),
	      hm_gid_str(&my_gid, gs, sizeof(gs)), da.atomic_cap,
	      da.max_qp_rd_atom, da.max_sge);
	athr = hm_start_async(ctx, on_async_event, 0);

	hm_step("ibv_alloc_pd/ibv_reg_mr");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		hm_fatal("alloc_pd", "%s", strerror(errno));
	A = hm_alloc_pages(LA);
	B = hm_alloc_pages(LB);
	I = hm_alloc_pages(LI);
	mrA = reg(A, LA, "A");
	mrB = reg(B, LB, "B");
	my_iova = IOVA_BASE;
	if (my_iova == (uint64_t)(uintptr_t)I)
		my_iova += 1ull << 30;
	mrI = ibv_reg_mr_iova(pd, I, LI, my_iova,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ);
	if (!mrI)
		hm_fatal("reg_mr_iova", "iova=0x%llx addr=%p len=%zu: %s",
			 (unsigned long long)my_iova, (void *)I, LI,
			 strerror(errno));
	hm_ok("reg_mr", "A=%zu B=%zu iova_mr=%zu iova=0x%llx", LA, LB, LI,
	      (unsigned long long)my_iova);

	/* exchange */
	memset(&me, 0, sizeof(me));
	me.magic = htonl(MAGIC);
	me.version = htonl(VERSION);
	me.role = htonl((uint32_t)role);
	me.a_addr = htobe64((uint64_t)(uintptr_t)A);
	me.a_rkey = htonl(mrA->rkey);
	me.i_iova = htobe64(my_iova);
	me.i_rkey = htonl(mrI->rkey);
	me.i_len = htobe64(LI);
	me.maxsz = htobe64(maxsz);
	memcpy(me.gid, my_gid.raw, 16);
	snprintf(me.sizes, sizeof(me.sizes), "%s", opt.sizes);
	snprintf(me.tests, sizeof(me.tests), "%s", subset_str);
	fd = role ? hm_tcp_connect(opt.host, opt.port) : hm_tcp_accept(opt.port);
	hm_tcp_send(fd, &me, sizeof(me), "setup info");
	hm_tcp_recv(fd, &peer, sizeof(peer), "peer setup info");
	if (ntohl(peer.magic) != MAGIC || ntohl(peer.version) != VERSION)
		hm_fatal("exchange", "peer is not hm_verbs_ops v%d", VERSION);
	if (ntohl(peer.role) == (uint32_t)role)
		hm_fatal("exchange", "both sides are %s",
			 role ? "clients" : "servers");
	peer.sizes[sizeof(peer.sizes) - 1] = 0;
	peer.tests[sizeof(peer.tests) - 1] = 0;
	if (strcmp(peer.sizes, me.sizes) || strcmp(peer.tests, me.tests))
		hm_fatal("exchange", "peer runs -S %s -m %s, we run -S %s -m %s",
			 peer.sizes, peer.tests, me.sizes, me.tests);
	peerA = be64toh(peer.a_addr);
	peerA_rkey = ntohl(peer.a_rkey);
	peerI = be64toh(peer.i_iova);
	peerI_rkey = ntohl(peer.i_rkey);
	memcpy(peer_gid.raw, peer.gid, 16);
	hm_ok("exchange", "peer_gid=%s", hm_gid_str(&peer_gid, gs, sizeof(gs)));

	conn_up(&mainc, "main");
	main_qp = mainc.qp;

	for (int t = 0; t < T_COUNT; t++) {
		if (!enabled[t] || t == T_BAD_RKEY)
			continue;
		for (d = 0; d < 2; d++) {
			if (t == T_INLINE)
				t_inline(d);
			else if (sized_test[t])
				for (i = 0; i < nsizes; i++)
					sized_test[t](t, d, sizes[i]);
			else
				plain_test[t](d);
		}
	}
	/* the error test goes last */
	if (enabled[T_BAD_RKEY])
		for (d = 0; d < 2; d++)
			t_bad_rkey(d);

	hm_barrier(fd, 0xff, "peer finished all tests");
	main_qp = NULL;
	conn_down(&mainc, "main");
	HM_TEARDOWN("ibv_dereg_mr", "dereg_mr",
		    ibv_dereg_mr(mrA) | ibv_dereg_mr(mrB) | ibv_dereg_mr(mrI));
	HM_TEARDOWN("ibv_dealloc_pd", "dealloc_pd", ibv_dealloc_pd(pd));
	hm_close_device(athr, ctx, devlist);
	close(fd);
	free(A);
	free(B);
	free(I);
	hm_summary();
	return hm_exit_code();
}
