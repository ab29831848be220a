//! The engine's opcode and AETH syndrome names (`rtl/pkg/hm_pkg.sv`, `HM_OP_*`, `HM_AETH_*`,
//! as `hematite_abi::pkt` reads them) agree with the reference model, which is written from the
//! specification on its own (`hematite_model::opcode`): every `HM_OP_X` names the opcode the model calls `RC_X` (with the
//! spec's long words), and the syndromes decode to the classes and codes IBTA defines.
use hematite_model::opcode;
use std::collections::BTreeMap;

/// The package's localparams whose names start with `prefix` (hematite-abi reads the package).
fn consts(prefix: &str) -> BTreeMap<String, u32> {
    hematite_abi::pkt::LOCALPARAMS
        .iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .map(|&(n, v)| (n.to_string(), v as u32))
        .collect()
}

#[test]
fn every_engine_opcode_is_the_models() {
    let ops = consts("HM_OP_");
    assert_eq!(ops.len(), 24, "{ops:?}");
    for (name, v) in &ops {
        let short = name.strip_prefix("HM_OP_").unwrap();
        let long = short
            .replace("WRITE", "RDMA_WRITE")
            .replace("READ_REQ", "RDMA_READ_REQUEST")
            .replace("READ_RESP", "RDMA_READ_RESPONSE")
            .replace("_IMM", "_WITH_IMMEDIATE")
            .replace("_INV", "_WITH_INVALIDATE")
            .replace("CMP_SWAP", "COMPARE_SWAP");
        let want = match long.as_str() {
            "ACK" => "RC_ACKNOWLEDGE".to_string(),
            "ATOMIC_ACK" => "RC_ATOMIC_ACKNOWLEDGE".to_string(),
            "CNP" => "CNP".to_string(),
            l => format!("RC_{l}"),
        };
        let info = opcode::info(*v as u8).unwrap_or_else(|| panic!("{name} = {v:#x}: not an opcode of the model"));
        assert_eq!(info.name, want, "{name} = {v:#x}");
    }
}

#[test]
fn aeth_syndromes_are_ibtas() {
    let s = consts("HM_AETH_");
    let cls = |n: &str| s[n] >> 5;
    assert_eq!((s["HM_AETH_CLS_ACK"], s["HM_AETH_CLS_RNR"], s["HM_AETH_CLS_NAK"]), (0, 1, 3));
    assert_eq!((cls("HM_AETH_ACK"), s["HM_AETH_ACK"] & 0x1F), (0, 31), "ACK with the invalid credit count");
    assert_eq!(s["HM_AETH_RNR"], 1 << 5, "RNR NAK, the timer code ORed in");
    for (n, code) in [("HM_AETH_NAK_PSN_SEQ", 0), ("HM_AETH_NAK_INV_REQ", 1), ("HM_AETH_NAK_REM_ACCESS", 2), ("HM_AETH_NAK_REM_OP", 3)] {
        assert_eq!((cls(n), s[n] & 0x1F), (3, code), "{n}");
    }
}
