/* hm_reclaim: every resource of the device can be allocated, up to the limits
 * ibv_query_device reports, and a verified transfer runs with all of them held. Run on a NIC
 * whose previous application was killed (scenario peer_loss), it shows that the device
 * reclaimed everything the dead application held: one PD, MR, CQ or QP not given back would
 * make an allocation below the limit fail.
 *
 * In order: max_pd PDs, max_cq CQs, max_qp QPs (RC, one WR each way), max_mr MRs (MRs 0 and 1
 * are 64 KiB buffers, the rest one page each); one more of each must fail (ENOMEM); the last
 * two QPs created (the highest QPNs when the device hands them out in order) are connected to
 * each other (the port loops frames to its own address back) and a 64 KiB RDMA WRITE and an
 * RDMA READ of a pattern are verified byte for byte; then everything is destroyed.
 *
 * -m N registers N MRs instead of max_mr, -c N creates N CQs instead of max_cq, -q N N QPs
 * instead of max_qp (then nothing beyond that limit is tried): every create is a firmware
 * command on the simulated NIC (about 20 ms of wall time on a 2-core machine), and 4,096 of
 * each take minutes.
 *
 *   hm_reclaim [-d DEV] [-t SECS] [-m MRS] [-c CQS] [-q QPS]
 */
#include "hm_common.h"

#define BUF 65536

static double secs_since(uint64_t t0)
{
	return (double)(hm_now_us() - t0) / 1e6;
}

/* i of the n objects allocated since t: "<name> i of n <what> (T s)[: error]" */
static void check_all(int i, int n, const char *name, const char *what, uint64_t t)
{
	int e = errno;

	hm_check(i == n, name, "%d of %d %s (%.1f s)%s%s", i, n, what, secs_since(t), i < n ? ": " : "",
		 i < n ? strerror(e) : "");
}

/* the allocation of object n + 1 (x: what it returned) must fail with ENOMEM */
static void check_beyond(const void *x, int n, const char *name, const char *what)
{
	int e = errno;

	hm_check(!x && e == ENOMEM, name, "%s %d: %s", what, n + 1, x ? "succeeded" : hm_errname(e));
}

/* destroy objs[0 .. n-1] with fn (the watchdog's step: its name); the number of calls that failed */
#define DESTROY_ALL(fn, objs, n)                        \
	({                                              \
		int fails_ = 0;                         \
		for (int i_ = 0; i_ < (n); i_++) {      \
			hm_step(#fn);                   \
			fails_ += fn((objs)[i_]) != 0;  \
		}                                       \
		fails_;                                 \
	})

int main(int argc, char **argv)
{
	const char *dev = NULL;
	int c, mr_cap = 0, cq_cap = 0, qp_cap = 0;

	hm_init_common("hm_reclaim");
	while ((c = getopt(argc, argv, "d:t:m:c:q:")) != -1) {
		if (hm_common_opt(c, &dev, NULL, NULL))
			continue;
		switch (c) {
		case 'm': mr_cap = atoi(optarg); break;
		case 'c': cq_cap = atoi(optarg); break;
		case 'q': qp_cap = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: hm_reclaim [-d DEV] [-t SECS] [-m MRS] [-c CQS] [-q QPS]\n");
			return 2;
		}
	}
	struct ibv_context *ctx = hm_open_device(dev, NULL);
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	if (ibv_query_device(ctx, &da) || ibv_query_port(ctx, 1, &pa))
		hm_fatal("query", "ibv_query_device / ibv_query_port failed");
	int npd = da.max_pd, ncq = da.max_cq, nqp = da.max_qp, nmr = da.max_mr;
	printf("# hm_reclaim: %s: max_pd %d, max_cq %d, max_qp %d, max_mr %d\n", ibv_get_device_name(ctx->device), npd, ncq,
	       nqp, nmr);
	if (npd < 1 || ncq < 1 || nqp < 2 || nmr < 2)
		hm_fatal("limits", "limits too small for the test");
	int max_mr = nmr, max_cq = ncq, max_qp = nqp;
	if (mr_cap >= 2 && mr_cap < nmr) {
		nmr = mr_cap;
		printf("# hm_reclaim: registering %d of the %d MRs (-m)\n", nmr, max_mr);
	}
	if (cq_cap >= 1 && cq_cap < ncq) {
		ncq = cq_cap;
		printf("# hm_reclaim: creating %d of the %d CQs (-c)\n", ncq, max_cq);
	}
	if (qp_cap >= 2 && qp_cap < nqp) {
		nqp = qp_cap;
		printf("# hm_reclaim: creating %d of the %d QPs (-q)\n", nqp, max_qp);
	}
	struct ibv_pd **pds = calloc((size_t)npd, sizeof(*pds));
	struct ibv_cq **cqs = calloc((size_t)ncq, sizeof(*cqs));
	struct ibv_qp **qps = calloc((size_t)nqp, sizeof(*qps));
	struct ibv_mr **mrs = calloc((size_t)nmr, sizeof(*mrs));
	char *src = hm_alloc_pages(BUF), *dst = hm_alloc_pages(BUF), *page = hm_alloc_pages(4096);
	if (!pds || !cqs || !qps || !mrs)
		hm_fatal("alloc", "out of memory");
	uint64_t t0 = hm_now_us(), t;
	int i;

	/* PDs */
	t = hm_now_us();
	for (i = 0; i < npd; i++) {
		hm_step("ibv_alloc_pd");
		if (!(pds[i] = ibv_alloc_pd(ctx)))
			break;
	}
	check_all(i, npd, "all_pds", "PDs allocated", t);
	int got_pd = i;
	errno = 0;
	struct ibv_pd *xpd = got_pd == npd ? ibv_alloc_pd(ctx) : NULL;
	if (got_pd == npd)
		check_beyond(xpd, npd, "pd_beyond_max", "PD");
	if (got_pd < 1)
		hm_fatal("all_pds", "no PD");
	struct ibv_pd *pd = pds[0];

	/* CQs */
	t = hm_now_us();
	for (i = 0; i < ncq; i++) {
		hm_step("ibv_create_cq");
		if (!(cqs[i] = ibv_create_cq(ctx, 4, NULL, NULL, 0)))
			break;
	}
	check_all(i, ncq, ncq == max_cq ? "all_cqs" : "cqs", "CQs created", t);
	int got_cq = i;
	errno = 0;
	struct ibv_cq *xcq = got_cq == max_cq ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
	if (got_cq == max_cq)
		check_beyond(xcq, ncq, "cq_beyond_max", "CQ");
	if (got_cq < 1)
		hm_fatal("all_cqs", "no CQ");

	/* QPs (the last two in PD 0, with the transfer MRs, completing into CQ 0; the rest spread
	 * over the PDs and CQs) */
	t = hm_now_us();
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	for (i = 0; i < nqp; i++) {
		hm_step("ibv_create_qp");
		int last = i >= nqp - 2;
		qa.send_cq = qa.recv_cq = cqs[last ? 0 : i % got_cq];
		if (!(qps[i] = ibv_create_qp(pds[last ? 0 : i % got_pd], &qa)))
			break;
	}
	check_all(i, nqp, nqp == max_qp ? "all_qps" : "qps", "QPs created", t);
	int got_qp = i;
	errno = 0;
	qa.send_cq = qa.recv_cq = cqs[0];
	struct ibv_qp *xqp = got_qp == max_qp ? ibv_create_qp(pd, &qa) : NULL;
	if (got_qp == max_qp)
		check_beyond(xqp, nqp, "qp_beyond_max", "QP");
	if (got_qp < nqp)
		hm_fatal("all_qps", "fewer QPs than asked for");
	/* the transfer pair: the last two QPs */
	struct ibv_qp *qp0 = qps[got_qp - 2], *qp1 = qps[got_qp - 1];

	/* MRs */
	t = hm_now_us();
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	for (i = 0; i < nmr; i++) {
		hm_step("ibv_reg_mr");
		if (i < 2)
			mrs[i] = ibv_reg_mr(pd, i == 0 ? src : dst, BUF, acc);
		else
			mrs[i] = ibv_reg_mr(pds[i % got_pd], page, 4096, IBV_ACCESS_LOCAL_WRITE);
		if (!mrs[i])
			break;
	}
	check_all(i, nmr, nmr == max_mr ? "all_mrs" : "mrs", "MRs registered", t);
	int got_mr = i;
	errno = 0;
	struct ibv_mr *xmr = got_mr == max_mr ? ibv_reg_mr(pd, page, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (got_mr == max_mr)
		check_beyond(xmr, nmr, "mr_beyond_max", "MR");
	if (got_mr < 2)
		hm_fatal("all_mrs", "fewer than 2 MRs");

	/* a verified transfer with everything held: the last two QPs on this port */
	hm_step("connecting the last two QPs");
	union ibv_gid g;
	if (ibv_query_gid(ctx, 1, 0, &g))
		hm_fatal("query_gid", "ibv_query_gid failed");
	uint32_t psn0 = hm_rand_psn(), psn1 = hm_rand_psn();
	struct hm_rtr_args r = { .mtu = pa.active_mtu, .dgid = g, .hop_limit = 64, .min_rnr_timer = 12, .max_dest_rd_atomic = 1 };
	r.dest_qpn = qp1->qp_num;
	r.rq_psn = psn1;
	int e = hm_qp_init(qp0, (unsigned)(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)) || hm_qp_rtr(qp0, &r) ||
		hm_qp_rts(qp0, psn0, 14, 7, 7, 1);
	r.dest_qpn = qp0->qp_num;
	r.rq_psn = psn0;
	e = e || hm_qp_init(qp1, (unsigned)(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)) || hm_qp_rtr(qp1, &r) ||
	    hm_qp_rts(qp1, psn1, 14, 7, 7, 1);
	if (e)
		hm_fatal("connect", "INIT/RTR/RTS: %s", strerror(errno));
	for (i = 0; i < BUF; i++)
		src[i] = (char)(i * 7 + 3);
	memset(dst, 0, BUF);
	struct ibv_wc wc;
	struct ibv_sge s = { .addr = (uintptr_t)src, .length = BUF, .lkey = mrs[0]->lkey };
	struct ibv_send_wr w = { .wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED };
	w.wr.rdma.remote_addr = (uintptr_t)dst;
	w.wr.rdma.rkey = mrs[1]->rkey;
	hm_post_wait(qp0, &w, cqs[0], &wc, "ibv_post_send", "the RDMA WRITE");
	hm_check(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 && memcmp(src, dst, BUF) == 0, "write_verified",
		 "64 KiB RDMA WRITE QP %u -> QP %u: %s, data %s", qp0->qp_num, qp1->qp_num, ibv_wc_status_str(wc.status),
		 memcmp(src, dst, BUF) ? "DIFFERS" : "verified");
	/* and back: QP 1 READs it into src after src was cleared */
	memset(src, 0, BUF);
	s.addr = (uintptr_t)src;
	w.wr_id = 2;
	w.opcode = IBV_WR_RDMA_READ;
	w.wr.rdma.remote_addr = (uintptr_t)dst;
	w.wr.rdma.rkey = mrs[1]->rkey;
	hm_post_wait(qp1, &w, cqs[0], &wc, "ibv_post_send (READ)", "the RDMA READ");
	hm_check(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 && memcmp(src, dst, BUF) == 0, "read_verified",
		 "64 KiB RDMA READ: %s, data %s", ibv_wc_status_str(wc.status), memcmp(src, dst, BUF) ? "DIFFERS" : "verified");

	/* tear down */
	t = hm_now_us();
	int fails = DESTROY_ALL(ibv_destroy_qp, qps, got_qp);
	fails += DESTROY_ALL(ibv_dereg_mr, mrs, got_mr);
	fails += DESTROY_ALL(ibv_destroy_cq, cqs, got_cq);
	fails += DESTROY_ALL(ibv_dealloc_pd, pds, got_pd);
	hm_check(fails == 0, "teardown", "%d QPs, %d MRs, %d CQs, %d PDs destroyed, %d failures (%.1f s)", got_qp, got_mr, got_cq,
		 got_pd, fails, secs_since(t));
	ibv_close_device(ctx);
	printf("# hm_reclaim: wall_s=%.1f\n", secs_since(t0));
	hm_summary();
	return hm_exit_code();
}
