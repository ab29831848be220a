//! DCQCN congestion-control parameters (per device): NVIDIA defaults, ranges, storage, and the
//! engine register words they become. `SET_CC_PARAMS` stores them and writes the engine's CC
//! registers (`HM_CTL_CC`) with [`hw::HwParams::from_cc`], the reference model's own
//! conversion (the same source file, included). Units: rates in Mb/s, times in µs, bytes.

/// The reference model's parameter definitions and conversion (`model/src/dcqcn_params.rs`).
#[allow(missing_docs, dead_code, clippy::all)]
pub mod hw {
    include!("../../model/src/dcqcn_params.rs");
}

/// The engine clock the register values are computed for (MHz) and the port's line rate
/// (Mb/s): the nominal 250 MHz / 100 Gb/s of the simulated NIC.
pub const CLK_MHZ: u32 = 250;
/// See [`CLK_MHZ`].
pub const LINE_MBPS: u32 = 100_000;
/// Pacer bucket depth written to `HM_CC_BURST` (bytes): four 4 KiB packets.
pub const BURST_BYTES: u32 = 16_384;

/// Number of parameters (the mailbox ABI's word count).
pub use hematite_abi::mbox::CC_PARAMS;

/// (name, default, min, max) of each parameter, in word order.
pub const CC_TABLE: [(&str, u32, u32, u32); CC_PARAMS] = [
    ("clamp_tgt_rate", 0, 0, 1),
    ("clamp_tgt_rate_after_time_inc", 1, 0, 1),
    ("rpg_time_reset", 300, 1, 131_071),
    ("rpg_byte_reset", 32_767, 1, 0xFF_FFFF),
    ("rpg_threshold", 1, 1, 31),
    ("rpg_max_rate", 0, 0, 400_000),
    ("rpg_ai_rate", 5, 1, 400_000),
    ("rpg_hai_rate", 50, 1, 400_000),
    ("rpg_gd", 11, 1, 15),
    ("rpg_min_dec_fac", 50, 1, 100),
    ("rpg_min_rate", 1, 1, 400_000),
    ("rate_to_set_on_first_cnp", 0, 0, 400_000),
    ("dce_tcp_g", 1019, 0, 1023),
    ("dce_tcp_rtt", 1, 1, 1023),
    ("rate_reduce_monitor_period", 4, 1, 65_535),
    ("initial_alpha_value", 1023, 0, 1023),
    ("min_time_between_cnps", 4, 0, 4095),
    ("cnp_dscp", 48, 0, 63),
    ("cnp_802p_prio", 6, 0, 7),
];

/// The stored parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CcParams(pub [u32; CC_PARAMS]);

impl CcParams {
    /// All zero (before `defaults`; keeps the firmware's statics in .bss).
    pub const ZERO: CcParams = CcParams([0; CC_PARAMS]);

    /// NVIDIA defaults.
    pub fn defaults() -> CcParams {
        let mut p = [0u32; CC_PARAMS];
        for (d, t) in p.iter_mut().zip(CC_TABLE.iter()) {
            *d = t.1;
        }
        CcParams(p)
    }

    /// Sets the parameters whose bit is set in `mask` to `values` (all or nothing). Err if
    /// the mask has bits beyond [`CC_PARAMS`] or a selected value is out of range.
    #[allow(clippy::result_unit_err)]
    pub fn set(&mut self, mask: u32, values: &[u32]) -> Result<(), ()> {
        if mask >> CC_PARAMS != 0 {
            return Err(());
        }
        let mut next = self.0;
        for (i, t) in CC_TABLE.iter().enumerate() {
            if mask & (1 << i) != 0 {
                let v = *values.get(i).ok_or(())?;
                if v < t.2 || v > t.3 {
                    return Err(());
                }
                if let Some(d) = next.get_mut(i) {
                    *d = v;
                }
            }
        }
        self.0 = next;
        Ok(())
    }
}

/// `HM_CC_PFC`: PFC frames honoured, every priority's packets ECN-capable (ECT(0)), a pause
/// quantum (512 bit times) in cycles with 8 fraction bits: 512 · clk / line rate (1.28 cycles =
/// 328/256 at 250 MHz and 100 Gb/s).
pub const fn pfc_word() -> u32 {
    let q8 = (512 * CLK_MHZ as u64 * 256 + LINE_MBPS as u64 / 2) / LINE_MBPS as u64;
    (q8 as u32) << 16 | 0xFF << 8 | 1
}

/// The engine's CC register words (`HM_CTL_CC + 4 i`, i = 0..15) for `p`, with CNP
/// generation and rate limiting on.
pub fn engine_words(p: &CcParams) -> [u32; 16] {
    let h = hw::HwParams::from_cc(&p.0, CLK_MHZ, LINE_MBPS, 1);
    let ctrl = 1 | 1 << 1 | u32::from(h.cnp_dscp) << 8 | u32::from(h.cnp_prio) << 16 | u32::from(h.clamp_tgt_rate) << 19
        | u32::from(h.clamp_after_inc) << 20 | u32::from(h.threshold) << 24;
    let mut w = [0; 16];
    w[0] = ctrl;
    w[1..14].copy_from_slice(&h.reg_words());
    w[14] = BURST_BYTES;
    w[15] = pfc_word();
    w
}
