/* hm_dev_fatal: the device process of a NIC dies mid-transfer (the harness SIGKILLs it).
 *
 * One process opens both NICs: -a (default hematite0, the target, stays alive) and -d
 * (default hematite1, the one that is killed). An RC QP on -d keeps signaled 64 KiB RDMA
 * WRITEs in flight to a QP on -a, and 8 receives are posted on it that nothing consumes. Once
 * 16 WRITEs completed it prints "writing until the device fails" (the harness kills the device
 * process then). It must see, each wait bounded by -t seconds:
 *   - IBV_EVENT_DEVICE_FATAL on the async event fd of -d (ibv_get_async_event);
 *   - every WR completed exactly once: the WRITEs with SUCCESS until the failure, the rest and
 *     the 8 receives with IBV_WC_WR_FLUSH_ERR (wr_id and qp_num checked), then an empty CQ;
 *   - post_send, post_recv failing with EIO (bad_wr set), alloc_pd, reg_mr, create_cq,
 *     create_qp failing with EIO, modify_qp failing;
 *   - every object of -d destroyed with success and the device closed;
 *   - the other NIC still answering (a PD and an MR there).
 *
 *   hm_dev_fatal [-a DEV] [-d DEV] [-t SECS]
 */
#include "hm_common.h"

#define NRECV 8
#define DEPTH 16
#define MSG 65536

int main(int argc, char **argv)
{
	const char *alive = "hematite0", *victim = "hematite1";
	int c;

	hm_init_common("hm_dev_fatal");
	while ((c = getopt(argc, argv, "a:d:t:")) != -1) {
		switch (c) {
		case 'a': alive = optarg; break;
		case 'd': victim = optarg; break;
		case 't': hm_timeout_s = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: hm_dev_fatal [-a DEV] [-d DEV] [-t SECS]\n");
			return 2;
		}
	}
	struct ibv_context *ca = hm_open_device(alive, NULL);
	struct ibv_context *cv = hm_open_device(victim, NULL);
	struct ibv_port_attr pa;
	if (ibv_query_port(cv, 1, &pa))
		hm_fatal("query_port", "ibv_query_port failed");
	size_t len = (size_t)DEPTH * MSG;
	char *abuf = hm_alloc_pages(len), *vbuf = hm_alloc_pages(len), *rbuf = hm_alloc_pages(4096);
	struct ibv_pd *apd = ibv_alloc_pd(ca), *vpd = ibv_alloc_pd(cv);
	if (!apd || !vpd)
		hm_fatal("setup", "alloc_pd: %s", strerror(errno));
	struct ibv_mr *amr = ibv_reg_mr(apd, abuf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_mr *vmr = ibv_reg_mr(vpd, vbuf, len, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rmr = ibv_reg_mr(vpd, rbuf, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_cq *acq = ibv_create_cq(ca, 64, NULL, NULL, 0), *vcq = ibv_create_cq(cv, 256, NULL, NULL, 0);
	if (!amr || !vmr || !rmr || !acq || !vcq)
		hm_fatal("setup", "MR/CQ: %s", strerror(errno));
	struct ibv_qp_init_attr qa = {
		.send_cq = acq, .recv_cq = acq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *aqp = ibv_create_qp(apd, &qa);
	qa.send_cq = vcq;
	qa.recv_cq = vcq;
	qa.cap.max_send_wr = 64;
	qa.cap.max_recv_wr = 16;
	struct ibv_qp *vqp = ibv_create_qp(vpd, &qa);
	if (!aqp || !vqp)
		hm_fatal("create_qp", "ibv_create_qp: %s", strerror(errno));
	union ibv_gid ag, vg;
	if (ibv_query_gid(ca, 1, 0, &ag) || ibv_query_gid(cv, 1, 0, &vg))
		hm_fatal("query_gid", "ibv_query_gid failed");
	uint32_t apsn = hm_rand_psn(), vpsn = hm_rand_psn();
	struct hm_rtr_args r = { .mtu = pa.active_mtu, .hop_limit = 64, .min_rnr_timer = 12, .max_dest_rd_atomic = 1 };
	r.dest_qpn = vqp->qp_num;
	r.rq_psn = vpsn;
	r.dgid = vg;
	if (hm_qp_init(aqp, IBV_ACCESS_REMOTE_WRITE) || hm_qp_rtr(aqp, &r) || hm_qp_rts(aqp, apsn, 14, 7, 7, 1))
		hm_fatal("connect", "%s: INIT/RTR/RTS: %s", alive, strerror(errno));
	r.dest_qpn = aqp->qp_num;
	r.rq_psn = apsn;
	r.dgid = ag;
	if (hm_qp_init(vqp, IBV_ACCESS_REMOTE_WRITE) || hm_qp_rtr(vqp, &r) || hm_qp_rts(vqp, vpsn, 14, 7, 7, 1))
		hm_fatal("connect", "%s: INIT/RTR/RTS: %s", victim, strerror(errno));
	for (int i = 0; i < NRECV; i++) {
		struct ibv_sge s = { .addr = (uintptr_t)rbuf, .length = 256, .lkey = rmr->lkey };
		struct ibv_recv_wr w = { .wr_id = 1000000 + (uint64_t)i, .sg_list = &s, .num_sge = 1 }, *bad;
		if (ibv_post_recv(vqp, &w, &bad))
			hm_fatal("post_recv", "ibv_post_recv: %s", strerror(errno));
	}

	/* WRITEs in flight until the device fails: post_send refused (EIO) or an error
	 * completion, and the fatal event */
	static unsigned char seen[1 << 16];
	uint64_t posted = 0, okc = 0, flushed = 0, other = 0, recv_flushed = 0, recv_done = 0, dup = 0, badqp = 0;
	int post_err = 0, got_fatal = 0, announced = 0, other_events = 0;
	uint64_t t_fail = 0, t_event = 0;
	struct ibv_wc wc[32];
	uint64_t dl = hm_deadline();
	int fl = fcntl(cv->async_fd, F_GETFL);
	fcntl(cv->async_fd, F_SETFL, fl | O_NONBLOCK);
	for (;;) {
		hm_step("WRITEs until the device fails");
		while (!post_err && posted - okc - flushed - other < DEPTH && posted < sizeof(seen)) {
			struct ibv_sge s = { .addr = (uintptr_t)vbuf + (posted % DEPTH) * MSG, .length = MSG, .lkey = vmr->lkey };
			struct ibv_send_wr w = { .wr_id = posted, .sg_list = &s, .num_sge = 1,
						 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
			w.wr.rdma.remote_addr = (uintptr_t)abuf + (posted % DEPTH) * MSG;
			w.wr.rdma.rkey = amr->rkey;
			int e = ibv_post_send(vqp, &w, &bad);
			if (e) {
				post_err = e;
				if (!t_fail)
					t_fail = hm_now_us();
				hm_check(e == EIO && bad == &w, "post_send_eio", "ibv_post_send after the failure: %s, bad_wr %s",
					 hm_errname(e), bad == &w ? "set" : "NOT set");
				break;
			}
			posted++;
		}
		int n = ibv_poll_cq(vcq, 32, wc);
		if (n < 0)
			hm_fatal("poll_cq", "ibv_poll_cq returned %d", n);
		for (int i = 0; i < n; i++) {
			if (wc[i].qp_num != vqp->qp_num)
				badqp++;
			if (wc[i].wr_id >= 1000000) {
				recv_done++;
				recv_flushed += wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].wr_id < 1000000 + NRECV;
				continue;
			}
			if (wc[i].wr_id >= posted || seen[wc[i].wr_id]++)
				dup++;
			if (wc[i].status == IBV_WC_SUCCESS) {
				okc++;
			} else {
				if (!t_fail)
					t_fail = hm_now_us();
				if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
					flushed++;
				else {
					other++;
					hm_info("completion of WR %llu: %s", (unsigned long long)wc[i].wr_id,
						ibv_wc_status_str(wc[i].status));
				}
			}
		}
		if (!announced && okc >= DEPTH) {
			announced = 1;
			printf("# hm_dev_fatal: %llu WRITEs completed; writing until the device fails\n",
			       (unsigned long long)okc);
			fflush(stdout);
			dl = hm_deadline();
		}
		struct ibv_async_event ev;
		if (!got_fatal && ibv_get_async_event(cv, &ev) == 0) {
			if (ev.event_type == IBV_EVENT_DEVICE_FATAL) {
				got_fatal = 1;
				t_event = hm_now_us();
			} else {
				other_events++;
				hm_info("asynchronous event %s", ibv_event_type_str(ev.event_type));
			}
			ibv_ack_async_event(&ev);
		}
		if (got_fatal && post_err && okc + flushed + other == posted && recv_done >= NRECV)
			break;
		if (n == 0)
			hm_sleep_us(1000);
		if (hm_now_us() > dl)
			hm_timeout("the device failure: fatal event %s, post_send %s, %llu of %llu WRITEs completed (%llu ok, %llu flushed), %llu of %d receives flushed",
				   got_fatal ? "seen" : "not seen", post_err ? "refused" : "accepted",
				   (unsigned long long)(okc + flushed + other), (unsigned long long)posted,
				   (unsigned long long)okc, (unsigned long long)flushed,
				   (unsigned long long)recv_flushed, NRECV);
	}
	hm_check(okc >= DEPTH, "writes_before_fatal", "%llu WRITEs completed before the device failed", (unsigned long long)okc);
	hm_check(got_fatal, "device_fatal_event", "IBV_EVENT_DEVICE_FATAL on %s (%.1f s after the first sign of the failure)", victim,
		 t_event >= t_fail ? (double)(t_event - t_fail) / 1e6 : -(double)(t_fail - t_event) / 1e6);
	hm_check(flushed > 0 && other == 0 && dup == 0 && badqp == 0, "flushed",
		 "%llu WRITEs in flight completed with WR_FLUSH_ERR, %llu other errors, %llu duplicate or unknown wr_ids, %llu wrong qp_num",
		 (unsigned long long)flushed, (unsigned long long)other, (unsigned long long)dup, (unsigned long long)badqp);
	hm_check(recv_flushed == NRECV, "recv_flushed", "%llu of %d posted receives completed with WR_FLUSH_ERR",
		 (unsigned long long)recv_flushed, NRECV);
	int extra = ibv_poll_cq(vcq, 32, wc);
	hm_check(extra == 0, "cq_empty", "ibv_poll_cq after the flush: %d", extra);

	/* everything that would need the device fails */
	{
		struct ibv_sge s = { .addr = (uintptr_t)rbuf, .length = 16, .lkey = rmr->lkey };
		struct ibv_recv_wr w = { .wr_id = 7, .sg_list = &s, .num_sge = 1 }, *bad = NULL;
		int e = ibv_post_recv(vqp, &w, &bad);
		hm_check(e == EIO && bad == &w, "post_recv_eio", "ibv_post_recv: %s", hm_errname(e));
	}
	{
		struct ibv_sge s = { .addr = (uintptr_t)vbuf, .length = 8, .lkey = vmr->lkey };
		struct ibv_send_wr w = { .wr_id = 9, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
		w.wr.rdma.remote_addr = (uintptr_t)abuf;
		w.wr.rdma.rkey = amr->rkey;
		int e = ibv_post_send(vqp, &w, &bad);
		hm_check(e == EIO && bad == &w, "post_send_eio_again", "ibv_post_send: %s", hm_errname(e));
	}
	errno = 0;
	struct ibv_pd *p2 = ibv_alloc_pd(cv);
	hm_check(!p2 && errno == EIO, "alloc_pd_eio", "ibv_alloc_pd: %s", p2 ? "succeeded" : hm_errname(errno));
	errno = 0;
	struct ibv_mr *m2 = ibv_reg_mr(vpd, rbuf, 4096, IBV_ACCESS_LOCAL_WRITE);
	hm_check(!m2 && errno == EIO, "reg_mr_eio", "ibv_reg_mr: %s", m2 ? "succeeded" : hm_errname(errno));
	errno = 0;
	struct ibv_cq *c2 = ibv_create_cq(cv, 16, NULL, NULL, 0);
	hm_check(!c2 && errno == EIO, "create_cq_eio", "ibv_create_cq: %s", c2 ? "succeeded" : hm_errname(errno));
	errno = 0;
	struct ibv_qp *q2 = ibv_create_qp(vpd, &qa);
	hm_check(!q2 && errno == EIO, "create_qp_eio", "ibv_create_qp: %s", q2 ? "succeeded" : hm_errname(errno));
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		int e = ibv_modify_qp(vqp, &a, IBV_QP_STATE);
		hm_check(e == EIO, "modify_qp_eio", "ibv_modify_qp(ERR): %s", hm_errname(e));
	}
	hm_check(other_events == 0, "no_other_events", "%d other asynchronous events", other_events);

	/* tear down the failed device: every destroy succeeds (the objects went with it) */
	hm_step("tearing down the failed device");
	int e1 = ibv_destroy_qp(vqp), e2 = ibv_destroy_cq(vcq), e3 = ibv_dereg_mr(vmr), e4 = ibv_dereg_mr(rmr);
	int e5 = ibv_dealloc_pd(vpd), e6 = ibv_close_device(cv);
	hm_check(!e1 && !e2 && !e3 && !e4 && !e5 && !e6, "teardown_failed_device",
		 "destroy_qp %d, destroy_cq %d, dereg_mr %d %d, dealloc_pd %d, close_device %d", e1, e2, e3, e4, e5, e6);

	/* the other NIC is not affected */
	hm_step("the surviving NIC");
	struct ibv_pd *p3 = ibv_alloc_pd(ca);
	struct ibv_mr *m3 = p3 ? ibv_reg_mr(p3, rbuf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	hm_check(p3 && m3, "other_nic_works", "%s: alloc_pd and reg_mr %s", alive, p3 && m3 ? "succeed" : strerror(errno));
	if (m3)
		ibv_dereg_mr(m3);
	if (p3)
		ibv_dealloc_pd(p3);
	if (ibv_destroy_qp(aqp) || ibv_destroy_cq(acq) || ibv_dereg_mr(amr) || ibv_dealloc_pd(apd) || ibv_close_device(ca))
		hm_fail("teardown_other", "%s: a destroy failed: %s", alive, strerror(errno));
	else
		hm_ok("teardown_other", "%s: all objects destroyed", alive);
	printf("# hm_dev_fatal: %llu WRITEs ok, %llu flushed, %llu receives flushed\n", (unsigned long long)okc,
	       (unsigned long long)flushed, (unsigned long long)recv_flushed);
	hm_summary();
	return hm_exit_code();
}
