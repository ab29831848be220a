// extern "C" shim for the Verilated rate-limiter slot map (hm_sim_slots_top). One call per
// clock: inputs applied, outputs sampled before the rising edge (the combinational lookups of
// this clock and the registered outputs of the previous one), then the edge.
#include <cstdint>
#include "verilated.h"
#include "Vslots0.h"

extern "C" {

struct HmSlotsIn {
    uint16_t tx_bytes;
    uint8_t rst, cnp_valid, cnp_qpn, tx_valid, tx_qpn, query_qpn, detach_valid, detach_qpn;
    uint8_t op, op_slot, cnp_dropped;
};

struct HmSlotsOut {
    uint32_t no_slot, bad_qpn, allocs;
    uint16_t tx_bytes;
    uint8_t cnp_valid, cnp_slot, tx_valid, tx_slot, query_hit, query_slot, unmapped, used;
};

struct HmSlots {
    VerilatedContext* ctx;
    Vslots0* m;
};

HmSlots* hm_slots_new() {
    HmSlots* h = new HmSlots();
    h->ctx = new VerilatedContext();
    h->m = new Vslots0(h->ctx);
    return h;
}

void hm_slots_tick(HmSlots* h, const HmSlotsIn* in, HmSlotsOut* out) {
    Vslots0* m = h->m;
    m->rst = in->rst;
    m->s_cnp_valid = in->cnp_valid;
    m->s_cnp_qpn = in->cnp_qpn;
    m->s_tx_valid = in->tx_valid;
    m->s_tx_qpn = in->tx_qpn;
    m->s_tx_bytes = in->tx_bytes;
    m->s_query_qpn = in->query_qpn;
    m->s_detach_valid = in->detach_valid;
    m->s_detach_qpn = in->detach_qpn;
    m->i_op = in->op;
    m->i_op_slot = in->op_slot;
    m->i_cnp_dropped = in->cnp_dropped;
    m->clk = 0;
    m->eval();
    out->cnp_valid = m->m_cnp_valid; out->cnp_slot = m->m_cnp_slot;
    out->tx_valid = m->m_tx_valid; out->tx_slot = m->m_tx_slot; out->tx_bytes = m->m_tx_bytes;
    out->query_hit = m->o_query_hit; out->query_slot = m->o_query_slot;
    out->unmapped = m->o_unmapped; out->used = m->o_used;
    out->no_slot = m->stat_no_slot; out->bad_qpn = m->stat_bad_qpn; out->allocs = m->stat_allocs;
    m->clk = 1;
    m->eval();
}

void hm_slots_free(HmSlots* h) {
    if (!h) return;
    Verilated::threadContextp(h->ctx);  // see hm_mr_free
    h->m->final();
    delete h->m;
    delete h->ctx;
    delete h;
}

}  // extern "C"
