// extern "C" shim between Rust and the Verilated packet-path models: one batched call per
// clock cycle (inputs in, one rising edge, outputs out), so the FFI cost is paid once a cycle.
#include <cstdint>
#include <cstring>
#include "verilated.h"
#include "Vpkt256.h"
#include "Vpkt512.h"

#define HM_MAX_WORDS 16   // 512-bit beats
#define HM_HDR_WORDS 40   // >= hm_roce_hdr_t bits / 32 (checked at run time)
#define HM_MON_WORDS 40   // >= hm_rx_status_t bits / 32

extern "C" {

struct HmPktIn {
    uint32_t rx_s_tdata[HM_MAX_WORDS];
    uint64_t rx_s_tkeep;
    uint8_t rst, rx_s_tvalid, rx_s_tlast, rx_s_tuser, rx_hdr_ready, rx_m_tready;
    uint8_t tx_hdr_valid, tx_s_tvalid, tx_s_tlast, tx_m_tready;
    uint32_t tx_hdr_data[HM_HDR_WORDS];
    uint32_t tx_s_tdata[HM_MAX_WORDS];
    uint64_t tx_s_tkeep;
};

struct HmPktOut {
    uint8_t rx_s_tready, rx_hdr_valid, rx_m_tvalid, rx_m_tlast, rx_mon_valid;
    uint8_t tx_hdr_ready, tx_s_tready, tx_m_tvalid, tx_m_tlast, tx_m_tuser;
    uint32_t rx_hdr_data[HM_HDR_WORDS];
    uint32_t rx_m_tdata[HM_MAX_WORDS];
    uint64_t rx_m_tkeep;
    uint32_t rx_mon_data[HM_MON_WORDS];
    uint32_t rx_stat[16];
    uint32_t tx_m_tdata[HM_MAX_WORDS];
    uint64_t tx_m_tkeep;
    uint32_t tx_stat[3];
};

}  // extern "C"

template <typename W>
static inline void put_wide(W& dst, const uint32_t* src, int words) {
    for (int i = 0; i < words; i++) dst[i] = src[i];
}
template <typename W>
static inline void get_wide(uint32_t* dst, const W& src, int words) {
    for (int i = 0; i < words; i++) dst[i] = src[i];
}

template <typename M, int DW>
static void tick_impl(M* m, const HmPktIn* in, HmPktOut* out) {
    constexpr int NW = DW / 32;
    constexpr int HW = sizeof(m->tx_hdr_data) / sizeof(uint32_t);
    constexpr int MW = sizeof(m->rx_mon_data) / sizeof(uint32_t);
    static_assert(HW <= HM_HDR_WORDS, "raise HM_HDR_WORDS");
    static_assert(MW <= HM_MON_WORDS, "raise HM_MON_WORDS");
    m->rst = in->rst;
    put_wide(m->rx_s_tdata, in->rx_s_tdata, NW);
    m->rx_s_tkeep = in->rx_s_tkeep;
    m->rx_s_tvalid = in->rx_s_tvalid;
    m->rx_s_tlast = in->rx_s_tlast;
    m->rx_s_tuser = in->rx_s_tuser;
    m->rx_hdr_ready = in->rx_hdr_ready;
    m->rx_m_tready = in->rx_m_tready;
    put_wide(m->tx_hdr_data, in->tx_hdr_data, HW);
    m->tx_hdr_valid = in->tx_hdr_valid;
    put_wide(m->tx_s_tdata, in->tx_s_tdata, NW);
    m->tx_s_tkeep = in->tx_s_tkeep;
    m->tx_s_tvalid = in->tx_s_tvalid;
    m->tx_s_tlast = in->tx_s_tlast;
    m->tx_m_tready = in->tx_m_tready;

    m->clk = 1;
    m->eval();
    m->clk = 0;
    m->eval();

    out->rx_s_tready = m->rx_s_tready;
    out->rx_hdr_valid = m->rx_hdr_valid;
    out->rx_m_tvalid = m->rx_m_tvalid;
    out->rx_m_tlast = m->rx_m_tlast;
    out->rx_mon_valid = m->rx_mon_valid;
    out->tx_hdr_ready = m->tx_hdr_ready;
    out->tx_s_tready = m->tx_s_tready;
    out->tx_m_tvalid = m->tx_m_tvalid;
    out->tx_m_tlast = m->tx_m_tlast;
    out->tx_m_tuser = m->tx_m_tuser;
    get_wide(out->rx_hdr_data, m->rx_hdr_data, HW);
    get_wide(out->rx_m_tdata, m->rx_m_tdata, NW);
    out->rx_m_tkeep = m->rx_m_tkeep;
    get_wide(out->rx_mon_data, m->rx_mon_data, MW);
    get_wide(out->rx_stat, m->rx_stat_cnt, 15);   // HM_RSN_COUNT
    get_wide(out->tx_m_tdata, m->tx_m_tdata, NW);
    out->tx_m_tkeep = m->tx_m_tkeep;
    out->tx_stat[0] = m->tx_stat_frames;
    out->tx_stat[1] = m->tx_stat_len_err;
    out->tx_stat[2] = m->tx_stat_bad_req;
}

struct HmPkt {
    VerilatedContext* ctx;
    int width;
    Vpkt256* m256;
    Vpkt512* m512;
};

extern "C" {

HmPkt* hm_pkt_new(int width) {
    if (width != 256 && width != 512) return nullptr;
    HmPkt* h = new HmPkt();
    h->ctx = new VerilatedContext();
    h->width = width;
    h->m256 = nullptr;
    h->m512 = nullptr;
    if (width == 256) h->m256 = new Vpkt256(h->ctx);
    else h->m512 = new Vpkt512(h->ctx);
    return h;
}

void hm_pkt_tick(HmPkt* h, const HmPktIn* in, HmPktOut* out) {
    if (h->width == 256) tick_impl<Vpkt256, 256>(h->m256, in, out);
    else tick_impl<Vpkt512, 512>(h->m512, in, out);
}

int hm_pkt_hdr_words(HmPkt* h) {
    return h->width == 256 ? (int)(sizeof(h->m256->tx_hdr_data) / 4) : (int)(sizeof(h->m512->tx_hdr_data) / 4);
}

void hm_pkt_free(HmPkt* h) {
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
