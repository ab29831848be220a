/*
 * hm_verbs_fuzz - a randomised verbs-call sequence fuzzer for the provider API.
 *
 * One process opens two devices (hematite0 and hematite1 under hematite-run),
 * connects one RC QP on each to the other (the "valid pair"), and one UC QP on
 * each to the other (the "UC pair"), and then makes
 * --count fuzzed verbs calls, chosen by a seeded PRNG (--seed), interleaving
 *   - valid operations that move data between the two QPs and verify it
 *     (WRITE, WRITE_WITH_IMM, SEND(_WITH_IMM) with 1-3 SGEs or inline, READ,
 *     CMP_AND_SWP, FETCH_AND_ADD, chains of unsignaled WRITEs, a full send
 *     queue: ENOMEM at the WR that does not fit, the WRs before it execute;
 *     the same WRITE / SEND variants over the UC pair, and the operations UC
 *     does not have, READ, atomics and SEND_WITH_INV, refused by
 *     ibv_post_send with EINVAL, nothing posted);
 *   - bad arguments the provider must refuse with a clear errno / return
 *     value: opcodes, SGE counts (too many, negative), inline beyond the
 *     maximum, inline READ, malformed atomics, a bad WR in the middle of a
 *     chain (the WRs before it execute, nothing after it), posting before
 *     RTS/INIT, posting more receives than the queue holds, polling with
 *     bad counts, req_notify, bad ports, bad CQ sizes and vectors, bad QP
 *     capacities / types / CQs from another context / NULL CQs / an SRQ,
 *     create_qp_ex masks and flags, bad MR lengths / addresses / access
 *     bits, unmapped memory, completion channels of another context;
 *   - wrong orders: modify_qp through the RC and UC state machines (scratch
 *     QPs of both types) with legal and illegal transitions, missing and extra attribute-mask bits, unknown
 *     mask bits and out-of-range attribute values (checked against the
 *     kernel's ib_modify_qp_is_ok table, written out here independently);
 *     destroying objects in use (PD with MRs/QPs, CQ with QPs: EBUSY; the
 *     objects stay usable); a comp channel with a CQ (EBUSY);
 *   - verbs the provider does not offer (SRQ, AH, MW, resize_cq, XRCD, TD,
 *     multicast, WQ, DM, modify_cq, counters): EOPNOTSUPP; the extended CQ's
 *     refused attributes (timestamps, IGNORE_OVERRUN, a parent domain:
 *     EOPNOTSUPP; unknown comp_mask bits, 0 or 2^31 entries: EINVAL), a valid
 *     one polled empty (ENOENT) and destroyed; create_qp_ex with send
 *     operations not offered (EOPNOTSUPP);
 *   - completions left in a CQ from before a QP's RESET must not free slots of
 *     its new queues (the fixed list runs this first, every run);
 *   - operations that must end in an error completion: bad lkey (random, of a
 *     deregistered MR, of an MR in another PD), SGE beyond the MR, bad rkey,
 *     remote access the MR does not allow, remote range beyond the MR, a
 *     receive too short for the SEND; afterwards both QPs are drained (flush
 *     completions) and reconnected, and the valid operations go on.
 *
 * A finding is: an operation that succeeded where it must fail, a failure
 * without a clear errno (wrong value, -1 instead of the errno, errno unset),
 * a wrong completion (status, opcode, length, immediate, wr_id, QP number),
 * data that does not verify, a completion that does not come (hang), an
 * asynchronous IBV_EVENT_CQ_ERR on a CQ sized for every WR the fuzzer can have
 * posted to it (the valid and the scratch CQs: the device overran it), an
 * IBV_EVENT_DEVICE_FATAL, or a crash (the wrapper sees the signal).
 *
 * Not fuzzed (libibverbs itself dereferences these before the provider runs,
 * so a crash would be libibverbs', and no provider can defend them): NULL or
 * freed top-level handles (ibv_post_send(NULL...), ibv_destroy_qp of a freed
 * QP, ibv_dealloc_pd twice), NULL attr / wc / bad_wr out-pointers, wc arrays
 * shorter than num_entries, sg_lists shorter than num_sge or NULL with
 * num_sge > 0 (every rdma-core provider dereferences these, and the verbs
 * contract gives the provider no way to check them).
 *
 * Usage: hm_verbs_fuzz [--count N] [--seed S] [-d DEV0] [-D DEV1] [-t SECS] [-v]
 * Last line: "fuzz verbs: N cases, F findings"; exit 0 only when F == 0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <getopt.h>
#include <limits.h>
#include <sys/mman.h>

#include "hm_common.h"

/* ------------------------------------------------------------------ PRNG */

static uint64_t rs[2];

static uint64_t rnd64(void)
{
	uint64_t s1 = rs[0];
	const uint64_t s0 = rs[1];

	rs[0] = s0;
	s1 ^= s1 << 23;
	rs[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
	return rs[1] + s0;
}

static uint32_t rnd(uint32_t n) { return n ? (uint32_t)(rnd64() % n) : 0; }
static int chance(unsigned pct) { return rnd(100) < pct; }
static uint32_t rnd_range(uint32_t lo, uint32_t hi) { return lo + rnd(hi - lo + 1); }

static void seed_rng(uint64_t s)
{
	uint64_t z = s + 0x9e3779b97f4a7c15ull;

	for (int i = 0; i < 2; i++) {
		z ^= z >> 30; z *= 0xbf58476d1ce4e5b9ull;
		z ^= z >> 27; z *= 0x94d049bb133111ebull;
		z ^= z >> 31;
		rs[i] = z ? z : 1;
		z += 0x9e3779b97f4a7c15ull;
	}
}

static void fill_rand(void *p, size_t n)
{
	uint8_t *b = p;

	while (n >= 8) {
		uint64_t v = rnd64();
		memcpy(b, &v, 8);
		b += 8;
		n -= 8;
	}
	while (n--)
		*b++ = (uint8_t)rnd64();
}

/* ------------------------------------------------------------------ findings */

static long ncases, nfind;
static int verbose;
static const char *act = "setup";
static uint64_t seed;
static long max_findings_shown = 200;

static HM_PRINTF(1, 2) void finding(const char *fmt, ...)
{
	char det[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(det, sizeof(det), fmt, ap);
	va_end(ap);
	nfind++;
	if (nfind <= max_findings_shown)
		printf("FINDING case %ld [%s]: %s\n", ncases, act, det);
}

/* the last cases, printed with a hang (what led there) */
#define HIST 48
static struct { long n; const char *op; int reconnected; } hist[HIST];

static void hist_add(const char *op)
{
	hist[ncases % HIST].n = ncases;
	hist[ncases % HIST].op = op;
	hist[ncases % HIST].reconnected = 0;
}

static void dump_state(void);
static void finish(int code) __attribute__((noreturn));
static void finish(int code)
{
	printf("fuzz verbs: %ld cases, %ld findings\n", ncases, nfind);
	fflush(stdout);
	_exit(code ? code : (nfind ? 1 : 0));
}

/* SIGTERM / SIGINT (fuzz.sh's timeout): say how far the run got, then die of the signal */
static void on_term(int sig)
{
	char b[160];
	int n = snprintf(b, sizeof(b), "# %ld cases, %ld findings, stopped by signal %d in %s\n",
			 ncases, nfind, sig, act);

	if (n > 0 && write(STDOUT_FILENO, b, (size_t)n) < 0)
		_exit(128 + sig);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* a completion or a blocking call that does not come back: a hang (fatal) */
static HM_PRINTF(1, 2) void hang(const char *fmt, ...)
{
	char det[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(det, sizeof(det), fmt, ap);
	va_end(ap);
	finding("HANG: %s (nothing after %d s)", det, hm_timeout_s);
	dump_state();
	finish(1);
}

#define SET(...) ((const int[]){ __VA_ARGS__, 0 })
/* (sets chosen inside nested blocks must outlive them) */
static const int E_INVAL[] = { EINVAL, 0 };
static const int E_INVAL_NOTSUP[] = { EINVAL, EOPNOTSUPP, 0 };
static const int E_NOTSUP_INVAL[] = { EOPNOTSUPP, EINVAL, 0 };
static const int E_INVAL_FAULT_NOMEM[] = { EINVAL, EFAULT, ENOMEM, 0 };
static const int E_INVAL_FAULT[] = { EINVAL, EFAULT, 0 };
static const int E_FAULT_INVAL[] = { EFAULT, EINVAL, 0 };
static const int E_NOTSUP_NOSYS[] = { EOPNOTSUPP, ENOSYS, 0 };
static const int E_NOMEM[] = { ENOMEM, 0 };

static int in_set(int e, const int *set)
{
	for (; *set; set++)
		if (e == *set)
			return 1;
	return 0;
}

static const char *set_str(const int *set)
{
	static char b[128];
	size_t o = 0;

	b[0] = 0;
	for (; *set; set++)
		o += (size_t)snprintf(b + o, sizeof(b) - o, "%s%s", o ? "|" : "",
				      hm_errname(*set));
	return b;
}

/* int verbs: the return value must be one of the errno values in set */
static int want_rc(const char *what, int rc, const int *set)
{
	int e = errno;

	if (rc != 0 && in_set(rc, set))
		return 1;
	if (rc == 0)
		finding("%s succeeded, expected %s", what, set_str(set));
	else if (rc == -1)
		finding("%s returned -1 (errno %s), expected the errno value %s "
			"itself", what, hm_errname(e), set_str(set));
	else
		finding("%s returned %d (%s), expected %s", what, rc,
			rc > 0 ? hm_errname(rc) : "negative", set_str(set));
	return 0;
}

static int want_zero(const char *what, int rc)
{
	if (rc == 0)
		return 1;
	finding("%s failed: rc=%d (%s) errno=%s, expected success", what, rc,
		rc > 0 ? hm_errname(rc) : "-", hm_errname(errno));
	return 0;
}

/* constructors: NULL with errno in set */
static int want_null(const char *what, const void *p, const int *set)
{
	int e = errno;

	if (!p && in_set(e, set))
		return 1;
	if (p)
		finding("%s succeeded, expected NULL with errno %s", what,
			set_str(set));
	else
		finding("%s: NULL with errno %s, expected %s", what,
			hm_errname(e), set_str(set));
	return 0;
}

/* ------------------------------------------------------------------ state */

#define BUFLEN (64 * 1024)
#define HALF (BUFLEN / 2)
#define NSCR 4          /* scratch QPs per side (state-machine fuzzing): even RC, odd UC */
#define NPD 3
#define NMR 4
#define NCQ 3
#define NQP 3
#define STASH 512
#define WR_MAGIC 0x48d0000000000000ull
#define WR_MASK  0xffff000000000000ull
#define WR_SIG   (1ull << 47)
#define WR_UC    (1ull << 46)   /* posted on the UC pair's QP */

struct stashed { int used; struct ibv_wc wc; };

struct scr {                      /* a scratch QP: the model of its state */
	struct ibv_qp *qp;
	enum ibv_qp_state st;
	struct ibv_qp_cap cap;
	uint32_t sq_occ, rq_occ;  /* WRs posted and not yet completed */
	uint32_t epoch;
	int uc;                   /* IBV_QPT_UC (else RC) */
};

struct pmr { struct ibv_mr *mr; int pd; };
struct pqp { struct ibv_qp *qp; int pd, scq, rcq; };

struct side {
	int i;
	struct ibv_context *ctx;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	union ibv_gid gid, gid6;    /* GID 0 (IPv4-mapped), GID 1 (IPv6 link-local) */
	int v6;                     /* the valid pair runs over IPv6 now */
	struct ibv_pd *pd, *pd2;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_cap cap;
	uint32_t psn;
	struct ibv_qp *uqp;  /* the UC pair's QP (same CQ, PD and capacities) */
	uint32_t upsn;
	uint8_t *buf;        struct ibv_mr *mr;     /* all access */
	uint8_t *buf_ro;     struct ibv_mr *mr_ro;  /* LOCAL_WRITE only */
	uint8_t *buf_p2;     struct ibv_mr *mr_p2;  /* in pd2, all access */
	uint32_t dead[16];   int ndead;             /* keys of deregistered MRs */
	uint32_t pend;       /* signaled WRs posted on the valid QP, not completed */
	struct stashed stash[STASH];
	struct ibv_cq *scq;  /* the scratch QPs' CQ */
	struct scr s[NSCR];
	struct ibv_comp_channel *ch;
	struct ibv_cq *chcq; /* a CQ on the channel */
	/* the pool: objects created and destroyed at random */
	struct ibv_pd *ppd[NPD];
	struct pmr pmr[NMR];
	struct ibv_cq *pcq[NCQ];
	struct pqp pqp[NQP];
	uint8_t *pbuf;       /* memory for pool MRs */
};

static struct side S[2];
static uint64_t wr_seq = 1;
static uint64_t forbid_lo, forbid_hi;   /* wr_ids that must never complete */
static int need_reconnect;
static int on_uc;   /* the valid operations run over the UC pair (post_*_counted, new_wrid) */

static uint64_t new_wrid(int sig)
{
	return WR_MAGIC | (sig ? WR_SIG : 0) | (on_uc ? WR_UC : 0) | (wr_seq++ & 0x3fffffffffffull);
}

static const char *wcs(int s) { return ibv_wc_status_str((enum ibv_wc_status)s); }

/* ------------------------------------------------------------------ completions */

/* Reads the asynchronous events of a side (its async fd is non-blocking). A CQ
 * the fuzzer sized for every WR that can be posted to it never overruns; a
 * device that says it did lost completions (the symptom would otherwise be a
 * hang 60 s later). QP events (QP_FATAL, QP_REQ_ERR, ...) follow the error
 * cases by design. */
static void watch_events(struct side *sd)
{
	struct ibv_async_event ev;

	while (ibv_get_async_event(sd->ctx, &ev) == 0) {
		if (ev.event_type == IBV_EVENT_CQ_ERR &&
		    (ev.element.cq == sd->cq || ev.element.cq == sd->scq))
			finding("side %d: IBV_EVENT_CQ_ERR on the %s CQ (%d entries): "
				"the device overran a CQ that holds every WR posted to it",
				sd->i, ev.element.cq == sd->cq ? "valid" : "scratch",
				ev.element.cq->cqe);
		else if (ev.event_type == IBV_EVENT_DEVICE_FATAL) {
			ibv_ack_async_event(&ev);
			finding("side %d: IBV_EVENT_DEVICE_FATAL", sd->i);
			finish(1);
		}
		ibv_ack_async_event(&ev);
	}
}

/* Takes every completion of a valid QP's CQ into the stash, checking what can
 * be checked without knowing the operation. */
static void collect(struct side *sd)
{
	struct ibv_wc wc[16];
	int n;

	do {
		hm_step(hm_step_what);
		watch_events(sd);
		n = ibv_poll_cq(sd->cq, 16, wc);
		if (n < 0) {
			finding("ibv_poll_cq(valid CQ of side %d) returned %d", sd->i, n);
			return;
		}
		for (int k = 0; k < n; k++) {
			struct ibv_wc *w = &wc[k];
			int slot = -1;

			if ((w->wr_id & WR_MASK) != WR_MAGIC) {
				finding("side %d: completion with a wr_id never posted: "
					"0x%llx status %s", sd->i,
					(unsigned long long)w->wr_id, wcs(w->status));
				continue;
			}
			if (w->qp_num != ((w->wr_id & WR_UC) ? sd->uqp : sd->qp)->qp_num)
				finding("side %d: completion wr_id 0x%llx with qp_num 0x%x, "
					"expected 0x%x (the %s QP)", sd->i, (unsigned long long)w->wr_id,
					w->qp_num, ((w->wr_id & WR_UC) ? sd->uqp : sd->qp)->qp_num,
					(w->wr_id & WR_UC) ? "UC" : "RC");
			if (forbid_hi && w->wr_id >= forbid_lo && w->wr_id <= forbid_hi)
				finding("side %d: a WR after the failing WR of a chain "
					"completed (wr_id 0x%llx, %s): it must not have been "
					"posted", sd->i, (unsigned long long)w->wr_id,
					wcs(w->status));
			if ((w->wr_id & WR_SIG) && sd->pend)
				sd->pend--;
			for (int j = 0; j < STASH; j++)
				if (!sd->stash[j].used) {
					slot = j;
					break;
				}
			if (slot < 0) {
				memset(sd->stash, 0, sizeof(sd->stash));
				slot = 0;
			}
			sd->stash[slot].used = 1;
			sd->stash[slot].wc = *w;
		}
	} while (n > 0);
}

static int take(struct side *sd, uint64_t wr_id, struct ibv_wc *out)
{
	for (int j = 0; j < STASH; j++)
		if (sd->stash[j].used && sd->stash[j].wc.wr_id == wr_id) {
			*out = sd->stash[j].wc;
			sd->stash[j].used = 0;
			return 1;
		}
	return 0;
}

static void wait_wc(struct side *sd, uint64_t wr_id, struct ibv_wc *out,
		    const char *what)
{
	uint64_t dl = hm_now_us() + (uint64_t)hm_timeout_s * 1000000ull;

	hm_step(what);
	for (;;) {
		collect(sd);
		if (take(sd, wr_id, out))
			return;
		if (hm_now_us() > dl)
			hang("completion of %s on side %d (wr_id 0x%llx)", what, sd->i,
			     (unsigned long long)wr_id);
		hm_sleep_us(100);
	}
}

/* checks a completion; 1 when it is what was expected */
static int check_wc(const struct ibv_wc *w, int status, int opcode,
		    int byte_len, const char *what)
{
	if ((int)w->status != status) {
		finding("%s: completion status %s (vendor_err %u), expected %s",
			what, wcs(w->status), w->vendor_err, wcs(status));
		return 0;
	}
	if (status != IBV_WC_SUCCESS)
		return 1;
	if (opcode >= 0 && (int)w->opcode != opcode) {
		finding("%s: completion opcode %d, expected %d", what, w->opcode,
			opcode);
		return 0;
	}
	if (byte_len >= 0 && (int)w->byte_len != byte_len) {
		finding("%s: completion byte_len %u, expected %d", what,
			w->byte_len, byte_len);
		return 0;
	}
	return 1;
}

/* ------------------------------------------------------------------ connection */

static int rc_connect_one(struct side *a, struct side *b)
{
	struct hm_rtr_args r;
	int rc;

	rc = hm_qp_init(a->qp, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (rc)
		return rc;
	memset(&r, 0, sizeof(r));
	r.mtu = a->pa.active_mtu;
	r.dgid = a->v6 ? b->gid6 : b->gid;
	r.sgid_index = a->v6;
	r.hop_limit = 64;
	r.min_rnr_timer = 1;
	r.max_dest_rd_atomic = 1;
	r.dest_qpn = b->qp->qp_num;
	r.rq_psn = b->psn;
	rc = hm_qp_rtr(a->qp, &r);
	if (rc)
		return rc;
	return 0;
}

/* the UC pair's QP of side a towards b's: UC's masks (no RD_ATOMIC, RNR, timeout or retry
 * attributes) */
static int uc_connect_one(struct side *a, struct side *b)
{
	struct hm_rtr_args r;
	int rc;

	rc = hm_qp_init(a->uqp, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (rc)
		return rc;
	r = hm_rtr_to(a->pa.active_mtu, b->uqp->qp_num, b->upsn, a->v6 ? &b->gid6 : &b->gid, a->v6, 0);
	return hm_qp_rtr_uc(a->uqp, &r);
}

static void connect_pair(void)
{
	int rc;

	hm_step("connecting the valid pair");
	S[0].psn = hm_rand_psn();
	S[1].psn = hm_rand_psn();
	/* IPv6 link-local mostly: its MAC is in the GID, no ARP round trip (faster) */
	S[0].v6 = S[1].v6 = S[0].gid6.raw[0] == 0xfe && chance(80);
	for (int i = 0; i < 2; i++) {
		uint64_t t1 = hm_now_us();

		rc = rc_connect_one(&S[i], &S[1 - i]);
		if (verbose)
			printf("#   connect side %d INIT+RTR: %.3f s\n", i, (double)(hm_now_us() - t1) / 1e6);
		if (rc) {
			finding("connecting the valid QP of side %d (INIT/RTR): rc=%d (%s)",
				i, rc, hm_errname(rc));
			finish(1);
		}
	}
	for (int i = 0; i < 2; i++) {
		/* rnr_retry 1: a SEND without a receive ends in RNR_RETRY_EXC_ERR */
		rc = hm_qp_rts(S[i].qp, S[i].psn, 14, 7, 1, 1);
		if (rc) {
			finding("connecting the valid QP of side %d (RTS): rc=%d (%s)", i,
				rc, hm_errname(rc));
			finish(1);
		}
	}
	hm_step("connecting the UC pair");
	S[0].upsn = hm_rand_psn();
	S[1].upsn = hm_rand_psn();
	for (int i = 0; i < 2; i++) {
		rc = uc_connect_one(&S[i], &S[1 - i]);
		if (!rc)
			rc = hm_qp_rts_uc(S[i].uqp, S[i].upsn);
		if (rc) {
			finding("connecting the UC QP of side %d: rc=%d (%s)", i, rc, hm_errname(rc));
			finish(1);
		}
	}
}

/* After an error completion: both QPs to ERR, every signaled WR completes
 * (flushed), then RESET and connect again. */
static void reconnect(void)
{
	struct ibv_qp_attr a;
	uint64_t dl;

	hm_step("reconnect: ERR");
	for (int i = 0; i < 2; i++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_ERR;
		want_zero("modify_qp(valid QP -> ERR)", ibv_modify_qp(S[i].qp, &a, IBV_QP_STATE));
		want_zero("modify_qp(UC QP -> ERR)", ibv_modify_qp(S[i].uqp, &a, IBV_QP_STATE));
	}
	dl = hm_now_us() + (uint64_t)hm_timeout_s * 1000000ull;
	hm_step("reconnect: flushing");
	for (;;) {
		collect(&S[0]);
		collect(&S[1]);
		if (!S[0].pend && !S[1].pend)
			break;
		if (hm_now_us() > dl)
			hang("flush completions after ERR (pending %u / %u)", S[0].pend,
			     S[1].pend);
		hm_sleep_us(200);
	}
	for (int i = 0; i < 2; i++) {
		/* (the error completions were checked by their op; the rest are flushes) */
		for (int j = 0; j < STASH; j++)
			S[i].stash[j].used = 0;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RESET;
		want_zero("modify_qp(valid QP -> RESET)", ibv_modify_qp(S[i].qp, &a, IBV_QP_STATE));
		want_zero("modify_qp(UC QP -> RESET)", ibv_modify_qp(S[i].uqp, &a, IBV_QP_STATE));
	}
	if (verbose)
		printf("#   reconnect: flushed after %.3f s\n",
		       (double)(hm_now_us() - dl + (uint64_t)hm_timeout_s * 1000000ull) / 1e6);
	connect_pair();
	need_reconnect = 0;
	hist[ncases % HIST].reconnected = 1;
}

/* With a hang: the cases before it, then each side's valid QP as the device sees it and the
 * engine's nonzero counters (docs/transport-engine.md), so that one long replay is enough to
 * tell a stuck engine from a dropped packet. Called by hang() and by the watchdog (which ends
 * it if a call blocks). */
static void dump_state(void)
{
	typedef int (*qcnt_fn)(struct ibv_context *, uint32_t *, uint32_t, uint32_t *);
	qcnt_fn qcnt = (qcnt_fn)dlsym(RTLD_DEFAULT, "hematite_query_counters");

	printf("# the last cases (newest last; R: reconnected after it):");
	for (long k = ncases - HIST + 1; k <= ncases; k++)
		if (k > 0 && hist[k % HIST].n == k)
			printf(" %ld:%s%s", k, hist[k % HIST].op, hist[k % HIST].reconnected ? "(R)" : "");
	printf("\n");
	fflush(stdout);
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;
		uint32_t c[128], n = 0;

		if (!S[i].ctx)
			continue;
		memset(&a, 0, sizeof(a));
		if (S[i].qp && ibv_query_qp(S[i].qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &ia) == 0)
			printf("# side %d valid QP 0x%x: state %d sq_psn 0x%x rq_psn 0x%x, %u signaled WRs pending\n",
			       i, S[i].qp->qp_num, a.qp_state, a.sq_psn, a.rq_psn, S[i].pend);
		fflush(stdout);
		if (qcnt && qcnt(S[i].ctx, c, 128, &n) == 0) {
			printf("# side %d counters (firmware words 0..11, then engine counter i at word 13+i):", i);
			for (uint32_t k = 0; k < n; k++)
				if (c[k])
					printf(" [%u]=%u", k, c[k]);
			printf("\n");
		}
		fflush(stdout);
	}
}

/* ------------------------------------------------------------------ helpers */

static struct side *pick_side(void) { return &S[rnd(2)]; }

static void sge_of(struct ibv_sge *g, const void *p, uint32_t len, uint32_t lkey)
{
	g->addr = (uintptr_t)p;
	g->length = len;
	g->lkey = lkey;
}

/* splits [p, p+len) into n SGEs (n >= 1) */
static int split_sges(struct ibv_sge *g, int n, uint8_t *p, uint32_t len, uint32_t lkey)
{
	uint32_t off = 0;

	if (n < 1)
		n = 1;
	if ((uint32_t)n > len && len)
		n = (int)len;
	if (!len)
		n = 1;
	for (int k = 0; k < n; k++) {
		uint32_t l = (k == n - 1) ? len - off : rnd_range(len ? 1 : 0, (len - off) - (uint32_t)(n - 1 - k));
		if (k < n - 1 && len - off - l < (uint32_t)(n - 1 - k))
			l = 1;
		sge_of(&g[k], p + off, l, lkey);
		off += l;
	}
	return n;
}

static void init_swr(struct ibv_send_wr *w, enum ibv_wr_opcode op, struct ibv_sge *g,
		     int n, int flags, int sig)
{
	memset(w, 0, sizeof(*w));
	w->wr_id = new_wrid(sig);
	w->opcode = op;
	w->sg_list = g;
	w->num_sge = n;
	w->send_flags = (unsigned)flags | (sig ? IBV_SEND_SIGNALED : 0);
}

static int post_send_counted(struct side *sd, struct ibv_send_wr *w,
			     struct ibv_send_wr **bad)
{
	int rc;
	struct ibv_send_wr *x;

	*bad = NULL;
	hm_step("ibv_post_send");
	rc = ibv_post_send(on_uc ? sd->uqp : sd->qp, w, bad);
	/* count the signaled WRs that were posted */
	for (x = w; x; x = x->next) {
		if (rc && x == *bad)
			break;
		if (x->send_flags & IBV_SEND_SIGNALED)
			sd->pend++;
	}
	return rc;
}

static int post_recv_counted(struct side *sd, struct ibv_recv_wr *w,
			     struct ibv_recv_wr **bad)
{
	int rc;
	struct ibv_recv_wr *x;

	*bad = NULL;
	hm_step("ibv_post_recv");
	rc = ibv_post_recv(on_uc ? sd->uqp : sd->qp, w, bad);
	for (x = w; x; x = x->next) {
		if (rc && x == *bad)
			break;
		sd->pend++;
	}
	return rc;
}

static void sentinel(uint8_t *p, uint32_t len)
{
	/* 16 bytes of 0x5a on both sides of [p, p+len) (inside the buffers) */
	memset(p - 16, 0x5a, 16);
	memset(p + len, 0x5a, 16);
}

static int sentinel_ok(const uint8_t *p, uint32_t len)
{
	for (int k = 0; k < 16; k++)
		if (p[-16 + k] != 0x5a || p[len + k] != 0x5a)
			return 0;
	return 1;
}

static int verify(const char *what, const uint8_t *got, const uint8_t *want, uint32_t len)
{
	if (memcmp(got, want, len)) {
		uint32_t k = 0;

		while (k < len && got[k] == want[k])
			k++;
		finding("%s: DATA MISMATCH at byte %u of %u (got 0x%02x, want 0x%02x)",
			what, k, len, got[k], want[k]);
		return 0;
	}
	return 1;
}

/* offsets: requester data in [16, HALF-16), responder target in [HALF+16, BUFLEN-16) */
static uint32_t loc_off(uint32_t len) { return 16 + rnd(HALF - 32 - len + 1); }
static uint32_t rem_off(uint32_t len) { return HALF + 16 + rnd(HALF - 32 - len + 1); }

static uint32_t rnd_len(void)
{
	switch (rnd(6)) {
	case 0: return rnd_range(1, 16);
	case 1: return rnd_range(1, 256);
	case 2: return rnd_range(1, 4096);
	case 3: return rnd_range(4090, 8200);
	case 4: return (uint32_t)S[0].pa.active_mtu ? 1024u << ((unsigned)S[0].pa.active_mtu - 3 + 0) : 4096;
	default: return rnd_range(1, 12000);
	}
}

/* ------------------------------------------------------------------ valid operations */

/* A UC WRITE completes once sent: nothing but the bytes themselves tells when the peer has
 * placed them. Waits (bounded by -t) until dst holds src; the caller's verify() reports what
 * is still missing. */
static void uc_await(const uint8_t *dst, const uint8_t *src, uint32_t len)
{
	uint64_t dl = hm_now_us() + (uint64_t)hm_timeout_s * 1000000ull;

	while (len && memcmp(dst, src, len) && hm_now_us() < dl)
		hm_sleep_us(200);
}

static void op_write(int imm)
{
	struct side *s = pick_side(), *r = &S[1 - s->i];
	uint32_t len = rnd_len();
	uint32_t lo = loc_off(len), ro = rem_off(len);
	struct ibv_sge g[4];
	struct ibv_send_wr w, *bad;
	struct ibv_recv_wr rw, *rbad;
	struct ibv_wc wc;
	int n = (int)rnd_range(1, s->cap.max_send_sge < 3 ? s->cap.max_send_sge : 3);
	int inl = len <= s->cap.max_inline_data && chance(30);
	uint8_t tmp[1024];
	uint8_t *src = s->buf + lo;
	uint32_t immv = (uint32_t)rnd64();

	act = on_uc ? (imm ? "valid UC WRITE_WITH_IMM" : "valid UC WRITE") : imm ? "valid WRITE_WITH_IMM" : "valid WRITE";
	fill_rand(src, len);
	if (chance(5)) {
		/* zero-length, no SGE at all (NCCL's empty messages) */
		len = 0;
		n = 0;
		inl = 0;
	} else if (inl && len <= sizeof(tmp)) {
		/* inline from unregistered memory */
		memcpy(tmp, src, len);
		n = split_sges(g, n, tmp, len, 0xdead);
	} else {
		inl = 0;
		n = split_sges(g, n, src, len, s->mr->lkey);
	}
	memset(r->buf + ro, 0, len);
	sentinel(r->buf + ro, len);
	if (imm) {
		memset(&rw, 0, sizeof(rw));
		rw.wr_id = new_wrid(1);
		rw.num_sge = 0;
		if (!want_zero("post_recv(0 SGE)", post_recv_counted(r, &rw, &rbad)))
			return;
	}
	init_swr(&w, imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, n ? g : NULL, n,
		 inl ? IBV_SEND_INLINE : 0, 1);
	w.wr.rdma.remote_addr = (uintptr_t)(r->buf + ro);
	w.wr.rdma.rkey = r->mr->rkey;
	w.imm_data = htobe32(immv);
	if (!want_zero("post_send(WRITE)", post_send_counted(s, &w, &bad)))
		return;
	wait_wc(s, w.wr_id, &wc, act);
	if (!check_wc(&wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, -1, act)) {
		need_reconnect = 1;
		return;
	}
	if (on_uc && !imm)
		uc_await(r->buf + ro, src, len);
	if (imm) {
		wait_wc(r, rw.wr_id, &wc, "WRITE_WITH_IMM receive");
		if (check_wc(&wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, (int)len,
			     "WRITE_WITH_IMM receive") &&
		    (!(wc.wc_flags & IBV_WC_WITH_IMM) || be32toh(wc.imm_data) != immv))
			finding("WRITE_WITH_IMM receive: flags 0x%x imm 0x%x, expected "
				"WITH_IMM 0x%x", wc.wc_flags, be32toh(wc.imm_data), immv);
	}
	verify(act, r->buf + ro, src, len);
	if (!sentinel_ok(r->buf + ro, len))
		finding("%s: bytes around the target changed (len %u)", act, len);
}

static void op_send(int imm)
{
	struct side *s = pick_side(), *r = &S[1 - s->i];
	uint32_t len = rnd_len();
	uint32_t lo = loc_off(len), ro = rem_off(len);
	struct ibv_sge g[4], rg[4];
	struct ibv_send_wr w, *bad;
	struct ibv_recv_wr rw, *rbad;
	struct ibv_wc wc;
	int n = (int)rnd_range(1, s->cap.max_send_sge < 3 ? s->cap.max_send_sge : 3);
	int rn = (int)rnd_range(1, r->cap.max_recv_sge < 3 ? r->cap.max_recv_sge : 3);
	int inl = len <= s->cap.max_inline_data && chance(30);
	uint8_t *src = s->buf + lo;
	uint32_t immv = (uint32_t)rnd64();
	uint32_t rlen = len + rnd(64);

	act = on_uc ? (imm ? "valid UC SEND_WITH_IMM" : "valid UC SEND") : imm ? "valid SEND_WITH_IMM" : "valid SEND";
	if (ro + rlen > BUFLEN - 16)
		rlen = len;
	fill_rand(src, len);
	n = split_sges(g, n, src, len, s->mr->lkey);
	memset(r->buf + ro, 0, rlen);
	sentinel(r->buf + ro, rlen);
	memset(&rw, 0, sizeof(rw));
	rw.wr_id = new_wrid(1);
	rw.sg_list = rg;
	rw.num_sge = split_sges(rg, rn, r->buf + ro, rlen, r->mr->lkey);
	if (!want_zero("post_recv", post_recv_counted(r, &rw, &rbad)))
		return;
	init_swr(&w, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, g, n,
		 inl ? IBV_SEND_INLINE : 0, 1);
	w.imm_data = htobe32(immv);
	if (!want_zero("post_send(SEND)", post_send_counted(s, &w, &bad)))
		return;
	wait_wc(s, w.wr_id, &wc, act);
	if (!check_wc(&wc, IBV_WC_SUCCESS, IBV_WC_SEND, -1, act)) {
		need_reconnect = 1;
		return;
	}
	wait_wc(r, rw.wr_id, &wc, "SEND receive");
	if (!check_wc(&wc, IBV_WC_SUCCESS, IBV_WC_RECV, (int)len, "SEND receive")) {
		need_reconnect = 1;
		return;
	}
	if (imm != !!(wc.wc_flags & IBV_WC_WITH_IMM) || (imm && be32toh(wc.imm_data) != immv))
		finding("%s receive: flags 0x%x imm 0x%x, expected imm %d 0x%x", act,
			wc.wc_flags, be32toh(wc.imm_data), imm, immv);
	verify(act, r->buf + ro, src, len);
	if (!sentinel_ok(r->buf + ro, rlen))
		finding("%s: bytes around the receive buffer changed", act);
}

static void op_read(void)
{
	struct side *s = pick_side(), *r = &S[1 - s->i];
	uint32_t len = rnd_len();
	uint32_t lo = loc_off(len), ro = rem_off(len);
	struct ibv_sge g[4];
	struct ibv_send_wr w, *bad;
	struct ibv_wc wc;
	int n = (int)rnd_range(1, s->cap.max_send_sge < 3 ? s->cap.max_send_sge : 3);

	act = "valid READ";
	fill_rand(r->buf + ro, len);
	memset(s->buf + lo, 0, len);
	sentinel(s->buf + lo, len);
	n = split_sges(g, n, s->buf + lo, len, s->mr->lkey);
	init_swr(&w, IBV_WR_RDMA_READ, g, n, 0, 1);
	w.wr.rdma.remote_addr = (uintptr_t)(r->buf + ro);
	w.wr.rdma.rkey = r->mr->rkey;
	if (!want_zero("post_send(READ)", post_send_counted(s, &w, &bad)))
		return;
	wait_wc(s, w.wr_id, &wc, act);
	if (!check_wc(&wc, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, (int)len, act)) {
		need_reconnect = 1;
		return;
	}
	verify(act, s->buf + lo, r->buf + ro, len);
	if (!sentinel_ok(s->buf + lo, len))
		finding("%s: bytes around the local buffer changed", act);
}

static void op_atomic(void)
{
	struct side *s = pick_side(), *r = &S[1 - s->i];
	uint32_t ro = (rem_off(8) + 7) & ~7u, lo = (loc_off(8) + 7) & ~7u;
	uint64_t v0 = rnd64(), x = rnd64(), sw = rnd64(), got, now;
	int cas = chance(50), eq = chance(50);
	struct ibv_sge g;
	struct ibv_send_wr w, *bad;
	struct ibv_wc wc;

	act = cas ? "valid CMP_AND_SWP" : "valid FETCH_AND_ADD";
	memcpy(r->buf + ro, &v0, 8);
	memset(s->buf + lo, 0, 8);
	sge_of(&g, s->buf + lo, 8, s->mr->lkey);
	init_swr(&w, cas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD, &g, 1, 0, 1);
	w.wr.atomic.remote_addr = (uintptr_t)(r->buf + ro);
	w.wr.atomic.rkey = r->mr->rkey;
	w.wr.atomic.compare_add = cas ? (eq ? v0 : v0 ^ 1) : x;
	w.wr.atomic.swap = sw;
	if (!want_zero("post_send(atomic)", post_send_counted(s, &w, &bad)))
		return;
	wait_wc(s, w.wr_id, &wc, act);
	if (!check_wc(&wc, IBV_WC_SUCCESS, cas ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD, -1, act)) {
		need_reconnect = 1;
		return;
	}
	memcpy(&got, s->buf + lo, 8);
	memcpy(&now, r->buf + ro, 8);
	if (got != v0)
		finding("%s: returned 0x%llx, the original was 0x%llx", act,
			(unsigned long long)got, (unsigned long long)v0);
	if (now != (cas ? (eq ? sw : v0) : v0 + x))
		finding("%s: target is 0x%llx afterwards, expected 0x%llx", act,
			(unsigned long long)now,
			(unsigned long long)(cas ? (eq ? sw : v0) : v0 + x));
}

/* k WRITEs, only the last signaled (unless all_sig) */
static void op_chain(void)
{
	struct side *s = pick_side(), *r = &S[1 - s->i];
	int k = (int)rnd_range(2, s->cap.max_send_wr < 8 ? s->cap.max_send_wr : 8);
	struct ibv_sge g[8];
	struct ibv_send_wr w[8], *bad;
	struct ibv_wc wc;
	uint32_t len = rnd_range(1, 1500);

	act = "valid WRITE chain";
	for (int j = 0; j < k; j++) {
		uint8_t *src = s->buf + 16 + (uint32_t)j * 2048;
		uint8_t *dst = r->buf + HALF + 16 + (uint32_t)j * 2048;

		fill_rand(src, len);
		memset(dst, 0, len);
		sge_of(&g[j], src, len, s->mr->lkey);
		init_swr(&w[j], IBV_WR_RDMA_WRITE, &g[j], 1, 0, j == k - 1);
		w[j].wr.rdma.remote_addr = (uintptr_t)dst;
		w[j].wr.rdma.rkey = r->mr->rkey;
		w[j].next = j < k - 1 ? &w[j + 1] : NULL;
	}
	if (!want_zero("post_send(chain)", post_send_counted(s, w, &bad)))
		return;
	wait_wc(s, w[k - 1].wr_id, &wc, act);
	if (!check_wc(&wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, -1, act)) {
		need_reconnect = 1;
		return;
	}
	for (int j = 0; j < k; j++)
		verify(act, r->buf + HALF + 16 + (uint32_t)j * 2048, s->buf + 16 + (uint32_t)j * 2048, len);
}

/* more WRs than the send queue holds: ENOMEM at the first that does not fit;
 * the ones before it execute */
static void op_overflow(void)
{
	struct side *s = pick_side(), *r = &S[1 - s->i];
	uint32_t cap = s->cap.max_send_wr;
	int k = (int)cap + (int)rnd_range(1, 4);
	struct ibv_sge *g = calloc((size_t)k, sizeof(*g));
	struct ibv_send_wr *w = calloc((size_t)k, sizeof(*w)), *bad;
	struct ibv_wc wc;
	uint32_t len = 64;

	act = "send queue overflow";
	if (!g || !w || cap > 200)
		goto out;
	for (int j = 0; j < k; j++) {
		uint8_t *src = s->buf + 16 + (uint32_t)j * 128;
		uint8_t *dst = r->buf + HALF + 16 + (uint32_t)j * 128;

		fill_rand(src, len);
		memset(dst, 0, len);
		sge_of(&g[j], src, len, s->mr->lkey);
		init_swr(&w[j], IBV_WR_RDMA_WRITE, &g[j], 1, 0, 1);
		w[j].wr.rdma.remote_addr = (uintptr_t)dst;
		w[j].wr.rdma.rkey = r->mr->rkey;
		w[j].next = j < k - 1 ? &w[j + 1] : NULL;
	}
	if (want_rc("post_send(more WRs than max_send_wr)", post_send_counted(s, w, &bad), SET(ENOMEM)) &&
	    bad != &w[cap])
		finding("post_send overflow: bad_wr is WR #%ld, expected #%u (max_send_wr %u)",
			bad ? (long)(bad - w) : -1L, cap, cap);
	for (uint32_t j = 0; j < cap && j < (uint32_t)k; j++) {
		if (bad && bad <= &w[j])
			break;
		wait_wc(s, w[j].wr_id, &wc, act);
		if (!check_wc(&wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, -1, act)) {
			need_reconnect = 1;
			goto out;
		}
		verify(act, r->buf + HALF + 16 + j * 128, s->buf + 16 + j * 128, len);
	}
out:
	free(g);
	free(w);
}

/* a bad WR in the middle of a chain: the valid WRs before it execute, nothing after */
static void op_chain_bad(void)
{
	struct side *s = pick_side(), *r = &S[1 - s->i];
	int before = (int)rnd_range(0, 3), after = (int)rnd_range(0, 2), k = before + 1 + after;
	struct ibv_sge g[8], big[64];
	struct ibv_send_wr w[8], *bad;
	struct ibv_wc wc;
	uint32_t len = rnd_range(1, 512);
	int rc;

	act = "chain with a bad WR";
	for (int j = 0; j < k; j++) {
		uint8_t *src = s->buf + 16 + (uint32_t)j * 1024;
		uint8_t *dst = r->buf + HALF + 16 + (uint32_t)j * 1024;

		fill_rand(src, len);
		memset(dst, 0, len);
		sge_of(&g[j], src, len, s->mr->lkey);
		init_swr(&w[j], IBV_WR_RDMA_WRITE, &g[j], 1, 0, 1);
		w[j].wr.rdma.remote_addr = (uintptr_t)dst;
		w[j].wr.rdma.rkey = r->mr->rkey;
		w[j].next = j < k - 1 ? &w[j + 1] : NULL;
	}
	/* the bad one */
	switch (rnd(4)) {
	case 0: w[before].opcode = (enum ibv_wr_opcode)rnd_range(11, 300); break;
	case 1:
		for (int j = 0; j < 64; j++)
			sge_of(&big[j], s->buf + 16, 1, s->mr->lkey);
		w[before].sg_list = big;
		w[before].num_sge = (int)s->cap.max_send_sge + 1;
		break;
	case 2: w[before].num_sge = -1; break;
	default:
		w[before].send_flags |= IBV_SEND_INLINE;
		g[before].length = s->cap.max_inline_data + 1;
		break;
	}
	forbid_lo = w[before].wr_id;
	forbid_hi = w[k - 1].wr_id;
	rc = post_send_counted(s, w, &bad);
	if (want_rc("post_send(chain with a bad WR)", rc, SET(EINVAL, EOPNOTSUPP)) && bad != &w[before])
		finding("chain with a bad WR at #%d: bad_wr is #%ld", before,
			bad ? (long)(bad - w) : -1L);
	for (int j = 0; j < before; j++) {
		wait_wc(s, w[j].wr_id, &wc, act);
		if (!check_wc(&wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, -1, act)) {
			need_reconnect = 1;
			return;
		}
		verify(act, r->buf + HALF + 16 + (uint32_t)j * 1024, s->buf + 16 + (uint32_t)j * 1024, len);
	}
	if (rc == 0)
		need_reconnect = 1;
}

/* ------------------------------------------------------------------ bad posts on the valid QP */

static void op_bad_post(void)
{
	struct side *s = pick_side(), *r = &S[1 - s->i];
	struct ibv_sge g[1100];
	struct ibv_send_wr w, *bad = NULL;
	struct ibv_recv_wr rw, *rbad = NULL;
	int rc, v = (int)rnd(13);
	const char *what = "";
	const int *want = E_INVAL;

	for (int j = 0; j < 1100; j++)
		sge_of(&g[j], s->buf + 16 + (uint32_t)(j % 64), 1, s->mr->lkey);
	init_swr(&w, IBV_WR_RDMA_WRITE, g, 1, 0, 1);
	w.wr.rdma.remote_addr = (uintptr_t)(r->buf + HALF + 16);
	w.wr.rdma.rkey = r->mr->rkey;
	switch (v) {
	case 0: {
		static const uint32_t ops[] = { IBV_WR_LOCAL_INV, IBV_WR_BIND_MW, IBV_WR_TSO, 11, 12, 13, 14, 15, 16, 100, 255, 0x7fffffff, 0xffffffffu, 0x80000000u };
		w.opcode = (enum ibv_wr_opcode)ops[rnd(sizeof(ops) / sizeof(ops[0]))];
		what = "post_send(opcode the device does not offer)";
		want = E_INVAL_NOTSUP;
		break;
	}
	case 1:
		w.num_sge = (int)s->cap.max_send_sge + 1 + (int)rnd(1000);
		what = "post_send(num_sge > max_send_sge)";
		break;
	case 2: {
		static const int negs[] = { -1, -2, INT_MIN, -1000 };
		w.num_sge = negs[rnd(4)];
		what = "post_send(negative num_sge)";
		break;
	}
	case 3:
		w.send_flags |= IBV_SEND_INLINE;
		w.num_sge = (int)rnd_range(1, 3);
		for (int j = 0; j < w.num_sge; j++)
			g[j].length = s->cap.max_inline_data / (uint32_t)w.num_sge + 1 + rnd(100);
		what = "post_send(inline beyond max_inline_data)";
		break;
	case 4:
		w.opcode = IBV_WR_RDMA_READ;
		w.send_flags |= IBV_SEND_INLINE;
		what = "post_send(inline RDMA_READ)";
		break;
	case 5:
		w.opcode = chance(50) ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
		w.wr.atomic.remote_addr = (uintptr_t)(r->buf + HALF + 16);
		w.wr.atomic.rkey = r->mr->rkey;
		switch (rnd(4)) {
		case 0: w.num_sge = 0; break;
		case 1: w.num_sge = 2; g[0].length = 4; g[1].length = 4; break;
		case 2: g[0].length = chance(50) ? 4 : 16; break;
		default: w.wr.atomic.remote_addr += rnd_range(1, 7); g[0].length = 8; break;
		}
		what = "post_send(malformed atomic: SGE count / length / alignment)";
		break;
	case 6:
		w.send_flags |= IBV_SEND_INLINE;
		w.num_sge = -1;
		what = "post_send(inline, negative num_sge)";
		break;
	case 7: {
		/* nothing at all: a NULL list is no error and posts nothing */
		hm_step("ibv_post_send(NULL list)");
		rc = ibv_post_send(s->qp, NULL, &bad);
		if (rc != 0)
			finding("post_send(NULL WR list) returned %d (%s), expected 0", rc,
				hm_errname(rc));
		hm_step("ibv_post_recv(NULL list)");
		rc = ibv_post_recv(s->qp, NULL, &rbad);
		if (rc != 0)
			finding("post_recv(NULL WR list) returned %d (%s), expected 0", rc,
				hm_errname(rc));
		return;
	}
	case 8:
	case 9: {
		static const int negs[] = { -1, INT_MIN };
		memset(&rw, 0, sizeof(rw));
		rw.wr_id = new_wrid(1);
		rw.sg_list = g;
		rw.num_sge = v == 8 ? (int)s->cap.max_recv_sge + 1 + (int)rnd(1000) : negs[rnd(2)];
		hm_step("ibv_post_recv(bad num_sge)");
		rc = ibv_post_recv(s->qp, &rw, &rbad);
		if (want_rc(v == 8 ? "post_recv(num_sge > max_recv_sge)" : "post_recv(negative num_sge)",
			    rc, SET(EINVAL)) && rbad != &rw)
			finding("post_recv(bad num_sge): bad_wr %p, expected the WR %p",
				(void *)rbad, (void *)&rw);
		if (rc == 0)
			need_reconnect = 1; /* it is on the queue now */
		return;
	}
	case 10:
		w.opcode = IBV_WR_SEND_WITH_INV;
		w.send_flags |= IBV_SEND_INLINE;
		w.num_sge = 2;
		g[0].length = s->cap.max_inline_data;
		g[1].length = 1;
		what = "post_send(inline SEND_WITH_INV, one byte too many)";
		break;
	case 11:
		w.opcode = IBV_WR_SEND;
		w.num_sge = (int)s->cap.max_send_sge + 1;
		what = "post_send(SEND, num_sge > max_send_sge)";
		break;
	default:
		/* a message longer than max_msg_sz (2^31): SGE lengths that add up beyond it */
		w.opcode = chance(50) ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
		w.num_sge = 2;
		g[0].length = 0x80000000u;
		g[1].length = rnd_range(1, 0xffffffffu);
		what = "post_send(SGE lengths adding up beyond 2^31)";
		break;
	}
	hm_step(what);
	rc = ibv_post_send(s->qp, &w, &bad);
	if (want_rc(what, rc, want) && bad != &w)
		finding("%s: bad_wr %p, expected the WR %p", what, (void *)bad, (void *)&w);
	if (rc == 0) {
		s->pend++;
		need_reconnect = 1;
	}
}

/* ------------------------------------------------------------------ error completions */

static int key_live(struct side *sd, uint32_t key)
{
	if (key == sd->mr->lkey || key == sd->mr_ro->lkey || key == sd->mr_p2->lkey)
		return 1;
	for (int j = 0; j < NMR; j++)
		if (sd->pmr[j].mr && sd->pmr[j].mr->lkey == key)
			return 1;
	return 0;
}

static uint32_t bad_key(struct side *sd, const char **how)
{
	for (int tries = 0; tries < 50; tries++) {
		uint32_t k;

		switch (rnd(4)) {
		case 0: k = (uint32_t)rnd64(); *how = "random key"; break;
		case 1:
			if (!sd->ndead)
				continue;
			k = sd->dead[rnd((uint32_t)sd->ndead)];
			*how = "key of a deregistered MR";
			break;
		case 2: k = S[1 - sd->i].mr->lkey ^ (1u << rnd(32)); *how = "flipped bit"; break;
		default: k = sd->mr->lkey + rnd_range(1, 64); *how = "nearby key"; break;
		}
		if (!key_live(sd, k))
			return k;
	}
	*how = "random key";
	return 0xfffffff0u;
}

static void op_err_completion(void)
{
	struct side *s = pick_side(), *r = &S[1 - s->i];
	uint32_t len = rnd_range(1, 2048);
	uint32_t lo = loc_off(len), ro = rem_off(len);
	struct ibv_sge g, rg;
	struct ibv_send_wr w, *bad;
	struct ibv_recv_wr rw, *rbad;
	struct ibv_wc wc;
	const char *how = "";
	int v = (int)rnd(10), want = IBV_WC_LOC_PROT_ERR, rwant = -1;
	char what[160];

	fill_rand(s->buf + lo, len);
	sge_of(&g, s->buf + lo, len, s->mr->lkey);
	init_swr(&w, chance(50) ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ, &g, 1, 0, 1);
	w.wr.rdma.remote_addr = (uintptr_t)(r->buf + ro);
	w.wr.rdma.rkey = r->mr->rkey;
	memset(&rw, 0, sizeof(rw));
	switch (v) {
	case 0:
		g.lkey = bad_key(s, &how);
		snprintf(what, sizeof(what), "%s with a bad lkey (%s)", w.opcode ? "READ" : "WRITE", how);
		break;
	case 1:
		g.lkey = s->mr_p2->lkey;
		g.addr = (uintptr_t)s->buf_p2 + 16;
		snprintf(what, sizeof(what), "%s with the lkey of an MR in another PD",
			 w.opcode ? "READ" : "WRITE");
		break;
	case 2:
		g.addr = (uintptr_t)(s->buf + BUFLEN - (len > 1 ? rnd_range(1, len - 1) : 0));
		snprintf(what, sizeof(what), "%s with an SGE beyond the end of the MR",
			 w.opcode ? "READ" : "WRITE");
		break;
	case 3:
		w.wr.rdma.rkey = bad_key(r, &how);
		want = IBV_WC_REM_ACCESS_ERR;
		rwant = -2; /* the responder QP may go to ERR (no completion there) */
		snprintf(what, sizeof(what), "%s with a bad rkey (%s)", w.opcode ? "READ" : "WRITE", how);
		break;
	case 4:
		w.wr.rdma.rkey = r->mr_ro->rkey;
		w.wr.rdma.remote_addr = (uintptr_t)(r->buf_ro + 16);
		want = IBV_WC_REM_ACCESS_ERR;
		snprintf(what, sizeof(what), "%s to an MR without remote access",
			 w.opcode ? "READ" : "WRITE");
		break;
	case 5:
		w.wr.rdma.remote_addr = (uintptr_t)(r->buf + BUFLEN - (len > 1 ? rnd_range(1, len - 1) : 0));
		want = IBV_WC_REM_ACCESS_ERR;
		snprintf(what, sizeof(what), "%s beyond the end of the remote MR",
			 w.opcode ? "READ" : "WRITE");
		break;
	case 6:
		w.wr.rdma.rkey = r->mr_p2->rkey;
		w.wr.rdma.remote_addr = (uintptr_t)(r->buf_p2 + 16);
		want = IBV_WC_REM_ACCESS_ERR;
		snprintf(what, sizeof(what), "%s to an MR in another PD than the responder QP's",
			 w.opcode ? "READ" : "WRITE");
		break;
	case 7:
		/* a receive too short for the SEND */
		w.opcode = IBV_WR_SEND;
		if (len < 2)
			len = 2, g.length = 2;
		rw.wr_id = new_wrid(1);
		rw.sg_list = &rg;
		rw.num_sge = 1;
		sge_of(&rg, r->buf + ro, rnd_range(1, len - 1), r->mr->lkey);
		want = IBV_WC_REM_INV_REQ_ERR;
		rwant = IBV_WC_LOC_LEN_ERR;
		snprintf(what, sizeof(what), "SEND of %u bytes into a %u-byte receive", len, rg.length);
		break;
	case 9: {
		/* the responder QP loses the remote access the operation needs (RTS -> RTS) */
		struct ibv_qp_attr qa;
		int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			  IBV_ACCESS_REMOTE_ATOMIC;

		if (chance(35)) {
			w.opcode = chance(50) ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
			acc &= ~IBV_ACCESS_REMOTE_ATOMIC;
		} else {
			acc &= ~(w.opcode == IBV_WR_RDMA_WRITE ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ);
		}
		memset(&qa, 0, sizeof(qa));
		qa.qp_access_flags = acc;
		hm_step("modify_qp(RTS -> RTS, access flags)");
		if (!want_zero("modify_qp(valid responder RTS -> RTS, fewer access flags)",
			       ibv_modify_qp(r->qp, &qa, IBV_QP_ACCESS_FLAGS)))
			return;
		want = IBV_WC_REM_ACCESS_ERR;
		snprintf(what, sizeof(what), "%s to a QP without that remote access",
			 w.opcode == IBV_WR_RDMA_WRITE ? "WRITE" : w.opcode == IBV_WR_RDMA_READ ? "READ" : "atomic");
		break;
	}
	default:
		/* a receive with a bad lkey */
		w.opcode = IBV_WR_SEND;
		rw.wr_id = new_wrid(1);
		rw.sg_list = &rg;
		rw.num_sge = 1;
		sge_of(&rg, r->buf + ro, len, bad_key(r, &how));
		want = IBV_WC_REM_OP_ERR;
		rwant = IBV_WC_LOC_PROT_ERR;
		snprintf(what, sizeof(what), "SEND into a receive with a bad lkey (%s)", how);
		break;
	}
	if (w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	    (want == IBV_WC_REM_ACCESS_ERR && v != 9 && chance(30))) {
		/* the same remote check for an atomic: 8 bytes, aligned */
		uint64_t ra = w.wr.rdma.remote_addr & ~7ull;
		uint32_t rk = w.wr.rdma.rkey;

		if (w.opcode != IBV_WR_ATOMIC_CMP_AND_SWP && w.opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) {
			w.opcode = chance(50) ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
			if (v == 5)
				ra = (uintptr_t)(r->buf + BUFLEN);
			size_t l = strlen(what);
			snprintf(what + l, sizeof(what) - l, " (as an atomic)");
		}
		g.addr = (uintptr_t)(s->buf + ((lo + 7) & ~7u));
		g.length = 8;
		w.wr.atomic.remote_addr = ra;
		w.wr.atomic.rkey = rk;
		w.wr.atomic.compare_add = rnd64();
		w.wr.atomic.swap = rnd64();
	}
	act = what;
	if (rw.wr_id && !want_zero("post_recv", post_recv_counted(r, &rw, &rbad)))
		return;
	if (!want_zero("post_send", post_send_counted(s, &w, &bad)))
		return;
	need_reconnect = 1;
	{
		uint64_t t1 = hm_now_us();

		wait_wc(s, w.wr_id, &wc, what);
		if (verbose)
			printf("#   %s: %s after %.3f s\n", what, wcs(wc.status),
			       (double)(hm_now_us() - t1) / 1e6);
	}
	if (wc.status == IBV_WC_SUCCESS)
		finding("%s: completed successfully, expected %s", what, wcs(want));
	else if ((int)wc.status != want &&
		 !(want == IBV_WC_REM_OP_ERR && (wc.status == IBV_WC_REM_ACCESS_ERR ||
						 wc.status == IBV_WC_REM_INV_REQ_ERR)) &&
		 /* an operation the responder QP is not enabled for: rxe (and Hematite's
		  * engine) NAK it as an invalid request, other devices as an access error */
		 !(v == 9 && wc.status == IBV_WC_REM_INV_REQ_ERR))
		finding("%s: completion status %s, expected %s", what, wcs(wc.status), wcs(want));
	if (wc.status != IBV_WC_SUCCESS && chance(50)) {
		/* the QP is in ERR now: a new WR is accepted and completes with WR_FLUSH_ERR */
		struct ibv_send_wr fw;
		struct ibv_sge fg;

		sge_of(&fg, s->buf + 16, 8, s->mr->lkey);
		init_swr(&fw, chance(50) ? IBV_WR_SEND : IBV_WR_RDMA_WRITE, &fg, 1, 0, 1);
		fw.wr.rdma.remote_addr = (uintptr_t)(r->buf + HALF + 16);
		fw.wr.rdma.rkey = r->mr->rkey;
		if (want_zero("post_send on a QP in ERR (after an error completion)",
			      post_send_counted(s, &fw, &bad))) {
			struct ibv_wc fwc;

			wait_wc(s, fw.wr_id, &fwc, "a WR posted in ERR");
			if (fwc.status != IBV_WC_WR_FLUSH_ERR)
				finding("a WR posted after an error completion (QP in ERR) completed "
					"with %s, expected WR_FLUSH_ERR", wcs(fwc.status));
		}
	}
	if (rwant >= 0) {
		wait_wc(r, rw.wr_id, &wc, "the responder's receive");
		if (wc.status == IBV_WC_SUCCESS)
			finding("%s: the receive completed successfully, expected %s", what,
				wcs(rwant));
		else if ((int)wc.status != rwant && wc.status != IBV_WC_WR_FLUSH_ERR)
			finding("%s: receive completion status %s, expected %s", what,
				wcs(wc.status), wcs(rwant));
	}
}

/* ------------------------------------------------------------------ polling, notify, queries */

static void op_poll_bad(void)
{
	struct side *s = pick_side();
	struct ibv_cq *cq;
	static struct ibv_wc wc[70000];
	static const int ns[] = { 0, -1, -2, INT_MIN, -65536 };
	int n, rc;

	act = "poll_cq with a bad count";
	switch (rnd(3)) {
	case 0: cq = s->cq; break;
	case 1: cq = s->chcq; break;
	default: cq = s->pcq[rnd(NCQ)] ? s->pcq[rnd(NCQ)] : s->cq; break;
	}
	if (!cq)
		cq = s->cq;
	if (chance(25)) {
		/* a huge count: at most the CQ's entries come back (the array holds them) */
		n = chance(50) ? INT_MAX : cq->cqe + 1 + (int)rnd(1000);
		hm_step("ibv_poll_cq(huge)");
		rc = ibv_poll_cq(cq, n, wc);
		if (rc < 0 || rc > cq->cqe)
			finding("poll_cq(n=%d) on an idle CQ returned %d", n, rc);
		for (int k = 0; k < rc && cq == s->cq; k++)
			if ((wc[k].wr_id & WR_MASK) != WR_MAGIC || wc[k].status == IBV_WC_SUCCESS)
				finding("poll_cq(n=%d) on the idle valid CQ returned wr_id 0x%llx status %s",
					n, (unsigned long long)wc[k].wr_id, wcs(wc[k].status));
		return;
	}
	n = ns[rnd(sizeof(ns) / sizeof(ns[0]))];
	hm_step("ibv_poll_cq(bad count)");
	rc = ibv_poll_cq(cq, n, wc);
	if (n == 0 && rc != 0)
		finding("poll_cq(n=0) returned %d, expected 0", rc);
	if (n < 0 && rc >= 0)
		finding("poll_cq(n=%d) returned %d, expected a negative value", n, rc);
}

static void op_notify(void)
{
	struct side *s = pick_side();
	struct ibv_cq *cq;
	static const int so[] = { 0, 1, -1, 2, INT_MIN, INT_MAX };
	int rc, v = so[rnd(6)];

	act = "req_notify_cq";
	switch (rnd(4)) {
	case 0: cq = s->cq; break;
	case 1: cq = s->chcq; break;
	case 2: cq = s->scq; break;
	default: cq = s->pcq[rnd(NCQ)]; break;
	}
	if (!cq)
		cq = s->cq;
	hm_step("ibv_req_notify_cq");
	rc = ibv_req_notify_cq(cq, v);
	if (rc)
		finding("req_notify_cq(solicited_only=%d) returned %d (%s), expected 0", v,
			rc, rc > 0 ? hm_errname(rc) : "-");
}

static void op_query(void)
{
	struct side *s = pick_side();
	struct ibv_port_attr pa;
	struct ibv_device_attr_ex dx;
	struct ibv_query_device_ex_input in;
	static const uint8_t ports[] = { 0, 2, 3, 7, 128, 255 };
	int rc;

	switch (rnd(4)) {
	case 0: {
		uint8_t p = ports[rnd(sizeof(ports))];

		act = "query_port(bad port)";
		hm_step(act);
		rc = ibv_query_port(s->ctx, p, &pa);
		want_rc("query_port(bad port)", rc, SET(EINVAL));
		break;
	}
	case 1:
		act = "query_port(1)";
		hm_step(act);
		memset(&pa, 0, sizeof(pa));
		rc = ibv_query_port(s->ctx, 1, &pa);
		if (want_zero("query_port(1)", rc) && (pa.state != IBV_PORT_ACTIVE || pa.gid_tbl_len != s->pa.gid_tbl_len))
			finding("query_port(1): state %d gid_tbl_len %d", pa.state, pa.gid_tbl_len);
		break;
	case 2:
		act = "query_device_ex(bad comp_mask)";
		hm_step(act);
		memset(&in, 0, sizeof(in));
		in.comp_mask = 1u << rnd(32);
		rc = ibv_query_device_ex(s->ctx, &in, &dx);
		want_rc("query_device_ex(unknown input comp_mask)", rc, SET(EINVAL, EOPNOTSUPP));
		break;
	default: {
		enum ibv_qp_state st;

		act = "query_qp(valid QP)";
		rc = hm_query_qp_state(s->qp, &st);
		if (want_zero("query_qp", rc) && st != IBV_QPS_RTS)
			finding("query_qp(valid QP): state %s, expected RTS", hm_qp_state_str(st));
		break;
	}
	}
}

/* verbs the provider does not offer: EOPNOTSUPP (libibverbs' defaults or the provider) */
static void op_unsupported(void)
{
	struct side *sd = pick_side();
	const int *want = E_NOTSUP_NOSYS;
	const char *what = "";
	void *p = NULL;
	int rc = 0, isptr = 1;

	errno = 0;
	switch (rnd(12)) {
	case 0: {
		struct ibv_srq_init_attr a;

		memset(&a, 0, sizeof(a));
		a.attr.max_wr = rnd_range(1, 64);
		a.attr.max_sge = 1;
		what = "create_srq";
		p = ibv_create_srq(sd->pd, &a);
		if (p)
			ibv_destroy_srq(p);
		break;
	}
	case 1: {
		struct ibv_ah_attr a;

		memset(&a, 0, sizeof(a));
		a.is_global = 1;
		a.grh.dgid = S[1 - sd->i].gid;
		a.grh.hop_limit = 64;
		a.port_num = 1;
		what = "create_ah";
		p = ibv_create_ah(sd->pd, &a);
		if (p)
			ibv_destroy_ah(p);
		break;
	}
	case 2:
		what = "alloc_mw";
		p = ibv_alloc_mw(sd->pd, chance(50) ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
		if (p)
			ibv_dealloc_mw(p);
		break;
	case 3: {
		struct ibv_cq *cq = sd->pcq[rnd(NCQ)] ? sd->pcq[rnd(NCQ)] : sd->cq;

		what = "resize_cq";
		isptr = 0;
		if (!cq)
			cq = sd->cq;
		rc = ibv_resize_cq(cq, (int)rnd_range(1, 4096));
		break;
	}
	case 4: {
		/* the extended CQ: the attributes it refuses (a valid one is made, polled empty
		 * and destroyed) */
		struct ibv_cq_init_attr_ex a;

		memset(&a, 0, sizeof(a));
		a.cqe = rnd_range(1, 256);
		a.wc_flags = IBV_WC_STANDARD_FLAGS;
		switch (rnd(6)) {
		case 0: a.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP << rnd(2); what = "create_cq_ex(timestamp)"; break;
		case 1: a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS; a.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
			what = "create_cq_ex(ignore overrun)"; break;
		case 2: a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD; a.parent_domain = sd->pd; what = "create_cq_ex(parent domain)"; break;
		case 3: a.comp_mask = 1u << rnd_range(2, 31); want = E_INVAL; what = "create_cq_ex(comp_mask bits)"; break;
		case 4: a.cqe = chance(50) ? 0 : 0x80000000u; want = E_INVAL; what = "create_cq_ex(cqe)"; break;
		default: {
			struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
			struct ibv_cq_ex *c;
			int r;

			what = "create_cq_ex";
			act = what;
			hm_step(what);
			c = ibv_create_cq_ex(sd->ctx, &a);
			if (!c) {
				finding("create_cq_ex of %u entries failed: %s", a.cqe, hm_errname(errno));
				return;
			}
			r = ibv_start_poll(c, &pa);
			if (r != ENOENT) {
				finding("ibv_start_poll on a new extended CQ: %s, expected ENOENT", hm_errname(r));
				if (r == 0)
					ibv_end_poll(c);
			}
			if ((r = ibv_destroy_cq(ibv_cq_ex_to_cq(c))))
				finding("destroying a new extended CQ: %s", hm_errname(r));
			return;
		}
		}
		p = ibv_create_cq_ex(sd->ctx, &a);
		if (p)
			ibv_destroy_cq(ibv_cq_ex_to_cq(p));
		break;
	}
	case 5: {
		struct ibv_xrcd_init_attr a;

		memset(&a, 0, sizeof(a));
		a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
		a.fd = -1;
		a.oflags = O_CREAT;
		what = "open_xrcd";
		p = ibv_open_xrcd(sd->ctx, &a);
		if (p)
			ibv_close_xrcd(p);
		break;
	}
	case 6: {
		struct ibv_td_init_attr a;

		memset(&a, 0, sizeof(a));
		what = "alloc_td";
		p = ibv_alloc_td(sd->ctx, &a);
		if (p)
			ibv_dealloc_td(p);
		break;
	}
	case 7: {
		union ibv_gid mg;

		memset(&mg, 0, sizeof(mg));
		mg.raw[0] = 0xff;
		mg.raw[1] = 0x0e;
		mg.raw[15] = 1;
		what = "attach_mcast";
		isptr = 0;
		rc = ibv_attach_mcast(sd->qp, &mg, 0);
		break;
	}
	case 8: {
		struct ibv_wq_init_attr a;

		memset(&a, 0, sizeof(a));
		a.wq_type = IBV_WQT_RQ;
		a.max_wr = 16;
		a.max_sge = 1;
		a.pd = sd->pd;
		a.cq = sd->cq;
		what = "create_wq";
		p = ibv_create_wq(sd->ctx, &a);
		if (p)
			ibv_destroy_wq(p);
		break;
	}
	case 9: {
		struct ibv_alloc_dm_attr a;

		memset(&a, 0, sizeof(a));
		a.length = rnd_range(1, 65536);
		what = "alloc_dm";
		p = ibv_alloc_dm(sd->ctx, &a);
		if (p)
			ibv_free_dm(p);
		break;
	}
	case 10: {
		struct ibv_modify_cq_attr a;

		memset(&a, 0, sizeof(a));
		a.attr_mask = IBV_CQ_ATTR_MODERATE;
		a.moderate.cq_count = 1;
		a.moderate.cq_period = 1;
		what = "modify_cq";
		isptr = 0;
		rc = ibv_modify_cq(sd->cq, &a);
		break;
	}
	default: {
		struct ibv_counters_init_attr a;

		memset(&a, 0, sizeof(a));
		what = "create_counters";
		p = ibv_create_counters(sd->ctx, &a);
		if (p)
			ibv_destroy_counters(p);
		break;
	}
	}
	act = what;
	if (isptr)
		want_null(what, p, want);
	else
		want_rc(what, rc, want);
}

/* ------------------------------------------------------------------ the RC state machine */

/* The kernel's qp_state_table for RC and UC (drivers/infiniband/core/verbs.c), written out
 * independently of the firmware's copy: required and optional attribute bits. UC's entries
 * are RC's without the attributes of reliability (RD_ATOMIC, RNR timer and retries, timeout),
 * and without PORT in SQD -> SQD; SQE -> RTS takes CUR_STATE and ACCESS_FLAGS on UC (neither
 * type ever enters SQE on Hematite, and no modify may move a QP there). */
struct trans { int valid; uint32_t req, opt; };

static struct trans qp_trans(int uc, int from, int to)
{
	struct trans t = { 0, 0, 0 };
	/* what RC adds to UC's entries */
	const uint32_t rnr = uc ? 0 : IBV_QP_MIN_RNR_TIMER;

	if (from < 0 || from > IBV_QPS_ERR || to < 0 || to > IBV_QPS_ERR)
		return t;
	if (to == IBV_QPS_RESET || (to == IBV_QPS_ERR && from != IBV_QPS_RESET)) {
		t.valid = 1;
		return t;
	}
	switch (from) {
	case IBV_QPS_RESET:
		if (to == IBV_QPS_INIT)
			t = (struct trans){ 1, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0 };
		break;
	case IBV_QPS_INIT:
		if (to == IBV_QPS_INIT)
			t = (struct trans){ 1, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS };
		else if (to == IBV_QPS_RTR)
			t = (struct trans){ 1, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						   (uc ? 0 : IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
					    IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX };
		break;
	case IBV_QPS_RTR:
		if (to == IBV_QPS_RTS)
			t = (struct trans){ 1, IBV_QP_SQ_PSN | (uc ? 0 : IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT |
									   IBV_QP_RNR_RETRY | IBV_QP_TIMEOUT),
					    IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | rnr |
						    IBV_QP_PATH_MIG_STATE };
		break;
	case IBV_QPS_RTS:
		if (to == IBV_QPS_RTS)
			t = (struct trans){ 1, 0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
						  IBV_QP_PATH_MIG_STATE | rnr };
		else if (to == IBV_QPS_SQD)
			t = (struct trans){ 1, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY };
		break;
	case IBV_QPS_SQD:
		if (to == IBV_QPS_RTS)
			t = (struct trans){ 1, 0, IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
						  rnr | IBV_QP_PATH_MIG_STATE };
		else if (to == IBV_QPS_SQD)
			t = (struct trans){ 1, 0, IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
						  IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE |
						  (uc ? 0 : IBV_QP_PORT | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
							IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
							IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) };
		break;
	case IBV_QPS_SQE:
		if (to == IBV_QPS_RTS)
			t = (struct trans){ 1, 0, uc ? IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS : 0 };
		break;
	default:
		break;
	}
	return t;
}

/* good values for every attribute the mask selects */
static void good_attr(struct side *sd, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_access_flags = (int)rnd(16);
	a->pkey_index = 0;
	a->port_num = 1;
	a->path_mtu = (enum ibv_mtu)rnd_range(IBV_MTU_256, sd->pa.active_mtu);
	a->dest_qp_num = rnd(1u << 24);
	a->rq_psn = rnd(1u << 24);
	a->sq_psn = rnd(1u << 24);
	a->max_dest_rd_atomic = (uint8_t)rnd_range(0, (uint32_t)sd->da.max_qp_rd_atom);
	a->max_rd_atomic = (uint8_t)rnd_range(0, (uint32_t)sd->da.max_qp_init_rd_atom);
	a->min_rnr_timer = (uint8_t)rnd(32);
	a->timeout = (uint8_t)rnd(32);
	a->retry_cnt = (uint8_t)rnd(8);
	a->rnr_retry = (uint8_t)rnd(8);
	a->en_sqd_async_notify = (uint8_t)rnd(2);
	a->ah_attr.is_global = 1;
	if (chance(50)) {
		/* IPv6 link-local: the MAC is in the GID */
		a->ah_attr.grh.dgid = chance(50) ? S[1 - sd->i].gid6 : sd->gid6;
		a->ah_attr.grh.sgid_index = 1;
	} else {
		a->ah_attr.grh.dgid = chance(50) ? S[1 - sd->i].gid : sd->gid;
		a->ah_attr.grh.sgid_index = 0;
	}
	a->ah_attr.grh.hop_limit = (uint8_t)rnd_range(1, 255);
	a->ah_attr.grh.traffic_class = (uint8_t)rnd(256);
	a->ah_attr.grh.flow_label = rnd(1u << 20);
	a->ah_attr.port_num = 1;
}

/* Corrupts one attribute the mask selects; 1 when it did (the modify must then fail). */
static int bad_attr(struct side *sd, struct ibv_qp_attr *a, uint32_t mask, const char **how, int cur)
{
	int tries;

	for (tries = 0; tries < 20; tries++) {
		switch (rnd(14)) {
		case 0: if (!(mask & IBV_QP_PORT)) break;
			a->port_num = chance(50) ? 0 : (uint8_t)rnd_range(2, 255); *how = "port_num"; return 1;
		case 1: if (!(mask & IBV_QP_PKEY_INDEX)) break;
			a->pkey_index = (uint16_t)rnd_range(1, 65535); *how = "pkey_index"; return 1;
		case 2: if (!(mask & IBV_QP_PATH_MTU)) break;
			a->path_mtu = (enum ibv_mtu)(chance(50) ? 0 : rnd_range(6, 1000)); *how = "path_mtu"; return 1;
		case 3: if (!(mask & IBV_QP_MAX_DEST_RD_ATOMIC)) break;
			a->max_dest_rd_atomic = (uint8_t)rnd_range((uint32_t)sd->da.max_qp_rd_atom + 1, 255);
			*how = "max_dest_rd_atomic above max_qp_rd_atom"; return 1;
		case 4: if (!(mask & IBV_QP_ACCESS_FLAGS)) break;
			a->qp_access_flags = (int)(rnd_range(1, 0xffff) << 4); *how = "unknown qp_access_flags"; return 1;
		case 5: if (!(mask & IBV_QP_AV)) break;
			a->ah_attr.grh.sgid_index = (uint8_t)rnd_range((uint32_t)sd->pa.gid_tbl_len, 255);
			*how = "sgid_index beyond the GID table"; return 1;
		case 6: if (!(mask & IBV_QP_AV)) break;
			a->ah_attr.is_global = 0; *how = "AV without a GRH"; return 1;
		case 7: if (!(mask & IBV_QP_MIN_RNR_TIMER)) break;
			a->min_rnr_timer = (uint8_t)rnd_range(32, 255); *how = "min_rnr_timer > 31"; return 1;
		case 8: if (!(mask & IBV_QP_RETRY_CNT)) break;
			a->retry_cnt = (uint8_t)rnd_range(8, 255); *how = "retry_cnt > 7"; return 1;
		case 9: if (!(mask & IBV_QP_RNR_RETRY)) break;
			a->rnr_retry = (uint8_t)rnd_range(8, 255); *how = "rnr_retry > 7"; return 1;
		case 10: if (!(mask & IBV_QP_AV)) break;
			memset(&a->ah_attr.grh.dgid, 0, 16); *how = "a zero destination GID"; return 1;
		case 11: if (!(mask & IBV_QP_AV)) break;
			/* an IPv4 destination from the IPv6 source GID, or the reverse */
			a->ah_attr.grh.dgid = a->ah_attr.grh.sgid_index ? S[1 - sd->i].gid : S[1 - sd->i].gid6;
			*how = "source and destination GIDs of different IP versions"; return 1;
		case 12: if (!(mask & IBV_QP_AV)) break;
			/* an IPv6 destination that is not EUI-64 link-local: would need neighbour
			 * discovery, which the provider does not do (documented: EOPNOTSUPP) */
			memset(&a->ah_attr.grh.dgid, 0, 16);
			a->ah_attr.grh.dgid.raw[0] = 0x20;
			a->ah_attr.grh.dgid.raw[1] = 0x01;
			a->ah_attr.grh.dgid.raw[2] = 0x0d;
			a->ah_attr.grh.dgid.raw[3] = 0xb8;
			a->ah_attr.grh.dgid.raw[15] = (uint8_t)rnd_range(1, 255);
			a->ah_attr.grh.sgid_index = 1;
			*how = "a global IPv6 destination (no neighbour discovery)"; return 1;
		default: if (!(mask & IBV_QP_CUR_STATE) && !(mask & IBV_QP_STATE)) break;
			a->cur_qp_state = (enum ibv_qp_state)((cur + (int)rnd_range(1, 6)) % 7);
			*how = "CUR_STATE that is not the current state";
			return 2;
		}
	}
	return 0;
}

static const uint32_t ALL_KNOWN = (1u << 21) - 1;

static void op_modify(void)
{
	struct side *sd = pick_side();
	struct scr *q = &sd->s[rnd(NSCR)];
	struct ibv_qp_attr a;
	int from = (int)q->st, to, rc, expect_ok, bad_state_val = 0;
	uint32_t mask;
	struct trans t;
	const char *how = "legal";
	char what[200];

	act = "modify_qp (state machine)";
	/* mostly the next legal state; sometimes any state, sometimes garbage */
	if (chance(45)) {
		static const int next[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_RTS,
					    IBV_QPS_SQD, IBV_QPS_RTS, IBV_QPS_ERR };
		to = next[from];
		if (chance(15))
			to = chance(50) ? IBV_QPS_RESET : IBV_QPS_ERR;
	} else if (chance(90)) {
		to = (int)rnd(7);
	} else {
		to = (int)rnd_range(7, 1000);
		bad_state_val = 1;
	}
	good_attr(sd, &a);
	a.qp_state = (enum ibv_qp_state)to;
	t = qp_trans(q->uc, from, to);
	mask = IBV_QP_STATE | t.req;
	/* optional bits, except the unsupported alternate path / migration and CUR_STATE */
	mask |= t.opt & rnd64() & ~(uint32_t)(IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE | IBV_QP_CUR_STATE);
	expect_ok = t.valid && !bad_state_val;
	if (!t.valid)
		how = bad_state_val ? "state value out of range" : "illegal transition";
	if (expect_ok && chance(45)) {
		switch (rnd(6)) {
		case 0:
			if (!t.req)
				break;
			{
				uint32_t b;

				do
					b = 1u << rnd(21);
				while (!(t.req & b));
				mask &= ~b;
			}
			how = "a required attribute missing";
			expect_ok = 0;
			break;
		case 1: {
			uint32_t b;
			int guard = 0;

			do
				b = 1u << rnd(21);
			while (((t.req | t.opt | IBV_QP_STATE) & b) && ++guard < 100);
			if (guard >= 100 || b == IBV_QP_CUR_STATE)
				break;
			mask |= b;
			how = "an attribute not allowed in this transition";
			expect_ok = 0;
			break;
		}
		case 2:
			mask |= 1u << rnd_range(21, 31);
			how = "an unknown mask bit";
			expect_ok = 0;
			break;
		case 3:
			if (!(t.opt & IBV_QP_ALT_PATH))
				break;
			mask |= IBV_QP_ALT_PATH;
			how = "ALT_PATH (not offered)";
			expect_ok = 0;
			break;
		default:
			switch (bad_attr(sd, &a, mask, &how, from)) {
			case 1: expect_ok = 0; break;
			case 2: mask |= IBV_QP_CUR_STATE; expect_ok = 0; break;
			default: break;
			}
			break;
		}
	}
	snprintf(what, sizeof(what), "modify_qp(scratch %s QP %s -> %s%s, mask 0x%x: %s)",
		 q->uc ? "UC" : "RC", hm_qp_state_str((enum ibv_qp_state)from),
		 bad_state_val ? "garbage" : hm_qp_state_str((enum ibv_qp_state)to), "", mask, how);
	hm_step(what);
	rc = ibv_modify_qp(q->qp, &a, (int)mask);
	if (expect_ok) {
		if (rc) {
			finding("%s failed: rc=%d (%s)", what, rc, rc > 0 ? hm_errname(rc) : "-");
			return;
		}
		q->st = (enum ibv_qp_state)to;
		if (to == IBV_QPS_RESET) {
			q->sq_occ = q->rq_occ = 0;
			q->epoch++;
		}
		if (q->qp->state != q->st)
			finding("%s: ibv_qp.state is %s afterwards", what, hm_qp_state_str(q->qp->state));
	} else {
		want_rc(what, rc, (mask & IBV_QP_ALT_PATH) || !strncmp(how, "a global IPv6", 13) ?
					  SET(EINVAL, EOPNOTSUPP) : SET(EINVAL));
		if (rc == 0) {
			q->st = (enum ibv_qp_state)(bad_state_val ? q->st : (enum ibv_qp_state)to);
		}
	}
	(void)ALL_KNOWN;
	if (chance(25)) {
		/* the device agrees with the model */
		enum ibv_qp_state st = IBV_QPS_UNKNOWN;

		hm_step("ibv_query_qp(scratch)");
		rc = hm_query_qp_state(q->qp, &st);
		if (want_zero("query_qp(scratch QP)", rc) && st != q->st)
			finding("query_qp(scratch QP) after %s: state %s, expected %s", what,
				hm_qp_state_str(st), hm_qp_state_str(q->st));
	}
}

/* drains the scratch CQ, keeping the queue occupancy of the scratch QPs */
static unsigned old_epoch_polled; /* completions drain_scq saw from before their QP's RESET */

static void drain_scq(struct side *sd)
{
	struct ibv_wc wc[16];
	int n;

	do {
		n = ibv_poll_cq(sd->scq, 16, wc);
		if (n < 0) {
			finding("poll_cq(scratch CQ) returned %d", n);
			return;
		}
		for (int k = 0; k < n; k++) {
			struct scr *q = NULL;

			for (int j = 0; j < NSCR; j++)
				if (sd->s[j].qp->qp_num == wc[k].qp_num)
					q = &sd->s[j];
			if (!q || (wc[k].wr_id & WR_MASK) != WR_MAGIC) {
				finding("scratch CQ: completion for qp_num 0x%x wr_id 0x%llx",
					wc[k].qp_num, (unsigned long long)wc[k].wr_id);
				continue;
			}
			if (wc[k].status != IBV_WC_WR_FLUSH_ERR)
				finding("scratch QP 0x%x: completion status %s, expected WR_FLUSH_ERR "
					"(nothing reaches it)", wc[k].qp_num, wcs(wc[k].status));
			if (((wc[k].wr_id >> 32) & 0x7fff) != (q->epoch & 0x7fff)) {
				old_epoch_polled++; /* from before a RESET */
				continue;
			}
			if (wc[k].opcode & IBV_WC_RECV) {
				if (q->rq_occ)
					q->rq_occ--;
			} else if (q->sq_occ) {
				q->sq_occ--;
			}
		}
	} while (n > 0);
}

static void op_scratch_post(void)
{
	struct side *sd = pick_side();
	struct scr *q = &sd->s[rnd(NSCR)];
	struct ibv_sge g;
	struct ibv_send_wr w, *bad;
	struct ibv_recv_wr rw, *rbad;
	int rc;
	char what[160];
	uint64_t id = WR_MAGIC | ((uint64_t)(q->epoch & 0x7fff) << 32) | (wr_seq++ & 0xffffffffull);

	act = "post on a scratch QP";
	if (chance(50))
		drain_scq(sd);
	sge_of(&g, sd->buf + 16, 16, sd->mr->lkey);
	if (chance(50)) {
		int n = (int)rnd_range(1, q->cap.max_recv_wr + 2);
		struct ibv_recv_wr *ws = calloc((size_t)n, sizeof(*ws));
		uint32_t room = q->cap.max_recv_wr - q->rq_occ;

		if (!ws)
			return;
		if ((uint32_t)n > room) {
			/* judging "full" needs every completion polled (slots retire then) */
			drain_scq(sd);
			room = q->cap.max_recv_wr - q->rq_occ;
		}
		for (int j = 0; j < n; j++) {
			ws[j].wr_id = id + (uint64_t)j;
			ws[j].sg_list = &g;
			ws[j].num_sge = 1;
			ws[j].next = j < n - 1 ? &ws[j + 1] : NULL;
		}
		wr_seq += (uint64_t)n;
		snprintf(what, sizeof(what), "post_recv(%d WRs, scratch QP in %s, %u of %u posted)",
			 n, hm_qp_state_str(q->st), q->rq_occ, q->cap.max_recv_wr);
		hm_step(what);
		rbad = NULL;
		rc = ibv_post_recv(q->qp, ws, &rbad);
		if (q->st == IBV_QPS_RESET) {
			if (want_rc(what, rc, SET(EINVAL)) && rbad != ws)
				finding("%s: bad_wr is not the first WR", what);
		} else if ((uint32_t)n > room) {
			if (want_rc(what, rc, SET(ENOMEM)) && rbad != &ws[room])
				finding("%s: bad_wr is WR #%ld, expected #%u", what,
					rbad ? (long)(rbad - ws) : -1L, room);
			q->rq_occ += rc ? (uint32_t)(rbad ? rbad - ws : 0) : (uint32_t)n;
		} else {
			if (want_zero(what, rc))
				q->rq_occ += (uint32_t)n;
		}
		free(ws);
		return;
	}
	(void)rw;
	(void)rbad;
	init_swr(&w, IBV_WR_SEND, &g, 1, 0, 1);
	w.wr_id = id;
	snprintf(what, sizeof(what), "post_send(scratch QP in %s, %u of %u posted)",
		 hm_qp_state_str(q->st), q->sq_occ, q->cap.max_send_wr);
	if (q->st == IBV_QPS_RTS || q->st == IBV_QPS_SQD)
		return; /* would go to the wire towards nobody */
	if (q->sq_occ >= q->cap.max_send_wr)
		drain_scq(sd);
	hm_step(what);
	rc = ibv_post_send(q->qp, &w, &bad);
	if (q->st != IBV_QPS_ERR && q->st != IBV_QPS_SQE) {
		if (want_rc(what, rc, SET(EINVAL)) && bad != &w)
			finding("%s: bad_wr is not the WR", what);
	} else if (q->sq_occ >= q->cap.max_send_wr) {
		want_rc(what, rc, SET(ENOMEM));
	} else if (want_zero(what, rc)) {
		q->sq_occ++;
	}
}

/* A QP's completions from before a RESET must not free slots of its new queue, nor be
 * returned: receives posted, ERR (they flush), RESET and INIT without polling, the queue
 * filled again; the CQ is polled then: no old flush completion may come, and the queue must
 * still be full. */
static void op_reset_stale(void)
{
	struct side *sd = pick_side();
	struct scr *q = &sd->s[rnd(NSCR)];
	struct ibv_qp_attr a;
	struct ibv_sge g;
	struct ibv_recv_wr ws[64], *bad;
	uint32_t cap = q->cap.max_recv_wr, n1 = rnd_range(1, cap);
	uint64_t t;
	int rc;

	act = "completions from before a RESET";
	if (cap > 64)
		return;
	sge_of(&g, sd->buf + 16, 16, sd->mr->lkey);
	for (uint32_t j = 0; j < cap; j++) {
		memset(&ws[j], 0, sizeof(ws[j]));
		ws[j].sg_list = &g;
		ws[j].num_sge = 1;
	}
	drain_scq(sd);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	if (!want_zero("modify_qp(scratch -> RESET)", ibv_modify_qp(q->qp, &a, IBV_QP_STATE)))
		return;
	q->st = IBV_QPS_RESET;
	q->sq_occ = q->rq_occ = 0;
	q->epoch++;
	if (!want_zero("modify_qp(scratch -> INIT)", hm_qp_init(q->qp, IBV_ACCESS_LOCAL_WRITE)))
		return;
	q->st = IBV_QPS_INIT;
	for (uint32_t j = 0; j < n1; j++) {
		ws[j].wr_id = WR_MAGIC | ((uint64_t)(q->epoch & 0x7fff) << 32) | (wr_seq++ & 0xffffffffull);
		ws[j].next = j + 1 < n1 ? &ws[j + 1] : NULL;
	}
	if (!want_zero("post_recv(scratch, INIT)", ibv_post_recv(q->qp, ws, &bad)))
		return;
	q->rq_occ = n1;
	a.qp_state = IBV_QPS_ERR;
	if (!want_zero("modify_qp(scratch -> ERR)", ibv_modify_qp(q->qp, &a, IBV_QP_STATE)))
		return;
	q->st = IBV_QPS_ERR;
	/* let the flushes land in the CQ, unpolled */
	t = hm_now_us() + 300000;
	while (hm_now_us() < t)
		hm_sleep_us(10000);
	a.qp_state = IBV_QPS_RESET;
	if (!want_zero("modify_qp(scratch ERR -> RESET)", ibv_modify_qp(q->qp, &a, IBV_QP_STATE)))
		return;
	q->st = IBV_QPS_RESET;
	q->sq_occ = q->rq_occ = 0;
	q->epoch++;
	if (!want_zero("modify_qp(scratch -> INIT)", hm_qp_init(q->qp, IBV_ACCESS_LOCAL_WRITE)))
		return;
	q->st = IBV_QPS_INIT;
	for (uint32_t j = 0; j < cap; j++) {
		ws[j].wr_id = WR_MAGIC | ((uint64_t)(q->epoch & 0x7fff) << 32) | (wr_seq++ & 0xffffffffull);
		ws[j].next = j + 1 < cap ? &ws[j + 1] : NULL;
	}
	if (!want_zero("post_recv(a full queue after RESET)", ibv_post_recv(q->qp, ws, &bad)))
		return;
	q->rq_occ = cap;
	/* the old flush completions were cleaned from the CQ at RESET: none may be polled */
	old_epoch_polled = 0;
	drain_scq(sd);
	if (old_epoch_polled)
		finding("%u completions from before a RESET were polled after it (the QP's completions "
			"are cleaned from its CQs at RESET)", old_epoch_polled);
	ws[0].next = NULL;
	ws[0].wr_id = WR_MAGIC | ((uint64_t)(q->epoch & 0x7fff) << 32) | (wr_seq++ & 0xffffffffull);
	rc = ibv_post_recv(q->qp, ws, &bad);
	if (rc == 0) {
		finding("post_recv on a full receive queue succeeded after the CQ was polled: the %u "
			"completions from before the RESET freed slots of the new queue "
			"(a posted receive was overwritten)", n1);
		q->rq_occ++;
	} else {
		want_rc("post_recv(full queue after RESET)", rc, E_NOMEM);
	}
}

/* ibv_rereg_mr of a pool MR: another pool PD, new memory in the pool buffer, new access flags,
 * any combination, or one bad argument (no flag, a NULL PD, an unknown flag, the other device's
 * PD, unmapped memory, a zero length, ZERO_BASED, an unknown access bit, remote write without
 * local write). A success keeps the keys; a refusal leaves keys, address, length and PD. */
static void op_rereg(void)
{
	struct side *sd = pick_side(), *o = &S[1 - sd->i];
	int j = (int)rnd(NMR), flags = 0, bad = 0, p = -1, access = 0, want_ret = IBV_REREG_MR_ERR_CMD, rc;
	struct pmr *m = &sd->pmr[j];
	struct ibv_pd *pd = NULL;
	uint8_t *addr = NULL;
	size_t len = 0;
	const int *want = E_INVAL;
	const char *how = "valid";
	char what[220];

	act = "rereg_mr";
	if (!m->mr)
		return;
	if (chance(50))
		flags |= IBV_REREG_MR_CHANGE_PD;
	if (chance(50))
		flags |= IBV_REREG_MR_CHANGE_TRANSLATION;
	if (chance(50) || !flags)
		flags |= IBV_REREG_MR_CHANGE_ACCESS;
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		p = (int)rnd(NPD);
		pd = sd->ppd[p];
		if (!pd)
			return;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		addr = sd->pbuf + 16 * rnd(64);
		len = rnd_range(1, 16384);
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
		access = (int)rnd(16);
		if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
			bad = 1;
			how = "remote write/atomic without local write";
		}
	}
	if (chance(30)) {
		bad = 1;
		want = E_INVAL;
		switch (rnd(9)) {
		case 0: flags = 0; pd = NULL; addr = NULL; len = 0; access = 0; how = "no flag"; break;
		case 1: flags |= IBV_REREG_MR_CHANGE_PD; pd = NULL; p = -1; how = "a NULL PD"; break;
		case 2: flags |= 1 << rnd_range(4, 30); how = "unknown flag"; want_ret = IBV_REREG_MR_ERR_INPUT; break;
		case 3: flags |= IBV_REREG_MR_CHANGE_PD; pd = o->pd; p = -1; how = "the other device's PD"; break;
		case 4: {
			void *u = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (u == MAP_FAILED)
				return;
			munmap(u, 8192);
			flags |= IBV_REREG_MR_CHANGE_TRANSLATION;
			addr = u;
			len = 8192;
			how = "unmapped memory";
			want = E_FAULT_INVAL;
			break;
		}
		case 5: flags |= IBV_REREG_MR_CHANGE_TRANSLATION; addr = sd->pbuf; len = 0; how = "length 0";
			want_ret = IBV_REREG_MR_ERR_INPUT; break;
		case 6: flags |= IBV_REREG_MR_CHANGE_ACCESS; access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED;
			how = "ZERO_BASED"; want = E_NOTSUP_INVAL; break;
		case 7: flags |= IBV_REREG_MR_CHANGE_ACCESS; access = IBV_ACCESS_LOCAL_WRITE | (int)(1u << rnd_range(8, 19));
			how = "unknown access bit"; want = E_INVAL_NOTSUP; break;
		default: flags |= IBV_REREG_MR_CHANGE_ACCESS; access = IBV_ACCESS_REMOTE_WRITE;
			how = "remote write without local write"; break;
		}
	}
	uint32_t lk = m->mr->lkey, rk = m->mr->rkey;
	snprintf(what, sizeof(what), "rereg_mr(pool MR %d, flags 0x%x, PD %d, len %zu, access 0x%x: %s)", j, flags, p, len,
		 access, how);
	act = what;
	hm_step(what);
	errno = 0;
	rc = ibv_rereg_mr(m->mr, flags, pd, addr, len, access);
	int e = errno;
	if (m->mr->lkey != lk || m->mr->rkey != rk)
		finding("%s: the keys changed (%#x/%#x -> %#x/%#x)", what, lk, rk, m->mr->lkey, m->mr->rkey);
	if (bad) {
		if (rc == 0) {
			finding("%s succeeded, expected %s", what, set_str(want));
			if (p >= 0)
				m->pd = p;
		} else if (rc != want_ret || !in_set(e, want)) {
			finding("%s returned %d (errno %s), expected %d with %s", what, rc, hm_errname(e), want_ret, set_str(want));
		}
		/* (libibverbs writes the MR's address, length and PD only on success; that a refusal
		 * left the provider's MR in its PD shows at the pool's dealloc_pd, which must be EBUSY
		 * exactly while the model's PD has users) */
	} else if (rc) {
		finding("%s failed: %d (errno %s)", what, rc, hm_errname(e));
	} else {
		if (p >= 0)
			m->pd = p;
		if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (m->mr->addr != addr || m->mr->length != len))
			finding("%s: the MR is %p+%zu, expected %p+%zu", what, m->mr->addr, m->mr->length, (void *)addr, len);
	}
}

/* ------------------------------------------------------------------ create / destroy */

static int pd_users(struct side *sd, int p)
{
	int n = 0;

	for (int j = 0; j < NMR; j++)
		n += sd->pmr[j].mr && sd->pmr[j].pd == p;
	for (int j = 0; j < NQP; j++)
		n += sd->pqp[j].qp && sd->pqp[j].pd == p;
	return n;
}

static int cq_users(struct side *sd, int c)
{
	int n = 0;

	for (int j = 0; j < NQP; j++)
		n += sd->pqp[j].qp && (sd->pqp[j].scq == c || sd->pqp[j].rcq == c);
	return n;
}

static void op_pool_create(void)
{
	struct side *sd = pick_side(), *o = &S[1 - sd->i];
	int v = (int)rnd(4), j, rc;
	char what[200];

	(void)rc;
	switch (v) {
	case 0: /* PD */
		act = "alloc_pd";
		for (j = 0; j < NPD && sd->ppd[j]; j++)
			;
		if (j == NPD)
			return;
		hm_step(act);
		sd->ppd[j] = ibv_alloc_pd(sd->ctx);
		if (!sd->ppd[j])
			finding("alloc_pd failed: %s", hm_errname(errno));
		return;
	case 1: { /* MR */
		int p;
		struct ibv_pd *pd;
		uint8_t *addr = sd->pbuf + 16 * rnd(64);
		size_t len = rnd_range(1, 16384);
		int access = (int)rnd(16), bad = 0;
		const int *want = E_INVAL;
		const char *how = "valid";
		struct ibv_mr *mr;

		act = "reg_mr";
		for (j = 0; j < NMR && sd->pmr[j].mr; j++)
			;
		if (j == NMR)
			return;
		p = (int)rnd(NPD);
		pd = sd->ppd[p];
		if (!pd)
			return;
		if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
		    !(access & IBV_ACCESS_LOCAL_WRITE)) {
			bad = 1;
			how = "remote write/atomic without local write";
		}
		if (chance(40)) {
			bad = 1;
			switch (rnd(9)) {
			case 0: len = 0; how = "length 0"; break;
			case 1: len = SIZE_MAX - rnd(4096); how = "length near SIZE_MAX (address overflow)"; break;
			case 2: len = (size_t)1 << rnd_range(40, 62); how = "huge length";
				want = E_INVAL_FAULT_NOMEM; break;
			case 3: addr = NULL; len = 4096; how = "NULL address";
				want = E_INVAL_FAULT; break;
			case 4: access |= IBV_ACCESS_ZERO_BASED; how = "ZERO_BASED"; want = E_NOTSUP_INVAL; break;
			case 5: access |= IBV_ACCESS_ON_DEMAND; how = "ON_DEMAND"; want = E_NOTSUP_INVAL; break;
			case 6: access |= IBV_ACCESS_HUGETLB; how = "HUGETLB"; want = E_NOTSUP_INVAL; break;
			case 7: access |= (int)(1u << rnd_range(8, 19)); how = "unknown access bit"; want = E_INVAL_NOTSUP; break;
			default: {
				/* memory that is not mapped (any more) */
				void *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

				if (m == MAP_FAILED)
					return;
				munmap(m, 8192);
				addr = m;
				len = 8192;
				how = "unmapped memory";
				want = E_FAULT_INVAL;
				break;
			}
			}
		}
		snprintf(what, sizeof(what), "reg_mr(pool PD %d, len %zu, access 0x%x: %s)", p, len, access, how);
		act = what;
		hm_step(what);
		errno = 0;
		mr = ibv_reg_mr(pd, addr, len, access);
		if (bad) {
			if (!want_null(what, mr, want) && mr) {
				sd->pmr[j].mr = mr;
				sd->pmr[j].pd = p;
			}
		} else if (!mr) {
			finding("%s failed: %s", what, hm_errname(errno));
		} else {
			sd->pmr[j].mr = mr;
			sd->pmr[j].pd = p;
		}
		return;
	}
	case 2: { /* CQ */
		int cqe = (int)rnd_range(1, 256), vec = (int)rnd((uint32_t)sd->ctx->num_comp_vectors);
		int bad = 0;
		const char *how = "valid";
		struct ibv_comp_channel *ch = NULL;
		struct ibv_cq *cq;

		for (j = 0; j < NCQ && sd->pcq[j]; j++)
			;
		if (j == NCQ)
			return;
		if (chance(40)) {
			static const int bc[] = { 0, -1, INT_MIN, -65536 };

			bad = 1;
			switch (rnd(5)) {
			case 0: cqe = bc[rnd(4)]; how = "cqe <= 0"; break;
			case 1: cqe = sd->da.max_cqe + 1 + (int)rnd(1000);
				if (chance(30))
					cqe = INT_MAX;
				how = "cqe > max_cqe"; break;
			case 2: vec = chance(50) ? -1 - (int)rnd(100) : sd->ctx->num_comp_vectors + (int)rnd(100);
				how = "comp_vector out of range"; break;
			case 3: vec = INT_MIN; how = "comp_vector INT_MIN"; break;
			default: ch = o->ch; how = "a completion channel of another context";
				if (!ch)
					bad = 0, how = "valid";
				break;
			}
		}
		snprintf(what, sizeof(what), "create_cq(cqe %d, vector %d: %s)", cqe, vec, how);
		act = what;
		hm_step(what);
		errno = 0;
		cq = ibv_create_cq(sd->ctx, cqe, NULL, ch, vec);
		if (bad) {
			if (!want_null(what, cq, SET(EINVAL)) && cq)
				sd->pcq[j] = cq;
		} else if (!cq) {
			finding("%s failed: %s", what, hm_errname(errno));
		} else {
			if (cq->cqe < cqe)
				finding("%s: got %d entries", what, cq->cqe);
			sd->pcq[j] = cq;
		}
		return;
	}
	default: { /* QP */
		struct ibv_qp_init_attr ia;
		struct ibv_qp_init_attr_ex ix;
		struct ibv_qp *qp;
		int p = (int)rnd(NPD), sc = (int)rnd(NCQ), rcq = (int)rnd(NCQ), bad = 0, ex = chance(25);
		const int *want = E_INVAL;
		const char *how = "valid";

		for (j = 0; j < NQP && sd->pqp[j].qp; j++)
			;
		if (j == NQP || !sd->ppd[p] || !sd->pcq[sc] || !sd->pcq[rcq])
			return;
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = sd->pcq[sc];
		ia.recv_cq = sd->pcq[rcq];
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = rnd_range(0, 64);
		ia.cap.max_recv_wr = rnd_range(0, 64);
		ia.cap.max_send_sge = rnd_range(0, (uint32_t)sd->da.max_sge);
		ia.cap.max_recv_sge = rnd_range(0, (uint32_t)sd->da.max_sge);
		ia.cap.max_inline_data = rnd_range(0, 64);
		ia.sq_sig_all = (int)rnd(2);
		if (chance(40)) {
			bad = 1;
			switch (rnd(10)) {
			case 0: ia.cap.max_send_wr = (uint32_t)sd->da.max_qp_wr + 1 + rnd(1000);
				if (chance(30))
					ia.cap.max_send_wr = UINT32_MAX;
				how = "max_send_wr > max_qp_wr"; break;
			case 1: ia.cap.max_recv_wr = chance(50) ? UINT32_MAX : (uint32_t)sd->da.max_qp_wr + 1;
				how = "max_recv_wr > max_qp_wr"; break;
			case 2: ia.cap.max_send_sge = (uint32_t)sd->da.max_sge + 1 + rnd(100);
				if (chance(30))
					ia.cap.max_send_sge = UINT32_MAX;
				how = "max_send_sge > max_sge"; break;
			case 3: ia.cap.max_recv_sge = chance(50) ? UINT32_MAX : (uint32_t)sd->da.max_sge + 1;
				how = "max_recv_sge > max_sge"; break;
			case 4: ia.cap.max_inline_data = chance(50) ? UINT32_MAX : 1u << rnd_range(12, 30);
				how = "max_inline_data too large"; break;
			case 5: {
				static const int types[] = { IBV_QPT_UD, IBV_QPT_RAW_PACKET, IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV, IBV_QPT_DRIVER, 0, 1, 5, 200 };
				ia.qp_type = (enum ibv_qp_type)types[rnd(9)];
				how = "QP type other than RC and UC";
				want = E_NOTSUP_INVAL;
				break;
			}
			case 6: ia.send_cq = chance(50) ? NULL : o->cq; how = "send CQ NULL or of another context"; break;
			case 7: ia.recv_cq = chance(50) ? NULL : o->cq; how = "recv CQ NULL or of another context"; break;
			case 8: ia.srq = (struct ibv_srq *)(uintptr_t)0x1000; how = "an SRQ";
				want = E_NOTSUP_INVAL; break;
			default:
				if (!ex) {
					ia.send_cq = o->cq;
					ia.recv_cq = o->cq;
					how = "both CQs of another context";
				} else {
					how = "create_qp_ex: bad comp_mask / create_flags / PD";
				}
				break;
			}
		}
		if (ex) {
			memset(&ix, 0, sizeof(ix));
			ix.send_cq = ia.send_cq;
			ix.recv_cq = ia.recv_cq;
			ix.srq = ia.srq;
			ix.cap = ia.cap;
			ix.qp_type = ia.qp_type;
			ix.sq_sig_all = ia.sq_sig_all;
			ix.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
			ix.pd = sd->ppd[p];
			if (bad && !strncmp(how, "create_qp_ex", 12)) {
				switch (rnd(4)) {
				case 0: ix.pd = NULL; how = "create_qp_ex: NULL PD"; break;
				case 1: ix.pd = o->pd; how = "create_qp_ex: PD of another context"; break;
				case 2: ix.create_flags = 1u << rnd(12); how = "create_qp_ex: create_flags";
					want = E_NOTSUP_INVAL; break;
				default:
					/* bits other than SEND_OPS_FLAGS (offered: with operations the
					 * device lacks it is refused) */
					if (chance(300)) {
						ix.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
						/* (SEND_WITH_INV, bit 9, is offered: not one of these) */
						static const uint64_t nope[] = { IBV_QP_EX_WITH_LOCAL_INV, IBV_QP_EX_WITH_BIND_MW,
										 IBV_QP_EX_WITH_TSO, IBV_QP_EX_WITH_ATOMIC_WRITE };
						ix.send_ops_flags = IBV_QP_EX_WITH_SEND | nope[rnd(4)];
						how = "create_qp_ex: send operations not offered";
					} else {
						uint32_t bit = (uint32_t)rnd_range(3, 12);
						ix.comp_mask |= 1u << (bit == 6 ? 7 : bit);
						how = "create_qp_ex: comp_mask bits";
					}
					want = E_NOTSUP_INVAL; break;
				}
			}
			snprintf(what, sizeof(what), "create_qp_ex(%s)", how);
			act = what;
			hm_step(what);
			errno = 0;
			qp = ibv_create_qp_ex(sd->ctx, &ix);
		} else {
			snprintf(what, sizeof(what), "create_qp(%s)", how);
			act = what;
			hm_step(what);
			errno = 0;
			qp = ibv_create_qp(sd->ppd[p], &ia);
		}
		if (bad) {
			if (!want_null(what, qp, want) && qp) {
				/* keep it, but only when it uses the pool objects */
				if (qp->send_cq == sd->pcq[sc] && qp->recv_cq == sd->pcq[rcq] && qp->pd == sd->ppd[p]) {
					sd->pqp[j] = (struct pqp){ qp, p, sc, rcq };
				} else if (ibv_destroy_qp(qp)) {
					printf("# could not destroy the wrongly created QP\n");
				}
			}
		} else if (!qp) {
			finding("%s failed: %s", what, hm_errname(errno));
		} else {
			sd->pqp[j] = (struct pqp){ qp, p, sc, rcq };
		}
		return;
	}
	}
}

static void op_pool_destroy(void)
{
	struct side *sd = pick_side();
	int j, rc;
	char what[160];

	switch (rnd(4)) {
	case 0:
		j = (int)rnd(NQP);
		if (!sd->pqp[j].qp)
			return;
		act = "destroy_qp";
		hm_step(act);
		if (want_zero("destroy_qp(pool QP)", ibv_destroy_qp(sd->pqp[j].qp)))
			sd->pqp[j].qp = NULL;
		return;
	case 1:
		j = (int)rnd(NMR);
		if (!sd->pmr[j].mr)
			return;
		act = "dereg_mr";
		hm_step(act);
		{
			uint32_t key = sd->pmr[j].mr->lkey;

			if (want_zero("dereg_mr(pool MR)", ibv_dereg_mr(sd->pmr[j].mr))) {
				sd->pmr[j].mr = NULL;
				if (sd->ndead < 16)
					sd->dead[sd->ndead++] = key;
				else
					sd->dead[rnd(16)] = key;
			}
		}
		return;
	case 2: {
		int users;

		j = (int)rnd(NCQ);
		if (!sd->pcq[j])
			return;
		users = cq_users(sd, j);
		snprintf(what, sizeof(what), "destroy_cq(pool CQ used by %d QPs)", users);
		act = what;
		hm_step(what);
		rc = ibv_destroy_cq(sd->pcq[j]);
		if (users)
			want_rc(what, rc, SET(EBUSY));
		else if (want_zero(what, rc))
			sd->pcq[j] = NULL;
		if (users && rc == 0)
			sd->pcq[j] = NULL; /* (the QPs now point to a freed CQ: stop using them) */
		return;
	}
	default: {
		int users;

		j = (int)rnd(NPD);
		if (!sd->ppd[j])
			return;
		users = pd_users(sd, j);
		snprintf(what, sizeof(what), "dealloc_pd(pool PD used by %d MRs/QPs)", users);
		act = what;
		hm_step(what);
		rc = ibv_dealloc_pd(sd->ppd[j]);
		if (users)
			want_rc(what, rc, SET(EBUSY));
		else if (want_zero(what, rc))
			sd->ppd[j] = NULL;
		if (users && rc == 0)
			sd->ppd[j] = NULL;
		return;
	}
	}
}

/* destroying the valid path's objects while in use: EBUSY, and they keep working */
static void op_destroy_in_use(void)
{
	struct side *sd = pick_side();
	int rc;

	switch (rnd(5)) {
	case 0:
		act = "dealloc_pd(PD with MRs and a QP)";
		hm_step(act);
		rc = ibv_dealloc_pd(sd->pd);
		want_rc(act, rc, SET(EBUSY));
		if (!rc) {
			finding("the valid PD is gone: stopping");
			finish(1);
		}
		break;
	case 1:
		act = "dealloc_pd(PD with an MR)";
		hm_step(act);
		rc = ibv_dealloc_pd(sd->pd2);
		want_rc(act, rc, SET(EBUSY));
		if (!rc) {
			finding("the second PD is gone: stopping");
			finish(1);
		}
		break;
	case 2:
		act = "destroy_cq(CQ of the valid QP)";
		hm_step(act);
		rc = ibv_destroy_cq(sd->cq);
		want_rc(act, rc, SET(EBUSY));
		if (!rc) {
			finding("the valid CQ is gone: stopping");
			finish(1);
		}
		break;
	case 3:
		act = "destroy_cq(CQ of the scratch QPs)";
		hm_step(act);
		rc = ibv_destroy_cq(sd->scq);
		want_rc(act, rc, SET(EBUSY));
		if (!rc) {
			finding("the scratch CQ is gone: stopping");
			finish(1);
		}
		break;
	default:
		if (!sd->ch)
			return;
		act = "destroy_comp_channel(with a CQ)";
		hm_step(act);
		rc = ibv_destroy_comp_channel(sd->ch);
		want_rc(act, rc, SET(EBUSY));
		if (!rc) {
			finding("the channel is gone: stopping");
			finish(1);
		}
		break;
	}
}

/* ------------------------------------------------------------------ setup */

static void setup_side(struct side *sd, struct ibv_device *dev)
{
	struct ibv_qp_init_attr ia;

	hm_step("ibv_open_device");
	sd->ctx = ibv_open_device(dev);
	if (!sd->ctx) {
		printf("# ibv_open_device(%s): %s\n", ibv_get_device_name(dev), strerror(errno));
		finish(2);
	}
	if (fcntl(sd->ctx->async_fd, F_SETFL, fcntl(sd->ctx->async_fd, F_GETFL) | O_NONBLOCK)) {
		printf("# %s: async fd: %s\n", ibv_get_device_name(dev), strerror(errno));
		finish(2);
	}
	if (ibv_query_device(sd->ctx, &sd->da) || ibv_query_port(sd->ctx, 1, &sd->pa) ||
	    ibv_query_gid(sd->ctx, 1, 0, &sd->gid) || ibv_query_gid(sd->ctx, 1, 1, &sd->gid6)) {
		printf("# querying %s failed\n", ibv_get_device_name(dev));
		finish(2);
	}
	sd->pd = ibv_alloc_pd(sd->ctx);
	sd->pd2 = ibv_alloc_pd(sd->ctx);
	sd->cq = ibv_create_cq(sd->ctx, 256, NULL, NULL, 0);
	sd->scq = ibv_create_cq(sd->ctx, 64, NULL, NULL, 0);
	sd->buf = hm_alloc_pages(BUFLEN);
	sd->buf_ro = hm_alloc_pages(8192);
	sd->buf_p2 = hm_alloc_pages(8192);
	sd->pbuf = hm_alloc_pages(32768);
	if (!sd->pd || !sd->pd2 || !sd->cq || !sd->scq) {
		printf("# setup of %s failed: %s\n", ibv_get_device_name(dev), strerror(errno));
		finish(2);
	}
	sd->mr = ibv_reg_mr(sd->pd, sd->buf, BUFLEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	sd->mr_ro = ibv_reg_mr(sd->pd, sd->buf_ro, 8192, IBV_ACCESS_LOCAL_WRITE);
	sd->mr_p2 = ibv_reg_mr(sd->pd2, sd->buf_p2, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!sd->mr || !sd->mr_ro || !sd->mr_p2) {
		printf("# reg_mr on %s failed: %s\n", ibv_get_device_name(dev), strerror(errno));
		finish(2);
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = sd->cq;
	ia.recv_cq = sd->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 3;
	ia.cap.max_recv_sge = 3;
	ia.cap.max_inline_data = 64;
	sd->qp = ibv_create_qp(sd->pd, &ia);
	if (!sd->qp) {
		printf("# create_qp on %s failed: %s\n", ibv_get_device_name(dev), strerror(errno));
		finish(2);
	}
	sd->cap = ia.cap;
	ia.qp_type = IBV_QPT_UC;
	sd->uqp = ibv_create_qp(sd->pd, &ia);
	if (!sd->uqp || memcmp(&ia.cap, &sd->cap, sizeof(ia.cap))) {
		printf("# create_qp (UC) on %s failed: %s\n", ibv_get_device_name(dev),
		       sd->uqp ? "capacities differ from the RC QP's" : strerror(errno));
		finish(2);
	}
	for (int j = 0; j < NSCR; j++) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = sd->scq;
		ia.recv_cq = sd->scq;
		ia.qp_type = (j & 1) ? IBV_QPT_UC : IBV_QPT_RC;
		sd->s[j].uc = j & 1;
		ia.cap.max_send_wr = 4;
		ia.cap.max_recv_wr = 4;
		ia.cap.max_send_sge = 1;
		ia.cap.max_recv_sge = 1;
		sd->s[j].qp = ibv_create_qp(sd->pd, &ia);
		if (!sd->s[j].qp) {
			printf("# create_qp (scratch) on %s failed: %s\n", ibv_get_device_name(dev), strerror(errno));
			finish(2);
		}
		sd->s[j].cap = ia.cap;
		sd->s[j].st = IBV_QPS_RESET;
	}
	/* a completion channel (the provider answers ibv_create_comp_channel when preloaded) */
	sd->ch = ibv_create_comp_channel(sd->ctx);
	if (sd->ch) {
		sd->chcq = ibv_create_cq(sd->ctx, 16, NULL, sd->ch, 0);
		if (!sd->chcq) {
			ibv_destroy_comp_channel(sd->ch);
			sd->ch = NULL;
		}
	} else {
		printf("# %s: no completion channel (%s): the provider is not preloaded; channel cases skipped\n",
		       ibv_get_device_name(dev), strerror(errno));
	}
	sd->ppd[0] = ibv_alloc_pd(sd->ctx);
	printf("# %s: max_qp_wr %d max_sge %d max_cqe %d max_qp_rd_atom %d; valid QP 0x%x: "
	       "send_wr %u recv_wr %u send_sge %u recv_sge %u inline %u\n",
	       ibv_get_device_name(dev), sd->da.max_qp_wr, sd->da.max_sge, sd->da.max_cqe,
	       sd->da.max_qp_rd_atom, sd->qp->qp_num, sd->cap.max_send_wr, sd->cap.max_recv_wr,
	       sd->cap.max_send_sge, sd->cap.max_recv_sge, sd->cap.max_inline_data);
}

static void teardown(void)
{
	hm_step("teardown");
	act = "teardown";
	for (int i = 0; i < 2; i++) {
		struct side *sd = &S[i];

		for (int j = 0; j < NQP; j++)
			if (sd->pqp[j].qp)
				want_zero("destroy_qp(pool)", ibv_destroy_qp(sd->pqp[j].qp));
		for (int j = 0; j < NMR; j++)
			if (sd->pmr[j].mr)
				want_zero("dereg_mr(pool)", ibv_dereg_mr(sd->pmr[j].mr));
		for (int j = 0; j < NCQ; j++)
			if (sd->pcq[j])
				want_zero("destroy_cq(pool)", ibv_destroy_cq(sd->pcq[j]));
		for (int j = 0; j < NPD; j++)
			if (sd->ppd[j])
				want_zero("dealloc_pd(pool)", ibv_dealloc_pd(sd->ppd[j]));
		for (int j = 0; j < NSCR; j++)
			want_zero("destroy_qp(scratch)", ibv_destroy_qp(sd->s[j].qp));
		want_zero("destroy_qp(valid)", ibv_destroy_qp(sd->qp));
		want_zero("destroy_qp(UC)", ibv_destroy_qp(sd->uqp));
		if (sd->chcq) {
			want_zero("destroy_cq(channel CQ)", ibv_destroy_cq(sd->chcq));
			want_zero("destroy_comp_channel", ibv_destroy_comp_channel(sd->ch));
		}
		want_zero("destroy_cq(scratch)", ibv_destroy_cq(sd->scq));
		want_zero("destroy_cq(valid)", ibv_destroy_cq(sd->cq));
		want_zero("dereg_mr", ibv_dereg_mr(sd->mr));
		want_zero("dereg_mr(ro)", ibv_dereg_mr(sd->mr_ro));
		want_zero("dereg_mr(pd2)", ibv_dereg_mr(sd->mr_p2));
		want_zero("dealloc_pd(pd2)", ibv_dealloc_pd(sd->pd2));
		want_zero("dealloc_pd", ibv_dealloc_pd(sd->pd));
		want_zero("close_device", ibv_close_device(sd->ctx));
	}
}

/* ------------------------------------------------------------------ main */

struct opdef { const char *name; void (*fn)(void); unsigned weight; };

static void op_write0(void) { op_write(0); }
static void op_write1(void) { op_write(1); }
static void op_send0(void) { op_send(0); }
static void op_send1(void) { op_send(1); }

/* a valid WRITE / WRITE_WITH_IMM / SEND / SEND_WITH_IMM over the UC pair, verified as on RC
 * (the simulated wire loses nothing, so every UC message arrives) */
static void op_uc(void)
{
	on_uc = 1;
	switch (rnd(4)) {
	case 0: op_write(0); break;
	case 1: op_write(1); break;
	case 2: op_send(0); break;
	default: op_send(1); break;
	}
	on_uc = 0;
}

/* what UC does not have: ibv_post_send refuses it with EINVAL, *bad_wr at it, and the WRs
 * before it in the list (0-2 valid WRITEs) execute */
static void op_uc_refused(void)
{
	static const enum ibv_wr_opcode refused[] = { IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
						      IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND_WITH_INV };
	struct side *s = pick_side(), *r = &S[1 - s->i];
	enum ibv_wr_opcode op = refused[rnd(4)];
	struct ibv_send_wr w[3], *bad;
	struct ibv_sge g[3];
	struct ibv_wc wc;
	uint32_t ro[3];
	int good = (int)rnd(3), rc;
	char what[120];

	on_uc = 1;
	act = "UC: an operation UC does not have";
	for (int j = 0; j <= good; j++) {
		uint32_t lo = 16 + 64 * (uint32_t)j;

		ro[j] = HALF + 16 + 64 * (uint32_t)j;
		fill_rand(s->buf + lo, 8);
		memset(r->buf + ro[j], 0, 8);
		sge_of(&g[j], s->buf + lo, 8, s->mr->lkey);
		init_swr(&w[j], j < good ? IBV_WR_RDMA_WRITE : op, &g[j], 1, 0, 1);
		w[j].wr.rdma.remote_addr = (uintptr_t)(r->buf + ro[j]);
		w[j].wr.rdma.rkey = r->mr->rkey;
		w[j].wr.atomic.remote_addr = (uintptr_t)(r->buf + ro[j]);
		w[j].wr.atomic.rkey = r->mr->rkey;
		w[j].next = j < good ? &w[j + 1] : NULL;
		if (op == IBV_WR_SEND_WITH_INV)
			w[j].invalidate_rkey = r->mr->rkey;
	}
	snprintf(what, sizeof(what), "post_send(UC: %d WRITEs, then opcode %d)", good, (int)op);
	rc = post_send_counted(s, w, &bad);
	if (want_rc(what, rc, SET(EINVAL)) && bad != &w[good])
		finding("%s: bad_wr is WR #%ld, expected #%d", what, bad ? (long)(bad - w) : -1L, good);
	if (rc != EINVAL || bad != &w[good])
		need_reconnect = 1; /* whatever was wrongly posted may have stopped the UC QP */
	for (int j = 0; j < good && rc == EINVAL && bad == &w[good]; j++) {
		wait_wc(s, w[j].wr_id, &wc, "UC WRITE before a refused WR");
		if (check_wc(&wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, -1, "UC WRITE before a refused WR")) {
			uc_await(r->buf + ro[j], s->buf + 16 + 64 * (uint32_t)j, 8);
			verify("UC WRITE before a refused WR", r->buf + ro[j], s->buf + 16 + 64 * (uint32_t)j, 8);
		} else
			need_reconnect = 1;
	}
	on_uc = 0;
}

static const struct opdef ops[] = {
	/* valid data movement (about 10-20 ms each on the simulated NICs) */
	{ "write", op_write0, 40 },
	{ "write_imm", op_write1, 16 },
	{ "send", op_send0, 24 },
	{ "send_imm", op_send1, 12 },
	{ "read", op_read, 24 },
	{ "atomic", op_atomic, 16 },
	{ "chain", op_chain, 12 },
	{ "overflow", op_overflow, 4 },
	{ "chain_bad", op_chain_bad, 16 },
	{ "uc", op_uc, 24 },
	{ "uc_refused", op_uc_refused, 6 },
	/* the provider's own checks (microseconds) */
	{ "bad_post", op_bad_post, 120 },
	{ "poll_bad", op_poll_bad, 40 },
	{ "notify", op_notify, 24 },
	{ "scratch_post", op_scratch_post, 40 },
	{ "destroy_in_use", op_destroy_in_use, 16 },
	{ "unsupported", op_unsupported, 12 },
	/* firmware commands (0.1-0.7 s each on the simulated NICs under load) */
	{ "query", op_query, 4 },
	{ "modify", op_modify, 6 },
	{ "pool_create", op_pool_create, 6 },
	{ "pool_destroy", op_pool_destroy, 3 },
	{ "rereg", op_rereg, 3 },
	{ "reset_stale", op_reset_stale, 1 },
	/* an error completion, then both QPs reconnected (about 7 s) */
	{ "err_completion", op_err_completion, 1 },
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

/* regression cases, run first */
static const struct opdef fixed[] = {
	/* completions from before a RESET freed slots of the new receive queue (hostdrv/src/nic/objects.rs, retire) */
	{ "reset_stale", op_reset_stale, 0 },
};
#define NFIXED (sizeof(fixed) / sizeof(fixed[0]))

static void usage(void)
{
	fprintf(stderr, "usage: %s [--count N] [--seed S] [-d DEV0] [-D DEV1] [-t SECS] [-v] [--only OP,OP]\n"
		"  ops:", hm_prog);
	for (size_t k = 0; k < NOPS; k++)
		fprintf(stderr, " %s", ops[k].name);
	fprintf(stderr, "\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 's' },
		{ "only", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *d0 = "hematite0", *d1 = "hematite1", *only = NULL;
	long count = 2000;
	struct ibv_device **list;
	struct ibv_device *dev0 = NULL, *dev1 = NULL;
	unsigned total = 0, w[NOPS];
	long per[NOPS];
	double tper[NOPS];
	uint64_t t0;
	int c, n = 0;

	hm_init_common(argv[0]);
	hm_timeout_s = 60;
	seed = (uint64_t)time(NULL);
	while ((c = getopt_long(argc, argv, "n:s:d:D:t:vh", lo, NULL)) != -1) {
		switch (c) {
		case 'n': count = atol(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'd': d0 = optarg; break;
		case 'D': d1 = optarg; break;
		case 't': hm_timeout_s = atoi(optarg); break;
		case 'v': verbose = 1; break;
		case 'o': only = optarg; break;
		default: usage();
		}
	}
	if (optind != argc || count < 0 || hm_timeout_s < 1)
		usage();
	seed_rng(seed);
	srand48((long)seed);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	for (size_t k = 0; k < NOPS; k++) {
		char pat[64];

		snprintf(pat, sizeof(pat), ",%s,", ops[k].name);
		w[k] = ops[k].weight;
		if (only) {
			char l[512];

			snprintf(l, sizeof(l), ",%s,", only);
			if (!strstr(l, pat))
				w[k] = 0;
		}
		total += w[k];
		per[k] = 0;
		tper[k] = 0;
	}
	if (!total)
		usage();
	printf("# hm_verbs_fuzz --count %ld --seed %llu (%s <-> %s)\n", count,
	       (unsigned long long)seed, d0, d1);

	hm_step("ibv_get_device_list");
	list = ibv_get_device_list(&n);
	for (int k = 0; list && k < n; k++) {
		if (!strcmp(ibv_get_device_name(list[k]), d0))
			dev0 = list[k];
		if (!strcmp(ibv_get_device_name(list[k]), d1))
			dev1 = list[k];
	}
	if (!dev0 || !dev1) {
		printf("# devices %s and %s not both found (%d devices)\n", d0, d1, n);
		finish(2);
	}
	S[0].i = 0;
	S[1].i = 1;
	hm_on_timeout = dump_state;
	setup_side(&S[0], dev0);
	setup_side(&S[1], dev1);
	connect_pair();

	t0 = hm_now_us();
	/* the fixed list: regression cases of bugs this fuzzer found, once per run, before
	 * the random ones (they count as cases) */
	for (size_t k = 0; k < NFIXED && ncases < count; k++) {
		act = fixed[k].name;
		ncases++;
		if (verbose)
			printf("# case %ld: fixed %s\n", ncases, fixed[k].name);
		fixed[k].fn();
		if (need_reconnect)
			reconnect();
	}
	while (ncases < count) {
		unsigned x = rnd(total);
		size_t k = 0;

		while (x >= w[k])
			x -= w[k++];
		act = ops[k].name;
		ncases++;
		hist_add(ops[k].name);
		per[k]++;
		if (verbose)
			printf("# case %ld: %s\n", ncases, ops[k].name);
		{
			uint64_t t1 = hm_now_us();

			ops[k].fn();
			forbid_lo = forbid_hi = 0;
			if (need_reconnect)
				reconnect();
			tper[k] += (double)(hm_now_us() - t1) / 1e6;
		}
		if (ncases % 250 == 0)
			printf("# %ld cases, %ld findings, %.1f s\n", ncases, nfind,
			       (double)(hm_now_us() - t0) / 1e6);
	}
	/* a last valid operation in each direction */
	act = "final check";
	ops[0].fn();
	ops[0].fn();
	if (need_reconnect)
		reconnect();
	teardown();
	ibv_free_device_list(list);
	printf("# per op:");
	for (size_t k = 0; k < NOPS; k++)
		printf(" %s=%ld/%.1fs", ops[k].name, per[k], tper[k]);
	printf("\n# %.1f s\n", (double)(hm_now_us() - t0) / 1e6);
	finish(0);
}
