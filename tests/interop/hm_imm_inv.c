/*
 * hm_imm_inv - immediate data and SEND with invalidate over one RC QP, both ways.
 *
 * A standalone ibverbs program (libibverbs + libc only, no header of this repository) so that
 * the same binary runs against Hematite (simulated NIC, through hematite-run) and against
 * Linux Soft-RoCE (rxe) in a Debian 12 VM, in either role.  Two processes connect one RC QP
 * (RoCEv2: GRH with the given GID index) and exchange QPN/PSN/GID/buffer over TCP.
 *
 * The tests run twice: first the client is the sender ("c2s"), then the server ("s2c").  The
 * receiver always posts its receives (and fills its memory) before sending READY over TCP.
 *   phase 1  SEND_WITH_IMM x ITERS, sizes 0, 1, MAX, MTU+1, 2*MTU, ... (multi-packet too);
 *            the receiver checks status, opcode RECV, IBV_WC_WITH_IMM, imm_data, byte_len,
 *            completion order, the data and that the rest of each receive buffer is untouched.
 *   phase 2  RDMA_WRITE_WITH_IMM x ITERS at varying offsets/sizes (0 bytes included) into the
 *            receiver's buffer; it checks RECV_RDMA_WITH_IMM, WITH_IMM, imm_data, byte_len,
 *            the bytes written, the bytes around them, and that receive buffers stay untouched.
 *   phase 3  SEND_WITH_INV: the receiver offers an rkey that may be invalidated - a memory
 *            window type 2 bound over an MR when ibv_alloc_mw() works (rxe), otherwise a
 *            separately registered MR (Hematite: no MWs, it invalidates MR rkeys).  The sender
 *            first RDMA-WRITEs through that rkey (it must work), then sends SEND_WITH_INV; the
 *            receiver checks IBV_WC_WITH_INV, invalidated_rkey and the data.  In the very last
 *            phase (unless --no-inv-check) the sender then WRITEs to the invalidated rkey and
 *            must get IBV_WC_REM_ACCESS_ERR; the receiver checks that no successful completion
 *            appeared and its memory was not written (its QP may go to error: expected).
 *            --kernel-inv-flag: accept a receive completion that flags SEND_WITH_INV with
 *            1 << 2 instead of IBV_WC_WITH_INV (Linux rxe in kernel 6.1 copies the kernel's
 *            IB_WC_WITH_INVALIDATE value into user completions, where libibverbs reads it as
 *            IBV_WC_IP_CSUM_OK); invalidated_rkey is still checked.
 * Every wait is bounded by the -t deadline (an alarm is the backstop).  Each failed check
 * prints one "FAIL: ..." line; the last line is "hm_imm_inv: N checks passed, M failed" and
 * the exit status is 0 only when M is 0.
 *
 * Build: cc -O2 -Wall -Wextra -Werror -o hm_imm_inv hm_imm_inv.c -libverbs
 * Run:   server: hm_imm_inv -d DEV -g GIDX [-p PORT] [-m MTU] [-n ITERS] [-s MAX] [-u TO] [-t S]
 *        client: hm_imm_inv -d DEV -g GIDX [same options] SERVER_HOST
 * e.g. on Hematite:  hematite-run --nic 0 -- ./hm_imm_inv -d hematite0 -g 0 &
 *                    hematite-run --nic 1 -- ./hm_imm_inv -d hematite1 -g 0 127.0.0.1
 * Both sides must use the same -n, -s and -m (checked in the exchange).  Under loss on simulated
 * NICs (hematite-run --loss P) give the Hematite side -u 14 or less: a lost retransmission is
 * repaired only by the ACK timer, which runs in simulated time (the provider keeps the device
 * at full speed while sends are outstanding, about 2.5 M cycles per second), so the default
 * -u 18 (~1 s simulated, 268 M cycles) would take minutes of wall time.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NV 10                  /* 64-bit values per TCP message */
#define ILEN 4096              /* the invalidatable region */
#define IWOFF 128u             /* phase 3: RDMA WRITE through the rkey at this offset ... */
#define IWLEN 512u             /* ... of this length */
#define ISEND 300u             /* phase 3: SEND_WITH_INV payload (at most MAX_SIZE) */
#define TAG(k, d, p) ((uint32_t)(k) << 16 | (uint32_t)(d) << 8 | (uint32_t)(p))
enum { T_HELLO = 1, T_RTS, T_READY, T_DONE, T_VERDICT, T_INVDONE, T_FINAL };

static struct {
	const char *dev, *host;
	int gidx, port, mtu, iters, maxsz, tmo, secs, inv_check, kernel_inv_flag;
} opt = { NULL, NULL, -1, 18515, 1024, 20, 8192, 18, 120, 1, 0 };

static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_mr *smr, *rmr, *wmr, *imr;   /* send, receive, WRITE target, invalidatable */
	struct ibv_mw *mw;
	uint8_t *sbuf, *rbuf, *wbuf, *ibuf;
	size_t slot, blen;      /* per-WR slot stride; sbuf, rbuf and wbuf hold ITERS slots */
	union ibv_gid gid;
	uint32_t psn;
} c;

static struct { uint32_t qpn, psn, wrkey; uint64_t waddr; union ibv_gid gid; } peer;
static unsigned npass, nfail;
static double deadline;
static int sock = -1;
static const char *const dname[2] = { "c2s", "s2c" };

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap(void) { struct timespec ts = { 0, 50000 }; nanosleep(&ts, NULL); }

static void __attribute__((noreturn)) finish(void)
{
	printf("hm_imm_inv: %u checks passed, %u failed\n", npass, nfail);
	fflush(stdout);
	exit(nfail ? 1 : 0);
}

/* one check: counts it, prints a FAIL line when !ok; returns ok */
static int __attribute__((format(printf, 2, 3))) check(int ok, const char *fmt, ...)
{
	va_list ap;
	if (ok)
		return ++npass, 1;
	nfail++;
	va_start(ap, fmt);
	printf("FAIL: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	return 0;
}

/* a failed verbs call, error completion, timeout or lost peer: the run cannot go on */
#define fatal(...) (check(0, __VA_ARGS__), finish())

/* the backstop for a call that never returns: async-signal-safe, writes the text from its end */
static char *prepend(char *p, const char *s) { size_t n = strlen(s); return memcpy(p - n, s, n); }
static char *prepend_u(char *p, unsigned v) { do *--p = (char)('0' + v % 10); while (v /= 10); return p; }
static void on_alarm(int sig)
{
	char b[256], *p = b + sizeof b;
	(void)sig;
	p = prepend_u(prepend(p, " failed\n"), nfail + 1);
	p = prepend_u(prepend(p, " checks passed, "), npass);
	p = prepend(p, "FAIL: the -t deadline passed inside a call that did not return (alarm)\nhm_imm_inv: ");
	if (write(1, p, (size_t)(b + sizeof b - p)) < 0) { /* nothing more to do */ }
	_exit(1);
}

/* ------------------------------------------------------------------ TCP side channel */
static void put64(uint8_t *p, uint64_t v) { for (int k = 7; k >= 0; k--, v >>= 8) p[k] = (uint8_t)v; }

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int k = 0; k < 8; k++) v = v << 8 | p[k];
	return v;
}

static void msg_send(uint32_t tag, const uint64_t *v)
{
	uint8_t b[8 + 8 * NV];
	size_t off = 0;
	put64(b, tag);
	for (int k = 0; k < NV; k++)
		put64(b + 8 + 8 * k, v ? v[k] : 0);
	while (off < sizeof b) {
		ssize_t n = send(sock, b + off, sizeof b - off, MSG_NOSIGNAL);
		if (n <= 0 && !(n < 0 && errno == EINTR))
			fatal("TCP send of message 0x%x failed: %s", tag, n ? strerror(errno) : "0 bytes");
		off += n > 0 ? (size_t)n : 0;
	}
}

/* waits, bounded by the deadline, until fd is readable */
static void wait_in(int fd, const char *what)
{
	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		double left = deadline - now();
		int r;
		if (left <= 0)
			fatal("timed out (-t %d s) waiting for %s (TCP)", opt.secs, what);
		if ((r = poll(&pfd, 1, (int)(left * 1000) + 1)) > 0)
			return;
		if (r < 0 && errno != EINTR)
			fatal("poll on the TCP socket: %s", strerror(errno));
	}
}

/* Receives message `tag`; returns -1 only when eof_ok and the peer closed before any byte. */
static int msg_recv(uint32_t tag, uint64_t *v, const char *what, int eof_ok)
{
	uint8_t b[8 + 8 * NV];
	size_t off = 0;
	while (off < sizeof b) {
		ssize_t n;
		wait_in(sock, what);
		if ((n = recv(sock, b + off, sizeof b - off, 0)) < 0 && errno == EINTR)
			continue;
		if (n <= 0 && off == 0 && eof_ok)
			return -1;
		if (n <= 0)
			fatal("the peer closed the TCP connection (%s) while this side waited for %s",
			      n ? strerror(errno) : "EOF", what);
		off += (size_t)n;
	}
	if (get64(b) != tag)
		fatal("waiting for %s: expected TCP message 0x%x, got 0x%llx (the peer is out of step)",
		      what, tag, (unsigned long long)get64(b));
	for (int k = 0; v && k < NV; k++)
		v[k] = get64(b + 8 + 8 * k);
	return 0;
}

static int tcp_connect(void)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
	char port[16];
	int fd = -1, rc;
	struct timeval tv = { 5, 0 };
	snprintf(port, sizeof port, "%d", opt.port);
	for (;;) {
		if ((rc = getaddrinfo(opt.host, port, &hints, &res)) != 0)
			fatal("getaddrinfo(%s): %s", opt.host, gai_strerror(rc));
		for (ai = res; ai; ai = ai->ai_next) {
			fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
			if (fd < 0)
				continue;
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv); /* bounds connect() */
			if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
				break;
			close(fd);
			fd = -1;
		}
		freeaddrinfo(res);
		if (fd >= 0)
			return fd;
		if (now() > deadline)
			fatal("timed out (-t %d s) connecting to %s:%d", opt.secs, opt.host, opt.port);
		sleep(1);
	}
}

static int tcp_accept(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port),
				  .sin_addr.s_addr = htonl(INADDR_ANY) };
	int one = 1, fd, lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		fatal("socket: %s", strerror(errno));
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 1))
		fatal("listening on 0.0.0.0:%d: %s", opt.port, strerror(errno));
	printf("server: listening on 0.0.0.0:%d\n", opt.port);
	fflush(stdout);
	do
		wait_in(lfd, "the client to connect");
	while ((fd = accept(lfd, NULL, NULL)) < 0);
	close(lfd);
	return fd;
}

/* ------------------------------------------------------------------ patterns */
static uint32_t size_of(int phase, int i)
{
	uint32_t m = (uint32_t)opt.maxsz, mtu = (uint32_t)opt.mtu, h;
	switch (i) {
	case 0: return phase == 1 ? 0 : 1;
	case 1: return phase == 1 ? 1 : 0;
	case 2: return m;
	case 3: return mtu + 1 < m ? mtu + 1 : m;
	case 4: return 2 * mtu < m ? 2 * mtu : m;
	}
	h = (uint32_t)(i + 1) * 2654435761u ^ (uint32_t)phase * 0x9e3779b9u;
	h ^= h >> 15;
	return h % (m + 1);
}

static uint32_t off_of(int i, uint32_t sz)
{
	uint32_t room = (uint32_t)opt.maxsz - sz;
	return room ? (((uint32_t)i * 2246822519u) >> 7) % (room + 1) : 0;
}

static uint8_t pat(int dir, int phase, int i, uint32_t j)
{
	return (uint8_t)(j * 7u + (j >> 8) * 13u + (uint32_t)i * 71u + (uint32_t)phase * 37u +
			 (uint32_t)dir * 131u + 5u);
}

static uint32_t imm_of(int dir, int phase, int i)
{
	return 0x5a000000u ^ (uint32_t)dir << 23 ^ (uint32_t)phase << 19 ^ ((uint32_t)i * 40503u & 0x7ffff);
}

static uint8_t fill_of(int dir, int phase) { return (uint8_t)(0xa0 + dir * 8 + phase); }

static void put_pat(uint8_t *p, uint32_t n, int dir, int phase, int i)
{
	for (uint32_t j = 0; j < n; j++) p[j] = pat(dir, phase, i, j);
}

/* one check: p[0..n) holds pattern i of (dir, phase), or the byte `fill` when i < 0 */
static int chk_bytes(const uint8_t *p, size_t n, int dir, int phase, int i, uint8_t fill,
		     const char *what, const char *part)
{
	for (size_t j = 0; j < n; j++) {
		uint8_t want = i < 0 ? fill : pat(dir, phase, i, (uint32_t)j);
		if (p[j] != want)
			return check(0, "%s: %s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, part, j,
				     n, p[j], want);
	}
	return check(1, "-");
}

/* the peer closed the side channel (it died or gave up): no need to wait for the deadline */
static int peer_gone(void)
{
	char ch;
	ssize_t n = recv(sock, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* ------------------------------------------------------------------ verbs helpers */
/* waits (bounded) for one completion; with `ok`, anything but success is fatal */
static void poll_one(struct ibv_cq *cq, struct ibv_wc *wc, const char *what, int ok)
{
	unsigned spins = 0;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			fatal("ibv_poll_cq returned %d while waiting for %s", n, what);
		if (n == 1 && ok && wc->status != IBV_WC_SUCCESS)
			fatal("%s: status %s (%d), opcode %d, wr_id %llu, vendor_err 0x%x", what,
			      ibv_wc_status_str(wc->status), wc->status, wc->opcode,
			      (unsigned long long)wc->wr_id, wc->vendor_err);
		if (n == 1)
			return;
		if (now() > deadline)
			fatal("timed out (-t %d s) waiting for %s", opt.secs, what);
		if (++spins > 64)
			nap();
		if (spins % 2048 == 0 && sock >= 0 && peer_gone())
			fatal("the peer closed the TCP connection while this side waited for %s", what);
	}
}

static void post_send1(uint64_t id, enum ibv_wr_opcode op, void *buf, uint32_t len, uint64_t raddr,
		       uint32_t rkey, uint32_t x)
{
	struct ibv_sge sge = { (uintptr_t)buf, len, c.smr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
				  .sg_list = len ? &sge : NULL, .num_sge = len ? 1 : 0 }, *bad = NULL;
	int rc;
	if (op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htonl(x);
	if (op == IBV_WR_SEND_WITH_INV)
		wr.invalidate_rkey = x;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if ((rc = ibv_post_send(c.qp, &wr, &bad)) != 0)
		fatal("ibv_post_send (opcode %d, wr_id %llu, %u bytes) failed: %s", op,
		      (unsigned long long)id, len, strerror(rc));
}

static void post_recv1(uint64_t id, void *buf, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)buf, len, c.rmr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
	int rc;
	if ((rc = ibv_post_recv(c.qp, &wr, &bad)) != 0)
		fatal("ibv_post_recv (wr_id %llu) failed: %s", (unsigned long long)id, strerror(rc));
}

static uint8_t *alloc_buf(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, n) || !memset(p, 0, n))
		fatal("out of memory (%zu bytes)", n);
	return p;
}

static struct ibv_mr *reg(void *p, size_t n, int access, const char *what)
{
	struct ibv_mr *mr = ibv_reg_mr(c.pd, p, n, access);
	if (!mr)
		fatal("ibv_reg_mr(%s, %zu bytes, access 0x%x): %s", what, n, access, strerror(errno));
	return mr;
}

static void gid_str(const union ibv_gid *g, char *s)
{
	if (!inet_ntop(AF_INET6, g->raw, s, INET6_ADDRSTRLEN)) strcpy(s, "?");
}

static void setup(int is_client)
{
	struct ibv_device **list;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr at;
	int n, i, rc, wr = opt.iters + 8;
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	char gs[INET6_ADDRSTRLEN];

	if (!(list = ibv_get_device_list(&n)))
		fatal("ibv_get_device_list: %s", strerror(errno));
	for (i = 0; i < n && strcmp(ibv_get_device_name(list[i]), opt.dev); i++)
		;
	if (i == n)
		fatal("RDMA device %s not found (%d devices listed)", opt.dev, n);
	if (!(c.ctx = ibv_open_device(list[i])))
		fatal("ibv_open_device(%s): %s", opt.dev, strerror(errno));
	ibv_free_device_list(list);
	if ((rc = ibv_query_device(c.ctx, &da)) != 0)
		fatal("ibv_query_device: %s", strerror(rc));
	if (da.max_qp_wr < wr || da.max_cqe < wr)
		fatal("-n %d needs %d WRs per queue; the device allows max_qp_wr %d, max_cqe %d",
		      opt.iters, wr, da.max_qp_wr, da.max_cqe);
	if ((rc = ibv_query_port(c.ctx, 1, &pa)) != 0)
		fatal("ibv_query_port(1): %s", strerror(rc));
	if (pa.state != IBV_PORT_ACTIVE)
		printf("warning: port 1 is not ACTIVE (state %d)\n", pa.state);
	if (128 << pa.active_mtu < opt.mtu)
		printf("warning: -m %d is above the port's active MTU %d\n", opt.mtu, 128 << pa.active_mtu);
	if ((rc = ibv_query_gid(c.ctx, 1, opt.gidx, &c.gid)) != 0)
		fatal("ibv_query_gid(port 1, index %d): %s", opt.gidx, strerror(rc > 0 ? rc : errno));
	if (!c.gid.global.subnet_prefix && !c.gid.global.interface_id)
		fatal("GID index %d of %s is empty", opt.gidx, opt.dev);
	if (!(c.pd = ibv_alloc_pd(c.ctx)))
		fatal("ibv_alloc_pd: %s", strerror(errno));
	if (!(c.scq = ibv_create_cq(c.ctx, wr, NULL, NULL, 0)) ||
	    !(c.rcq = ibv_create_cq(c.ctx, wr, NULL, NULL, 0)))
		fatal("ibv_create_cq(%d): %s", wr, strerror(errno));
	c.slot = ((size_t)(opt.maxsz > 1024 ? opt.maxsz : 1024) + 63) & ~(size_t)63;
	c.blen = c.slot * (size_t)opt.iters;
	c.ibuf = alloc_buf(ILEN);
	c.smr = reg(c.sbuf = alloc_buf(c.blen), c.blen, IBV_ACCESS_LOCAL_WRITE, "send buffers");
	c.rmr = reg(c.rbuf = alloc_buf(c.blen), c.blen, IBV_ACCESS_LOCAL_WRITE, "receive buffers");
	c.wmr = reg(c.wbuf = alloc_buf(c.blen), c.blen, rw, "RDMA WRITE target");

	qa = (struct ibv_qp_init_attr){ .send_cq = c.scq, .recv_cq = c.rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = (uint32_t)wr, .max_recv_wr = (uint32_t)wr,
			 .max_send_sge = 1, .max_recv_sge = 1 } };
	if (!(c.qp = ibv_create_qp(c.pd, &qa)))
		fatal("ibv_create_qp(RC, %d WRs): %s", wr, strerror(errno));
	at = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags =
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	if ((rc = ibv_modify_qp(c.qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				IBV_QP_ACCESS_FLAGS)) != 0)
		fatal("ibv_modify_qp(INIT): %s", strerror(rc));
	srand48(getpid() ^ (long)(now() * 1e6));
	c.psn = (uint32_t)lrand48() & 0xffffff;
	gid_str(&c.gid, gs);
	printf("%s: local  QPN 0x%06x PSN 0x%06x GID %s\n", is_client ? "client" : "server",
	       c.qp->qp_num, c.psn, gs);
}

static void exchange(int is_client)
{
	uint64_t params = (uint64_t)opt.iters << 40 | (uint64_t)opt.maxsz << 16 | (uint64_t)opt.mtu, m[NV];
	uint64_t v[NV] = { c.qp->qp_num, c.psn, get64(c.gid.raw), get64(c.gid.raw + 8), (uintptr_t)c.wbuf,
			   c.wmr->rkey, params };
	char gs[INET6_ADDRSTRLEN];
	if (is_client) {
		for (;;) { /* a port forwarder may accept and then close while nobody listens */
			sock = tcp_connect();
			msg_send(TAG(T_HELLO, 0, 0), v);
			if (msg_recv(TAG(T_HELLO, 0, 0), m, "HELLO (QP address)", 1) == 0)
				break;
			close(sock);
			sleep(1);
		}
	} else {
		sock = tcp_accept();
		msg_recv(TAG(T_HELLO, 0, 0), m, "HELLO (QP address)", 0);
		msg_send(TAG(T_HELLO, 0, 0), v);
	}
	setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	if (m[6] != params)
		fatal("the peer runs with -n %llu -s %llu -m %llu, this side with -n %d -s %d -m %d",
		      (unsigned long long)(m[6] >> 40), (unsigned long long)(m[6] >> 16 & 0xffffff),
		      (unsigned long long)(m[6] & 0xffff), opt.iters, opt.maxsz, opt.mtu);
	peer.qpn = (uint32_t)m[0];
	peer.psn = (uint32_t)m[1];
	put64(peer.gid.raw, m[2]);
	put64(peer.gid.raw + 8, m[3]);
	peer.waddr = m[4];
	peer.wrkey = (uint32_t)m[5];
	gid_str(&peer.gid, gs);
	printf("%s: remote QPN 0x%06x PSN 0x%06x GID %s\n", is_client ? "client" : "server",
	       peer.qpn, peer.psn, gs);
}

static void connect_qp(void)
{
	struct ibv_qp_attr at;
	int rc, k = 0;
	while ((256 << k) < opt.mtu)   /* IBV_MTU_256 is 1 ... IBV_MTU_4096 is 5 */
		k++;
	at = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .path_mtu = (enum ibv_mtu)(k + 1),
		.dest_qp_num = peer.qpn, .rq_psn = peer.psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 12, .ah_attr = {
			.grh = { .dgid = peer.gid, .sgid_index = (uint8_t)opt.gidx, .hop_limit = 64 },
			.is_global = 1, .port_num = 1 } };
	if ((rc = ibv_modify_qp(c.qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) != 0)
		fatal("ibv_modify_qp(RTR): %s", strerror(rc));
	at = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .timeout = (uint8_t)opt.tmo, .retry_cnt = 7,
		.rnr_retry = 7, .sq_psn = c.psn, .max_rd_atomic = 1 };
	if ((rc = ibv_modify_qp(c.qp, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) != 0)
		fatal("ibv_modify_qp(RTS): %s", strerror(rc));
	msg_send(TAG(T_RTS, 0, 0), NULL);
	msg_recv(TAG(T_RTS, 0, 0), NULL, "RTS (the peer's QP is connected)", 0);
}

/* the sender: sends `tell` (values v), then waits for the receiver's verdict `hear` */
static void sender_sync(uint32_t tell, uint64_t v[NV], uint32_t hear)
{
	msg_send(tell, v);
	msg_recv(hear, v, "the receiver's verdict on its checks", 0);
	if (v[0])
		printf("   note: the receiver reported %llu failed checks\n", (unsigned long long)v[0]);
}

/* the receiver: waits for the sender's DONE, then sends VERDICT (its failures since f0) */
static void receiver_sync(int dir, int phase, unsigned f0)
{
	uint64_t v[NV] = { 0 };
	msg_recv(TAG(T_DONE, dir, phase), NULL, "DONE (the sender's completions)", 0);
	v[0] = nfail - f0;
	msg_send(TAG(T_VERDICT, dir, phase), v);
}

/* ------------------------------------------------------------------ phases 1 and 2 */
static void phase_imm(int dir, int snd, int phase)
{
	const char *name = phase == 1 ? "SEND_WITH_IMM" : "RDMA_WRITE_WITH_IMM";
	unsigned f0 = nfail;
	uint8_t fill = fill_of(dir, phase);
	uint64_t v[NV] = { 0 };
	struct ibv_wc wc;
	char what[128];
	int i, n = opt.iters;

	printf("-- %s phase %d: %s x%d (this side: %s)\n", dname[dir], phase, name, n,
	       snd ? "sender" : "receiver");
	fflush(stdout);
	if (snd) {
		msg_recv(TAG(T_READY, dir, phase), v, "READY (the receiver posted its receives)", 0);
		for (i = 0; i < n; i++) {
			uint32_t sz = size_of(phase, i), off = phase == 2 ? off_of(i, sz) : 0;
			uint8_t *p = c.sbuf + (size_t)i * c.slot;
			put_pat(p, sz, dir, phase, i);
			post_send1((uint64_t)i, phase == 1 ? IBV_WR_SEND_WITH_IMM : IBV_WR_RDMA_WRITE_WITH_IMM,
				   p, sz, peer.waddr + (uint64_t)i * c.slot + off, peer.wrkey,
				   imm_of(dir, phase, i));
		}
		for (i = 0; i < n; i++) {
			snprintf(what, sizeof what, "%s phase %d: send completion %d/%d (%s, %u bytes)",
				 dname[dir], phase, i + 1, n, name, size_of(phase, i));
			poll_one(c.scq, &wc, what, 1);
			check(wc.wr_id == (uint64_t)i && wc.opcode == (phase == 1 ? IBV_WC_SEND : IBV_WC_RDMA_WRITE),
			      "%s: wr_id %llu opcode %d (out of order or wrong opcode)", what,
			      (unsigned long long)wc.wr_id, wc.opcode);
		}
		sender_sync(TAG(T_DONE, dir, phase), v, TAG(T_VERDICT, dir, phase));
	} else {
		memset(c.rbuf, fill, c.blen);
		memset(c.wbuf, fill, c.blen);
		for (i = 0; i < n; i++)
			post_recv1((uint64_t)i, c.rbuf + (size_t)i * c.slot, (uint32_t)c.slot);
		msg_send(TAG(T_READY, dir, phase), NULL);
		for (i = 0; i < n; i++) {
			uint32_t sz = size_of(phase, i), off = phase == 2 ? off_of(i, sz) : 0;
			uint8_t *base = (phase == 1 ? c.rbuf : c.wbuf) + (size_t)i * c.slot;
			snprintf(what, sizeof what, "%s phase %d: receive completion %d/%d (%s, %u bytes at +%u)",
				 dname[dir], phase, i + 1, n, name, sz, off);
			poll_one(c.rcq, &wc, what, 1);
			check(wc.wr_id == (uint64_t)i, "%s: wr_id %llu (completions out of order)", what,
			      (unsigned long long)wc.wr_id);
			check(wc.opcode == (phase == 1 ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM),
			      "%s: opcode %d, expected %d", what, wc.opcode,
			      phase == 1 ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM);
			check((wc.wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV)) == IBV_WC_WITH_IMM,
			      "%s: wc_flags 0x%x, expected WITH_IMM without WITH_INV", what, wc.wc_flags);
			check(ntohl(wc.imm_data) == imm_of(dir, phase, i), "%s: imm_data 0x%08x, expected 0x%08x",
			      what, ntohl(wc.imm_data), imm_of(dir, phase, i));
			check(wc.byte_len == sz, "%s: byte_len %u, expected %u", what, wc.byte_len, sz);
			chk_bytes(base + off, sz, dir, phase, i, 0, what, "data");
			chk_bytes(base, off, 0, 0, -1, fill, what, "bytes before the data (modified)");
			chk_bytes(base + off + sz, c.slot - off - sz, 0, 0, -1, fill, what,
				  "bytes after the data (modified)");
		}
		if (phase == 2)
			chk_bytes(c.rbuf, c.blen, 0, 0, -1, fill, "phase 2", "receive buffers (written by WRITE_WITH_IMM)");
		receiver_sync(dir, phase, f0);
	}
	printf("   %s phase %d: %s\n", dname[dir], phase, nfail == f0 ? "ok (this side)" : "FAILED (this side)");
}

/* ------------------------------------------------------------------ phase 3 */
static uint32_t inv_target(int *is_mw)
{
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc;
	int rc;

	errno = 0;
	c.mw = ibv_alloc_mw(c.pd, IBV_MW_TYPE_2);
	if (!c.mw) {
		int e = errno;
		c.imr = reg(c.ibuf, ILEN, rw, "invalidatable MR");
		printf("   inv target: separately registered MR, rkey 0x%08x (ibv_alloc_mw type 2: %s)\n",
		       c.imr->rkey, e ? strerror(e) : "failed");
		*is_mw = 0;
		return c.imr->rkey;
	}
	c.imr = reg(c.ibuf, ILEN, rw | IBV_ACCESS_MW_BIND, "MR under the memory window");
	wr = (struct ibv_send_wr){ .wr_id = 300, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
		.bind_mw = { .mw = c.mw, .rkey = ibv_inc_rkey(c.mw->rkey), .bind_info = { .mr = c.imr,
			.addr = (uintptr_t)c.ibuf, .length = ILEN, .mw_access_flags = IBV_ACCESS_REMOTE_WRITE } } };
	if ((rc = ibv_post_send(c.qp, &wr, &bad)) != 0)
		fatal("ibv_post_send(BIND_MW type 2): %s", strerror(rc));
	poll_one(c.scq, &wc, "the BIND_MW completion", 1);
	check(wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 300, "BIND_MW: opcode %d wr_id %llu",
	      wc.opcode, (unsigned long long)wc.wr_id);
	printf("   inv target: memory window type 2, rkey 0x%08x (over MR rkey 0x%08x)\n",
	       wr.bind_mw.rkey, c.imr->rkey);
	*is_mw = 1;
	return wr.bind_mw.rkey;
}

static void drain(struct ibv_cq *cq, const char *name, double quiet)
{
	double end = now() + quiet;
	struct ibv_wc wc;
	while (now() < end) {
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			fatal("ibv_poll_cq(%s) returned %d", name, n);
		if (n == 0) {
			nap();
			continue;
		}
		if (check(wc.status != IBV_WC_SUCCESS, "inv check: unexpected successful completion on the %s "
			  "(opcode %d, wr_id %llu)", name, wc.opcode, (unsigned long long)wc.wr_id))
			printf("   inv check: %s completion with status %s (accepted: the QP went to error)\n",
			       name, ibv_wc_status_str(wc.status));
	}
}

static void phase_inv(int dir, int snd, int last)
{
	const int phase = 3;
	uint32_t slen = ISEND < (uint32_t)opt.maxsz ? ISEND : (uint32_t)opt.maxsz;
	unsigned f0 = nfail;
	uint8_t fill = fill_of(dir, phase);
	uint64_t v[NV] = { 0 };
	struct ibv_wc wc;

	printf("-- %s phase 3: SEND_WITH_INV (this side: %s)%s\n", dname[dir], snd ? "sender" : "receiver",
	       last && opt.inv_check ? ", then RDMA WRITE to the invalidated rkey" : "");
	fflush(stdout);
	if (snd) {
		uint64_t raddr;
		uint32_t rkey;
		msg_recv(TAG(T_READY, dir, phase), v, "READY (the receiver's invalidatable rkey)", 0);
		raddr = v[0];
		rkey = (uint32_t)v[1];
		printf("   the receiver's inv target: %s, rkey 0x%08x\n",
		       v[3] ? "memory window type 2" : "memory region", rkey);
		put_pat(c.sbuf, IWLEN, dir, phase, 1);
		put_pat(c.sbuf + c.slot, slen, dir, phase, 0);
		post_send1(310, IBV_WR_RDMA_WRITE, c.sbuf, IWLEN, raddr + IWOFF, rkey, 0);
		post_send1(311, IBV_WR_SEND_WITH_INV, c.sbuf + c.slot, slen, 0, 0, rkey);
		poll_one(c.scq, &wc, "the completion of the RDMA WRITE through the rkey to invalidate", 1);
		check(wc.wr_id == 310 && wc.opcode == IBV_WC_RDMA_WRITE, "phase 3: RDMA WRITE completion: "
		      "wr_id %llu opcode %d", (unsigned long long)wc.wr_id, wc.opcode);
		poll_one(c.scq, &wc, "the SEND_WITH_INV completion", 1);
		check(wc.wr_id == 311 && wc.opcode == IBV_WC_SEND, "phase 3: SEND_WITH_INV completion: "
		      "wr_id %llu opcode %d", (unsigned long long)wc.wr_id, wc.opcode);
		sender_sync(TAG(T_DONE, dir, phase), v, TAG(T_VERDICT, dir, phase));
		if (last && opt.inv_check) {
			post_send1(312, IBV_WR_RDMA_WRITE, c.sbuf, 64, raddr, rkey, 0);
			poll_one(c.scq, &wc, "the completion of the RDMA WRITE to the invalidated rkey", 0);
			check(wc.status == IBV_WC_REM_ACCESS_ERR, "RDMA WRITE to the invalidated rkey 0x%08x "
			      "completed with %s (%d), expected remote access error", rkey,
			      ibv_wc_status_str(wc.status), wc.status);
			printf("   inv check: RDMA WRITE to the invalidated rkey: %s\n", ibv_wc_status_str(wc.status));
			v[0] = wc.status;
			sender_sync(TAG(T_INVDONE, dir, phase), v, TAG(T_FINAL, dir, phase));
		}
	} else {
		int is_mw;
		uint32_t rkey = inv_target(&is_mw);
		memset(c.ibuf, fill, ILEN);
		memset(c.rbuf, fill, c.slot);
		post_recv1(320, c.rbuf, (uint32_t)c.slot);
		v[0] = (uintptr_t)c.ibuf;
		v[1] = rkey;
		v[3] = (uint64_t)is_mw;
		msg_send(TAG(T_READY, dir, phase), v);
		poll_one(c.rcq, &wc, "the SEND_WITH_INV receive completion", 1);
		check(wc.wr_id == 320 && wc.opcode == IBV_WC_RECV, "SEND_WITH_INV receive: wr_id %llu opcode %d",
		      (unsigned long long)wc.wr_id, wc.opcode);
		if (opt.kernel_inv_flag && (wc.wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV | IBV_WC_IP_CSUM_OK)) ==
					       IBV_WC_IP_CSUM_OK) {
			/* Linux rxe (kernel 6.1) writes the kernel's IB_WC_WITH_INVALIDATE (1 << 2) into
			 * user-space completions, where libibverbs reads 1 << 2 as IBV_WC_IP_CSUM_OK */
			printf("   note: this device reported SEND_WITH_INV with wc_flags 0x%x (the kernel's "
			       "IB_WC_WITH_INVALIDATE bit, --kernel-inv-flag)\n", wc.wc_flags);
			check(1, "%s", "SEND_WITH_INV receive flags");
		} else {
			check((wc.wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV)) == IBV_WC_WITH_INV,
			      "SEND_WITH_INV receive: wc_flags 0x%x, expected WITH_INV without WITH_IMM", wc.wc_flags);
		}
		check(wc.invalidated_rkey == rkey, "SEND_WITH_INV receive: invalidated_rkey 0x%08x, expected 0x%08x",
		      wc.invalidated_rkey, rkey);
		check(wc.byte_len == slen, "SEND_WITH_INV receive: byte_len %u, expected %u", wc.byte_len, slen);
		chk_bytes(c.rbuf, slen, dir, phase, 0, 0, "SEND_WITH_INV receive", "data");
		chk_bytes(c.rbuf + slen, c.slot - slen, 0, 0, -1, fill, "SEND_WITH_INV receive",
			  "bytes after the data (modified)");
		chk_bytes(c.ibuf + IWOFF, IWLEN, dir, phase, 1, 0, "RDMA WRITE before invalidation", "data");
		chk_bytes(c.ibuf, IWOFF, 0, 0, -1, fill, "RDMA WRITE before invalidation", "bytes before (modified)");
		chk_bytes(c.ibuf + IWOFF + IWLEN, ILEN - IWOFF - IWLEN, 0, 0, -1, fill,
			  "RDMA WRITE before invalidation", "bytes after (modified)");
		receiver_sync(dir, phase, f0);
		if (last && opt.inv_check) {
			unsigned f1 = nfail;
			msg_recv(TAG(T_INVDONE, dir, phase), v, "INVDONE (the sender's WRITE to the invalidated rkey)", 0);
			printf("   inv check: the sender's WRITE to the invalidated rkey ended with %s\n",
			       ibv_wc_status_str((enum ibv_wc_status)v[0]));
			drain(c.rcq, "receive CQ", 1.0);
			drain(c.scq, "send CQ", 0.1);
			chk_bytes(c.ibuf, IWOFF, 0, 0, -1, fill, "inv check",
				  "the target of the WRITE to the invalidated rkey (modified)");
			v[0] = nfail - f1;
			msg_send(TAG(T_FINAL, dir, phase), v);
		}
	}
	printf("   %s phase 3: %s\n", dname[dir], nfail == f0 ? "ok (this side)" : "FAILED (this side)");
}

#define FREE(call) do { int rc_ = (call); if (rc_) check(0, "%s: %s", #call, strerror(rc_)); } while (0)
static void teardown(void)
{
	struct ibv_mr *mrs[] = { c.smr, c.rmr, c.wmr, c.imr };
	FREE(ibv_destroy_qp(c.qp));
	if (c.mw)
		FREE(ibv_dealloc_mw(c.mw));
	for (unsigned k = 0; k < 4; k++)
		if (mrs[k])
			FREE(ibv_dereg_mr(mrs[k]));
	FREE(ibv_destroy_cq(c.scq));
	FREE(ibv_destroy_cq(c.rcq));
	FREE(ibv_dealloc_pd(c.pd));
	FREE(ibv_close_device(c.ctx));
}

static void usage(const char *a0)
{
	fprintf(stderr, "usage: %s -d DEV -g GID_INDEX [-p TCP_PORT] [-m 256|512|1024|2048|4096] [-n ITERS]\n"
		"          [-s MAX_SIZE] [-u ACK_TIMEOUT] [-t SECONDS] [--no-inv-check] [--kernel-inv-flag]\n"
		"          [SERVER_HOST]\n", a0);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "no-inv-check", no_argument, NULL, 'N' },
					       { "kernel-inv-flag", no_argument, NULL, 'K' },
					       { NULL, 0, NULL, 0 } };
	int ch, is_client;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((ch = getopt_long(argc, argv, "d:g:p:m:n:s:u:t:h", lo, NULL)) != -1) {
		switch (ch) {
		case 'd': opt.dev = optarg; break;
		case 'g': opt.gidx = atoi(optarg); break;
		case 'p': opt.port = atoi(optarg); break;
		case 'm': opt.mtu = atoi(optarg); break;
		case 'n': opt.iters = atoi(optarg); break;
		case 's': opt.maxsz = atoi(optarg); break;
		case 'u': opt.tmo = atoi(optarg); break;
		case 't': opt.secs = atoi(optarg); break;
		case 'N': opt.inv_check = 0; break;
		case 'K': opt.kernel_inv_flag = 1; break;
		default: usage(argv[0]);
		}
	}
	if (optind < argc)
		opt.host = argv[optind++];
	if (optind < argc || !opt.dev || opt.gidx < 0 || opt.gidx > 255 || opt.port <= 0 || opt.port > 65535 ||
	    (opt.mtu != 256 && opt.mtu != 512 && opt.mtu != 1024 && opt.mtu != 2048 && opt.mtu != 4096) ||
	    opt.iters < 5 || opt.iters > 4096 || opt.maxsz < 2 || opt.maxsz > (1 << 24) ||
	    (double)opt.iters * opt.maxsz > 64.0 * 1024 * 1024 || opt.tmo < 0 || opt.tmo > 31 || opt.secs <= 0)
		usage(argv[0]);
	is_client = opt.host != NULL;
	deadline = now() + opt.secs;
	signal(SIGALRM, on_alarm);
	signal(SIGPIPE, SIG_IGN);
	alarm((unsigned)opt.secs + 15);
	printf("hm_imm_inv: %s, device %s, GID index %d, path MTU %d, %d iterations, max size %d, "
	       "ack timeout %d, deadline %d s, inv check %s\n", is_client ? "client" : "server", opt.dev,
	       opt.gidx, opt.mtu, opt.iters, opt.maxsz, opt.tmo, opt.secs, opt.inv_check ? "on" : "off");
	if (opt.maxsz <= opt.mtu)
		printf("warning: -s %d is not above the path MTU: no multi-packet messages\n", opt.maxsz);

	setup(is_client);
	exchange(is_client);
	connect_qp();
	for (int dir = 0; dir < 2; dir++) {
		int snd = (dir == 0) == is_client;
		printf("== direction %s: %s sends, this side (%s) is the %s\n", dname[dir],
		       dir == 0 ? "client" : "server", is_client ? "client" : "server", snd ? "sender" : "receiver");
		phase_imm(dir, snd, 1);
		phase_imm(dir, snd, 2);
		phase_inv(dir, snd, dir == 1);
	}
	teardown();
	close(sock);
	finish();
}
