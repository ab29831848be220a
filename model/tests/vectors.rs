//! The shared RoCEv2 test vectors (`shared/vectors/rocev2_vectors.json` and the pcaps).

mod common;

use common::{be16, hex, shared_dir, unhex};
use hematite_model::capture::read_frames;
use hematite_model::{build_frame, classify, icrc, normalize_for_tx, parse_frame, DropReason};
use serde_json::Value;
use std::collections::BTreeMap;

fn load() -> Value {
    let p = shared_dir().join("vectors/rocev2_vectors.json");
    let s = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&s).expect("vectors JSON")
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or_else(|| panic!("missing numeric field {k} in {v}"))
}

fn mac(s: &str) -> u64 {
    s.split(':').fold(0u64, |a, x| a << 8 | u64::from_str_radix(x, 16).unwrap())
}

fn ip(s: &str) -> u128 {
    match s.parse::<std::net::IpAddr>().unwrap() {
        std::net::IpAddr::V4(a) => u32::from(a) as u128,
        std::net::IpAddr::V6(a) => u128::from(a),
    }
}

fn check_positive(v: &Value) {
    let name = v["name"].as_str().unwrap();
    let f = unhex(v["hex"].as_str().unwrap());
    let flds = &v["fields"];
    let out = classify(&f);
    assert_eq!(out.reason, None, "{name}: dropped");
    assert!(out.icrc_ok, "{name}");
    assert_eq!(parse_frame(&f).map(|p| p.to_record()), Ok(out.rec), "{name}: parse_frame disagrees");
    let r = out.rec;

    // Ethernet / VLAN
    let eth = &flds["Ethernet"];
    assert_eq!(r.eth_dst, mac(eth["dst"].as_str().unwrap()), "{name}");
    assert_eq!(r.eth_src, mac(eth["src"].as_str().unwrap()), "{name}");
    let l3 = if let Some(q) = flds.get("802.1Q") {
        assert_eq!(u(eth, "type"), 0x8100, "{name}");
        assert!(r.vlan_valid, "{name}");
        assert_eq!(r.vlan_pcp as u64, u(q, "prio"), "{name}");
        assert_eq!(r.vlan_dei as u64, u(q, "dei"), "{name}");
        assert_eq!(r.vlan_vid as u64, u(q, "vlan"), "{name}");
        assert_eq!(u(q, "type"), if r.ipv6 { 0x86DD } else { 0x0800 }, "{name}");
        18
    } else {
        assert!(!r.vlan_valid, "{name}");
        assert_eq!(u(eth, "type"), if r.ipv6 { 0x86DD } else { 0x0800 }, "{name}");
        14
    };

    // IP
    let ip_end;
    if let Some(h) = flds.get("IP") {
        assert!(!r.ipv6, "{name}");
        assert_eq!(u(h, "version"), 4);
        assert_eq!(u(h, "ihl"), 5);
        assert_eq!((r.dscp << 2 | r.ecn) as u64, u(h, "tos"), "{name}");
        assert_eq!(u(h, "len"), r.udp_len as u64 + 20, "{name}");
        assert_eq!(r.ip_id as u64, u(h, "id"), "{name}");
        assert_eq!(r.ip_df, h["flags"].as_str().unwrap().contains("DF"), "{name}");
        assert_eq!(u(h, "frag"), 0);
        assert_eq!(r.ttl as u64, u(h, "ttl"), "{name}");
        assert_eq!(u(h, "proto"), 17);
        assert_eq!(be16(&f, l3 + 10) as u64, u(h, "chksum"), "{name}");
        assert!(out.ipv4_csum_ok, "{name}");
        assert_eq!(r.ip_src, ip(h["src"].as_str().unwrap()), "{name}");
        assert_eq!(r.ip_dst, ip(h["dst"].as_str().unwrap()), "{name}");
        assert_eq!(r.flow_label, 0);
        ip_end = l3 + u(h, "len") as usize;
    } else {
        let h = &flds["IPv6"];
        assert!(r.ipv6, "{name}");
        assert!(!out.ipv4_csum_ok);
        assert_eq!(u(h, "version"), 6);
        assert_eq!((r.dscp << 2 | r.ecn) as u64, u(h, "tc"), "{name}");
        assert_eq!(r.flow_label as u64, u(h, "fl"), "{name}");
        assert_eq!(u(h, "plen"), r.udp_len as u64, "{name}");
        assert_eq!(u(h, "nh"), 17);
        assert_eq!(r.ttl as u64, u(h, "hlim"), "{name}");
        assert_eq!(r.ip_src, ip(h["src"].as_str().unwrap()), "{name}");
        assert_eq!(r.ip_dst, ip(h["dst"].as_str().unwrap()), "{name}");
        assert_eq!((r.ip_id, r.ip_df), (0, false));
        ip_end = l3 + 40 + u(h, "plen") as usize;
    }
    assert_eq!(ip_end, f.len(), "{name}: positive vectors carry no Ethernet padding");

    // UDP
    let udp = &flds["UDP"];
    assert_eq!(r.udp_sport as u64, u(udp, "sport"), "{name}");
    assert_eq!(r.udp_dport as u64, u(udp, "dport"), "{name}");
    assert_eq!(r.udp_len as u64, u(udp, "len"), "{name}");
    assert_eq!(r.udp_csum as u64, u(udp, "chksum"), "{name}");

    // BTH
    let b = &flds["BTH"];
    assert_eq!(r.opcode as u64, u(b, "opcode"), "{name}");
    assert_eq!(r.se as u64, u(b, "solicited"), "{name}");
    assert_eq!(r.migreq as u64, u(b, "migreq"), "{name}");
    assert_eq!(r.padcnt as u64, u(b, "padcount"), "{name}");
    assert_eq!(r.tver as u64, u(b, "version"), "{name}");
    assert_eq!(r.pkey as u64, u(b, "pkey"), "{name}");
    assert_eq!(r.fecn as u64, u(b, "fecn"), "{name}");
    assert_eq!(r.becn as u64, u(b, "becn"), "{name}");
    assert_eq!(r.resv6 as u64, u(b, "resv6"), "{name}");
    assert_eq!(r.dest_qp as u64, u(b, "dqpn"), "{name}");
    assert_eq!(r.ackreq as u64, u(b, "ackreq"), "{name}");
    assert_eq!(r.resv7 as u64, u(b, "resv7"), "{name}");
    assert_eq!(r.psn as u64, u(b, "psn"), "{name}");
    let wire = &f[ip_end - 4..ip_end];
    assert_eq!(u32::from_be_bytes(wire.try_into().unwrap()) as u64, u(b, "icrc"), "{name}");

    // ICRC
    let ic = &v["icrc"];
    assert_eq!(hex(wire), ic["wire_hex"].as_str().unwrap(), "{name}");
    let val = icrc::icrc_masked(&f[l3..ip_end - 4], r.ipv6);
    assert_eq!(format!("{val:#010x}"), ic["crc32_value"].as_str().unwrap(), "{name}");
    assert_eq!(icrc::icrc_wire_bytes(val), wire, "{name}");
    assert!(icrc::residue_ok(&f[l3..ip_end], r.ipv6), "{name}");
    assert_eq!(icrc::crc32_update(icrc::SEED, &masked(&f[l3..ip_end], r.ipv6)), icrc::RESIDUE);

    // Extension headers + payload + pad.
    let bth_end = l3 + if r.ipv6 { 40 } else { 20 } + 8 + 12;
    if let Some(p) = flds.get("payload_hex") {
        assert_eq!(hex(&f[bth_end..ip_end - 4]), p.as_str().unwrap(), "{name}");
    }
    if let Some(a) = flds.get("AETH") {
        assert_eq!(r.syndrome as u64, u(a, "syndrome"), "{name}");
        assert_eq!(r.msn as u64, u(a, "msn"), "{name}");
        assert_eq!(ip_end - 4 - bth_end, 4, "{name}");
    }
    if flds.get("CNPPadding").is_some() {
        assert_eq!(r.opcode, 0x81);
        assert_eq!(&f[bth_end..ip_end - 4], &[0u8; 16], "{name}");
        assert_eq!(r.payload_len, 0);
    }
    assert_eq!(r.payload_off as usize + r.payload_len as usize + r.padcnt as usize, ip_end - 4, "{name}");

    // TX: rebuilding from the decoded record reproduces the frame; the record is a fixed point.
    let payload = &f[r.payload_off as usize..][..r.payload_len as usize];
    assert_eq!(hex(&build_frame(&r, payload).unwrap()), hex(&f), "{name}: build_frame differs");
    assert_eq!(normalize_for_tx(&r), r, "{name}");
}

/// The masked CRC input (helper for the residue check).
fn masked(l3: &[u8], v6: bool) -> Vec<u8> {
    l3.iter().enumerate().map(|(i, &b)| b | icrc::mask_at(i, v6)).collect()
}

#[test]
fn positive_and_reference_vectors() {
    let j = load();
    let pos = j["positive"].as_array().unwrap();
    let hw = j["reference_hw"].as_array().unwrap();
    assert_eq!(pos.len(), 48);
    assert_eq!(hw.len(), 2);
    for v in pos.iter().chain(hw) {
        check_positive(v);
    }
    println!("checked {} positive + {} reference vectors", pos.len(), hw.len());
}

#[test]
fn vector_pcaps_match_json() {
    let j = load();
    let dir = shared_dir().join("vectors");
    let mut files: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    let mut n = 0;
    for set in ["positive", "reference_hw", "negative"] {
        for v in j[set].as_array().unwrap() {
            let pcap = v["pcap"].as_str().unwrap().to_string();
            let frames = files
                .entry(pcap.clone())
                .or_insert_with(|| read_frames(&dir.join(&pcap)).unwrap_or_else(|e| panic!("{pcap}: {e}")));
            let idx = u(v, "frame") as usize - 1;
            assert_eq!(hex(&frames[idx]), v["hex"].as_str().unwrap(), "{pcap} frame {}", idx + 1);
            n += 1;
        }
    }
    assert_eq!(n, 48 + 2 + 508);
}

#[test]
fn negative_vectors() {
    let j = load();
    let neg = j["negative"].as_array().unwrap();
    assert_eq!(neg.len(), 508);
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut icrc_fail = 0;
    for v in neg {
        let name = v["name"].as_str().unwrap();
        let cat = v["category"].as_str().unwrap();
        let field = v["field"].as_str().unwrap();
        let f = unhex(v["hex"].as_str().unwrap());
        let out = classify(&f);
        let expect = v["expect_icrc_valid"].as_bool().unwrap();
        assert_eq!(out.icrc_ok, expect, "{name}: icrc verdict");
        assert_eq!(parse_frame(&f).err().map(|e| e.reason()), out.reason, "{name}");
        match cat {
            "covered" => assert!(out.reason.is_some(), "{name}: covered flip accepted"),
            "masked" | "not_covered" => {
                let ipv4_hdr = field.starts_with("ipv4.tos") || field.starts_with("ipv4.ttl") || field.starts_with("ipv4.header_checksum");
                match out.reason {
                    None => {}
                    Some(DropReason::BadIpv4Csum) if ipv4_hdr => {}
                    Some(r) => panic!("{name}: {cat} flip dropped as {r}"),
                }
            }
            c => panic!("unknown category {c}"),
        }
        if !out.icrc_ok {
            icrc_fail += 1;
        }
        let verdict = out.reason.map_or("accepted", |r| r.name()).to_string();
        *counts.entry((cat.to_string(), verdict)).or_default() += 1;
    }
    println!("negative vectors: {} total, {icrc_fail} with bad ICRC", neg.len());
    for ((cat, verdict), n) in &counts {
        println!("  {cat:12} {verdict:14} {n}");
    }
    assert_eq!(icrc_fail, 279);
    assert_eq!(counts.get(&("masked".into(), "bad_ipv4_csum".into())), Some(&45));
}
