// DCQCN parameters: the 19 CC parameters (names, ranges, NVIDIA and paper presets) and their
// conversion to the hardware register set (`HwParams::from_cc`). Plain `core` Rust with no
// allocation and no floating point: it is textually included by the model
// (`model/src/dcqcn.rs`) and by the no_std firmware (`firmware/src/cc.rs`), so the conversion
// the firmware does before writing the engine's CC registers is the one the tests check.
// ------------------------------------------------------------------------------------------
// Parameters
// ------------------------------------------------------------------------------------------

/// Number of CC parameters (the firmware's `CC_PARAMS`).
pub const CC_PARAMS: usize = 19;

/// Indices of the CC parameters, in the firmware's `CC_TABLE` word order.
pub mod idx {
    /// `clamp_tgt_rate` (0/1).
    pub const CLAMP_TGT_RATE: usize = 0;
    /// `clamp_tgt_rate_after_time_inc` (0/1).
    pub const CLAMP_TGT_RATE_AFTER_TIME_INC: usize = 1;
    /// `rpg_time_reset` (µs): increase timer T.
    pub const RPG_TIME_RESET: usize = 2;
    /// `rpg_byte_reset` (bytes): byte counter B.
    pub const RPG_BYTE_RESET: usize = 3;
    /// `rpg_threshold`: fast-recovery threshold F.
    pub const RPG_THRESHOLD: usize = 4;
    /// `rpg_max_rate` (Mb/s, 0 = line rate).
    pub const RPG_MAX_RATE: usize = 5;
    /// `rpg_ai_rate` (Mb/s): R_AI.
    pub const RPG_AI_RATE: usize = 6;
    /// `rpg_hai_rate` (Mb/s): R_HAI.
    pub const RPG_HAI_RATE: usize = 7;
    /// `rpg_gd`: cut = R_C·α >> gd (α with 10 fraction bits).
    pub const RPG_GD: usize = 8;
    /// `rpg_min_dec_fac` (%): one cut keeps at least this share of the rate.
    pub const RPG_MIN_DEC_FAC: usize = 9;
    /// `rpg_min_rate` (Mb/s).
    pub const RPG_MIN_RATE: usize = 10;
    /// `rate_to_set_on_first_cnp` (Mb/s, 0 = off).
    pub const RATE_TO_SET_ON_FIRST_CNP: usize = 11;
    /// `dce_tcp_g`: α gain G (g = (1024 − G)/1024).
    pub const DCE_TCP_G: usize = 12;
    /// `dce_tcp_rtt` (µs): α update period.
    pub const DCE_TCP_RTT: usize = 13;
    /// `rate_reduce_monitor_period` (µs): decrease window.
    pub const RATE_REDUCE_MONITOR_PERIOD: usize = 14;
    /// `initial_alpha_value` (α on the first CNP, 10-bit fraction).
    pub const INITIAL_ALPHA_VALUE: usize = 15;
    /// `min_time_between_cnps` (µs): NP interval.
    pub const MIN_TIME_BETWEEN_CNPS: usize = 16;
    /// `cnp_dscp`.
    pub const CNP_DSCP: usize = 17;
    /// `cnp_802p_prio`.
    pub const CNP_802P_PRIO: usize = 18;
}

/// Names of the CC parameters in word order (as in the firmware's `CC_TABLE`).
pub const CC_NAMES: [&str; CC_PARAMS] = [
    "clamp_tgt_rate",
    "clamp_tgt_rate_after_time_inc",
    "rpg_time_reset",
    "rpg_byte_reset",
    "rpg_threshold",
    "rpg_max_rate",
    "rpg_ai_rate",
    "rpg_hai_rate",
    "rpg_gd",
    "rpg_min_dec_fac",
    "rpg_min_rate",
    "rate_to_set_on_first_cnp",
    "dce_tcp_g",
    "dce_tcp_rtt",
    "rate_reduce_monitor_period",
    "initial_alpha_value",
    "min_time_between_cnps",
    "cnp_dscp",
    "cnp_802p_prio",
];

/// Accepted range `(min, max)` of each CC parameter (the firmware's `CC_TABLE` ranges);
/// [`HwParams::from_cc`] clamps its inputs into these.
pub const CC_RANGES: [(u32, u32); CC_PARAMS] = [
    (0, 1),
    (0, 1),
    (1, 131_071),
    (1, 0xFF_FFFF),
    (1, 31),
    (0, 400_000),
    (1, 400_000),
    (1, 400_000),
    (1, 15),
    (1, 100),
    (1, 400_000),
    (0, 400_000),
    (0, 1023),
    (1, 1023),
    (1, 65_535),
    (0, 1023),
    (0, 4095),
    (0, 63),
    (0, 7),
];

/// NVIDIA defaults: the values of the firmware's `CC_TABLE` (ConnectX `mlxconfig` defaults, with
/// `min_time_between_cnps` = 4 µs as in NVIDIA's documentation table).
pub const NVIDIA_DEFAULTS: [u32; CC_PARAMS] = [
    0,      // clamp_tgt_rate
    1,      // clamp_tgt_rate_after_time_inc
    300,    // rpg_time_reset (µs)
    32_767, // rpg_byte_reset (bytes)
    1,      // rpg_threshold
    0,      // rpg_max_rate (line rate)
    5,      // rpg_ai_rate (Mb/s)
    50,     // rpg_hai_rate (Mb/s)
    11,     // rpg_gd (cut = α/2)
    50,     // rpg_min_dec_fac (%)
    1,      // rpg_min_rate (Mb/s)
    0,      // rate_to_set_on_first_cnp (off)
    1019,   // dce_tcp_g (g = 5/1024)
    1,      // dce_tcp_rtt (µs)
    4,      // rate_reduce_monitor_period (µs)
    1023,   // initial_alpha_value
    4,      // min_time_between_cnps (µs)
    48,     // cnp_dscp
    6,      // cnp_802p_prio
];

/// The DCQCN paper's parameters (Zhu et al., SIGCOMM'15, as commonly quoted; see
/// `shared/reference/DCQCN.md` §3.5) in the NVIDIA-style encoding. Approximations, explained
/// in `docs/dcqcn.md`:
/// * g = 1/256 → `dce_tcp_g` = 1020 (exact: (1024 − 1020)/1024).
/// * α timer K = 55 µs → `dce_tcp_rtt` = 55; the paper decays α only after K µs without a CNP
///   and applies the +g at each CNP; the periodic NVIDIA-style update with a "CNP seen" bit is
///   the same when CNPs come every N = 50 µs < K.
/// * Cut on every CNP: `clamp_tgt_rate` = 1 (R_T ← R_C on every cut), `rpg_gd` = 11 (α/2), no
///   extra bound (`rpg_min_dec_fac` = 1 %, never binding for α/2), decrease window 1 µs (≪ N,
///   so every paced CNP gets its own cut, at most 1 µs late).
/// * T = 55 µs, B = 10 MB (10,000,000 bytes), F = 5, R_AI = 40 Mb/s, R_HAI = 100 Mb/s (the paper
///   leaves R_HAI open), N = 50 µs.
/// * Minimum rate 100 Mb/s (the paper's author's ns-3 model default; the paper gives none).
/// * Initial α = 1023 (≈ 1), no `rate_to_set_on_first_cnp`; CNP DSCP/PCP as NVIDIA.
pub const PAPER: [u32; CC_PARAMS] = [
    1,          // clamp_tgt_rate: R_T = R_C on every cut
    1,          // clamp_tgt_rate_after_time_inc (irrelevant when clamp_tgt_rate = 1)
    55,         // rpg_time_reset: T = 55 µs
    10_000_000, // rpg_byte_reset: B = 10 MB
    5,          // rpg_threshold: F = 5
    0,          // rpg_max_rate: line rate
    40,         // rpg_ai_rate: R_AI = 40 Mb/s
    100,        // rpg_hai_rate: R_HAI = 100 Mb/s
    11,         // rpg_gd: cut α/2
    1,          // rpg_min_dec_fac: no extra bound
    100,        // rpg_min_rate: 100 Mb/s (author's ns-3 model)
    0,          // rate_to_set_on_first_cnp: off
    1020,       // dce_tcp_g: g = 4/1024 = 1/256
    55,         // dce_tcp_rtt: K = 55 µs
    1,          // rate_reduce_monitor_period: 1 µs (≪ N)
    1023,       // initial_alpha_value: α = 1
    50,         // min_time_between_cnps: N = 50 µs
    48,         // cnp_dscp
    6,          // cnp_802p_prio
];

/// Fraction bits of the rate unit: a rate of `r` RU is `r / 2^20` bytes per clock cycle.
pub const RATE_FRAC: u32 = 20;
/// Largest rate in RU (2^31 − 1, just under 2048 bytes per cycle): sums of two rates fit in 32 bits.
pub const RATE_MAX: u32 = (1 << 31) - 1;
/// Largest α (10-bit fraction, 1023/1024).
pub const ALPHA_MAX: u16 = 1023;
/// Saturation value of the 5-bit stage counters.
pub const STAGE_MAX: u8 = 31;
/// Largest period in cycles that [`HwParams::from_cc`] produces (2^30).
pub const PERIOD_MAX: u32 = 1 << 30;
/// Largest byte count of one transmitted-bytes report and of one merged FIFO entry (16 bits).
pub const TX_BYTES_MAX: u32 = 0xFFFF;

/// Register-level DCQCN parameters in hardware units (what the RTL holds in its registers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HwParams {
    /// `clamp_tgt_rate`: R_T ← R_C on every cut.
    pub clamp_tgt_rate: bool,
    /// `clamp_tgt_rate_after_time_inc`: R_T ← R_C on a cut if any increase event happened since
    /// the previous cut (without it: only if a byte-counter event happened).
    pub clamp_after_inc: bool,
    /// Increase timer T in cycles (1..=[`PERIOD_MAX`]).
    pub inc_period: u32,
    /// Byte counter threshold B in bytes (1..=0xFF_FFFF, 24 bits).
    pub byte_reset: u32,
    /// Fast-recovery threshold F (1..=31).
    pub threshold: u8,
    /// Maximum rate (RU): R_T and R_C never exceed it; a QP back at it with α = 0 is released.
    pub max_rate: u32,
    /// Additive increase step R_AI (RU, ≥ 1).
    pub ai_rate: u32,
    /// Hyper increase step R_HAI (RU, ≥ 1).
    pub hai_rate: u32,
    /// Cut shift: reduction = R_C·α >> gd (1..=15; 11 ⇒ α/2).
    pub gd: u8,
    /// Lower bound of one cut as a 10-bit fraction of the old rate (11..=1024):
    /// ⌈rpg_min_dec_fac · 1024 / 100⌉.
    pub min_dec_q10: u16,
    /// Minimum rate (RU, 1..=`max_rate`).
    pub min_rate: u32,
    /// R_C = R_T on the first CNP (RU, `min_rate..=max_rate`), or 0: start at `max_rate` and cut.
    pub first_rate: u32,
    /// α gain G (0..=1023): α ← α·G >> 10 (+ 1024 − G when a CNP was seen).
    pub g: u16,
    /// α update period in cycles.
    pub alpha_period: u32,
    /// Decrease window in cycles (at most one cut per window after the first).
    pub dec_period: u32,
    /// α on the first CNP (0..=1023).
    pub initial_alpha: u16,
    /// NP: minimum cycles between two CNPs of one QP (0 = a CNP for every CE packet).
    pub cnp_interval: u32,
    /// DSCP of generated CNPs (6 bits; for the CNP builder).
    pub cnp_dscp: u8,
    /// 802.1p priority of generated CNPs (3 bits; for the CNP builder).
    pub cnp_prio: u8,
    /// Line rate (RU): the rate reported for unlimited QPs.
    pub line_rate: u32,
}

/// `a · b / c` rounded to nearest, in `u64` (callers keep `a · b` below 2^63); `c` = 0 gives 0.
const fn mul_div_round(a: u64, b: u64, c: u64) -> u64 {
    if c == 0 {
        return 0;
    }
    (a * b + c / 2) / c
}

const fn clamp_u64(v: u64, lo: u64, hi: u64) -> u64 {
    if v < lo {
        lo
    } else if v > hi {
        hi
    } else {
        v
    }
}

/// Converts Mb/s to rate units (2^-20 bytes per cycle) at `clk_mhz`: round(mbps · 2^17 / clk),
/// clamped to [`RATE_MAX`]. Integer only; `mbps` ≤ 2^24 keeps the product below 2^41.
pub const fn mbps_to_ru(mbps: u32, clk_mhz: u32) -> u32 {
    let clk = if clk_mhz == 0 { 1 } else { clk_mhz };
    let mb = if mbps > 0xFF_FFFF { 0xFF_FFFF } else { mbps };
    let v = mul_div_round(mb as u64, 1 << (RATE_FRAC - 3), clk as u64);
    if v > RATE_MAX as u64 {
        RATE_MAX
    } else {
        v as u32
    }
}

/// µs → cycles at `clk_mhz / time_scale`: round(us · clk / scale), at least 1, at most
/// [`PERIOD_MAX`].
const fn us_to_cycles(us: u32, clk_mhz: u32, scale: u32) -> u32 {
    clamp_u64(mul_div_round(us as u64, clk_mhz as u64, scale as u64), 1, PERIOD_MAX as u64) as u32
}

impl HwParams {
    /// Converts the 19 CC parameters (firmware `CC_TABLE` order and units: Mb/s, µs, bytes) to
    /// hardware units for a `clk_mhz` clock and a `line_rate_mbps` port. Every time constant is
    /// divided by `time_scale` (≥ 1; 0 counts as 1) and so is the byte counter threshold; rates
    /// are not scaled (time compression keeps bytes per cycle). Out-of-range inputs are clamped
    /// into [`CC_RANGES`]; `clk_mhz` into 1..=65535, `line_rate_mbps` into 1..=400,000.
    ///
    /// Integer-only `u64` arithmetic (largest product: 400,000 · 2^17 < 2^36), so the same code
    /// runs in the no_std riscv32 firmware.
    pub const fn from_cc(params: &[u32; CC_PARAMS], clk_mhz: u32, line_rate_mbps: u32, time_scale: u32) -> HwParams {
        let mut p = [0u32; CC_PARAMS];
        let mut i = 0;
        while i < CC_PARAMS {
            p[i] = clamp_u64(params[i] as u64, CC_RANGES[i].0 as u64, CC_RANGES[i].1 as u64) as u32;
            i += 1;
        }
        let clk = clamp_u64(clk_mhz as u64, 1, 65_535) as u32;
        let scale = if time_scale == 0 { 1 } else { time_scale };
        let line = mbps_to_ru(clamp_u64(line_rate_mbps as u64, 1, 400_000) as u32, clk);
        let line = if line == 0 { 1 } else { line };
        let max_rate = if p[idx::RPG_MAX_RATE] == 0 {
            line
        } else {
            clamp_u64(mbps_to_ru(p[idx::RPG_MAX_RATE], clk) as u64, 1, line as u64) as u32
        };
        let min_rate = clamp_u64(mbps_to_ru(p[idx::RPG_MIN_RATE], clk) as u64, 1, max_rate as u64) as u32;
        let first_rate = if p[idx::RATE_TO_SET_ON_FIRST_CNP] == 0 {
            0
        } else {
            clamp_u64(mbps_to_ru(p[idx::RATE_TO_SET_ON_FIRST_CNP], clk) as u64, min_rate as u64, max_rate as u64) as u32
        };
        let ai = mbps_to_ru(p[idx::RPG_AI_RATE], clk);
        let hai = mbps_to_ru(p[idx::RPG_HAI_RATE], clk);
        let byte_reset = clamp_u64(mul_div_round(p[idx::RPG_BYTE_RESET] as u64, 1, scale as u64), 1, 0xFF_FFFF) as u32;
        // ⌈pct·1024/100⌉: the bound R_C·q >> 10 never undercuts pct % (rounded down to an RU)
        let min_dec_q10 = ((p[idx::RPG_MIN_DEC_FAC] as u64 * 1024).div_ceil(100)) as u16;
        let cnp_interval = if p[idx::MIN_TIME_BETWEEN_CNPS] == 0 {
            0
        } else {
            us_to_cycles(p[idx::MIN_TIME_BETWEEN_CNPS], clk, scale)
        };
        HwParams {
            clamp_tgt_rate: p[idx::CLAMP_TGT_RATE] != 0,
            clamp_after_inc: p[idx::CLAMP_TGT_RATE_AFTER_TIME_INC] != 0,
            inc_period: us_to_cycles(p[idx::RPG_TIME_RESET], clk, scale),
            byte_reset,
            threshold: p[idx::RPG_THRESHOLD] as u8,
            max_rate,
            ai_rate: if ai == 0 { 1 } else { ai },
            hai_rate: if hai == 0 { 1 } else { hai },
            gd: p[idx::RPG_GD] as u8,
            min_dec_q10,
            min_rate,
            first_rate,
            g: p[idx::DCE_TCP_G] as u16,
            alpha_period: us_to_cycles(p[idx::DCE_TCP_RTT], clk, scale),
            dec_period: us_to_cycles(p[idx::RATE_REDUCE_MONITOR_PERIOD], clk, scale),
            initial_alpha: p[idx::INITIAL_ALPHA_VALUE] as u16,
            cnp_interval,
            cnp_dscp: p[idx::CNP_DSCP] as u8,
            cnp_prio: p[idx::CNP_802P_PRIO] as u8,
            line_rate: line,
        }
    }

    /// The same register set with every field forced into its documented range (what the RTL
    /// sees if software writes nonsense; [`HwParams::from_cc`] output is already normalized).
    pub fn normalized(&self) -> HwParams {
        let line = self.line_rate.clamp(1, RATE_MAX);
        let max_rate = self.max_rate.clamp(1, line);
        let min_rate = self.min_rate.clamp(1, max_rate);
        HwParams {
            inc_period: self.inc_period.clamp(1, PERIOD_MAX),
            byte_reset: self.byte_reset.clamp(1, 0xFF_FFFF),
            threshold: self.threshold.clamp(1, STAGE_MAX),
            max_rate,
            ai_rate: self.ai_rate.clamp(1, RATE_MAX),
            hai_rate: self.hai_rate.clamp(1, RATE_MAX),
            gd: self.gd.clamp(1, 15),
            min_dec_q10: self.min_dec_q10.min(1024),
            min_rate,
            first_rate: if self.first_rate == 0 { 0 } else { self.first_rate.clamp(min_rate, max_rate) },
            g: self.g.min(1023),
            alpha_period: self.alpha_period.clamp(1, PERIOD_MAX),
            dec_period: self.dec_period.clamp(1, PERIOD_MAX),
            initial_alpha: self.initial_alpha.min(ALPHA_MAX),
            cnp_interval: self.cnp_interval.min(PERIOD_MAX),
            cnp_dscp: self.cnp_dscp & 63,
            cnp_prio: self.cnp_prio & 7,
            line_rate: line,
            ..*self
        }
    }

    /// The engine's CC registers 1..=13 (`HM_CTL_CC + 4 i`) holding this set: the CNP
    /// interval, the periods, the byte counter, the rates, then α₀ / G and the minimum cut / gd
    /// packed 16 + 16 bits. (Register 0 is the control word, 14 the pacer burst, 15 PFC.)
    pub fn reg_words(&self) -> [u32; 13] {
        [
            self.cnp_interval,
            self.inc_period,
            self.alpha_period,
            self.dec_period,
            self.byte_reset,
            self.max_rate,
            self.ai_rate,
            self.hai_rate,
            self.min_rate,
            self.first_rate,
            self.line_rate,
            u32::from(self.initial_alpha) << 16 | u32::from(self.g),
            u32::from(self.min_dec_q10) << 16 | u32::from(self.gd),
        ]
    }
}
