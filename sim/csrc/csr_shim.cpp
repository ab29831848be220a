// extern "C" shim for the Verilated register block (hm_csr). One call per clock: inputs
// applied, outputs sampled before the rising edge, then the edge.
#include <cstdint>
#include "verilated.h"
#include "Vcsr512.h"

extern "C" {

struct HmCsrIn {
    uint32_t counters[16];
    uint32_t awaddr, wdata, araddr;
    uint8_t rst, awvalid, wstrb, wvalid, bready, arvalid, rready, db_ready;
};

struct HmCsrOut {
    uint64_t db_data;
    uint32_t rdata;
    uint8_t awready, wready, bresp, bvalid, arready, rresp, rvalid, db_valid;
};

struct HmCsr {
    VerilatedContext* ctx;
    Vcsr512* m;
};

HmCsr* hm_csr_new() {
    HmCsr* h = new HmCsr();
    h->ctx = new VerilatedContext();
    h->m = new Vcsr512(h->ctx);
    return h;
}

void hm_csr_tick(HmCsr* h, const HmCsrIn* in, HmCsrOut* out) {
    Vcsr512* m = h->m;
    m->rst = in->rst;
    for (int i = 0; i < 16; i++) m->counters[i] = in->counters[i];
    m->s_axil_awaddr = in->awaddr; m->s_axil_awvalid = in->awvalid;
    m->s_axil_wdata = in->wdata; m->s_axil_wstrb = in->wstrb; m->s_axil_wvalid = in->wvalid;
    m->s_axil_bready = in->bready;
    m->s_axil_araddr = in->araddr; m->s_axil_arvalid = in->arvalid; m->s_axil_rready = in->rready;
    m->m_db_ready = in->db_ready;
    m->clk = 0;
    m->eval();
    out->awready = m->s_axil_awready; out->wready = m->s_axil_wready;
    out->bresp = m->s_axil_bresp; out->bvalid = m->s_axil_bvalid;
    out->arready = m->s_axil_arready; out->rdata = m->s_axil_rdata; out->rresp = m->s_axil_rresp;
    out->rvalid = m->s_axil_rvalid;
    out->db_data = m->m_db_data; out->db_valid = m->m_db_valid;
    m->clk = 1;
    m->eval();
}

void hm_csr_free(HmCsr* h) {
    if (!h) return;
    // Verilator 5.006 erases a model's scopes from the thread's current context, which may be
    // another (already deleted) model's: make it this model's own first (else a deadlock).
    Verilated::threadContextp(h->ctx);
    h->m->final();
    delete h->m;
    delete h->ctx;
    delete h;
}

}  // extern "C"
