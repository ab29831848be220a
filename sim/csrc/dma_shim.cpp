// extern "C" shim for the Verilated DMA test top (hm_sim_dma_top). One call per clock:
// inputs applied, combinational settle, outputs sampled *before* the edge (some AXI readies
// are combinational), then the rising edge.
#include <cstdint>
#include "verilated.h"
#include "Vdma256.h"
#include "Vdma512.h"

extern "C" {

struct HmDmaIn {
    uint64_t rd_req_addr, wr_req_addr, wr_s_tkeep;
    uint32_t rd_req_len, wr_req_len;
    uint32_t rdata[16];
    uint32_t wr_s_tdata[16];
    uint8_t rst, rd_req_tag, rd_req_valid, rd_m_tready;
    uint8_t arready, rid, rresp, rlast, rvalid;
    uint8_t wr_req_tag, wr_req_valid, wr_s_tvalid, wr_s_tlast, wr_done_ready;
    uint8_t awready, wready, bid, bresp, bvalid;
};

struct HmDmaOut {
    uint64_t araddr, awaddr, rd_m_tkeep, wstrb;
    uint32_t rd_m_tdata[16];
    uint32_t wdata[16];
    uint32_t rd_bad, wr_bad, wr_len_err;
    uint8_t rd_req_ready, rd_m_tvalid, rd_m_tlast, rd_m_tuser, rd_m_tid;
    uint8_t arid, arlen, arsize, arburst, arvalid, rready;
    uint8_t wr_req_ready, wr_s_tready, wr_done_tag, wr_done_err, wr_done_valid;
    uint8_t awid, awlen, awsize, awburst, awvalid, wlast, wvalid, bready;
};

}  // extern "C"

template <typename M, int DW>
static void dma_tick(M* m, const HmDmaIn* in, HmDmaOut* out) {
    constexpr int NW = DW / 32;
    m->rst = in->rst;
    m->rd_req_addr = in->rd_req_addr; m->rd_req_len = in->rd_req_len; m->rd_req_tag = in->rd_req_tag;
    m->rd_req_valid = in->rd_req_valid; m->rd_m_tready = in->rd_m_tready;
    m->arready = in->arready; m->rid = in->rid; m->rresp = in->rresp; m->rlast = in->rlast; m->rvalid = in->rvalid;
    for (int i = 0; i < NW; i++) m->rdata[i] = in->rdata[i];
    m->wr_req_addr = in->wr_req_addr; m->wr_req_len = in->wr_req_len; m->wr_req_tag = in->wr_req_tag;
    m->wr_req_valid = in->wr_req_valid;
    for (int i = 0; i < NW; i++) m->wr_s_tdata[i] = in->wr_s_tdata[i];
    m->wr_s_tkeep = in->wr_s_tkeep; m->wr_s_tvalid = in->wr_s_tvalid; m->wr_s_tlast = in->wr_s_tlast;
    m->wr_done_ready = in->wr_done_ready;
    m->awready = in->awready; m->wready = in->wready; m->bid = in->bid; m->bresp = in->bresp; m->bvalid = in->bvalid;

    m->clk = 0;
    m->eval();
    // pre-edge outputs
    out->rd_req_ready = m->rd_req_ready;
    for (int i = 0; i < NW; i++) out->rd_m_tdata[i] = m->rd_m_tdata[i];
    out->rd_m_tkeep = m->rd_m_tkeep; out->rd_m_tvalid = m->rd_m_tvalid; out->rd_m_tlast = m->rd_m_tlast;
    out->rd_m_tuser = m->rd_m_tuser; out->rd_m_tid = m->rd_m_tid;
    out->arid = m->arid; out->araddr = m->araddr; out->arlen = m->arlen; out->arsize = m->arsize;
    out->arburst = m->arburst; out->arvalid = m->arvalid; out->rready = m->rready;
    out->rd_bad = m->rd_bad;
    out->wr_req_ready = m->wr_req_ready; out->wr_s_tready = m->wr_s_tready;
    out->wr_done_tag = m->wr_done_tag; out->wr_done_err = m->wr_done_err; out->wr_done_valid = m->wr_done_valid;
    out->awid = m->awid; out->awaddr = m->awaddr; out->awlen = m->awlen; out->awsize = m->awsize;
    out->awburst = m->awburst; out->awvalid = m->awvalid;
    for (int i = 0; i < NW; i++) out->wdata[i] = m->wdata[i];
    out->wstrb = m->wstrb; out->wlast = m->wlast; out->wvalid = m->wvalid; out->bready = m->bready;
    out->wr_bad = m->wr_bad; out->wr_len_err = m->wr_len_err;

    m->clk = 1;
    m->eval();
}

struct HmDma {
    VerilatedContext* ctx;
    int width;
    Vdma256* m256;
    Vdma512* m512;
};

extern "C" {

HmDma* hm_dma_new(int width) {
    if (width != 256 && width != 512) return nullptr;
    HmDma* h = new HmDma();
    h->ctx = new VerilatedContext();
    h->width = width;
    h->m256 = nullptr;
    h->m512 = nullptr;
    if (width == 256) h->m256 = new Vdma256(h->ctx);
    else h->m512 = new Vdma512(h->ctx);
    return h;
}

void hm_dma_tick(HmDma* h, const HmDmaIn* in, HmDmaOut* out) {
    if (h->width == 256) dma_tick<Vdma256, 256>(h->m256, in, out);
    else dma_tick<Vdma512, 512>(h->m512, in, out);
}

void hm_dma_free(HmDma* h) {
    if (!h) return;
    // Verilator 5.006 erases a model's scopes from the thread's current context, which may be
    // another (already deleted) model's: make it this model's own first (else a deadlock).
    Verilated::threadContextp(h->ctx);
    if (h->m256) { h->m256->final(); delete h->m256; }
    if (h->m512) { h->m512->final(); delete h->m512; }
    delete h->ctx;
    delete h;
}

}  // extern "C"
