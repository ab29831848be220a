/*
 * hm_common.h - shared helpers for the Hematite verbs test programs
 * (hm_nccl_replay, hm_verbs_errors, hm_verbs_ops).
 *
 * Everything here is static; functions a program does not use are marked
 * unused so that -Wall -Wextra -Werror stays quiet.
 *
 * Output conventions (parsed by harnesses):
 *   ok <name> [key=value ...]
 *   FAIL <name>: <details>
 *   TIMEOUT: <what was being waited for>          (exit status 3)
 *   summary: N passed, M failed                   (last line)
 * Exit status: 0 all checks passed, 1 a check failed, 2 usage/setup error,
 * 3 timeout.
 */
#ifndef HM_COMMON_H
#define HM_COMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <endian.h>

#include <infiniband/verbs.h>

#define HM_UNUSED __attribute__((unused))
#define HM_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ------------------------------------------------------------------ */
/* global options shared by all programs                               */

static int hm_timeout_s = 120;      /* -t: bound on every blocking step   */
static const char *hm_prog = "hm";  /* program name for messages          */
static int hm_npass;                /* checks passed                      */
static int hm_nfail;                /* checks failed                      */

/*
 * The options of the two-process programs (server: no HOST, client: HOST):
 * the head of their usage text (printf arguments: program name, default
 * port); hm_common_opt parses the letters.
 */
#define HM_USAGE_PAIR                                                        \
	"usage: %s [options] [HOST]\n"                                       \
	"  server: no HOST; client: HOST of the server (e.g. 127.0.0.1)\n"   \
	"  -d DEV     device name (default: first device)\n"                 \
	"  -g GIDX    GID index (default 0)\n"                               \
	"  -p PORT    TCP port (default %d)\n"                               \
	"  -t SECS    timeout of every blocking step (default 120)\n"

/* The option letters the programs share (getopt's c and optarg): -d DEV,
 * -t SECS, and -g GIDX / -p PORT where gidx / port is given.  Returns 0 for
 * any other letter. */
static HM_UNUSED int hm_common_opt(int c, const char **dev, int *gidx,
				   int *port)
{
	switch (c) {
	case 'd': *dev = optarg; return 1;
	case 't': hm_timeout_s = atoi(optarg); return 1;
	case 'g': if (!gidx) return 0; *gidx = atoi(optarg); return 1;
	case 'p': if (!port) return 0; *port = atoi(optarg); return 1;
	default: return 0;
	}
}

/* -o TIMEOUT (RTS's local ACK timeout code) and -r RETRY (its retry count)
 * of the programs that test retries; 0 for any other letter */
static HM_UNUSED int hm_retry_opt(int c, int *tcode, int *retry)
{
	switch (c) {
	case 'o': *tcode = atoi(optarg); return 1;
	case 'r': *retry = atoi(optarg); return 1;
	default: return 0;
	}
}

/* ------------------------------------------------------------------ */
/* time                                                                */

static HM_UNUSED uint64_t hm_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

/* absolute deadline (us) for one blocking step */
static HM_UNUSED uint64_t hm_deadline(void)
{
	return hm_now_us() + (uint64_t)hm_timeout_s * 1000000ull;
}

static HM_UNUSED void hm_sleep_us(unsigned us)
{
	struct timespec ts = { .tv_sec = us / 1000000,
			       .tv_nsec = (long)(us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------ */
/* check reporting                                                     */

static HM_UNUSED void hm_summary(void)
{
	int p = __atomic_load_n(&hm_npass, __ATOMIC_SEQ_CST);
	int f = __atomic_load_n(&hm_nfail, __ATOMIC_SEQ_CST);

	printf("summary: %d passed, %d failed\n", p, f);
	fflush(stdout);
}

/* ok: "ok <name> [extra]" (a NULL or empty format prints no extra);
 * else "FAIL <name>: <details>" (no details print "failed") */
static HM_UNUSED __attribute__((format(printf, 3, 0))) void
hm_vreport(int ok, const char *name, const char *fmt, va_list ap)
{
	char det[1024] = "";

	if (fmt && *fmt)
		vsnprintf(det, sizeof(det), fmt, ap);
	__atomic_add_fetch(ok ? &hm_npass : &hm_nfail, 1, __ATOMIC_SEQ_CST);
	if (ok)
		printf("ok %s%s%s\n", name, det[0] ? " " : "", det);
	else
		printf("FAIL %s: %s\n", name, det[0] ? det : "failed");
	fflush(stdout);
}

static HM_UNUSED HM_PRINTF(2, 3) void hm_ok(const char *name, const char *fmt,
					    ...)
{
	va_list ap;

	va_start(ap, fmt);
	hm_vreport(1, name, fmt, ap);
	va_end(ap);
}

static HM_UNUSED HM_PRINTF(2, 3) void hm_fail(const char *name,
					      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	hm_vreport(0, name, fmt, ap);
	va_end(ap);
}

/* pass/fail in one call; returns cond */
static HM_UNUSED HM_PRINTF(3, 4) int hm_check(int cond, const char *name,
					      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	hm_vreport(cond, name, fmt, ap);
	va_end(ap);
	return cond;
}

static HM_UNUSED HM_PRINTF(1, 2) void hm_info(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static HM_UNUSED int hm_exit_code(void)
{
	return __atomic_load_n(&hm_nfail, __ATOMIC_SEQ_CST) ? 1 : 0;
}

/* Fatal: report as a failed check, print the summary and exit 1. */
static HM_UNUSED __attribute__((noreturn)) HM_PRINTF(2, 3) void
hm_fatal(const char *name, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	hm_vreport(0, name, fmt, ap);
	va_end(ap);
	hm_summary();
	exit(1);
}

/* A bounded wait expired: "TIMEOUT: <what>", summary, exit 3. */
static HM_UNUSED __attribute__((noreturn)) HM_PRINTF(1, 2) void
hm_timeout(const char *fmt, ...)
{
	char what[1024] = "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	printf("TIMEOUT: %s\n", what);
	__atomic_add_fetch(&hm_nfail, 1, __ATOMIC_SEQ_CST);
	hm_summary();
	exit(3);
}

/*
 * Watchdog: the programs mark each step (hm_step) and every polling loop
 * refreshes the mark.  A verbs call that blocks for longer than the timeout
 * (a hung ibv_open_device, ibv_destroy_qp, ibv_poll_cq ...) is reported as
 * "TIMEOUT: <step>" with exit status 3, like any other bounded wait.
 */
static char hm_step_what[160] = "start";
static uint64_t hm_step_us;
/* called by the watchdog after its TIMEOUT line (a program's state dump, for the
 * diagnosis); it may block on the very call that hung: SIGALRM ends it after 30 s */
static void (*hm_on_timeout)(void);

static HM_UNUSED void hm_step(const char *what)
{
	if (what != hm_step_what)
		snprintf(hm_step_what, sizeof(hm_step_what), "%s", what);
	__atomic_store_n(&hm_step_us, hm_now_us(), __ATOMIC_RELEASE);
}

static void *hm_watchdog(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t t = __atomic_load_n(&hm_step_us, __ATOMIC_ACQUIRE);
		uint64_t lim = (uint64_t)hm_timeout_s * 1000000ull + 3000000ull;

		if (t && hm_now_us() > t + lim) {
			char buf[512];
			int n = snprintf(buf, sizeof(buf),
					 "TIMEOUT: %s (blocked for more than %d s)\n"
					 "summary: %d passed, %d failed\n",
					 hm_step_what, hm_timeout_s,
					 __atomic_load_n(&hm_npass, __ATOMIC_SEQ_CST),
					 __atomic_load_n(&hm_nfail, __ATOMIC_SEQ_CST) + 1);

			if (write(STDOUT_FILENO, buf, (size_t)n) < 0)
				_exit(3);
			if (hm_on_timeout) {
				alarm(30);
				hm_on_timeout();
				fflush(stdout);
			}
			_exit(3);
		}
		hm_sleep_us(500000);
	}
	return NULL;
}

static HM_UNUSED void hm_start_watchdog(void)
{
	pthread_t t;

	hm_step("start");
	if (pthread_create(&t, NULL, hm_watchdog, NULL) == 0)
		pthread_detach(t);
}

/* name of an errno value, for messages ("EINVAL" rather than 22) */
static HM_UNUSED const char *hm_errname(int e)
{
	switch (e) {
	case 0: return "0";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case EINTR: return "EINTR";
	case EIO: return "EIO";
	case ENXIO: return "ENXIO";
	case E2BIG: return "E2BIG";
	case EBADF: return "EBADF";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EFAULT: return "EFAULT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENODEV: return "ENODEV";
	case EINVAL: return "EINVAL";
	case ENFILE: return "ENFILE";
	case EMFILE: return "EMFILE";
	case ENOTTY: return "ENOTTY";
	case ENOSPC: return "ENOSPC";
	case ERANGE: return "ERANGE";
	case ENOSYS: return "ENOSYS";
	case ENODATA: return "ENODATA";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECONNRESET: return "ECONNRESET";
	default: {
		static __thread char buf[32];

		snprintf(buf, sizeof(buf), "errno%d", e);
		return buf;
	}
	}
}

/* ------------------------------------------------------------------ */
/* TCP side channel                                                    */

static HM_UNUSED void hm_set_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Server: listen on port, accept one peer within the timeout. */
static HM_UNUSED int hm_tcp_accept(int port)
{
	struct sockaddr_in6 a6;
	struct sockaddr_in a4;
	int one = 1, lfd, fd;
	uint64_t dl;

	lfd = socket(AF_INET6, SOCK_STREAM, 0);
	if (lfd >= 0) {
		int zero = 0;

		setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		memset(&a6, 0, sizeof(a6));
		a6.sin6_family = AF_INET6;
		a6.sin6_addr = in6addr_any;
		a6.sin6_port = htons((uint16_t)port);
		if (bind(lfd, (struct sockaddr *)&a6, sizeof(a6)) < 0) {
			close(lfd);
			lfd = -1;
		}
	}
	if (lfd < 0) {
		lfd = socket(AF_INET, SOCK_STREAM, 0);
		if (lfd < 0)
			hm_fatal("tcp_listen", "socket: %s", strerror(errno));
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		memset(&a4, 0, sizeof(a4));
		a4.sin_family = AF_INET;
		a4.sin_addr.s_addr = htonl(INADDR_ANY);
		a4.sin_port = htons((uint16_t)port);
		if (bind(lfd, (struct sockaddr *)&a4, sizeof(a4)) < 0)
			hm_fatal("tcp_listen", "bind port %d: %s", port,
				 strerror(errno));
	}
	if (listen(lfd, 1) < 0)
		hm_fatal("tcp_listen", "listen: %s", strerror(errno));
	hm_info("%s: waiting for client on port %d", hm_prog, port);

	dl = hm_deadline();
	for (;;) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		uint64_t now = hm_now_us();
		int r;

		hm_step("tcp accept");

		if (now >= dl)
			hm_timeout("client connection on tcp port %d", port);
		r = poll(&p, 1, (int)((dl - now) / 1000) + 1);
		if (r < 0 && errno != EINTR)
			hm_fatal("tcp_accept", "poll: %s", strerror(errno));
		if (r > 0)
			break;
	}
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		hm_fatal("tcp_accept", "accept: %s", strerror(errno));
	close(lfd);
	hm_set_nodelay(fd);
	return fd;
}

/* Client: connect to host:port, retrying for up to 60 s. */
static HM_UNUSED int hm_tcp_connect(const char *host, int port)
{
	uint64_t dl = hm_now_us() + 60ull * 1000000ull;
	char ports[16];
	int last_err = 0;

	snprintf(ports, sizeof(ports), "%d", port);
	for (;;) {
		struct addrinfo hints, *res = NULL, *ai;
		int r;

		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		hm_step("tcp connect");
		r = getaddrinfo(host, ports, &hints, &res);
		if (r)
			hm_fatal("tcp_connect", "getaddrinfo %s: %s", host,
				 gai_strerror(r));
		for (ai = res; ai; ai = ai->ai_next) {
			int fd = socket(ai->ai_family, ai->ai_socktype,
					ai->ai_protocol);

			if (fd < 0)
				continue;
			if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
				freeaddrinfo(res);
				hm_set_nodelay(fd);
				return fd;
			}
			last_err = errno;
			close(fd);
		}
		freeaddrinfo(res);
		if (hm_now_us() >= dl)
			hm_timeout("tcp connect to %s:%d (last error %s)", host,
				   port, strerror(last_err));
		hm_sleep_us(200000);
	}
}

/* Send (out) or receive len bytes over the side channel, each wait bounded
 * by the timeout; a receive that finds the connection closed is fatal. */
static HM_UNUSED void hm_tcp_io(int fd, char *p, size_t len, int out,
				const char *what)
{
	uint64_t dl = hm_deadline();

	while (len) {
		struct pollfd pf = { .fd = fd, .events = out ? POLLOUT : POLLIN };
		uint64_t now = hm_now_us();
		ssize_t n;
		int r;

		hm_step(what);
		if (now >= dl) {
			if (out)
				hm_timeout("tcp send of %s", what);
			hm_timeout("peer message: %s", what);
		}
		r = poll(&pf, 1, (int)((dl - now) / 1000) + 1);
		if (r < 0 && errno != EINTR)
			hm_fatal("tcp", "poll while %s %s: %s",
				 out ? "sending" : "waiting for", what,
				 strerror(errno));
		if (r <= 0)
			continue;
		n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n == 0 && !out)
			hm_fatal("tcp", "peer closed the connection while we "
				 "waited for %s", what);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			hm_fatal("tcp", "%s %s: %s", out ? "send" : "recv",
				 what, strerror(errno));
		}
		p += n;
		len -= (size_t)n;
	}
}

static HM_UNUSED void hm_tcp_send(int fd, const void *buf, size_t len,
				  const char *what)
{
	hm_tcp_io(fd, (char *)(uintptr_t)buf, len, 1, what);
}

static HM_UNUSED void hm_tcp_recv(int fd, void *buf, size_t len,
				  const char *what)
{
	hm_tcp_io(fd, buf, len, 0, what);
}

/* Small control message used for lock-step phases. */
struct hm_ctl {
	uint32_t tag;    /* phase identifier, both sides must agree */
	uint32_t status; /* 0 = fine, else failure/skip code        */
	uint64_t value;  /* free use                                */
};

static HM_UNUSED void hm_ctl_send(int fd, uint32_t tag, uint32_t status,
				  uint64_t value)
{
	struct hm_ctl m = { htonl(tag), htonl(status), htobe64(value) };

	hm_tcp_send(fd, &m, sizeof(m), "control message");
}

/* Receive a control message; a tag mismatch means the two sides lost step. */
static HM_UNUSED struct hm_ctl hm_ctl_recv(int fd, uint32_t tag,
					   const char *what)
{
	struct hm_ctl m;

	hm_tcp_recv(fd, &m, sizeof(m), what);
	m.tag = ntohl(m.tag);
	m.status = ntohl(m.status);
	m.value = be64toh(m.value);
	if (m.tag != tag)
		hm_fatal("tcp_sync", "waiting for %s: got phase tag 0x%x, "
			 "expected 0x%x (peer out of step)", what, m.tag, tag);
	return m;
}

/* Both sides call this; returns when the peer reached the same point. */
static HM_UNUSED void hm_barrier(int fd, uint32_t tag, const char *what)
{
	hm_ctl_send(fd, tag, 0, 0);
	(void)hm_ctl_recv(fd, tag, what);
}

/*
 * Swap the connection info of the two sides (len bytes each way): the
 * client (host given) connects and sends first; the server announces
 * "# <prog>: waiting for client on port N", accepts and answers.  Returns
 * the side channel.
 */
static HM_UNUSED int hm_exchange_info(const char *host, int port,
				      const void *me, void *peer, size_t len)
{
	int fd;

	if (host) {
		fd = hm_tcp_connect(host, port);
		hm_tcp_send(fd, me, len, "info");
		hm_tcp_recv(fd, peer, len, "peer info");
	} else {
		printf("# %s: waiting for client on port %d\n", hm_prog, port);
		fflush(stdout);
		fd = hm_tcp_accept(port);
		hm_tcp_recv(fd, peer, len, "peer info");
		hm_tcp_send(fd, me, len, "info");
	}
	return fd;
}

/* ------------------------------------------------------------------ */
/* verbs helpers                                                       */

static HM_UNUSED const char *hm_gid_str(const union ibv_gid *g, char *buf,
					size_t len)
{
	if (!inet_ntop(AF_INET6, g->raw, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

static HM_UNUSED int hm_gid_is_zero(const union ibv_gid *g)
{
	static const uint8_t z[16];

	return memcmp(g->raw, z, 16) == 0;
}

static HM_UNUSED int hm_mtu_bytes(enum ibv_mtu m)
{
	switch (m) {
	case IBV_MTU_256: return 256;
	case IBV_MTU_512: return 512;
	case IBV_MTU_1024: return 1024;
	case IBV_MTU_2048: return 2048;
	case IBV_MTU_4096: return 4096;
	default: return 0;
	}
}

/*
 * Find and open the device (-d name, default the first one).  The device
 * list stays allocated (the ibv_device must outlive the context).
 */
static HM_UNUSED struct ibv_context *hm_open_device(const char *name,
						    struct ibv_device ***list_out)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_device *dev = NULL;
	int n = 0, i;

	hm_step("ibv_get_device_list");
	list = ibv_get_device_list(&n);
	if (!list)
		hm_fatal("get_device_list", "ibv_get_device_list: %s",
			 strerror(errno));
	if (n == 0)
		hm_fatal("get_device_list", "no RDMA devices found");
	for (i = 0; i < n; i++) {
		if (!name || strcmp(ibv_get_device_name(list[i]), name) == 0) {
			dev = list[i];
			break;
		}
	}
	if (!dev)
		hm_fatal("get_device_list", "device %s not found (%d devices)",
			 name, n);
	hm_step("ibv_open_device");
	ctx = ibv_open_device(dev);
	if (!ctx)
		hm_fatal("open_device", "ibv_open_device(%s): %s",
			 ibv_get_device_name(dev), strerror(errno));
	if (list_out)
		*list_out = list;
	else
		ibv_free_device_list(list);
	return ctx;
}

/* A teardown call: the watchdog's step, then the call, checked to return 0
 * ("ok <name> rc=0" or "FAIL <name>: rc=N"). */
#define HM_TEARDOWN(step, name, call)                                        \
	do {                                                                 \
		int hm_rc_;                                                  \
									     \
		hm_step(step);                                               \
		hm_rc_ = (call);                                             \
		hm_check(hm_rc_ == 0, name, "rc=%d", hm_rc_);                \
	} while (0)

/* Stop the async event thread (hm_start_async), close the device (a
 * check) and free its list. */
static HM_UNUSED void hm_close_device(pthread_t athr, struct ibv_context *ctx,
				      struct ibv_device **list)
{
	hm_step("stopping the async event thread");
	pthread_cancel(athr);
	pthread_join(athr, NULL);
	HM_TEARDOWN("ibv_close_device", "close_device", ibv_close_device(ctx));
	ibv_free_device_list(list);
}

/*
 * The async event thread: every event goes to on_event (with cancellation
 * disabled) and is then acked.  It ends when ibv_get_async_event fails,
 * reported as FAIL async_event if report_failure.  One per program.
 */
static struct {
	struct ibv_context *ctx;
	void (*on_event)(const struct ibv_async_event *);
	int report_failure;
} hm_async;

static HM_UNUSED void *hm_async_thread(void *arg)
{
	(void)arg;
	for (;;) {
		struct ibv_async_event ev;
		int old;

		if (ibv_get_async_event(hm_async.ctx, &ev)) {
			if (errno == EINTR)
				continue;
			if (hm_async.report_failure) {
				pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
				hm_fail("async_event", "ibv_get_async_event "
					"failed: %s", strerror(errno));
				pthread_setcancelstate(old, NULL);
			}
			return NULL;
		}
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
		hm_async.on_event(&ev);
		ibv_ack_async_event(&ev);
		pthread_setcancelstate(old, NULL);
	}
}

static HM_UNUSED pthread_t
hm_start_async(struct ibv_context *ctx,
	       void (*on_event)(const struct ibv_async_event *),
	       int report_failure)
{
	pthread_t t;

	hm_async.ctx = ctx;
	hm_async.on_event = on_event;
	hm_async.report_failure = report_failure;
	if (pthread_create(&t, NULL, hm_async_thread, NULL))
		hm_fatal("async_thread", "pthread_create failed");
	return t;
}

/* ibv_create_qp attributes: the CQs, the type and the capabilities asked
 * for; no SRQ, no qp_context, sq_sig_all 0 */
static HM_UNUSED struct ibv_qp_init_attr
hm_qp_attr(struct ibv_cq *scq, struct ibv_cq *rcq, enum ibv_qp_type type,
	   uint32_t send_wr, uint32_t recv_wr, uint32_t send_sge,
	   uint32_t recv_sge, uint32_t inline_data)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.cap.max_send_wr = send_wr;
	ia.cap.max_recv_wr = recv_wr;
	ia.cap.max_send_sge = send_sge;
	ia.cap.max_recv_sge = recv_sge;
	ia.cap.max_inline_data = inline_data;
	ia.qp_type = type;
	return ia;
}

/* RESET -> INIT on port 1 */
static HM_UNUSED int hm_qp_init(struct ibv_qp *qp, unsigned access)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = access;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS);
}

struct hm_rtr_args {
	enum ibv_mtu mtu;
	uint32_t dest_qpn;
	uint32_t rq_psn;
	union ibv_gid dgid;
	int sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t min_rnr_timer;
	uint8_t max_dest_rd_atomic;
};

/* RTR arguments towards the peer's QP dest_qpn (its first PSN rq_psn, its
 * GID dgid) from GID index sgid_index; hop limit 64 and min RNR timer 12,
 * which a caller may change before hm_qp_rtr */
static HM_UNUSED struct hm_rtr_args
hm_rtr_to(enum ibv_mtu mtu, uint32_t dest_qpn, uint32_t rq_psn,
	  const union ibv_gid *dgid, int sgid_index, uint8_t max_dest_rd_atomic)
{
	struct hm_rtr_args r;

	memset(&r, 0, sizeof(r));
	r.mtu = mtu;
	r.dest_qpn = dest_qpn;
	r.rq_psn = rq_psn;
	r.dgid = *dgid;
	r.sgid_index = sgid_index;
	r.hop_limit = 64;
	r.min_rnr_timer = 12;
	r.max_dest_rd_atomic = max_dest_rd_atomic;
	return r;
}

/* the INIT -> RTR attributes of r (RoCEv2 style: GRH always present) */
static HM_UNUSED void hm_rtr_attr(const struct hm_rtr_args *r, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = r->mtu;
	a->dest_qp_num = r->dest_qpn;
	a->rq_psn = r->rq_psn;
	a->max_dest_rd_atomic = r->max_dest_rd_atomic;
	a->min_rnr_timer = r->min_rnr_timer;
	a->ah_attr.is_global = 1;
	a->ah_attr.grh.dgid = r->dgid;
	a->ah_attr.grh.sgid_index = (uint8_t)r->sgid_index;
	a->ah_attr.grh.hop_limit = r->hop_limit;
	a->ah_attr.grh.traffic_class = r->traffic_class;
	a->ah_attr.port_num = 1;
}

/* INIT -> RTR of an RC QP */
static HM_UNUSED int hm_qp_rtr(struct ibv_qp *qp, const struct hm_rtr_args *r)
{
	struct ibv_qp_attr a;

	hm_rtr_attr(r, &a);
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER);
}

/* INIT -> RTR of a UC QP: UC's required attributes only (AV, PATH_MTU, DEST_QPN, RQ_PSN;
 * r->min_rnr_timer and r->max_dest_rd_atomic are not UC attributes and are not sent) */
static HM_UNUSED int hm_qp_rtr_uc(struct ibv_qp *qp, const struct hm_rtr_args *r)
{
	struct ibv_qp_attr a;

	hm_rtr_attr(r, &a);
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
}

/* RTR -> RTS of a UC QP: SQ_PSN only */
static HM_UNUSED int hm_qp_rts_uc(struct ibv_qp *qp, uint32_t sq_psn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* RTR -> RTS */
static HM_UNUSED int hm_qp_rts(struct ibv_qp *qp, uint32_t sq_psn,
			       uint8_t timeout, uint8_t retry_cnt,
			       uint8_t rnr_retry, uint8_t max_rd_atomic)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = rnr_retry;
	a.max_rd_atomic = max_rd_atomic;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

static HM_UNUSED const char *hm_qp_state_str(enum ibv_qp_state s)
{
	switch (s) {
	case IBV_QPS_RESET: return "RESET";
	case IBV_QPS_INIT: return "INIT";
	case IBV_QPS_RTR: return "RTR";
	case IBV_QPS_RTS: return "RTS";
	case IBV_QPS_SQD: return "SQD";
	case IBV_QPS_SQE: return "SQE";
	case IBV_QPS_ERR: return "ERR";
	default: return "UNKNOWN";
	}
}

static HM_UNUSED int hm_query_qp_state(struct ibv_qp *qp,
				       enum ibv_qp_state *st)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int rc;

	memset(&a, 0, sizeof(a));
	memset(&ia, 0, sizeof(ia));
	rc = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
	if (!rc)
		*st = a.qp_state;
	return rc;
}

/*
 * Busy-poll a CQ until at least one completion arrives (then up to max are
 * returned).  After a few empty polls it sleeps briefly between polls: the
 * simulated device is slow, hardware is fast.  Times out with exit 3.
 */
static HM_UNUSED int hm_poll_cq_wait(struct ibv_cq *cq, struct ibv_wc *wc,
				     int max, const char *what)
{
	uint64_t dl = hm_deadline();
	unsigned empty = 0;

	hm_step(what);
	for (;;) {
		int n;

		hm_step(hm_step_what);
		n = ibv_poll_cq(cq, max, wc);

		if (n < 0)
			hm_fatal("poll_cq", "ibv_poll_cq returned %d while "
				 "waiting for %s", n, what);
		if (n > 0)
			return n;
		if (++empty > 32) {
			if (hm_now_us() >= dl)
				hm_timeout("completion: %s", what);
			hm_sleep_us(50);
		}
	}
}

/* Post one send WR chain and wait for a completion on cq (into wc); a
 * refused post is fatal: "FAIL post_send: <post_what>: <errno text>". */
static HM_UNUSED void hm_post_wait(struct ibv_qp *qp, struct ibv_send_wr *wr,
				   struct ibv_cq *cq, struct ibv_wc *wc,
				   const char *post_what, const char *what)
{
	struct ibv_send_wr *bad;

	if (ibv_post_send(qp, wr, &bad))
		hm_fatal("post_send", "%s: %s", post_what, strerror(errno));
	hm_poll_cq_wait(cq, wc, 1, what);
}

/* a signaled send WR: wr_id, opcode and the SGE list (sg may be NULL) */
static HM_UNUSED struct ibv_send_wr hm_send_wr(uint64_t wr_id,
					       enum ibv_wr_opcode op,
					       struct ibv_sge *sg, int num_sge)
{
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = sg,
				  .num_sge = num_sge, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED };

	return wr;
}

/* One ibv_poll_cq for up to max CQEs, marked as the watchdog's step what
 * (if given); a poll error is fatal: "FAIL poll_cq: ibv_poll_cq returned N" */
static HM_UNUSED int hm_poll_cq(struct ibv_cq *cq, int max, struct ibv_wc *wc,
				const char *what)
{
	int n;

	if (what)
		hm_step(what);
	n = ibv_poll_cq(cq, max, wc);
	if (n < 0)
		hm_fatal("poll_cq", "ibv_poll_cq returned %d", n);
	return n;
}

/* Poll for a quiet period and return how many CQEs (unexpected) showed up. */
static HM_UNUSED int hm_poll_cq_quiet(struct ibv_cq *cq, unsigned quiet_us,
				      struct ibv_wc *first)
{
	uint64_t end = hm_now_us() + quiet_us;
	int total = 0;

	while (hm_now_us() < end) {
		struct ibv_wc wc;
		int n;

		hm_step("ibv_poll_cq (quiet period)");
		n = ibv_poll_cq(cq, 1, &wc);

		if (n > 0) {
			if (!total && first)
				*first = wc;
			total += n;
		} else if (n < 0) {
			return -1;
		} else {
			hm_sleep_us(200);
		}
	}
	return total;
}

/* bytes that differ between p and q over n */
static HM_UNUSED size_t hm_differ(const uint8_t *p, const uint8_t *q, size_t n)
{
	size_t d = 0;
	for (size_t i = 0; i < n; i++)
		d += p[i] != q[i];
	return d;
}

/* bytes of p that are not v over n */
static HM_UNUSED size_t hm_not_fill(const uint8_t *p, uint8_t v, size_t n)
{
	size_t d = 0;
	for (size_t i = 0; i < n; i++)
		d += p[i] != v;
	return d;
}

/* a work completion status (an int, as the programs keep them) as text */
static HM_UNUSED const char *hm_wc_str(int s)
{
	return ibv_wc_status_str((enum ibv_wc_status)s);
}

static HM_UNUSED void *hm_alloc_pages(size_t len)
{
	void *p = NULL;
	long pg = sysconf(_SC_PAGESIZE);
	size_t sz = (len + (size_t)pg - 1) & ~((size_t)pg - 1);

	if (sz == 0)
		sz = (size_t)pg;
	if (posix_memalign(&p, (size_t)pg, sz))
		hm_fatal("alloc", "posix_memalign(%zu): out of memory", sz);
	memset(p, 0, sz);
	return p;
}

static HM_UNUSED size_t hm_page_round(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	len = (len + pg - 1) & ~(pg - 1);
	return len ? len : pg;
}

static HM_UNUSED uint32_t hm_rand_psn(void)
{
	return (uint32_t)lrand48() & 0xffffff;
}

static HM_UNUSED void hm_init_common(const char *prog)
{
	const char *s = strrchr(prog, '/');

	hm_prog = s ? s + 1 : prog;
	setvbuf(stdout, NULL, _IOLBF, 0);
	hm_start_watchdog();
	signal(SIGPIPE, SIG_IGN);
	srand48((long)getpid() ^ (long)hm_now_us());
}

/* The start of a one-NIC program that loops QPs through the port: options -d DEV and -t
 * SECS (usage on anything else: exit 2; hm_init_common starts the watchdog, which reads -t
 * as it goes), the device opened, port 1's attributes and GID 0. */
static HM_UNUSED struct ibv_context *hm_loopback_start(const char *prog, int argc, char **argv,
						     struct ibv_port_attr *pa, union ibv_gid *gid)
{
	const char *dev = "hematite0";
	struct ibv_context *ctx;
	int c;

	hm_init_common(prog);
	while ((c = getopt(argc, argv, "d:t:")) != -1) {
		if (!hm_common_opt(c, &dev, NULL, NULL)) {
			fprintf(stderr, "usage: %s [-d DEV] [-t SECS]\n", prog);
			exit(2);
		}
	}
	ctx = hm_open_device(dev, NULL);
	if (ibv_query_port(ctx, 1, pa) || ibv_query_gid(ctx, 1, 0, gid))
		hm_fatal("query_port", "ibv_query_port / ibv_query_gid failed");
	return ctx;
}

#endif /* HM_COMMON_H */
