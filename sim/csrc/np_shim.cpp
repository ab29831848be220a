// extern "C" shim for the Verilated DCQCN notification point (hm_sim_np_top). One call per
// clock: inputs applied, outputs sampled before the rising edge, then the edge.
#include <cstdint>
#include "verilated.h"
#include "Vnp0.h"

extern "C" {

struct HmNpIn {
    uint16_t cfg_interval;
    uint8_t rst, ce_valid, ce_qpn, cnp_full;
};

struct HmNpOut {
    uint32_t stat_cnps, stat_suppressed, stat_blocked, stat_bad_qpn;
    uint16_t now;
    uint8_t cnp_valid, cnp_qpn, suppressed, blocked;
};

struct HmNp {
    VerilatedContext* ctx;
    Vnp0* m;
};

HmNp* hm_np_new() {
    HmNp* h = new HmNp();
    h->ctx = new VerilatedContext();
    h->m = new Vnp0(h->ctx);
    return h;
}

void hm_np_tick(HmNp* h, const HmNpIn* in, HmNpOut* out) {
    Vnp0* m = h->m;
    m->rst = in->rst;
    m->cfg_interval = in->cfg_interval;
    m->s_ce_valid = in->ce_valid;
    m->s_ce_qpn = in->ce_qpn;
    m->i_cnp_full = in->cnp_full;
    m->clk = 0;
    m->eval();
    out->cnp_valid = m->m_cnp_valid; out->cnp_qpn = m->m_cnp_qpn;
    out->suppressed = m->o_suppressed; out->blocked = m->o_blocked;
    out->stat_cnps = m->stat_cnps; out->stat_suppressed = m->stat_suppressed;
    out->stat_blocked = m->stat_blocked; out->stat_bad_qpn = m->stat_bad_qpn;
    out->now = m->o_now;
    m->clk = 1;
    m->eval();
}

void hm_np_free(HmNp* h) {
    if (!h) return;
    Verilated::threadContextp(h->ctx);  // see hm_mr_free
    h->m->final();
    delete h->m;
    delete h->ctx;
    delete h;
}

}  // extern "C"
