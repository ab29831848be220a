//! DCQCN congestion-control parameters (per device): NVIDIA defaults, ranges, storage. The
//! firmware only stores and returns them; the DCQCN RTL that will consume them does not exist
//! yet. Units: rates in Mb/s, times in µs, bytes in bytes.

/// Number of parameters.
pub const CC_PARAMS: usize = 19;

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
