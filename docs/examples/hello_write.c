/*
 * hello_write: the smallest complete RDMA program, as a template for your own (docs/user-guide.md).
 *
 * One process, one device: two RC queue pairs on the same port are connected to each other
 * (the port loops frames for its own address back), QP a writes 4 KiB into QP b's buffer
 * with one RDMA WRITE, and the program checks every byte. Plain libibverbs, nothing
 * Hematite-specific:
 *
 *   gcc -O2 -Wall -o hello_write docs/examples/hello_write.c -libverbs
 *   ./hematite run --nic 0 -- ./hello_write hematite0
 *
 * Usage: hello_write [DEVICE [GID_INDEX]]   (default: the first device, GID index 0)
 * Exit status 0 when the data arrived intact.
 */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEN 4096

static int fail(const char *what)
{
	fprintf(stderr, "hello_write: %s failed\n", what);
	return 1;
}

/* RESET -> INIT -> RTR -> RTS, connected to QP number `dest` at GID `gid`. */
static int connect_qp(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *gid, int gid_index,
		      enum ibv_mtu mtu)
{
	struct ibv_qp_attr init = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_qp_attr rtr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu,
		.dest_qp_num = dest,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1, /* RoCE: every address has a GRH */
			.grh = { .dgid = *gid, .sgid_index = gid_index, .hop_limit = 64 },
			.port_num = 1,
		},
	};
	/* retry up to 7 times, 4.096 us << 14 (about 67 ms) per try; PSNs start at 0 */
	struct ibv_qp_attr rts = {
		.qp_state = IBV_QPS_RTS,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = 1,
	};

	if (ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return fail("modify_qp to INIT");
	if (ibv_modify_qp(qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return fail("modify_qp to RTR");
	if (ibv_modify_qp(qp, &rts, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return fail("modify_qp to RTS");
	return 0;
}

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : NULL;
	int gid_index = argc > 2 ? atoi(argv[2]) : 0;
	int n, i, rc = 1;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = NULL;

	for (i = 0; list && i < n && !dev; i++)
		if (!want || strcmp(ibv_get_device_name(list[i]), want) == 0)
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "hello_write: no device %s\n", want ? want : "at all");
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		return fail("ibv_open_device");

	struct ibv_port_attr port;
	union ibv_gid gid;
	if (ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, gid_index, &gid))
		return fail("query_port / query_gid");

	char *src = calloc(1, LEN), *dst = calloc(1, LEN);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *smr = pd ? ibv_reg_mr(pd, src, LEN, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_mr *dmr = pd ? ibv_reg_mr(pd, dst, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!src || !dst || !smr || !dmr || !cq)
		return fail("allocating the PD, MRs and CQ");

	struct ibv_qp_init_attr qia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qa = ibv_create_qp(pd, &qia), *qb = ibv_create_qp(pd, &qia);
	if (!qa || !qb)
		return fail("ibv_create_qp");
	if (connect_qp(qa, qb->qp_num, &gid, gid_index, port.active_mtu) ||
	    connect_qp(qb, qa->qp_num, &gid, gid_index, port.active_mtu))
		return 1;

	for (i = 0; i < LEN; i++)
		src[i] = (char)(i * 7 + 3);
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = LEN, .lkey = smr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)dst, .rkey = dmr->rkey },
	}, *bad;
	if (ibv_post_send(qa, &wr, &bad))
		return fail("ibv_post_send");

	/* poll for the completion, for at most 10 s */
	struct ibv_wc wc;
	time_t t0 = time(NULL);
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && time(NULL) - t0 < 10)
		;
	if (n != 1) {
		fprintf(stderr, "hello_write: %s\n", n < 0 ? "ibv_poll_cq failed" : "no completion within 10 s");
	} else if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "hello_write: the WRITE completed with %s\n", ibv_wc_status_str(wc.status));
	} else if (memcmp(src, dst, LEN) != 0) {
		fprintf(stderr, "hello_write: the destination differs from the source\n");
	} else {
		printf("hello_write: %d bytes written by QP %u into QP %u's buffer on %s and verified\n", LEN,
		       qa->qp_num, qb->qp_num, ibv_get_device_name(dev));
		rc = 0;
	}

	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(src);
	free(dst);
	return rc;
}
