// extern "C" shim for the Verilated NIC (hm_sim_nic_top: the transport engine, 512-bit
// datapath, and the control core). One
// call per clock: inputs applied, combinational settle, outputs sampled before the rising
// edge (AXI readies may be combinational), then the edge.
#include <cstdint>
#include "verilated.h"
#include "Vrc512.h"
#ifdef HM_COVERAGE
// Coverage build (HEMATITE_COVERAGE set when the models were built, ./hematite coverage): each
// model writes its line/toggle counts when it is freed, to $HEMATITE_COVERAGE/eng-PID-N.dat.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include "verilated_cov.h"
static std::atomic<unsigned> hm_cov_seq{0};
#endif

extern "C" {

struct HmEngIn {
    uint32_t rdata[16];
    uint32_t rx_tdata[16];
    uint32_t rl_pause[128];
    uint64_t rx_tkeep;
    uint32_t bar_wdata, ctl_wdata;
    uint16_t bar_awaddr, bar_araddr, ctl_awaddr, ctl_araddr;
    uint8_t rst;
    uint8_t bar_awvalid, bar_wstrb, bar_wvalid, bar_bready, bar_arvalid, bar_rready;
    uint8_t ctl_awvalid, ctl_wstrb, ctl_wvalid, ctl_bready, ctl_arvalid, ctl_rready;
    uint8_t arready, rid, rresp, rlast, rvalid;
    uint8_t awready, wready, bid, bresp, bvalid;
    uint8_t rx_tvalid, rx_tlast, rx_tuser, tx_tready, irq_ready;
    uint32_t fw_wdata;
    uint16_t fw_awaddr, fw_araddr;
    uint8_t ctl_sel, fw_awvalid, fw_wstrb, fw_wvalid, fw_bready, fw_arvalid, fw_rready, fw_link;
};

struct HmEngOut {
    uint32_t wdata[16];
    uint32_t tx_tdata[16];
    uint64_t araddr, awaddr, wstrb, tx_tkeep;
    uint32_t bar_rdata, ctl_rdata;
    uint8_t bar_awready, bar_wready, bar_bresp, bar_bvalid, bar_arready, bar_rresp, bar_rvalid;
    uint8_t ctl_awready, ctl_wready, ctl_bresp, ctl_bvalid, ctl_arready, ctl_rresp, ctl_rvalid;
    uint8_t arid, arlen, arsize, arburst, arvalid, rready;
    uint8_t awid, awlen, awsize, awburst, awvalid, wlast, wvalid, bready;
    uint8_t rx_tready, tx_tvalid, tx_tlast, tx_tuser, irq_valid, irq_vec;
    uint32_t fw_rdata;
    uint8_t fw_awready, fw_wready, fw_bresp, fw_bvalid, fw_arready, fw_rresp, fw_rvalid;
    uint8_t fw_irq_done, fw_fault, fw_trap;
};

struct HmEng {
    VerilatedContext* ctx;
    Vrc512* m;
};

HmEng* hm_eng_new() {
    HmEng* h = new HmEng();
    h->ctx = new VerilatedContext();
    h->m = new Vrc512(h->ctx);
    return h;
}

void hm_eng_tick(HmEng* h, const HmEngIn* in, HmEngOut* out) {
    Vrc512* m = h->m;
    m->rst = in->rst;
    m->s_bar_awaddr = in->bar_awaddr; m->s_bar_awvalid = in->bar_awvalid;
    m->s_bar_wdata = in->bar_wdata; m->s_bar_wstrb = in->bar_wstrb; m->s_bar_wvalid = in->bar_wvalid;
    m->s_bar_bready = in->bar_bready; m->s_bar_araddr = in->bar_araddr;
    m->s_bar_arvalid = in->bar_arvalid; m->s_bar_rready = in->bar_rready;
    m->s_ctl_awaddr = in->ctl_awaddr; m->s_ctl_awvalid = in->ctl_awvalid;
    m->s_ctl_wdata = in->ctl_wdata; m->s_ctl_wstrb = in->ctl_wstrb; m->s_ctl_wvalid = in->ctl_wvalid;
    m->s_ctl_bready = in->ctl_bready; m->s_ctl_araddr = in->ctl_araddr;
    m->s_ctl_arvalid = in->ctl_arvalid; m->s_ctl_rready = in->ctl_rready;
    m->m_axi_arready = in->arready; m->m_axi_rid = in->rid; m->m_axi_rresp = in->rresp;
    m->m_axi_rlast = in->rlast; m->m_axi_rvalid = in->rvalid;
    for (int i = 0; i < 16; i++) m->m_axi_rdata[i] = in->rdata[i];
    m->m_axi_awready = in->awready; m->m_axi_wready = in->wready; m->m_axi_bid = in->bid;
    m->m_axi_bresp = in->bresp; m->m_axi_bvalid = in->bvalid;
    for (int i = 0; i < 16; i++) m->s_rx_tdata[i] = in->rx_tdata[i];
    m->s_rx_tkeep = in->rx_tkeep; m->s_rx_tvalid = in->rx_tvalid; m->s_rx_tlast = in->rx_tlast;
    m->s_rx_tuser = in->rx_tuser; m->m_tx_tready = in->tx_tready;
    for (int i = 0; i < 128; i++) m->rl_pause[i] = in->rl_pause[i];
    m->m_irq_ready = in->irq_ready;
    m->ctl_sel = in->ctl_sel;
    m->fw_link = in->fw_link;
    m->s_fw_awaddr = in->fw_awaddr; m->s_fw_awvalid = in->fw_awvalid;
    m->s_fw_wdata = in->fw_wdata; m->s_fw_wstrb = in->fw_wstrb; m->s_fw_wvalid = in->fw_wvalid;
    m->s_fw_bready = in->fw_bready; m->s_fw_araddr = in->fw_araddr;
    m->s_fw_arvalid = in->fw_arvalid; m->s_fw_rready = in->fw_rready;

    m->clk = 0;
    m->clk_core = 0;
    m->eval();
    out->bar_awready = m->s_bar_awready; out->bar_wready = m->s_bar_wready;
    out->bar_bresp = m->s_bar_bresp; out->bar_bvalid = m->s_bar_bvalid;
    out->bar_arready = m->s_bar_arready; out->bar_rdata = m->s_bar_rdata;
    out->bar_rresp = m->s_bar_rresp; out->bar_rvalid = m->s_bar_rvalid;
    out->ctl_awready = m->s_ctl_awready; out->ctl_wready = m->s_ctl_wready;
    out->ctl_bresp = m->s_ctl_bresp; out->ctl_bvalid = m->s_ctl_bvalid;
    out->ctl_arready = m->s_ctl_arready; out->ctl_rdata = m->s_ctl_rdata;
    out->ctl_rresp = m->s_ctl_rresp; out->ctl_rvalid = m->s_ctl_rvalid;
    out->arid = m->m_axi_arid; out->araddr = m->m_axi_araddr; out->arlen = m->m_axi_arlen;
    out->arsize = m->m_axi_arsize; out->arburst = m->m_axi_arburst; out->arvalid = m->m_axi_arvalid;
    out->rready = m->m_axi_rready;
    out->awid = m->m_axi_awid; out->awaddr = m->m_axi_awaddr; out->awlen = m->m_axi_awlen;
    out->awsize = m->m_axi_awsize; out->awburst = m->m_axi_awburst; out->awvalid = m->m_axi_awvalid;
    for (int i = 0; i < 16; i++) out->wdata[i] = m->m_axi_wdata[i];
    out->wstrb = m->m_axi_wstrb; out->wlast = m->m_axi_wlast; out->wvalid = m->m_axi_wvalid;
    out->bready = m->m_axi_bready;
    out->rx_tready = m->s_rx_tready;
    for (int i = 0; i < 16; i++) out->tx_tdata[i] = m->m_tx_tdata[i];
    out->tx_tkeep = m->m_tx_tkeep; out->tx_tvalid = m->m_tx_tvalid; out->tx_tlast = m->m_tx_tlast;
    out->tx_tuser = m->m_tx_tuser;
    out->irq_valid = m->m_irq_valid; out->irq_vec = m->m_irq_vec;
    out->fw_awready = m->s_fw_awready; out->fw_wready = m->s_fw_wready;
    out->fw_bresp = m->s_fw_bresp; out->fw_bvalid = m->s_fw_bvalid;
    out->fw_arready = m->s_fw_arready; out->fw_rdata = m->s_fw_rdata;
    out->fw_rresp = m->s_fw_rresp; out->fw_rvalid = m->s_fw_rvalid;
    out->fw_irq_done = m->fw_irq_done; out->fw_fault = m->fw_fault; out->fw_trap = m->fw_trap;

    m->clk = 1;
    m->clk_core = m->core_clk_en;   // the control core sleeps while it polls an empty mailbox
    m->eval();
}

void hm_eng_free(HmEng* h) {
    if (!h) return;
    // Verilator 5.006 erases a model's scopes from the thread's current context, which may be
    // another (already deleted) model's: make it this model's own first (else a deadlock).
    Verilated::threadContextp(h->ctx);
    h->m->final();
#ifdef HM_COVERAGE
    if (const char* dir = std::getenv("HEMATITE_COVERAGE")) {
        char name[64];
        std::snprintf(name, sizeof name, "/eng-%d-%u.dat", (int)getpid(), hm_cov_seq++);
        h->ctx->coveragep()->write((std::string(dir) + name).c_str());
    }
#endif
    delete h->m;
    delete h->ctx;
    delete h;
}

}  // extern "C"
