//! The DCQCN rate-limiter slot map (`rtl/cc/hm_dcqcn_slots.sv`, wrapped by
//! `sim/hw/hm_sim_slots_top.sv`: 4 slots, 8-bit QPNs, 5-bit keys) in co-simulation.

/// The wrapper's parameters, for the reference model.
pub const SLOTS_N: usize = 4;
pub const SLOTS_KEY_BITS: u32 = 5;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct HmSlotsIn {
    pub tx_bytes: u16,
    pub rst: u8,
    pub cnp_valid: u8,
    pub cnp_qpn: u8,
    pub tx_valid: u8,
    pub tx_qpn: u8,
    pub query_qpn: u8,
    pub detach_valid: u8,
    pub detach_qpn: u8,
    /// The reaction point's o_op code (0 idle, 1 first CNP, 2 CNP, 6 release, ...).
    pub op: u8,
    pub op_slot: u8,
    pub cnp_dropped: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct HmSlotsOut {
    pub no_slot: u32,
    pub bad_qpn: u32,
    pub allocs: u32,
    pub tx_bytes: u16,
    pub cnp_valid: u8,
    pub cnp_slot: u8,
    pub tx_valid: u8,
    pub tx_slot: u8,
    pub query_hit: u8,
    pub query_slot: u8,
    pub unmapped: u8,
    pub used: u8,
}

#[repr(C)]
struct HmSlots {
    _private: [u8; 0],
}

extern "C" {
    fn hm_slots_new() -> *mut HmSlots;
    fn hm_slots_tick(h: *mut HmSlots, inp: *const HmSlotsIn, out: *mut HmSlotsOut);
    fn hm_slots_free(h: *mut HmSlots);
}

/// The Verilated slot map.
pub struct SlotsSim {
    h: *mut HmSlots,
}

impl SlotsSim {
    /// A map held in reset for a few cycles; the next [`SlotsSim::tick`] is the first clock
    /// after reset.
    pub fn new() -> SlotsSim {
        // SAFETY: no preconditions.
        let h = unsafe { hm_slots_new() };
        let mut s = SlotsSim { h };
        let i = HmSlotsIn { rst: 1, ..Default::default() };
        for _ in 0..3 {
            s.tick(&i);
        }
        s
    }

    /// One clock; returns the outputs sampled before the edge (this clock's lookups, the
    /// registered outputs of the previous clock).
    pub fn tick(&mut self, i: &HmSlotsIn) -> HmSlotsOut {
        let mut o = HmSlotsOut::default();
        // SAFETY: self.h is live until Drop; #[repr(C)] twins of the C structs.
        unsafe { hm_slots_tick(self.h, i, &mut o) };
        o
    }
}

impl Default for SlotsSim {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SlotsSim {
    fn drop(&mut self) {
        // SAFETY: created by hm_slots_new, freed once.
        unsafe { hm_slots_free(self.h) }
    }
}
