//! The DCQCN reference model's CC parameter presets and tables agree with the firmware's
//! `CC_TABLE` (names, defaults, ranges), and the model's conversion to hardware units accepts
//! every value the firmware stores.

use hematite_firmware::cc::{CcParams, CC_PARAMS, CC_TABLE};
use hematite_model::dcqcn::{self, HwParams};

#[test]
fn model_tables_match_firmware() {
    assert_eq!(CC_PARAMS, dcqcn::CC_PARAMS);
    for (i, &(name, default, min, max)) in CC_TABLE.iter().enumerate() {
        assert_eq!(dcqcn::CC_NAMES[i], name);
        assert_eq!(dcqcn::NVIDIA_DEFAULTS[i], default, "{name}");
        assert_eq!(dcqcn::CC_RANGES[i], (min, max), "{name}");
        let v = dcqcn::PAPER[i];
        assert!(v >= min && v <= max, "PAPER {name} = {v} outside the firmware range");
    }
    assert_eq!(CcParams::defaults().0, dcqcn::NVIDIA_DEFAULTS);
    // the firmware accepts the paper preset as one SET_CC_PARAMS of all words
    let mut p = CcParams::defaults();
    assert_eq!(p.set((1 << CC_PARAMS) - 1, &dcqcn::PAPER), Ok(()));
    assert_eq!(p.0, dcqcn::PAPER);
}

#[test]
fn stored_extremes_convert() {
    // every parameter at its minimum, then at its maximum: the conversion is total and its
    // output already normalized
    let lo: [u32; CC_PARAMS] = core::array::from_fn(|i| CC_TABLE[i].2);
    let hi: [u32; CC_PARAMS] = core::array::from_fn(|i| CC_TABLE[i].3);
    for words in [lo, hi] {
        for (clk, line, scale) in [(1, 1, 1), (250, 100_000, 1), (500, 400_000, 64), (65_535, 400_000, u32::MAX)] {
            let p = HwParams::from_cc(&words, clk, line, scale);
            assert_eq!(p.normalized(), p);
        }
    }
}
