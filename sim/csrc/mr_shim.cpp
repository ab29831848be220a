// extern "C" shim for the Verilated memory-region table (hm_mr_table, 4096 entries). One call
// per clock: inputs applied, outputs sampled before the rising edge, then the edge.
#include <cstdint>
#include "verilated.h"
#include "Vmr0.h"

extern "C" {

struct HmMrIn {
    uint64_t wr_base, wr_len, chk_addr, chk_len;
    uint32_t wr_pd, chk_key, chk_pd;
    uint16_t wr_index;
    uint8_t rst, wr_entry_valid, wr_tag, wr_access, wr_valid;
    uint8_t chk_need, chk_id, chk_valid, res_ready;
};

struct HmMrOut {
    uint64_t res_base;
    uint8_t wr_ready, chk_ready, res_ok, res_err, res_id, res_valid;
};

struct HmMr {
    VerilatedContext* ctx;
    Vmr0* m;
};

HmMr* hm_mr_new() {
    HmMr* h = new HmMr();
    h->ctx = new VerilatedContext();
    h->m = new Vmr0(h->ctx);
    return h;
}

void hm_mr_tick(HmMr* h, const HmMrIn* in, HmMrOut* out) {
    Vmr0* m = h->m;
    m->rst = in->rst;
    m->s_wr_index = in->wr_index; m->s_wr_entry_valid = in->wr_entry_valid; m->s_wr_tag = in->wr_tag;
    m->s_wr_pd = in->wr_pd; m->s_wr_base = in->wr_base; m->s_wr_len = in->wr_len;
    m->s_wr_access = in->wr_access; m->s_wr_valid = in->wr_valid;
    m->s_chk_key = in->chk_key; m->s_chk_pd = in->chk_pd; m->s_chk_addr = in->chk_addr;
    m->s_chk_len = in->chk_len; m->s_chk_need = in->chk_need; m->s_chk_id = in->chk_id;
    m->s_chk_valid = in->chk_valid; m->m_res_ready = in->res_ready;
    m->clk = 0;
    m->eval();
    out->wr_ready = m->s_wr_ready; out->chk_ready = m->s_chk_ready;
    out->res_ok = m->m_res_ok; out->res_err = m->m_res_err; out->res_base = m->m_res_base;
    out->res_id = m->m_res_id; out->res_valid = m->m_res_valid;
    m->clk = 1;
    m->eval();
}

void hm_mr_free(HmMr* h) {
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
