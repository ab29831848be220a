// extern "C" shim for the Verilated DCQCN blocks of one NIC (hm_sim_cc_top: reaction point,
// pacer, notification point). One call per clock: inputs applied, outputs sampled before the
// rising edge (the registered results of the previous clock and the debug view of the state
// after the previous edge), then the edge.
#include <cstdint>
#include "verilated.h"
#include "Vcc0.h"

extern "C" {

struct HmCcCfg {
    uint32_t inc_period, alpha_period, dec_period, byte_reset;
    uint32_t max_rate, ai_rate, hai_rate, min_rate, first_rate, line_rate;
    uint32_t burst, cnp_interval;
    uint16_t min_dec_q10, g, initial_alpha;
    uint8_t clamp_tgt_rate, clamp_after_inc, threshold, gd;
};

struct HmCcIn {
    uint16_t tx_bytes;
    uint8_t rst, cnp_valid, cnp_qpn, tx_valid, tx_qpn, query_qpn, ce_valid, ce_qpn, cnp_full, dbg_qpn;
};

struct HmCcOut {
    uint32_t rate, now;
    uint32_t stat[9];       // cnp_dropped, tx_dropped, tx_merged, bad_qpn, activations, releases, cuts, increases, timer_skips
    uint32_t entry[7];      // 206-bit debug entry, LSB first
    uint64_t tokens;        // 42-bit two's complement
    uint32_t dbg_last, dbg_rate, np_cnps;
    uint8_t rate_valid, rate_qpn, rate_limited, op, op_qpn, op_timer, op_flag;
    uint8_t cnp_dropped, tx_dropped, tx_merged, tx_filtered;
    uint8_t dbg_active, dbg_scan, dbg_cnp_count, dbg_tx_count, query_ok, dbg_limited;
    uint8_t cnp_valid, cnp_qpn, np_suppressed, np_blocked;
};

struct HmCc {
    VerilatedContext* ctx;
    Vcc0* m;
};

HmCc* hm_cc_new() {
    HmCc* h = new HmCc();
    h->ctx = new VerilatedContext();
    h->m = new Vcc0(h->ctx);
    return h;
}

void hm_cc_tick(HmCc* h, const HmCcCfg* c, const HmCcIn* in, HmCcOut* out) {
    Vcc0* m = h->m;
    m->rst = in->rst;
    m->cfg_clamp_tgt_rate = c->clamp_tgt_rate;
    m->cfg_clamp_after_inc = c->clamp_after_inc;
    m->cfg_inc_period = c->inc_period;
    m->cfg_alpha_period = c->alpha_period;
    m->cfg_dec_period = c->dec_period;
    m->cfg_byte_reset = c->byte_reset;
    m->cfg_threshold = c->threshold;
    m->cfg_max_rate = c->max_rate;
    m->cfg_ai_rate = c->ai_rate;
    m->cfg_hai_rate = c->hai_rate;
    m->cfg_min_rate = c->min_rate;
    m->cfg_first_rate = c->first_rate;
    m->cfg_line_rate = c->line_rate;
    m->cfg_gd = c->gd;
    m->cfg_min_dec_q10 = c->min_dec_q10;
    m->cfg_g = c->g;
    m->cfg_initial_alpha = c->initial_alpha;
    m->cfg_burst = c->burst;
    m->cfg_cnp_interval = c->cnp_interval;
    m->s_cnp_valid = in->cnp_valid;
    m->s_cnp_qpn = in->cnp_qpn;
    m->s_tx_valid = in->tx_valid;
    m->s_tx_qpn = in->tx_qpn;
    m->s_tx_bytes = in->tx_bytes;
    m->s_query_qpn = in->query_qpn;
    m->s_ce_valid = in->ce_valid;
    m->s_ce_qpn = in->ce_qpn;
    m->i_cnp_full = in->cnp_full;
    m->dbg_qpn = in->dbg_qpn;
    m->clk = 0;
    m->eval();
    out->rate_valid = m->m_rate_valid; out->rate_qpn = m->m_rate_qpn;
    out->rate = m->m_rate; out->rate_limited = m->m_rate_limited;
    out->op = m->o_op; out->op_qpn = m->o_op_qpn; out->op_timer = m->o_op_timer; out->op_flag = m->o_op_flag;
    out->cnp_dropped = m->o_cnp_dropped; out->tx_dropped = m->o_tx_dropped;
    out->tx_merged = m->o_tx_merged; out->tx_filtered = m->o_tx_filtered;
    out->stat[0] = m->stat_cnp_dropped; out->stat[1] = m->stat_tx_dropped; out->stat[2] = m->stat_tx_merged;
    out->stat[3] = m->stat_bad_qpn; out->stat[4] = m->stat_activations; out->stat[5] = m->stat_releases;
    out->stat[6] = m->stat_cuts; out->stat[7] = m->stat_increases; out->stat[8] = m->stat_timer_skips;
    out->now = m->o_now;
    out->dbg_active = m->dbg_active;
    for (int i = 0; i < 7; i++) out->entry[i] = m->dbg_entry[i];
    out->dbg_scan = m->dbg_scan; out->dbg_cnp_count = m->dbg_cnp_count; out->dbg_tx_count = m->dbg_tx_count;
    out->query_ok = m->o_query_ok;
    out->tokens = m->dbg_tokens; out->dbg_last = m->dbg_last; out->dbg_rate = m->dbg_rate;
    out->dbg_limited = m->dbg_limited;
    out->cnp_valid = m->m_cnp_valid; out->cnp_qpn = m->m_cnp_qpn;
    out->np_suppressed = m->o_np_suppressed; out->np_blocked = m->o_np_blocked;
    out->np_cnps = m->stat_np_cnps;
    m->clk = 1;
    m->eval();
}

void hm_cc_free(HmCc* h) {
    if (!h) return;
    Verilated::threadContextp(h->ctx);  // see hm_mr_free
    h->m->final();
    delete h->m;
    delete h->ctx;
    delete h;
}

}  // extern "C"
