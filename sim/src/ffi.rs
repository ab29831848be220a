//! The only unsafe code of the crate: the extern "C" shim around the Verilated models
//! (csrc/shim.cpp). Layouts are `#[repr(C)]` twins of the C structs there.

use std::os::raw::c_int;

pub const MAX_WORDS: usize = 16;
pub const HDR_WORDS: usize = 40;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct HmPktIn {
    pub rx_s_tdata: [u32; MAX_WORDS],
    pub rx_s_tkeep: u64,
    pub rst: u8,
    pub rx_s_tvalid: u8,
    pub rx_s_tlast: u8,
    pub rx_s_tuser: u8,
    pub rx_hdr_ready: u8,
    pub rx_m_tready: u8,
    pub tx_hdr_valid: u8,
    pub tx_s_tvalid: u8,
    pub tx_s_tlast: u8,
    pub tx_m_tready: u8,
    pub tx_hdr_data: [u32; HDR_WORDS],
    pub tx_s_tdata: [u32; MAX_WORDS],
    pub tx_s_tkeep: u64,
}

impl Default for HmPktIn {
    fn default() -> Self {
        HmPktIn {
            rx_s_tdata: [0; MAX_WORDS],
            rx_s_tkeep: 0,
            rst: 0,
            rx_s_tvalid: 0,
            rx_s_tlast: 0,
            rx_s_tuser: 0,
            rx_hdr_ready: 1,
            rx_m_tready: 1,
            tx_hdr_valid: 0,
            tx_s_tvalid: 0,
            tx_s_tlast: 0,
            tx_m_tready: 1,
            tx_hdr_data: [0; HDR_WORDS],
            tx_s_tdata: [0; MAX_WORDS],
            tx_s_tkeep: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct HmPktOut {
    pub rx_s_tready: u8,
    pub rx_hdr_valid: u8,
    pub rx_m_tvalid: u8,
    pub rx_m_tlast: u8,
    pub rx_mon_valid: u8,
    pub tx_hdr_ready: u8,
    pub tx_s_tready: u8,
    pub tx_m_tvalid: u8,
    pub tx_m_tlast: u8,
    pub tx_m_tuser: u8,
    pub rx_hdr_data: [u32; HDR_WORDS],
    pub rx_m_tdata: [u32; MAX_WORDS],
    pub rx_m_tkeep: u64,
    pub rx_mon_data: [u32; HDR_WORDS],
    pub rx_stat: [u32; 16],
    pub tx_m_tdata: [u32; MAX_WORDS],
    pub tx_m_tkeep: u64,
    pub tx_stat: [u32; 3],
}

impl Default for HmPktOut {
    fn default() -> Self {
        // SAFETY: all-zero is a valid value for this plain-old-data struct of integers.
        unsafe { std::mem::zeroed() }
    }
}

#[repr(C)]
struct HmPkt {
    _private: [u8; 0],
}

extern "C" {
    fn hm_pkt_new(width: c_int) -> *mut HmPkt;
    fn hm_pkt_tick(h: *mut HmPkt, inp: *const HmPktIn, out: *mut HmPktOut);
    fn hm_pkt_hdr_words(h: *mut HmPkt) -> c_int;
    fn hm_pkt_free(h: *mut HmPkt);
}

/// Owning handle of one Verilated model.
pub struct Handle(*mut HmPkt);

impl Handle {
    pub fn new(width: usize) -> Option<Handle> {
        // SAFETY: hm_pkt_new has no preconditions; it returns null for unsupported widths.
        let p = unsafe { hm_pkt_new(width as c_int) };
        if p.is_null() {
            return None;
        }
        let h = Handle(p);
        // SAFETY: h.0 is a live model created above.
        let words = unsafe { hm_pkt_hdr_words(h.0) } as usize;
        assert!(words <= HDR_WORDS && words * 32 >= crate::layout::HDR_BITS, "record layout/shim mismatch");
        Some(h)
    }

    pub fn tick(&mut self, inp: &HmPktIn, out: &mut HmPktOut) {
        // SAFETY: self.0 is live (freed only in Drop); inp/out are valid, properly aligned
        // #[repr(C)] twins of the C structs, and the shim copies only within their bounds.
        unsafe { hm_pkt_tick(self.0, inp, out) }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: self.0 came from hm_pkt_new and is freed exactly once here.
        unsafe { hm_pkt_free(self.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn rejects_unsupported_width() {
        assert!(Handle::new(128).is_none());
    }
    #[test]
    fn reset_state_is_idle() {
        let mut h = Handle::new(512).unwrap();
        let mut out = HmPktOut::default();
        let inp = HmPktIn { rst: 1, ..Default::default() };
        h.tick(&inp, &mut out);
        h.tick(&inp, &mut out);
        assert_eq!(out.rx_m_tvalid, 0);
        assert_eq!(out.tx_m_tvalid, 0);
        assert_eq!(out.rx_mon_valid, 0);
    }
}
