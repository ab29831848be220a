/* hm_peer_loss: a peer that disappears mid-run. The server connects an RC QP, says
 * "connected" and then only sleeps (the harness kills it with SIGKILL; its NIC resets and
 * forgets the QP). The client keeps RDMA WRITEs in flight; once the peer is gone it must see
 * an error completion with IBV_WC_RETRY_EXC_ERR, the WRs behind it flushed
 * (IBV_WC_WR_FLUSH_ERR), the QP in ERR, and a QP-fatal asynchronous event: no hang (every wait
 * is bounded by -t).
 *
 *   server: hm_peer_loss -d DEV [-p PORT]
 *   client: hm_peer_loss -d DEV [-p PORT] [-o TIMEOUT_CODE] [-r RETRY] HOST
 *
 * The client uses a short local ACK timeout (code 8: 1 ms) so that the retries run out in
 * seconds of simulated time. */
#include "hm_common.h"

#include <signal.h>

struct info {
	uint32_t qpn, psn, rkey, pad;
	uint64_t addr;
	union ibv_gid gid;
};

int main(int argc, char **argv)
{
	const char *dev = NULL, *host = NULL;
	int port = 18519, gidx = 0, tcode = 8, retry = 3, c;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_port_attr pa;
	struct info me, peer;
	struct hm_rtr_args r;
	size_t len = 1 << 20;
	char *buf;
	int fd;

	hm_init_common("hm_peer_loss");
	while ((c = getopt(argc, argv, "d:g:p:t:o:r:")) != -1) {
		if (!hm_common_opt(c, &dev, &gidx, &port) && !hm_retry_opt(c, &tcode, &retry)) {
			fprintf(stderr, "usage: hm_peer_loss [-d DEV] [-g GIDX] [-p PORT] [-t SECS] [-o TIMEOUT] [-r RETRY] [HOST]\n");
			return 2;
		}
	}
	if (optind < argc)
		host = argv[optind];
	hm_start_watchdog();

	ctx = hm_open_device(dev, NULL);
	if (ibv_query_port(ctx, 1, &pa))
		hm_fatal("query_port", "ibv_query_port failed");
	pd = ibv_alloc_pd(ctx);
	buf = hm_alloc_pages(len);
	mr = pd ? ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	if (!pd || !mr || !cq)
		hm_fatal("setup", "PD/MR/CQ: %s", strerror(errno));
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	qp = ibv_create_qp(pd, &qa);
	if (!qp)
		hm_fatal("create_qp", "ibv_create_qp: %s", strerror(errno));
	memset(&me, 0, sizeof(me));
	me.qpn = qp->qp_num;
	me.psn = hm_rand_psn();
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	if (ibv_query_gid(ctx, 1, gidx, &me.gid))
		hm_fatal("query_gid", "ibv_query_gid failed");

	fd = hm_exchange_info(host, port, &me, &peer, sizeof(me));
	r = hm_rtr_to(pa.active_mtu, peer.qpn, peer.psn, &peer.gid, gidx, 1);
	if (hm_qp_init(qp, IBV_ACCESS_REMOTE_WRITE) || hm_qp_rtr(qp, &r) ||
	    hm_qp_rts(qp, me.psn, (uint8_t)tcode, (uint8_t)retry, 7, 1))
		hm_fatal("connect", "INIT/RTR/RTS: %s", strerror(errno));
	hm_barrier(fd, 1, "both connected");

	if (!host) {
		printf("# hm_peer_loss: connected; waiting to be killed\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	printf("# hm_peer_loss: connected; writing until the peer is gone\n");
	fflush(stdout);

	/* keep up to 16 signaled 64 KiB WRITEs in flight until one fails */
	uint64_t posted = 0, done = 0, okc = 0;
	int first_err = -1, flushed = 0, after = 0;
	struct ibv_wc wc[16];
	uint64_t dl = hm_deadline();
	while (first_err < 0) {
		while (posted - done < 16) {
			struct ibv_sge s = { .addr = (uintptr_t)buf, .length = 65536, .lkey = mr->lkey };
			struct ibv_send_wr w = { .wr_id = posted, .sg_list = &s, .num_sge = 1,
						 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED };
			struct ibv_send_wr *bad;
			w.wr.rdma.remote_addr = peer.addr + (posted % 16) * 65536;
			w.wr.rdma.rkey = peer.rkey;
			if (ibv_post_send(qp, &w, &bad))
				hm_fatal("post_send", "ibv_post_send: %s", strerror(errno));
			posted++;
		}
		int n = hm_poll_cq(cq, 16, wc, NULL);
		for (int i = 0; i < n; i++, done++) {
			if (wc[i].status == IBV_WC_SUCCESS) {
				okc++;
			} else if (first_err < 0) {
				first_err = wc[i].status;
			} else {
				after++;
				flushed += wc[i].status == IBV_WC_WR_FLUSH_ERR;
			}
		}
		if (n == 0)
			hm_sleep_us(200);
		if (hm_now_us() > dl)
			hm_timeout("an error completion after the peer went away (%llu WRITEs completed)",
				   (unsigned long long)okc);
	}
	hm_check(okc > 0, "writes_before_loss", "%llu WRITEs completed before the peer went away", (unsigned long long)okc);
	hm_check(first_err == IBV_WC_RETRY_EXC_ERR, "retry_exceeded", "first error completion: %s (%d)",
		 ibv_wc_status_str(first_err), first_err);
	/* the rest of what was posted is flushed */
	while (done < posted) {
		int n = hm_poll_cq_wait(cq, wc, 16, "flushed completions");
		for (int i = 0; i < n; i++, done++) {
			after++;
			flushed += wc[i].status == IBV_WC_WR_FLUSH_ERR;
		}
	}
	hm_check(flushed == after, "flushed", "%d of the %d WRs behind the failed one completed with WR_FLUSH_ERR", flushed, after);
	enum ibv_qp_state st = IBV_QPS_RESET;
	hm_check(hm_query_qp_state(qp, &st) == 0 && st == IBV_QPS_ERR, "qp_err", "QP state after the failure: %s",
		 hm_qp_state_str(st));
	struct ibv_async_event ev;
	int fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	int got = -1;
	for (int i = 0; i < 200 && got < 0; i++) {
		if (ibv_get_async_event(ctx, &ev) == 0) {
			got = ev.event_type;
			ibv_ack_async_event(&ev);
		} else {
			hm_sleep_us(10000);
		}
	}
	hm_check(got == IBV_EVENT_QP_FATAL, "qp_fatal_event", "asynchronous event: %s",
		 got < 0 ? "none" : ibv_event_type_str(got));
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		hm_fail("teardown", "a destroy failed: %s", strerror(errno));
	else
		hm_ok("teardown", "all objects destroyed");
	hm_summary();
	return hm_exit_code();
}
