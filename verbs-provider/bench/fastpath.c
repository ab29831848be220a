/* Fast-path microbenchmark for the provider: one process opens two Hematite NICs (hematite0
 * and hematite1, joined by the simulated wire), connects an RC QP on each, and posts signaled
 * 64-byte RDMA WRITEs one ibv_post_send call at a time, then takes each completion with its
 * own ibv_poll_cq call.
 *
 * Run it under valgrind's callgrind with collection toggled on inside the provider's
 * post_send (or poll_cq) op and off again inside the simulated backend's doorbell write
 * (see bench.sh): callgrind's "Collected" count divided by the number of calls printed here is
 * the instructions per post_send (per polled completion) in the provider and driver code.
 *
 * Prints: posts=N polls=N empty_polls=N (polls that found nothing; they are waited out with a
 * sleep before polling so that each measured poll returns one completion). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define ROUNDS 16
#define BATCH 64
#define MSG 64

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;
	char *buf;
};

static void die(const char *what)
{
	fprintf(stderr, "fastpath: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void open_side(struct side *s, struct ibv_device *dev)
{
	struct ibv_qp_init_attr qa;

	s->ctx = ibv_open_device(dev);
	if (!s->ctx)
		die("ibv_open_device");
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd)
		die("ibv_alloc_pd");
	if (posix_memalign((void **)&s->buf, 4096, 1 << 16))
		die("posix_memalign");
	memset(s->buf, 0x5a, 1 << 16);
	s->mr = ibv_reg_mr(s->pd, s->buf, 1 << 16,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!s->mr)
		die("ibv_reg_mr");
	s->cq = ibv_create_cq(s->ctx, 4096, NULL, NULL, 0);
	if (!s->cq)
		die("ibv_create_cq");
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = s->cq;
	qa.recv_cq = s->cq;
	qa.cap.max_send_wr = BATCH;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	s->qp = ibv_create_qp(s->pd, &qa);
	if (!s->qp)
		die("ibv_create_qp");
	if (ibv_query_gid(s->ctx, 1, 0, &s->gid))
		die("ibv_query_gid");
}

static void connect_to(struct side *s, struct side *peer)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

int main(int argc, char **argv)
{
	/* "chain": 16 WRs per ibv_post_send call and up to 16 completions per ibv_poll_cq call */
	int chain = argc > 1 && !strcmp(argv[1], "chain") ? 16 : 1;
	long calls_post = 0, calls_poll = 0;
	struct ibv_device **list;
	struct side a, b;
	struct ibv_device *d0 = NULL, *d1 = NULL;
	long posts = 0, polls = 0, empty = 0;
	int n, i, r;

	list = ibv_get_device_list(&n);
	if (!list)
		die("ibv_get_device_list");
	for (i = 0; i < n; i++) {
		if (!strcmp(ibv_get_device_name(list[i]), "hematite0"))
			d0 = list[i];
		if (!strcmp(ibv_get_device_name(list[i]), "hematite1"))
			d1 = list[i];
	}
	if (!d0 || !d1) {
		fprintf(stderr, "fastpath: needs hematite0 and hematite1\n");
		return 1;
	}
	open_side(&a, d0);
	open_side(&b, d1);
	connect_to(&a, &b);
	connect_to(&b, &a);

	for (r = 0; r < ROUNDS; r++) {
		for (i = 0; i < BATCH; i += chain) {
			struct ibv_sge sge[16];
			struct ibv_send_wr wr[16], *bad;
			int k;
			for (k = 0; k < chain; k++) {
				int j = i + k;
				sge[k].addr = (uintptr_t)a.buf + (j % 16) * MSG;
				sge[k].length = MSG;
				sge[k].lkey = a.mr->lkey;
				memset(&wr[k], 0, sizeof(wr[k]));
				wr[k].wr_id = (uint64_t)r * BATCH + j;
				wr[k].sg_list = &sge[k];
				wr[k].num_sge = 1;
				wr[k].opcode = IBV_WR_RDMA_WRITE;
				wr[k].send_flags = IBV_SEND_SIGNALED;
				wr[k].wr.rdma.remote_addr = (uintptr_t)b.buf + (j % 16) * MSG;
				wr[k].wr.rdma.rkey = b.mr->rkey;
				wr[k].next = k + 1 < chain ? &wr[k + 1] : NULL;
			}
			if (ibv_post_send(a.qp, &wr[0], &bad))
				die("ibv_post_send");
			posts += chain;
			calls_post++;
		}
		usleep(200000);
		for (i = 0; i < BATCH;) {
			struct ibv_wc wc[16];
			int got, k;
			got = ibv_poll_cq(a.cq, chain, wc);
			calls_poll++;
			if (got < 0)
				die("ibv_poll_cq");
			if (got == 0) {
				/* the simulated device has not finished: wait (such polls are counted) */
				empty++;
				usleep(20000);
				continue;
			}
			for (k = 0; k < got; k++, i++) {
				if (wc[k].status != IBV_WC_SUCCESS || wc[k].opcode != IBV_WC_RDMA_WRITE ||
				    wc[k].wr_id != (uint64_t)r * BATCH + i) {
					fprintf(stderr, "fastpath: bad completion: status %d opcode %d wr_id %llu\n",
						wc[k].status, wc[k].opcode, (unsigned long long)wc[k].wr_id);
					return 1;
				}
				polls++;
			}
		}
	}
	printf("mode=%s posts=%ld post_calls=%ld polls=%ld poll_calls=%ld empty_polls=%ld\n", chain > 1 ? "chain" : "single",
	       posts, calls_post, polls, calls_poll, empty);
	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_dereg_mr(a.mr);
	ibv_dereg_mr(b.mr);
	ibv_dealloc_pd(a.pd);
	ibv_dealloc_pd(b.pd);
	ibv_close_device(a.ctx);
	ibv_close_device(b.ctx);
	ibv_free_device_list(list);
	return 0;
}
