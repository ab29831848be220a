/* hm_soak: a long verified traffic run over many RC QP pairs (tests/soak/soak.sh runs it for
 * an hour on a faulty wire). Every message has its own data and is checked:
 *
 *   per QP pair and round r (the client is the requester, the server the responder):
 *     SEND            client slot -> a receive buffer of the server: the server checks the
 *                     header (QP, kind, sequence number), the length and every byte
 *     RDMA WRITE+IMM  client slot -> server slot r % (4 W), immediate = r: the server checks
 *                     the sequence number and every byte of the slot when the completion is in
 *     RDMA WRITE      client slot -> server slot r % W, then
 *     RDMA READ       of that server slot back into a cleared client slot: the client checks
 *                     every byte
 *
 * Sizes (1 B .. 64 KiB; SENDs >= 8 B for their header) and contents are functions of (seed,
 * QP, round, kind), so the receiver knows what each message must be. The server counts lost
 * (a sequence gap or fewer than the client sent), duplicated (a sequence number again) and
 * corrupted (wrong length or bytes) messages per kind; the client the corrupted READs; every
 * completion must be successful. Up to W rounds per QP are in flight (-w).
 *
 * Resources: QUERY_RESOURCES (hematite_query_resources, looked up with dlsym in the preloaded
 * provider) right after ibv_open_device (the baseline), with everything created (must be the
 * baseline + 1 PD, 1 CQ, 1 MR, N QPs) and after everything was destroyed (must be the
 * baseline). The engine's counters (hematite_query_counters) at the start and the end give
 * the frames the RX path dropped (rx_dropped: the wire's corrupted frames fail the ICRC).
 *
 *   server: hm_soak -d DEV [-p PORT] [-q NQP] [-w W] [-P PIDFILE]
 *   client: hm_soak -d DEV [-p PORT] [-q NQP] [-w W] [-s SEED] [-T SECONDS] [-o TIMEOUT_CODE]
 *                   [-r RETRY] [-P PIDFILE] HOST
 *
 * Prints "# progress ..." lines every -i seconds (client), a "soak: ..." result line and
 * "summary: P passed, F failed"; exits 1 on any failure, 3 on a timeout. */
#include "hm_common.h"

#include <dlfcn.h>
#include <inttypes.h>

#define MAXS 65536u
#define MAX_QP 64
#define MAGIC 0x48534f4bu /* "HSOK" */

enum { K_SEND = 1, K_WIMM = 2, K_WRITE = 3, K_READ = 4 };

static uint64_t seed = 1;
static int nshown;

/* a failed message check: counted always, shown for the first 20 */
#define MSG_FAIL(...)                                                    \
	do {                                                             \
		if (nshown++ < 20)                                       \
			hm_fail(__VA_ARGS__);                            \
		else                                                     \
			__atomic_add_fetch(&hm_nfail, 1, __ATOMIC_SEQ_CST); \
	} while (0)
static int nqp = 16, win = 4;
static int ops = 7; /* -O: bit 0 SEND, bit 1 WRITE+IMM, bit 2 WRITE and READ back */
#define OP_ON(j) ((ops >> ((j) < 2 ? (j) : 2)) & 1)

/* splitmix64 */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t key_of(int qp, uint32_t r, int kind)
{
	return mix(seed ^ ((uint64_t)qp << 56) ^ ((uint64_t)kind << 48) ^ r);
}

/* 1 B .. 64 KiB: half up to 256 B, a third up to 8 KiB, the rest up to 64 KiB */
static uint32_t size_of(int qp, uint32_t r, int kind)
{
	uint64_t k = mix(key_of(qp, r, kind) ^ 0x5151);
	uint32_t u = (uint32_t)(k % 100), v = (uint32_t)(k >> 32);
	uint32_t s = u < 50 ? 1 + v % 256 : u < 85 ? 1 + v % 8192 : 1 + v % MAXS;
	if (kind == K_SEND && s < 8)
		s = 8;
	return s;
}

/* the message's bytes; a SEND starts with its header (MAGIC ^ qp, round) */
static void fill(uint8_t *p, uint32_t len, int qp, uint32_t r, int kind)
{
	uint64_t x = key_of(qp, r, kind);
	uint32_t i = 0;

	for (; i + 8 <= len; i += 8) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		memcpy(p + i, &x, 8);
	}
	x = x * 6364136223846793005ull + 1442695040888963407ull;
	for (; i < len; i++)
		p[i] = (uint8_t)(x >> (8 * (i & 7)));
	if (kind == K_SEND) {
		uint32_t h[2] = { MAGIC ^ (uint32_t)qp, r };
		memcpy(p, h, 8);
	}
}

static int check(const uint8_t *p, uint32_t len, int qp, uint32_t r, int kind)
{
	static uint8_t want[MAXS];

	fill(want, len, qp, r, kind);
	return memcmp(p, want, len) == 0;
}

struct info {
	uint32_t qpn[MAX_QP];
	uint32_t psn[MAX_QP];
	uint32_t rkey, nqp;
	uint64_t addr;
	union ibv_gid gid;
};

typedef int (*qres_fn)(struct ibv_context *, uint32_t *);
typedef int (*qcnt_fn)(struct ibv_context *, uint32_t *, uint32_t, uint32_t *);
static qres_fn qres;
static qcnt_fn qcnt;

static void resources(struct ibv_context *ctx, uint32_t r[4], const char *when)
{
	int e;

	hm_step("hematite_query_resources");
	e = qres(ctx, r);

	if (e)
		hm_fatal("query_resources", "%s: %s", when, strerror(e));
}

/* engine counter i (docs/transport-engine.md) */
static uint32_t counters(struct ibv_context *ctx, uint32_t *w, uint32_t max)
{
	uint32_t n = 0;
	int e;

	hm_step("hematite_query_counters");
	e = qcnt(ctx, w, max, &n);

	if (e || n < 13 || n < 13 + w[12])
		hm_fatal("query_counters", "hematite_query_counters: %s, %u words", strerror(e), n);
	return w[12];
}
#define ENG(w, i) ((w)[13 + (i)])
#define C_RX_DROPPED 10
#define C_DUP_REQ 19
#define C_RETRIES 24
#define C_TIMEOUTS 25

static uint64_t vmrss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	uint64_t v = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %" SCNu64, &v) == 1)
			break;
	fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *host = NULL, *pidfile = NULL;
	int port = 18533, gidx = 0, tcode = 8, retry = 7, c, interval = 30, rd_atom = 4;
	double secs = 60;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[MAX_QP];
	struct ibv_mr *mr;
	struct ibv_port_attr pa;
	struct info me, peer;
	uint32_t base[4], mid[4], end[4];
	static uint32_t cnt0[64], cnt1[64];
	int fd;

	hm_init_common("hm_soak");
	hm_timeout_s = 300;
	while ((c = getopt(argc, argv, "d:g:p:q:w:s:T:o:r:t:P:i:O:R:")) != -1) {
		if (hm_common_opt(c, &dev, &gidx, &port) || hm_retry_opt(c, &tcode, &retry))
			continue;
		switch (c) {
		case 'q': nqp = atoi(optarg); break;
		case 'w': win = atoi(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'T': secs = atof(optarg); break;
		case 'P': pidfile = optarg; break;
		case 'i': interval = atoi(optarg); break;
		case 'O': ops = atoi(optarg); break;
		case 'R': rd_atom = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: hm_soak [-d DEV] [-p PORT] [-q NQP] [-w W] [-s SEED] [-T SECS] "
					"[-o TIMEOUT] [-r RETRY] [-t STEP_SECS] [-P PIDFILE] [-i SECS] [HOST]\n");
			return 2;
		}
	}
	if (optind < argc)
		host = argv[optind];
	if (nqp < 1 || nqp > MAX_QP || win < 1 || win > 16 || interval < 1 || ops < 1 || ops > 7)
		hm_fatal("options", "-q 1..%d, -w 1..16, -i >= 1, -O 1..7", MAX_QP);
	if (pidfile) {
		FILE *f = fopen(pidfile, "w");
		if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f))
			hm_fatal("pidfile", "%s: %s", pidfile, strerror(errno));
	}
	qres = (qres_fn)dlsym(RTLD_DEFAULT, "hematite_query_resources");
	qcnt = (qcnt_fn)dlsym(RTLD_DEFAULT, "hematite_query_counters");
	if (!qres || !qcnt)
		hm_fatal("provider", "hematite_query_resources / hematite_query_counters not found "
				     "(run under hematite-run, which preloads the Hematite provider)");

	ctx = hm_open_device(dev, NULL);
	resources(ctx, base, "baseline");
	counters(ctx, cnt0, 64);
	hm_info("resources at start (PD CQ MR QP): %u %u %u %u", base[0], base[1], base[2], base[3]);
	if (ibv_query_port(ctx, 1, &pa))
		hm_fatal("query_port", "ibv_query_port failed");

	/* client: per QP 4 slot arrays of W (SEND source, WRITE+IMM source, WRITE source, READ
	 * destination); server: per QP 2 W receive buffers, 4 W WRITE+IMM slots, W WRITE slots */
	size_t per_qp = (size_t)(host ? 4 * win : 7 * win) * MAXS;
	size_t len = per_qp * (size_t)nqp;
	uint8_t *buf = hm_alloc_pages(len);
	hm_step("setup: ibv_alloc_pd, ibv_reg_mr, ibv_create_cq");
	pd = ibv_alloc_pd(ctx);
	mr = pd ? ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
	int cqe = 4 * win * nqp + 16;
	cq = ibv_create_cq(ctx, cqe < 512 ? 512 : cqe, NULL, NULL, 0);
	if (!pd || !mr || !cq)
		hm_fatal("setup", "PD/MR/CQ: %s", strerror(errno));
	memset(&me, 0, sizeof(me));
	for (int i = 0; i < nqp; i++) {
		struct ibv_qp_init_attr qa = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = (uint32_t)(4 * win), .max_recv_wr = (uint32_t)(2 * win),
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};
		hm_step("setup: ibv_create_qp, RESET->INIT");
		qp[i] = ibv_create_qp(pd, &qa);
		if (!qp[i])
			hm_fatal("create_qp", "ibv_create_qp %d: %s", i, strerror(errno));
		if (hm_qp_init(qp[i], IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ))
			hm_fatal("connect", "QP %d RESET->INIT: %s", i, strerror(errno));
		me.qpn[i] = qp[i]->qp_num;
		me.psn[i] = hm_rand_psn();
	}
	me.nqp = (uint32_t)nqp;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	if (ibv_query_gid(ctx, 1, gidx, &me.gid))
		hm_fatal("query_gid", "ibv_query_gid failed");
	resources(ctx, mid, "with everything created");
	hm_check(mid[0] == base[0] + 1 && mid[1] == base[1] + 1 && mid[2] == base[2] + 1 &&
			 mid[3] == base[3] + (uint32_t)nqp,
		 "resources_in_use", "PD CQ MR QP in use with everything created: %u %u %u %u (baseline + 1 1 1 %d)",
		 mid[0], mid[1], mid[2], mid[3], nqp);

	/* the server's receives before the client can send */
	uint8_t *sbuf = buf;
	if (!host) {
		for (int i = 0; i < nqp; i++)
			for (int k = 0; k < 2 * win; k++) {
				struct ibv_sge s = { .addr = (uintptr_t)(sbuf + (size_t)i * per_qp + (size_t)k * MAXS),
						     .length = MAXS, .lkey = mr->lkey };
				struct ibv_recv_wr w = { .wr_id = (uint64_t)i << 32 | (uint32_t)k, .sg_list = &s, .num_sge = 1 }, *bad;
				int e = ibv_post_recv(qp[i], &w, &bad);
				if (e)
					hm_fatal("post_recv", "QP %d receive %d: %s", i, k, strerror(e));
			}
	}
	fd = hm_exchange_info(host, port, &me, &peer, sizeof(me));
	if (peer.nqp != (uint32_t)nqp)
		hm_fatal("options", "the peer has %u QPs, we %d (give both the same -q)", peer.nqp, nqp);
	hm_step("connect: INIT->RTR->RTS");
	for (int i = 0; i < nqp; i++) {
		struct hm_rtr_args r = hm_rtr_to(pa.active_mtu, peer.qpn[i], peer.psn[i], &peer.gid, gidx,
						 (uint8_t)rd_atom);
		r.min_rnr_timer = 1;
		if (hm_qp_rtr(qp[i], &r) ||
		    hm_qp_rts(qp[i], me.psn[i], (uint8_t)tcode, (uint8_t)retry, 7, (uint8_t)rd_atom))
			hm_fatal("connect", "QP %d INIT/RTR/RTS: %s", i, strerror(errno));
	}
	{
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;
		if (ibv_query_qp(qp[0], &qa, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &qia) == 0)
			hm_info("QP 0: timeout code %u, retry count %u", qa.timeout, qa.retry_cnt);
	}
	hm_barrier(fd, 1, "both connected");
	hm_info("connected: %d RC QP pairs, %d rounds in flight per QP, MTU %d, timeout code %d, retry %d, "
		"READs in flight per QP %d, ops mask %d, seed %llu",
		nqp, win, hm_mtu_bytes(pa.active_mtu), tcode, retry, rd_atom, ops, (unsigned long long)seed);

	uint64_t t0 = hm_now_us();
	uint64_t nmsg[5] = { 0 }, nbytes = 0, lost[5] = { 0 }, dup[5] = { 0 }, bad[5] = { 0 }, okm[5] = { 0 };
	uint64_t wc_err = 0;
	struct ibv_wc wc[64];

	if (host) {
		/* ------------------------------------------------------------ client */
		uint8_t *src = buf; /* slot (i, a, k) at i * per_qp + (a * W + k) * MAXS */
#define CSLOT(i, a, k) (src + (size_t)(i) * per_qp + ((size_t)(a) * (size_t)win + (size_t)(k)) * MAXS)
		uint32_t posted[MAX_QP] = { 0 }, done[MAX_QP] = { 0 };
		uint8_t left[MAX_QP][16]; /* completions still due per round slot */
		uint64_t next_report = t0 + (uint64_t)interval * 1000000ull;
		uint64_t stop = t0 + (uint64_t)(secs * 1e6);
		int stopping = 0;
		uint64_t last_progress = hm_now_us();

		memset(left, 0, sizeof(left));
		for (;;) {
			uint64_t now = hm_now_us();
			if (!stopping && now >= stop)
				stopping = 1;
			int inflight = 0;
			for (int i = 0; i < nqp; i++) {
				while (!stopping && posted[i] - done[i] < (uint32_t)win) {
					uint32_t r = posted[i], k = r % (uint32_t)win;
					uint32_t s1 = size_of(i, r, K_SEND), s2 = size_of(i, r, K_WIMM), s3 = size_of(i, r, K_WRITE);
					fill(CSLOT(i, 0, k), s1, i, r, K_SEND);
					fill(CSLOT(i, 1, k), s2, i, r, K_WIMM);
					fill(CSLOT(i, 2, k), s3, i, r, K_WRITE);
					memset(CSLOT(i, 3, k), 0xEE, s3);
					struct ibv_sge sg[4] = {
						{ (uintptr_t)CSLOT(i, 0, k), s1, mr->lkey },
						{ (uintptr_t)CSLOT(i, 1, k), s2, mr->lkey },
						{ (uintptr_t)CSLOT(i, 2, k), s3, mr->lkey },
						{ (uintptr_t)CSLOT(i, 3, k), s3, mr->lkey },
					};
					struct ibv_send_wr w[4], *badw;
					memset(w, 0, sizeof(w));
					int op[4] = { IBV_WR_SEND, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ };
					uint64_t raddr[4] = { 0,
							      peer.addr + (size_t)i * (size_t)(7 * win) * MAXS +
								      ((size_t)(2 * win) + r % (uint32_t)(4 * win)) * MAXS,
							      peer.addr + (size_t)i * (size_t)(7 * win) * MAXS + ((size_t)(6 * win) + k) * MAXS,
							      peer.addr + (size_t)i * (size_t)(7 * win) * MAXS + ((size_t)(6 * win) + k) * MAXS };
					int nw = 0;
					for (int j = 0; j < 4; j++) {
						if (!OP_ON(j))
							continue;
						w[nw].wr_id = (uint64_t)i << 40 | (uint64_t)r << 8 | (uint64_t)(j + 1);
						w[nw].sg_list = &sg[j];
						w[nw].num_sge = 1;
						w[nw].opcode = op[j];
						w[nw].send_flags = IBV_SEND_SIGNALED;
						w[nw].wr.rdma.remote_addr = raddr[j];
						w[nw].wr.rdma.rkey = peer.rkey;
						if (j == 1)
							w[nw].imm_data = htonl(r);
						if (nw)
							w[nw - 1].next = &w[nw];
						nw++;
						nmsg[j + 1]++;
						nbytes += j == 0 ? s1 : j == 1 ? s2 : s3;
					}
					int pe = ibv_post_send(qp[i], w, &badw);
					if (pe)
						hm_fatal("post_send", "QP %d round %u: %s", i, r, strerror(pe));
					left[i][k] = (uint8_t)nw;
					posted[i]++;
				}
				inflight += (int)(posted[i] - done[i]);
			}
			if (stopping && inflight == 0)
				break;
			int n = hm_poll_cq(cq, 64, wc, "soak: client completions");
			if (n == 0) {
				if (now - last_progress > (uint64_t)hm_timeout_s * 1000000ull)
					hm_timeout("client completions: none for %d s (%d rounds in flight)", hm_timeout_s, inflight);
				hm_sleep_us(200);
			} else {
				last_progress = now;
			}
			for (int e = 0; e < n; e++) {
				int i = (int)(wc[e].wr_id >> 40), kind = (int)(wc[e].wr_id & 0xff);
				uint32_t r = (uint32_t)(wc[e].wr_id >> 8) & 0xffffffffu, k;
				if (wc[e].status != IBV_WC_SUCCESS) {
					wc_err++;
					hm_fatal("completion", "QP %d round %u kind %d: %s (vendor 0x%x)", i, r, kind,
						 ibv_wc_status_str(wc[e].status), wc[e].vendor_err);
				}
				if (i >= nqp || kind < 1 || kind > 4 || r - done[i] >= (uint32_t)win)
					hm_fatal("completion", "unexpected wr_id 0x%llx", (unsigned long long)wc[e].wr_id);
				k = r % (uint32_t)win;
				okm[kind]++;
				if (kind == K_READ) {
					uint32_t s3 = size_of(i, r, K_WRITE);
					if (check(CSLOT(i, 3, k), s3, i, r, K_WRITE)) {
						okm[0]++;
					} else {
						bad[K_READ]++;
						MSG_FAIL("read_back", "QP %d round %u: the %u bytes read back differ from those written",
							i, r, s3);
					}
				}
				if (--left[i][k] == 0) {
					/* rounds complete in order on a QP (one send queue) */
					if (r != done[i])
						hm_fatal("completion", "QP %d: round %u completed before round %u", i, r, done[i]);
					done[i]++;
				}
			}
			now = hm_now_us();
			if (now >= next_report) {
				next_report += (uint64_t)interval * 1000000ull;
				uint64_t rounds = 0;
				for (int i = 0; i < nqp; i++)
					rounds += done[i];
				counters(ctx, cnt1, 64);
				printf("# progress t=%.0fs rounds=%llu messages=%llu bytes=%llu rss_kb=%llu ack_timeouts=%u retries=%u rx_dropped=%u\n",
				       (now - t0) / 1e6, (unsigned long long)rounds, (unsigned long long)(nmsg[1] + nmsg[2] + nmsg[3] + nmsg[4]),
				       (unsigned long long)nbytes, (unsigned long long)vmrss_kb(),
				       ENG(cnt1, C_TIMEOUTS) - ENG(cnt0, C_TIMEOUTS), ENG(cnt1, C_RETRIES) - ENG(cnt0, C_RETRIES),
				       ENG(cnt1, C_RX_DROPPED) - ENG(cnt0, C_RX_DROPPED));
				fflush(stdout);
			}
		}
		/* the rounds per QP to the server, which checks it got exactly these */
		uint32_t tot[MAX_QP];
		for (int i = 0; i < nqp; i++)
			tot[i] = htonl(done[i]);
		hm_tcp_send(fd, tot, sizeof(uint32_t) * (size_t)nqp, "round counts");
		(void)hm_ctl_recv(fd, 2, "the server's verdict");
	} else {
		/* ------------------------------------------------------------ server */
		uint32_t got[3][MAX_QP]; /* next expected round per kind (SEND, WRITE+IMM) */
		uint32_t tot[MAX_QP];
		int have_tot = 0;
		uint64_t quiet_since = hm_now_us();
		memset(got, 0, sizeof(got));
		for (;;) {
			if (!have_tot) {
				uint32_t peek;
				ssize_t m = recv(fd, &peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT);
				if (m == 0)
					hm_fatal("tcp", "the client closed the connection");
				if (m > 0) {
					hm_tcp_recv(fd, tot, sizeof(uint32_t) * (size_t)nqp, "round counts");
					for (int i = 0; i < nqp; i++)
						tot[i] = ntohl(tot[i]);
					have_tot = 1;
					quiet_since = hm_now_us();
				}
			}
			if (have_tot) {
				int all = 1;
				for (int i = 0; i < nqp; i++)
					all &= (!(ops & 1) || got[K_SEND][i] >= tot[i]) && (!(ops & 2) || got[K_WIMM][i] >= tot[i]);
				/* the client saw every completion: every message is in, or lost */
				if (all || hm_now_us() - quiet_since > 10000000ull)
					break;
			}
			int n = hm_poll_cq(cq, 64, wc, "soak: server completions");
			if (n == 0) {
				hm_sleep_us(200);
				continue;
			}
			quiet_since = hm_now_us();
			for (int e = 0; e < n; e++) {
				int i = (int)(wc[e].wr_id >> 32);
				uint32_t slot = (uint32_t)wc[e].wr_id, r;
				uint8_t *rb = sbuf + (size_t)i * per_qp + (size_t)slot * MAXS;
				int kind;
				if (wc[e].status != IBV_WC_SUCCESS) {
					wc_err++;
					hm_fatal("completion", "server QP %d: %s (vendor 0x%x)", i,
						 ibv_wc_status_str(wc[e].status), wc[e].vendor_err);
				}
				if (i >= nqp || slot >= (uint32_t)(2 * win))
					hm_fatal("completion", "unexpected wr_id 0x%llx", (unsigned long long)wc[e].wr_id);
				const uint8_t *p;
				uint32_t want;
				if (wc[e].opcode == IBV_WC_RECV) {
					uint32_t h[2];
					kind = K_SEND;
					memcpy(h, rb, 8);
					r = h[1];
					p = rb;
					if (wc[e].byte_len < 8 || h[0] != (MAGIC ^ (uint32_t)i)) {
						bad[K_SEND]++;
						MSG_FAIL("send", "QP %d: a SEND of %u bytes without its header", i, wc[e].byte_len);
						goto repost;
					}
				} else if (wc[e].opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc[e].wc_flags & IBV_WC_WITH_IMM)) {
					kind = K_WIMM;
					r = ntohl(wc[e].imm_data);
					p = sbuf + (size_t)i * per_qp + ((size_t)(2 * win) + r % (uint32_t)(4 * win)) * MAXS;
				} else {
					hm_fatal("completion", "server QP %d: opcode %d flags 0x%x", i, wc[e].opcode, wc[e].wc_flags);
				}
				if (r < got[kind][i]) {
					dup[kind]++;
					MSG_FAIL(kind == K_SEND ? "send" : "write_imm", "QP %d: round %u again (expected %u)", i, r,
						got[kind][i]);
					goto repost;
				}
				if (r > got[kind][i]) {
					lost[kind] += r - got[kind][i];
					MSG_FAIL(kind == K_SEND ? "send" : "write_imm", "QP %d: rounds %u..%u missing", i,
						got[kind][i], r - 1);
				}
				got[kind][i] = r + 1;
				want = size_of(i, r, kind);
				if ((kind == K_SEND && wc[e].byte_len != want) || !check(p, want, i, r, kind)) {
					bad[kind]++;
					MSG_FAIL(kind == K_SEND ? "send" : "write_imm", "QP %d round %u: %u bytes, not the %u sent, or other bytes",
						i, r, wc[e].byte_len, want);
				} else {
					okm[kind]++;
					nbytes += want;
				}
				nmsg[kind]++;
repost:;
				struct ibv_sge s = { .addr = (uintptr_t)rb, .length = MAXS, .lkey = mr->lkey };
				struct ibv_recv_wr w = { .wr_id = wc[e].wr_id, .sg_list = &s, .num_sge = 1 }, *badr;
				int pe = ibv_post_recv(qp[i], &w, &badr);
				if (pe)
					hm_fatal("post_recv", "QP %d: %s", i, strerror(pe));
			}
		}
		uint64_t sent = 0;
		for (int i = 0; i < nqp; i++) {
			sent += tot[i];
			for (int kind = K_SEND; kind <= K_WIMM; kind++)
				if (!(ops & (1 << (kind - 1)))) {
					if (got[kind][i])
						MSG_FAIL("ops", "QP %d: %u messages of kind %d, which -O %d excludes", i, got[kind][i], kind, ops);
				} else if (got[kind][i] < tot[i]) {
					lost[kind] += tot[i] - got[kind][i];
					MSG_FAIL(kind == K_SEND ? "send" : "write_imm", "QP %d: rounds %u..%u never arrived", i,
						got[kind][i], tot[i] - 1);
				} else if (got[kind][i] > tot[i]) {
					MSG_FAIL(kind == K_SEND ? "send" : "write_imm", "QP %d: %u rounds arrived, the client sent %u", i,
						got[kind][i], tot[i]);
					dup[kind] += got[kind][i] - tot[i];
				}
		}
		hm_ctl_send(fd, 2, 0, 0);
		hm_info("server: the client completed %llu rounds", (unsigned long long)sent);
	}

	/* nothing may complete after the end (a duplicate delivered late would) */
	hm_barrier(fd, 3, "traffic over");
	struct ibv_wc extra;
	int late = hm_poll_cq_quiet(cq, 500000, &extra);
	hm_check(late == 0, "no_late_completions", "%d completions after the end", late);
	double wall = (hm_now_us() - t0) / 1e6;
	uint32_t ncnt = counters(ctx, cnt1, 64);
	uint32_t rx_dropped = ENG(cnt1, C_RX_DROPPED) - ENG(cnt0, C_RX_DROPPED);
	hm_info("engine counters over the run (of %u): rx_dropped %u, duplicate requests %u, go-back-N retries %u, ACK timeouts %u",
		ncnt, rx_dropped, ENG(cnt1, C_DUP_REQ) - ENG(cnt0, C_DUP_REQ), ENG(cnt1, C_RETRIES) - ENG(cnt0, C_RETRIES),
		ENG(cnt1, C_TIMEOUTS) - ENG(cnt0, C_TIMEOUTS));

	/* teardown, then the device must be back to the baseline */
	int terr = 0;
	for (int i = 0; i < nqp; i++)
		terr |= ibv_destroy_qp(qp[i]) != 0;
	terr |= ibv_dereg_mr(mr) != 0;
	terr |= ibv_destroy_cq(cq) != 0;
	terr |= ibv_dealloc_pd(pd) != 0;
	hm_check(!terr, "teardown", "QPs, MR, CQ, PD destroyed");
	resources(ctx, end, "after teardown");
	int back = memcmp(base, end, sizeof(base)) == 0;
	hm_check(back, "resources_back_to_baseline", "PD CQ MR QP in use: start %u %u %u %u, end %u %u %u %u",
		 base[0], base[1], base[2], base[3], end[0], end[1], end[2], end[3]);
	hm_barrier(fd, 4, "teardown done");
	ibv_close_device(ctx);

	uint64_t tl = lost[1] + lost[2], td = dup[1] + dup[2], tc = bad[1] + bad[2] + bad[4];
	hm_check(tl == 0 && td == 0 && tc == 0 && wc_err == 0, "verified",
		 "lost %llu duplicated %llu corrupted %llu error completions %llu",
		 (unsigned long long)tl, (unsigned long long)td, (unsigned long long)tc, (unsigned long long)wc_err);
	if (host)
		printf("soak: client messages=%llu (send %llu write_imm %llu write %llu read %llu) bytes=%llu "
		       "reads_verified=%llu lost=%llu duplicated=%llu corrupted=%llu wc_errors=%llu wall_s=%.1f "
		       "rx_dropped=%u resources_start=%u/%u/%u/%u resources_end=%u/%u/%u/%u\n",
		       (unsigned long long)(nmsg[1] + nmsg[2] + nmsg[3] + nmsg[4]), (unsigned long long)nmsg[1],
		       (unsigned long long)nmsg[2], (unsigned long long)nmsg[3], (unsigned long long)nmsg[4],
		       (unsigned long long)nbytes, (unsigned long long)okm[0], (unsigned long long)tl,
		       (unsigned long long)td, (unsigned long long)tc, (unsigned long long)wc_err, wall, rx_dropped,
		       base[0], base[1], base[2], base[3], end[0], end[1], end[2], end[3]);
	else
		printf("soak: server messages=%llu (send %llu write_imm %llu) verified=%llu bytes=%llu lost=%llu "
		       "duplicated=%llu corrupted=%llu wc_errors=%llu wall_s=%.1f rx_dropped=%u "
		       "resources_start=%u/%u/%u/%u resources_end=%u/%u/%u/%u\n",
		       (unsigned long long)(nmsg[1] + nmsg[2]), (unsigned long long)nmsg[1], (unsigned long long)nmsg[2],
		       (unsigned long long)(okm[1] + okm[2]), (unsigned long long)nbytes, (unsigned long long)tl,
		       (unsigned long long)td, (unsigned long long)tc, (unsigned long long)wc_err, wall, rx_dropped,
		       base[0], base[1], base[2], base[3], end[0], end[1], end[2], end[3]);
	hm_summary();
	return hm_exit_code();
}
