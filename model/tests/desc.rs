//! Descriptor formats (`hematite_model::desc`, generated from rtl/pkg/hm_desc_pkg.sv): sizes,
//! byte offsets pinned against the package's `// N:` comments, round trips of every codec, and
//! one test per error.

use hematite_model::desc::*;
use hematite_abi::regs::*;
use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::*;
use proptest::prelude::*;

const SV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../rtl/pkg/hm_desc_pkg.sv");

/// Every struct of the package with its generated layout, and for host-memory descriptors the
/// byte offset the `// N:` comments are relative to (`None`: control-bus struct, no comments).
fn layouts() -> Vec<(&'static str, Layout, usize, Option<usize>)> {
    vec![
        ("hm_sge_t", HM_SGE_T_FIELDS, HM_SGE_T_BITS, Some(0)),
        ("hm_sq_wqe_hdr_t", HM_SQ_WQE_HDR_T_FIELDS, HM_SQ_WQE_HDR_T_BITS, Some(0)),
        ("hm_atomic_args_t", HM_ATOMIC_ARGS_T_FIELDS, HM_ATOMIC_ARGS_T_BITS, Some(SQ_HDR_BYTES)),
        ("hm_rq_wqe_hdr_t", HM_RQ_WQE_HDR_T_FIELDS, HM_RQ_WQE_HDR_T_BITS, Some(0)),
        ("hm_cqe_t", HM_CQE_T_FIELDS, HM_CQE_T_BITS, Some(0)),
        ("hm_qp_ctx_t", HM_QP_CTX_T_FIELDS, HM_QP_CTX_T_BITS, None),
        ("hm_cq_ctx_t", HM_CQ_CTX_T_FIELDS, HM_CQ_CTX_T_BITS, None),
        ("hm_mr_ctx_t", HM_MR_CTX_T_FIELDS, HM_MR_CTX_T_BITS, None),
        ("hm_ctl_cmd_t", HM_CTL_CMD_T_FIELDS, HM_CTL_CMD_T_BITS, None),
        ("hm_ctl_status_t", HM_CTL_STATUS_T_FIELDS, HM_CTL_STATUS_T_BITS, None),
        ("hm_ctl_eq_t", HM_CTL_EQ_T_FIELDS, HM_CTL_EQ_T_BITS, None),
        ("hm_ctl_post_t", HM_CTL_POST_T_FIELDS, HM_CTL_POST_T_BITS, None),
    ]
}

/// A field as the test reads it: name, width, byte offset from a leading `// N:` comment.
type SvField = (String, usize, Option<usize>);

/// A second, deliberately simple reading of the package: each struct and its fields.
fn sv_structs() -> Vec<(String, Vec<SvField>)> {
    let src = std::fs::read_to_string(SV).expect("read hm_desc_pkg.sv");
    let mut out = Vec::new();
    let mut cur: Option<Vec<SvField>> = None;
    for line in src.lines() {
        let (code, comment) = match line.split_once("//") {
            Some((c, m)) => (c.trim(), Some(m.trim())),
            None => (line.trim(), None),
        };
        if code.starts_with("typedef struct packed") {
            cur = Some(Vec::new());
        } else if let (Some(rest), Some(fields)) = (code.strip_prefix('}'), cur.as_mut()) {
            let name = rest.trim().trim_end_matches(';').trim().to_string();
            out.push((name, std::mem::take(fields)));
            cur = None;
        } else if let (Some(decl), Some(fields)) = (code.strip_prefix("logic"), cur.as_mut()) {
            let decl = decl.trim().trim_end_matches(';');
            let (width, name) = match decl.strip_prefix('[') {
                Some(r) => {
                    let (range, name) = r.split_once(']').unwrap();
                    let (hi, lo) = range.split_once(':').unwrap();
                    (hi.trim().parse::<usize>().unwrap() - lo.trim().parse::<usize>().unwrap() + 1, name)
                }
                None => (1, decl),
            };
            let off = comment
                .and_then(|c| c.split_once(':'))
                .and_then(|(n, _)| n.trim().parse::<usize>().ok());
            fields.push((name.trim().to_string(), width, off));
        }
    }
    out
}

#[test]
fn struct_sizes() {
    assert_eq!(HM_SGE_T_BITS, 128);
    assert_eq!(HM_SQ_WQE_HDR_T_BITS, 256);
    assert_eq!(HM_ATOMIC_ARGS_T_BITS, 128);
    assert_eq!(HM_RQ_WQE_HDR_T_BITS, 128);
    assert_eq!(HM_CQE_T_BITS, 256);
    assert_eq!(CQE_BYTES, 32);
    let window = HM_CTL_STAGE_WORDS as usize * 32;
    assert_eq!(CTX_WORDS, 32);
    assert!(HM_QP_CTX_T_BITS <= window, "QP context {HM_QP_CTX_T_BITS} bits");
    assert!(HM_CQ_CTX_T_BITS <= window);
    assert!(HM_MR_CTX_T_BITS <= window);
    assert_eq!(HM_CTL_CMD_T_BITS, 32);
    assert_eq!(HM_CTL_STATUS_T_BITS, 32);
    assert_eq!(HM_CTL_EQ_T_BITS, 32);
    assert_eq!(HM_CTL_POST_T_BITS, 32);
    // the congestion-control register words
    for b in [HM_CC_CTRL_T_BITS, HM_CC_ALPHA_T_BITS, HM_CC_PFC_T_BITS, HM_CC_CUT_T_BITS] {
        assert_eq!(b, 32);
    }
    // Atomic operands and their SGE fill the smallest slot exactly.
    assert_eq!(SQ_HDR_BYTES + ATOMIC_ARGS_BYTES + SGE_BYTES, MIN_STRIDE);
}

#[test]
fn tables_are_contiguous() {
    for (name, fields, bits, _) in layouts() {
        let mut next = bits;
        for &(f, lsb, w) in fields {
            assert!(w > 0, "{name}.{f}");
            assert_eq!(lsb + w, next, "{name}.{f}: gap or overlap");
            next = lsb;
        }
        assert_eq!(next, 0, "{name}: last field does not end at bit 0");
    }
}

/// The generated tables agree with a second reading of the package (names, order, widths), and
/// every host-memory field sits at the byte offset its `// N:` comment states.
#[test]
fn tables_match_sv_comments() {
    let sv = sv_structs();
    let known = layouts();
    assert_eq!(
        sv.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        known.iter().map(|k| k.0).collect::<Vec<_>>(),
        "struct list of the package changed: update layouts() in this test"
    );
    for ((name, fields), (_, gen, bits, base)) in sv.iter().zip(known) {
        assert_eq!(fields.len(), gen.len(), "{name}: field count");
        assert_eq!(fields.iter().map(|f| f.1).sum::<usize>(), bits, "{name}: width");
        for ((f, w, off), &(gf, lsb, gw)) in fields.iter().zip(gen) {
            assert_eq!((f.as_str(), *w), (gf, gw), "{name}: field order / width");
            if let Some(base) = base {
                let off = off.unwrap_or_else(|| panic!("{name}.{f}: no `// N:` byte-offset comment"));
                assert_eq!(lsb % 8, 0, "{name}.{f}: not byte aligned");
                assert_eq!(w % 8, 0, "{name}.{f}: not whole bytes");
                assert_eq!(base + lsb / 8, off, "{name}.{f}: comment says byte {off}");
            }
        }
    }
}

/// The tables of docs/descriptors.md agree with the generated layouts: every struct heading
/// names a `hm_*_t`, and its table lists each field once with the right offset and size
/// (bytes for host-memory descriptors, bits for control-bus structs).
#[test]
fn doc_tables_match() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/descriptors.md"))
        .expect("read docs/descriptors.md");
    let known = layouts();
    let mut documented = Vec::new();
    let mut cur: Option<(&'static str, Layout, Option<usize>)> = None;
    let mut rows: Vec<(String, usize, usize)> = Vec::new();
    let mut in_bits = false;
    let mut check = |cur: Option<(&'static str, Layout, Option<usize>)>, rows: &mut Vec<(String, usize, usize)>| {
        let Some((name, fields, base)) = cur else { return };
        let mut got = std::mem::take(rows);
        got.sort();
        let mut want: Vec<(String, usize, usize)> = fields
            .iter()
            .map(|&(f, lsb, w)| match base {
                Some(b) => (f.to_string(), b + lsb / 8, w / 8),
                None => (f.to_string(), lsb, w),
            })
            .collect();
        want.sort();
        assert_eq!(got, want, "docs/descriptors.md table of {name}");
        documented.push(name);
    };
    for line in doc.lines() {
        if line.starts_with('#') {
            check(cur.take(), &mut rows);
            cur = known
                .iter()
                .find(|k| line.contains(&format!("`{}`", k.0)))
                .map(|k| (k.0, k.1, k.3));
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cur.is_none() || cells.len() < 5 || !cells[0].is_empty() {
            continue;
        }
        match cells[1] {
            "byte" => in_bits = false,
            "bits" => in_bits = true,
            pos => {
                let start = pos.split("..").next().unwrap_or("");
                let (Ok(start), Ok(size)) = (start.parse::<usize>(), cells[2].parse::<usize>()) else { continue };
                let f = cells[3].trim_matches('`').to_string();
                assert_eq!(in_bits, cur.is_some_and(|c| c.2.is_none()), "{f}: byte/bit table kind");
                if let Some((a, b)) = pos.split_once("..") {
                    let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
                    assert_eq!(b - a + 1, size, "{f}: range and width disagree");
                }
                rows.push((f, start, size));
            }
        }
    }
    check(cur.take(), &mut rows);
    let mut all: Vec<&str> = known.iter().map(|k| k.0).collect();
    all.sort();
    documented.sort();
    assert_eq!(documented, all, "every struct has a table in docs/descriptors.md");
}

fn byte_of(fields: Layout, name: &str) -> usize {
    let (lsb, _) = field(fields, name);
    assert_eq!(lsb % 8, 0);
    lsb / 8
}

#[test]
fn byte_offsets_pinned() {
    let h = HM_SQ_WQE_HDR_T_FIELDS;
    for (f, b) in [
        ("opcode", 0),
        ("flags", 1),
        ("num_sge", 2),
        ("rsvd", 3),
        ("imm", 4),
        ("wr_id", 8),
        ("remote_addr", 16),
        ("rkey", 24),
        ("length", 28),
    ] {
        assert_eq!(byte_of(h, f), b, "send WQE {f}");
    }
    for (f, b) in [("addr", 0), ("len", 8), ("lkey", 12)] {
        assert_eq!(byte_of(HM_SGE_T_FIELDS, f), b, "SGE {f}");
    }
    for (f, b) in [("compare", 0), ("swap_add", 8)] {
        assert_eq!(byte_of(HM_ATOMIC_ARGS_T_FIELDS, f), b, "atomic {f}");
    }
    for (f, b) in [("wr_id", 0), ("num_sge", 8), ("rsvd", 9)] {
        assert_eq!(byte_of(HM_RQ_WQE_HDR_T_FIELDS, f), b, "receive WQE {f}");
    }
    for (f, b) in [
        ("wr_id", 0),
        ("byte_len", 8),
        ("imm", 12),
        ("qpn", 16),
        ("rsvd2", 20),
        ("opcode", 22),
        ("status", 23),
        ("wqe_index", 24),
        ("rsvd", 26),
        ("flags", 31),
    ] {
        assert_eq!(byte_of(HM_CQE_T_FIELDS, f), b, "CQE {f}");
    }
    assert_eq!(SQ_HDR_BYTES, 32);
    assert_eq!(RQ_HDR_BYTES, 16);
    assert_eq!(SGE_BYTES, 16);
    assert_eq!(ATOMIC_ARGS_BYTES, 16);
}

#[test]
fn constants_generated() {
    assert_eq!(HM_WQE_OP_FETCH_ADD, 7);
    assert_eq!(HM_WQE_OP_COUNT, 8);
    assert_eq!(HM_WQE_F_FENCE, 0x08);
    assert_eq!(HM_CQE_F_OWNER, 0x80);
    assert_eq!(HM_CQE_ST_RNR_RETRY_EXC_ERR, 9);
    assert_eq!(HM_QPA_REMOTE_ATOMIC, 4); // 3'b100
    assert_eq!(HM_CTL_STATUS, 0x104u16);
    assert_eq!(HM_CTL_STAGE_WORDS, 32u16);
    assert_eq!(HM_CTL_F_LOAD_CQ, 4u8);
}

#[test]
#[should_panic(expected = "no field `lkye`")]
fn unknown_field_panics() {
    field(HM_SGE_T_FIELDS, "lkye");
}

#[test]
fn bit_helpers() {
    let mut b = [0u8; 4];
    set_bits(&mut b, 4, 12, 0xABC);
    assert_eq!(b, [0xC0, 0xAB, 0, 0]);
    assert_eq!(get_bits(&b, 4, 12), 0xABC);
    // out of range reads are zero, writes are dropped, width is capped at 128
    assert_eq!(get_bits(&b, 28, 8), 0);
    set_bits(&mut b, 30, 8, 0xFF);
    assert_eq!(b[3], 0xC0);
    assert_eq!(get_bits(&b, usize::MAX - 2, 300), 0);
    set_bits(&mut b, usize::MAX, 200, u128::MAX);
    let mut big = [0u8; 17];
    set_bits(&mut big, 3, 128, u128::MAX);
    assert_eq!(get_bits(&big, 3, 128), u128::MAX);
    assert_eq!(big[0], 0xF8);
    assert_eq!(big[16], 0x07);
    // word views: bit b is bit b % 32 of word b / 32
    assert_eq!(bytes_to_words(&[1, 2, 3, 4, 5]), vec![0x0403_0201, 5]);
    assert_eq!(words_to_bytes(&[0x0403_0201]), vec![1, 2, 3, 4]);
    let w = encode_ctl_cmd(HM_CTL_OP_WRITE, HM_CTL_TBL_MR, HM_CTL_F_LOAD_SQ, 0x1234).unwrap();
    assert_eq!(w, 0x1201_1234);
}

#[test]
fn log_stride_values() {
    assert_eq!(log_stride(64), Some(0));
    assert_eq!(log_stride(512), Some(3));
    assert_eq!(log_stride(1024), None);
    assert_eq!(log_stride(96), None);
    assert_eq!(log_stride(0), None);
}

fn sge(addr: u64, len: u32, lkey: u32) -> Sge {
    Sge { addr, len, lkey }
}

#[test]
fn send_wqe_bytes() {
    let wr = SendWr {
        wr_id: 0x1122_3344_5566_7788,
        op: SendOp::WriteImm { remote_addr: 0xA1A2_A3A4_A5A6_A7A8, rkey: 0xB1B2_B3B4, imm: 0xC1C2_C3C4 },
        sgl: vec![sge(0xD0D1_D2D3_D4D5_D6D7, 0x100, 0xE1E2_E3E4), sge(0x10, 0x20, 0x30)],
        signaled: true,
        solicited: true,
        inline: false,
    };
    let b = encode_send_wqe(&wr, 64, None).unwrap();
    assert_eq!(b.len(), 64);
    assert_eq!(b[0], HM_WQE_OP_WRITE_IMM);
    assert_eq!(b[1], HM_WQE_F_SIGNALED | HM_WQE_F_SOLICITED);
    assert_eq!(b[2], 2);
    assert_eq!(b[3], 0);
    assert_eq!(b[4..8], [0xC1, 0xC2, 0xC3, 0xC4], "immediate data in wire order");
    assert_eq!(b[8..16], 0x1122_3344_5566_7788u64.to_le_bytes());
    assert_eq!(b[16..24], 0xA1A2_A3A4_A5A6_A7A8u64.to_le_bytes());
    assert_eq!(b[24..28], 0xB1B2_B3B4u32.to_le_bytes());
    assert_eq!(b[28..32], 0x120u32.to_le_bytes());
    assert_eq!(b[32..40], 0xD0D1_D2D3_D4D5_D6D7u64.to_le_bytes());
    assert_eq!(b[40..44], 0x100u32.to_le_bytes());
    assert_eq!(b[44..48], 0xE1E2_E3E4u32.to_le_bytes());
    assert_eq!(b[48..56], 0x10u64.to_le_bytes());

    let inv = SendWr::new(1, SendOp::SendInv(0x0102_0304), vec![]);
    assert_eq!(encode_send_wqe(&inv, 64, None).unwrap()[4..8], [4, 3, 2, 1], "R_Key little-endian");

    let cas = SendWr::new(
        2,
        SendOp::CmpSwap { remote_addr: 8, rkey: 9, compare: 0x0A0B, swap: 0x0C0D },
        vec![sge(0x40, 8, 5)],
    );
    let b = encode_send_wqe(&cas, 64, None).unwrap();
    assert_eq!(b[2], 1);
    assert_eq!(b[32..40], 0x0A0Bu64.to_le_bytes());
    assert_eq!(b[40..48], 0x0C0Du64.to_le_bytes());
    assert_eq!(b[48..56], 0x40u64.to_le_bytes());
    assert_eq!(b[56..60], 8u32.to_le_bytes());
    assert_eq!(b[60..64], 5u32.to_le_bytes());

    let mut w = SendWr::new(3, SendOp::Send, vec![sge(0, 5, 1)]);
    w.inline = true;
    let b = encode_send_wqe(&w, 64, Some(b"hello")).unwrap();
    assert_eq!(b[1], HM_WQE_F_SIGNALED | HM_WQE_F_INLINE);
    assert_eq!(b[2], 0);
    assert_eq!(b[28..32], 5u32.to_le_bytes());
    assert_eq!(&b[32..37], b"hello");
    let (d, data) = decode_send_wqe(&b).unwrap();
    assert_eq!(data.as_deref(), Some(&b"hello"[..]));
    assert_eq!(d, SendWr { sgl: vec![], ..w });
}

#[test]
fn recv_wqe_and_cqe_bytes() {
    let wr = RecvWr { wr_id: 0x0102_0304_0506_0708, sgl: vec![sge(0x1000, 64, 0x101)] };
    let b = encode_recv_wqe(&wr, 64).unwrap();
    assert_eq!(b[0..8], 0x0102_0304_0506_0708u64.to_le_bytes());
    assert_eq!(b[8], 1);
    assert!(b[9..16].iter().all(|&x| x == 0));
    assert_eq!(b[16..24], 0x1000u64.to_le_bytes());

    let cqe = Cqe {
        wr_id: 0xAA,
        status: WcStatus::Success,
        opcode: WcOpcode::RecvRdmaWithImm,
        byte_len: 0x1234,
        imm: Some(0xDEAD_BEEF),
        invalidated_rkey: None,
        qpn: 0x11,
    };
    let b = encode_cqe(&cqe, 0x0203, true).unwrap();
    assert_eq!(b[0..8], 0xAAu64.to_le_bytes());
    assert_eq!(b[8..12], 0x1234u32.to_le_bytes());
    assert_eq!(b[12..16], [0xDE, 0xAD, 0xBE, 0xEF]);
    assert_eq!(b[16..20], 0x11u32.to_le_bytes());
    assert_eq!(b[22], HM_CQE_OP_RECV_RDMA_IMM);
    assert_eq!(b[23], HM_CQE_ST_SUCCESS);
    assert_eq!(b[24..26], [0x03, 0x02]);
    assert_eq!(b[31], HM_CQE_F_OWNER | HM_CQE_F_RQ | HM_CQE_F_IMM);
    assert_eq!(decode_cqe(&b).unwrap(), (cqe, 0x0203, true));

    let inv = Cqe { imm: None, invalidated_rkey: Some(0x0102_0304), opcode: WcOpcode::Recv, ..cqe };
    let b = encode_cqe(&inv, 0, false).unwrap();
    assert_eq!(b[12..16], [4, 3, 2, 1]);
    assert_eq!(b[31], HM_CQE_F_RQ | HM_CQE_F_INV);
    assert_eq!(decode_cqe(&b).unwrap(), (inv, 0, false));
}

/// Owner/phase rule: the engine writes pass p over a ring of n entries with owner = (p is
/// even), starting at pass 0 = owner 1; software polling with its own phase sees each entry
/// exactly once, and never a zeroed (owner 0) entry on the first pass.
#[test]
fn cqe_owner_phase() {
    let n = 4usize;
    let mut ring = vec![[0u8; CQE_BYTES]; n];
    let mut sw_phase = true;
    let mut sw_ci = 0usize;
    let mut seen = Vec::new();
    for k in 0..3 * n as u64 {
        let slot = (k as usize) % n;
        let owner = (k as usize / n) % 2 == 0;
        let c = Cqe {
            wr_id: k,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            byte_len: 0,
            imm: None,
            invalidated_rkey: None,
            qpn: 1,
        };
        // before the write, software sees nothing new
        assert_ne!(decode_cqe(&ring[sw_ci]).unwrap().2, sw_phase);
        ring[slot] = encode_cqe(&c, slot as u16, owner).unwrap();
        while let Ok((c, _, o)) = decode_cqe(&ring[sw_ci]) {
            if o != sw_phase {
                break;
            }
            seen.push(c.wr_id);
            sw_ci += 1;
            if sw_ci == n {
                sw_ci = 0;
                sw_phase = !sw_phase;
            }
        }
    }
    assert_eq!(seen, (0..3 * n as u64).collect::<Vec<_>>());
}

#[test]
fn contexts_bits() {
    let cfg = QpConfig { dest_qpn: 0xABCDEF, ..QpConfig::default() };
    let f = QpCtxFields {
        cfg,
        state: HM_QPS_RTS,
        sq_base: 0x1000,
        sq_log_size: 6,
        sq_log_stride: 1,
        rq_base: 0x2000,
        rq_log_size: 7,
        rq_log_stride: 2,
        sq_cqn: 3,
        rq_cqn: 4,
    };
    let w = encode_qp_ctx(&f).unwrap();
    let b = words_to_bytes(&w);
    let g = |n: &str| {
        let (lsb, wd) = field(HM_QP_CTX_T_FIELDS, n);
        get_bits(&b, lsb, wd)
    };
    assert_eq!(g("pmtu"), 3, "1024 bytes = 128 << 3");
    assert_eq!(g("state"), HM_QPS_RTS as u128);
    assert_eq!(g("dest_qpn"), 0xABCDEF);
    assert_eq!(g("access"), 7);
    assert_eq!(g("eth_dst"), 0x02_00_00_00_00_02);
    assert_eq!(g("vlan_valid"), 0);
    // eth_dst is the least significant field: bit 0 of word 0
    assert_eq!(w[0], 0x0000_0002);
    // everything past the struct is zero
    let used = HM_QP_CTX_T_BITS.div_ceil(32);
    assert!(w[used..].iter().all(|&x| x == 0));
    assert_eq!(decode_qp_ctx(&w).unwrap(), f);
    for (bytes, code) in [(256, 1), (512, 2), (1024, 3), (2048, 4), (4096, 5)] {
        assert_eq!(pmtu_code(bytes), Ok(code));
    }

    let w = encode_cq_ctx(0xFFFF_0000_1234_5000, 10, 7, true).unwrap();
    assert_eq!(w[0], 0x1234_5000);
    assert_eq!(w[1], 0xFFFF_0000);
    assert_eq!(w[2], 1 | 10 << 1 | 7 << 6);
    assert_eq!(decode_cq_ctx(&w).unwrap(), (0xFFFF_0000_1234_5000, 10, 7, true));

    let mr = Mr {
        lkey: 5 << 8 | 0x2A,
        rkey: 5 << 8 | 0x2A,
        base: 0x10,
        len: 0x20,
        access: MrAccess { local_write: true, remote_read: false, remote_write: true, remote_atomic: false },
        pd: 9,
    };
    let w = encode_mr_ctx(&mr, true).unwrap();
    assert_eq!(w[0], 1 | 0x2A << 1 | 9 << 9);
    let b = words_to_bytes(&w);
    let (lsb, wd) = field(HM_MR_CTX_T_FIELDS, "access");
    assert_eq!(get_bits(&b, lsb, wd), 0b0101);
    assert_eq!(decode_mr_ctx(&w, 5).unwrap(), (mr, true));

    assert_eq!(decode_ctl_cmd(0x2102_0007), (HM_CTL_OP_READ, HM_CTL_TBL_CQ, HM_CTL_F_LOAD_RQ, 7));
    assert_eq!(decode_ctl_status(0x8000_0002), Ok((true, HM_CTL_ST_RANGE)));
}

// ---------------------------------------------------------------------------------------------
// Errors: one block per DescError variant
// ---------------------------------------------------------------------------------------------

fn err_send(wr: &SendWr, stride: usize, inline: Option<&[u8]>) -> DescError {
    encode_send_wqe(wr, stride, inline).unwrap_err()
}

#[test]
fn error_bad_stride() {
    let wr = SendWr::new(1, SendOp::Send, vec![]);
    for s in [0, 32, 63, 96, 1024] {
        assert_eq!(err_send(&wr, s, None), DescError::BadStride(s));
        assert_eq!(encode_recv_wqe(&RecvWr { wr_id: 0, sgl: vec![] }, s), Err(DescError::BadStride(s)));
    }
    assert_eq!(decode_send_wqe(&[0; 65]), Err(DescError::BadStride(65)));
    assert_eq!(decode_recv_wqe(&[0; 16]), Err(DescError::BadStride(16)));
}

#[test]
fn error_short_buffer() {
    assert_eq!(decode_cqe(&[0; 31]), Err(DescError::ShortBuffer { need: 32, got: 31 }));
    let qp_words = HM_QP_CTX_T_BITS.div_ceil(32);
    assert_eq!(
        decode_qp_ctx(&vec![0; qp_words - 1]),
        Err(DescError::ShortBuffer { need: qp_words, got: qp_words - 1 })
    );
    assert!(matches!(decode_cq_ctx(&[0; 2]), Err(DescError::ShortBuffer { need: 3, got: 2 })));
    assert!(matches!(decode_mr_ctx(&[], 0), Err(DescError::ShortBuffer { .. })));
}

#[test]
fn error_too_many_sges() {
    let wr = SendWr::new(1, SendOp::Send, vec![sge(0, 1, 1); 3]);
    assert_eq!(err_send(&wr, 64, None), DescError::TooManySges { count: 3, max: 2 });
    assert!(encode_send_wqe(&wr, 128, None).is_ok());
    let wr = SendWr::new(1, SendOp::Send, vec![sge(0, 1, 1); 31]);
    assert_eq!(err_send(&wr, 512, None), DescError::TooManySges { count: 31, max: 30 });
    let rwr = RecvWr { wr_id: 0, sgl: vec![sge(0, 1, 1); 4] };
    assert_eq!(encode_recv_wqe(&rwr, 64), Err(DescError::TooManySges { count: 4, max: 3 }));
    // decode side: num_sge beyond the slot
    let mut b = encode_send_wqe(&SendWr::new(1, SendOp::Send, vec![]), 64, None).unwrap();
    b[2] = 3;
    assert_eq!(decode_send_wqe(&b), Err(DescError::TooManySges { count: 3, max: 2 }));
    let mut b = encode_recv_wqe(&RecvWr { wr_id: 0, sgl: vec![] }, 64).unwrap();
    b[8] = 4;
    assert_eq!(decode_recv_wqe(&b), Err(DescError::TooManySges { count: 4, max: 3 }));
}

#[test]
fn error_inline_too_long() {
    let mut wr = SendWr::new(1, SendOp::Send, vec![]);
    wr.inline = true;
    assert_eq!(err_send(&wr, 64, Some(&[0; 33])), DescError::InlineTooLong { len: 33, max: 32 });
    assert!(encode_send_wqe(&wr, 64, Some(&[0; 32])).is_ok());
    assert!(encode_send_wqe(&wr, 512, Some(&[0; 480])).is_ok());
    let mut b = encode_send_wqe(&wr, 64, Some(&[0; 32])).unwrap();
    b[28] = 33;
    assert_eq!(decode_send_wqe(&b), Err(DescError::InlineTooLong { len: 33, max: 32 }));
}

#[test]
fn error_inline_mismatch() {
    let mut wr = SendWr::new(1, SendOp::Send, vec![sge(0, 4, 1)]);
    assert_eq!(err_send(&wr, 64, Some(b"abcd")), DescError::InlineMismatch, "bytes without flag");
    wr.inline = true;
    assert_eq!(err_send(&wr, 64, None), DescError::InlineMismatch, "flag without bytes");
    assert_eq!(err_send(&wr, 64, Some(b"abc")), DescError::InlineMismatch, "length differs from SGL");
    let mut rd = SendWr::new(1, SendOp::Read { remote_addr: 0, rkey: 0 }, vec![sge(0, 4, 1)]);
    rd.inline = true;
    assert_eq!(err_send(&rd, 64, Some(b"abcd")), DescError::InlineMismatch, "inline READ");
    let mut b = encode_send_wqe(&SendWr::new(1, rd.op, vec![]), 64, None).unwrap();
    b[1] |= HM_WQE_F_INLINE;
    assert_eq!(decode_send_wqe(&b), Err(DescError::InlineMismatch));
}

#[test]
fn error_atomic_sgl() {
    let op = SendOp::FetchAdd { remote_addr: 0, rkey: 1, add: 1 };
    assert_eq!(err_send(&SendWr::new(1, op, vec![]), 64, None), DescError::AtomicSgl(0));
    assert_eq!(err_send(&SendWr::new(1, op, vec![sge(0, 8, 1); 2]), 256, None), DescError::AtomicSgl(2));
    let mut b = encode_send_wqe(&SendWr::new(1, op, vec![sge(0, 8, 1)]), 64, None).unwrap();
    b[2] = 0;
    assert_eq!(decode_send_wqe(&b), Err(DescError::AtomicSgl(0)));
}

#[test]
fn error_length_overflow() {
    let ok = SendWr::new(1, SendOp::Send, vec![sge(0, 1 << 31, 1)]);
    assert!(encode_send_wqe(&ok, 64, None).is_ok());
    let wr = SendWr::new(1, SendOp::Send, vec![sge(0, 1 << 31, 1), sge(0, 1, 1)]);
    assert_eq!(err_send(&wr, 64, None), DescError::LengthOverflow((1 << 31) + 1));
    let wr = SendWr::new(1, SendOp::Send, vec![sge(0, u32::MAX, 1); 40]);
    assert_eq!(err_send(&wr, 64, None), DescError::LengthOverflow(40 * u32::MAX as u64));
    // decode: SGL total above 2^31 with a matching length field
    let mut b = encode_send_wqe(&SendWr::new(1, SendOp::Send, vec![sge(0, 1 << 31, 1), sge(0, 0, 1)]), 64, None)
        .unwrap();
    b[40..44].copy_from_slice(&(1u32 << 30).to_le_bytes());
    b[56..60].copy_from_slice(&(1u32 << 30).to_le_bytes());
    b[28..32].copy_from_slice(&(1u32 << 31).to_le_bytes());
    assert!(decode_send_wqe(&b).is_ok());
    b[56..60].copy_from_slice(&((1u32 << 30) + 1).to_le_bytes());
    b[28..32].copy_from_slice(&((1u32 << 31) + 1).to_le_bytes());
    assert_eq!(decode_send_wqe(&b), Err(DescError::LengthOverflow((1 << 31) + 1)));
}

fn qp_fields() -> QpCtxFields {
    QpCtxFields {
        cfg: QpConfig::default(),
        state: HM_QPS_INIT,
        sq_base: 0,
        sq_log_size: 4,
        sq_log_stride: 0,
        rq_base: 0,
        rq_log_size: 4,
        rq_log_stride: 0,
        sq_cqn: 0,
        rq_cqn: 0,
    }
}

#[test]
fn error_invalid_pmtu() {
    for p in [0, 128, 1500, 8192] {
        let mut f = qp_fields();
        f.cfg.pmtu = p;
        assert_eq!(encode_qp_ctx(&f), Err(DescError::InvalidPmtu(p)));
        assert_eq!(pmtu_code(p), Err(DescError::InvalidPmtu(p)));
    }
}

#[test]
fn error_field_range() {
    let mut f = qp_fields();
    f.cfg.dest_qpn = 1 << 24;
    assert_eq!(encode_qp_ctx(&f), Err(DescError::FieldRange { field: "dest_qpn", value: 1 << 24 }));
    let mut f = qp_fields();
    f.cfg.av.eth_src = 1 << 48;
    assert!(matches!(encode_qp_ctx(&f), Err(DescError::FieldRange { field: "eth_src", .. })));
    let mut f = qp_fields();
    f.sq_log_stride = 4;
    assert!(matches!(encode_qp_ctx(&f), Err(DescError::FieldRange { field: "sq_log_stride", .. })));
    let mut f = qp_fields();
    f.cfg.timeout = 32;
    assert!(matches!(encode_qp_ctx(&f), Err(DescError::FieldRange { field: "timeout", .. })));
    assert_eq!(encode_cq_ctx(0, 32, 0, true), Err(DescError::FieldRange { field: "log_size", value: 32 }));
    assert_eq!(encode_ctl_cmd(16, 0, 0, 0), Err(DescError::FieldRange { field: "op", value: 16 }));
    assert_eq!(encode_ctl_cmd(1, 16, 0, 0), Err(DescError::FieldRange { field: "table_sel", value: 16 }));
    assert_eq!(decode_mr_ctx(&[0; 32], 1 << 24), Err(DescError::FieldRange { field: "index", value: 1 << 24 }));
}

#[test]
fn error_unknown_code() {
    let base = encode_send_wqe(&SendWr::new(1, SendOp::Send, vec![]), 64, None).unwrap();
    let mut b = base.clone();
    b[0] = HM_WQE_OP_COUNT;
    assert_eq!(decode_send_wqe(&b), Err(DescError::UnknownCode { field: "opcode", value: 8 }));
    let mut b = base.clone();
    b[1] |= HM_WQE_F_FENCE;
    assert_eq!(decode_send_wqe(&b), Err(DescError::UnknownCode { field: "flags", value: 0x09 }));

    let cqe = Cqe {
        wr_id: 1,
        status: WcStatus::Success,
        opcode: WcOpcode::Send,
        byte_len: 0,
        imm: None,
        invalidated_rkey: None,
        qpn: 1,
    };
    let base = encode_cqe(&cqe, 0, true).unwrap();
    let mut b = base;
    b[22] = 7;
    assert_eq!(decode_cqe(&b), Err(DescError::UnknownCode { field: "opcode", value: 7 }));
    let mut b = base;
    b[23] = 10;
    assert_eq!(decode_cqe(&b), Err(DescError::UnknownCode { field: "status", value: 10 }));
    let mut b = base;
    b[31] |= 0x08;
    assert_eq!(decode_cqe(&b), Err(DescError::UnknownCode { field: "flags", value: 0x88 }));

    let mut f = qp_fields();
    f.state = HM_QPS_ERR + 1;
    assert_eq!(encode_qp_ctx(&f), Err(DescError::UnknownCode { field: "state", value: 6 }));
    let w = encode_qp_ctx(&qp_fields()).unwrap();
    let mut b = words_to_bytes(&w);
    let (lsb, wd) = field(HM_QP_CTX_T_FIELDS, "state");
    set_bits(&mut b, lsb, wd, 7);
    assert_eq!(decode_qp_ctx(&bytes_to_words(&b)), Err(DescError::UnknownCode { field: "state", value: 7 }));
    for code in [0u8, 6, 7] {
        let mut b = words_to_bytes(&w);
        let (lsb, wd) = field(HM_QP_CTX_T_FIELDS, "pmtu");
        set_bits(&mut b, lsb, wd, code.into());
        assert_eq!(decode_qp_ctx(&bytes_to_words(&b)), Err(DescError::UnknownCode { field: "pmtu", value: code }));
    }
}

#[test]
fn error_inconsistent() {
    let cqe = Cqe {
        wr_id: 1,
        status: WcStatus::Success,
        opcode: WcOpcode::Recv,
        byte_len: 0,
        imm: Some(1),
        invalidated_rkey: Some(2),
        qpn: 1,
    };
    assert!(matches!(encode_cqe(&cqe, 0, true), Err(DescError::Inconsistent(_))));
    let good = encode_cqe(&Cqe { invalidated_rkey: None, ..cqe }, 0, true).unwrap();
    let bad = |f: &dyn Fn(&mut [u8; 32])| {
        let mut b = good;
        f(&mut b);
        assert!(matches!(decode_cqe(&b), Err(DescError::Inconsistent(_))), "{b:02x?}");
    };
    bad(&|b| b[31] |= HM_CQE_F_INV); // IMM and INV
    bad(&|b| b[31] &= !HM_CQE_F_RQ); // receive opcode without RQ
    bad(&|b| b[22] = HM_CQE_OP_SEND); // RQ with a send opcode
    bad(&|b| b[20] = 1); // rsvd2
    bad(&|b| b[30] = 1); // rsvd

    let mut b = encode_send_wqe(&SendWr::new(1, SendOp::Send, vec![sge(0, 4, 1)]), 64, None).unwrap();
    b[28] = 5; // length != SGL total
    assert!(matches!(decode_send_wqe(&b), Err(DescError::Inconsistent(_))));
    b[28] = 4;
    b[3] = 1; // rsvd
    assert!(matches!(decode_send_wqe(&b), Err(DescError::Inconsistent(_))));
    let mut b = encode_send_wqe(&SendWr::new(1, SendOp::Send, vec![]), 64, None).unwrap();
    b[1] |= HM_WQE_F_INLINE;
    b[2] = 1; // inline with SGEs
    assert!(matches!(decode_send_wqe(&b), Err(DescError::Inconsistent(_))));
    let mut b = encode_recv_wqe(&RecvWr { wr_id: 0, sgl: vec![] }, 64).unwrap();
    b[15] = 1;
    assert!(matches!(decode_recv_wqe(&b), Err(DescError::Inconsistent(_))));

    let mr = Mr { lkey: 0x101, rkey: 0x102, base: 0, len: 0, access: MrAccess::ALL, pd: 1 };
    assert!(matches!(encode_mr_ctx(&mr, true), Err(DescError::Inconsistent(_))));

    let w = encode_qp_ctx(&qp_fields()).unwrap();
    for vf in ["vlan_valid", "vlan_pcp", "vlan_vid"] {
        let mut b = words_to_bytes(&w);
        let (lsb, _) = field(HM_QP_CTX_T_FIELDS, vf);
        set_bits(&mut b, lsb, 1, 1);
        assert!(matches!(decode_qp_ctx(&bytes_to_words(&b)), Err(DescError::Inconsistent(_))), "{vf}");
    }
    assert!(matches!(decode_ctl_status(0x0000_0100), Err(DescError::Inconsistent(_))));
}

#[test]
fn errors_display() {
    let all = [
        DescError::BadStride(3),
        DescError::ShortBuffer { need: 2, got: 1 },
        DescError::TooManySges { count: 3, max: 2 },
        DescError::InlineTooLong { len: 33, max: 32 },
        DescError::InlineMismatch,
        DescError::AtomicSgl(2),
        DescError::LengthOverflow(1 << 32),
        DescError::InvalidPmtu(1500),
        DescError::FieldRange { field: "x", value: 1 },
        DescError::UnknownCode { field: "opcode", value: 9 },
        DescError::Inconsistent("why"),
    ];
    for e in all {
        assert!(!e.to_string().is_empty());
    }
}

// ---------------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------------

fn arb_sge(max_len: u32) -> impl Strategy<Value = Sge> {
    (any::<u64>(), 0..=max_len, any::<u32>()).prop_map(|(addr, len, lkey)| Sge { addr, len, lkey })
}

fn arb_op() -> impl Strategy<Value = SendOp> {
    prop_oneof![
        Just(SendOp::Send),
        any::<u32>().prop_map(SendOp::SendImm),
        any::<u32>().prop_map(SendOp::SendInv),
        (any::<u64>(), any::<u32>()).prop_map(|(remote_addr, rkey)| SendOp::Write { remote_addr, rkey }),
        (any::<u64>(), any::<u32>(), any::<u32>())
            .prop_map(|(remote_addr, rkey, imm)| SendOp::WriteImm { remote_addr, rkey, imm }),
        (any::<u64>(), any::<u32>()).prop_map(|(remote_addr, rkey)| SendOp::Read { remote_addr, rkey }),
        (any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(remote_addr, rkey, compare, swap)| {
            SendOp::CmpSwap { remote_addr, rkey, compare, swap }
        }),
        (any::<u64>(), any::<u32>(), any::<u64>())
            .prop_map(|(remote_addr, rkey, add)| SendOp::FetchAdd { remote_addr, rkey, add }),
    ]
}

/// A valid send WR for a random stride, with inline bytes when it is inline.
fn arb_send() -> impl Strategy<Value = (SendWr, usize, Option<Vec<u8>>)> {
    (0u8..4, arb_op(), any::<bool>(), any::<u64>(), any::<bool>(), any::<bool>()).prop_flat_map(
        |(ls, op, inline, wr_id, signaled, solicited)| {
            let stride = MIN_STRIDE << ls;
            let inline = inline && !op.is_rd_atomic();
            let room = stride - SQ_HDR_BYTES;
            let mk = move |sgl: Vec<Sge>, data: Option<Vec<u8>>| {
                (SendWr { wr_id, op, sgl, signaled, solicited, inline }, stride, data)
            };
            if inline {
                (proptest::collection::vec(any::<u8>(), 0..=room), any::<bool>(), any::<u64>(), any::<u32>())
                    .prop_map(move |(data, with_sgl, addr, lkey)| {
                        let sgl = if with_sgl { vec![Sge { addr, len: data.len() as u32, lkey }] } else { vec![] };
                        mk(sgl, Some(data))
                    })
                    .boxed()
            } else if op.is_atomic() {
                arb_sge(u32::MAX >> 1).prop_map(move |s| mk(vec![s], None)).boxed()
            } else {
                proptest::collection::vec(arb_sge(1 << 26), 0..=room / SGE_BYTES)
                    .prop_map(move |sgl| mk(sgl, None))
                    .boxed()
            }
        },
    )
}

fn arb_status() -> impl Strategy<Value = WcStatus> {
    prop::sample::select(vec![
        WcStatus::Success,
        WcStatus::LocLenErr,
        WcStatus::LocProtErr,
        WcStatus::LocQpOpErr,
        WcStatus::WrFlushErr,
        WcStatus::RemAccessErr,
        WcStatus::RemInvReqErr,
        WcStatus::RemOpErr,
        WcStatus::RetryExcErr,
        WcStatus::RnrRetryExcErr,
    ])
}

fn arb_wc_opcode() -> impl Strategy<Value = WcOpcode> {
    prop::sample::select(vec![
        WcOpcode::Send,
        WcOpcode::RdmaWrite,
        WcOpcode::RdmaRead,
        WcOpcode::CmpSwap,
        WcOpcode::FetchAdd,
        WcOpcode::Recv,
        WcOpcode::RecvRdmaWithImm,
    ])
}

fn arb_cqe() -> impl Strategy<Value = Cqe> {
    (any::<u64>(), arb_status(), arb_wc_opcode(), any::<u32>(), 0u8..3, any::<u32>(), any::<u32>()).prop_map(
        |(wr_id, status, opcode, byte_len, kind, x, qpn)| Cqe {
            wr_id,
            status,
            opcode,
            byte_len,
            imm: (kind == 1).then_some(x),
            invalidated_rkey: (kind == 2).then_some(x),
            qpn,
        },
    )
}

fn arb_qp_ctx() -> impl Strategy<Value = QpCtxFields> {
    let av = (
        (0u64..1 << 48, 0u64..1 << 48, any::<bool>(), any::<u128>(), any::<u128>()),
        (0u8..64, 0u8..4, any::<u8>(), any::<u16>(), 0u32..1 << 20, any::<u16>()),
    )
        .prop_map(|((eth_src, eth_dst, ipv6, ip_src, ip_dst), (dscp, ecn, ttl, udp_sport, flow_label, pkey))| {
            AddrVec { eth_src, eth_dst, ipv6, ip_src, ip_dst, dscp, ecn, ttl, udp_sport, flow_label, pkey }
        });
    let cfg = (
        (any::<u32>(), prop::sample::select(vec![256u32, 512, 1024, 2048, 4096]), 0u32..1 << 24, 0u32..1 << 24),
        (0u32..1 << 24, 0u8..32, 0u8..8, 0u8..8, 0u8..32, 0u8..16, 0u8..16),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        av,
    )
        .prop_map(
            |(
                (pd, pmtu, dest_qpn, sq_psn),
                (rq_psn, timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic, max_dest_rd_atomic),
                (remote_write, remote_read, remote_atomic),
                av,
            )| QpConfig {
                pd,
                pmtu,
                dest_qpn,
                sq_psn,
                rq_psn,
                timeout,
                retry_cnt,
                rnr_retry,
                min_rnr_timer,
                max_rd_atomic,
                max_dest_rd_atomic,
                access: QpAccess { remote_write, remote_read, remote_atomic },
                av,
                std_timer: remote_write ^ remote_atomic,
                uc: remote_read ^ remote_atomic,
                // (the engine's context has no selective-repeat bit: always off)
                sr: false,
            },
        );
    (
        cfg,
        0u8..=HM_QPS_ERR,
        (any::<u64>(), 0u8..32, 0u8..4, any::<u64>(), 0u8..32, 0u8..4),
        (any::<u16>(), any::<u16>()),
    )
        .prop_map(|(cfg, state, (sq_base, sq_log_size, sq_log_stride, rq_base, rq_log_size, rq_log_stride), cqns)| {
            QpCtxFields {
                cfg,
                state,
                sq_base,
                sq_log_size,
                sq_log_stride,
                rq_base,
                rq_log_size,
                rq_log_stride,
                sq_cqn: cqns.0,
                rq_cqn: cqns.1,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn send_wqe_round_trip((wr, stride, data) in arb_send()) {
        let b = encode_send_wqe(&wr, stride, data.as_deref()).unwrap();
        prop_assert_eq!(b.len(), stride);
        let (d, dd) = decode_send_wqe(&b).unwrap();
        let expect = if wr.inline { SendWr { sgl: vec![], ..wr.clone() } } else { wr.clone() };
        prop_assert_eq!(d, expect);
        prop_assert_eq!(dd, data);
        // bytes after the used part of the slot are zero
        let used = if wr.inline {
            SQ_HDR_BYTES + u32::from_le_bytes([b[28], b[29], b[30], b[31]]) as usize
        } else if wr.op.is_atomic() {
            MIN_STRIDE
        } else {
            SQ_HDR_BYTES + SGE_BYTES * wr.sgl.len()
        };
        prop_assert!(b[used..].iter().all(|&x| x == 0));
    }

    #[test]
    fn recv_wqe_round_trip(ls in 0u8..4, wr_id: u64, sgl in proptest::collection::vec(arb_sge(u32::MAX), 0..=31)) {
        let stride = MIN_STRIDE << ls;
        let wr = RecvWr { wr_id, sgl };
        let max = (stride - RQ_HDR_BYTES) / SGE_BYTES;
        match encode_recv_wqe(&wr, stride) {
            Ok(b) => {
                prop_assert!(wr.sgl.len() <= max);
                prop_assert_eq!(b.len(), stride);
                prop_assert_eq!(decode_recv_wqe(&b).unwrap(), wr);
            }
            Err(e) => prop_assert_eq!(e, DescError::TooManySges { count: wr.sgl.len(), max }),
        }
    }

    #[test]
    fn cqe_round_trip(cqe in arb_cqe(), idx: u16, owner: bool) {
        let b = encode_cqe(&cqe, idx, owner).unwrap();
        prop_assert_eq!(decode_cqe(&b).unwrap(), (cqe, idx, owner));
    }

    #[test]
    fn qp_ctx_round_trip(f in arb_qp_ctx()) {
        let w = encode_qp_ctx(&f).unwrap();
        prop_assert_eq!(decode_qp_ctx(&w).unwrap(), f);
    }

    #[test]
    fn mr_ctx_round_trip(index in 0u32..1 << 24, tag: u8, base: u64, len: u64, pd: u32, acc in 0u8..16, valid: bool) {
        let key = index << 8 | tag as u32;
        let mr = Mr {
            lkey: key,
            rkey: key,
            base,
            len,
            access: MrAccess {
                local_write: acc & 1 != 0,
                remote_read: acc & 2 != 0,
                remote_write: acc & 4 != 0,
                remote_atomic: acc & 8 != 0,
            },
            pd,
        };
        let w = encode_mr_ctx(&mr, valid).unwrap();
        prop_assert_eq!(decode_mr_ctx(&w, index).unwrap(), (mr, valid));
    }

    #[test]
    fn cq_ctx_and_cmd_round_trip(base: u64, log_size in 0u8..32, vector: u8, valid: bool,
                                 op in 0u8..16, table in 0u8..16, flags: u8, index: u16) {
        let w = encode_cq_ctx(base, log_size, vector, valid).unwrap();
        prop_assert_eq!(decode_cq_ctx(&w).unwrap(), (base, log_size, vector, valid));
        let c = encode_ctl_cmd(op, table, flags, index).unwrap();
        prop_assert_eq!(decode_ctl_cmd(c), (op, table, flags, index));
    }

    /// Decoders never panic, and whatever they accept re-encodes to the same bytes.
    #[test]
    fn decoders_total(ls in 0u8..4, seed in proptest::collection::vec(any::<u8>(), 512), sparse: bool) {
        let stride = MIN_STRIDE << ls;
        // sparse inputs (mostly zero) get past the validity checks more often
        let buf: Vec<u8> = seed.iter().take(stride)
            .map(|&x| if sparse && x % 5 != 0 { 0 } else { x }).collect();
        if let Ok((wr, data)) = decode_send_wqe(&buf) {
            // the decoder ignores the fields an opcode does not use; re-encoding zeroes them
            let again = encode_send_wqe(&wr, stride, data.as_deref()).unwrap();
            prop_assert_eq!(decode_send_wqe(&again).unwrap(), (wr, data));
        }
        if let Ok(wr) = decode_recv_wqe(&buf) {
            // everything up to the last SGE is meaningful; the rest of the slot is not read
            let used = RQ_HDR_BYTES + SGE_BYTES * wr.sgl.len();
            prop_assert_eq!(&encode_recv_wqe(&wr, stride).unwrap()[..used], &buf[..used]);
        }
        if let Ok((c, i, o)) = decode_cqe(&buf) {
            // `imm` is not read when neither IMM nor INV is set
            let again = encode_cqe(&c, i, o).unwrap();
            prop_assert_eq!(decode_cqe(&again).unwrap(), (c, i, o));
            if c.imm.is_some() || c.invalidated_rkey.is_some() {
                prop_assert_eq!(&again[..], &buf[..CQE_BYTES]);
            }
        }
        let words = bytes_to_words(&buf);
        if let Ok(f) = decode_qp_ctx(&words) {
            let w = encode_qp_ctx(&f).unwrap();
            prop_assert_eq!(decode_qp_ctx(&w).unwrap(), f);
        }
        let _ = decode_cq_ctx(&words);
        let _ = decode_mr_ctx(&words, 1);
        let _ = decode_ctl_status(words[0]);
    }
}

#[test]
fn event_entries_decode_and_anything_else_is_refused() {
    let mut b = vec![0u8; 32];
    b[22] = HM_CQE_OP_EVENT;
    b[23] = HM_EV_QP_FATAL;
    b[16..20].copy_from_slice(&0x1234u32.to_le_bytes());
    b[31] = HM_CQE_F_OWNER;
    assert_eq!(decode_event(&b).unwrap(), (Event::QpFatal(0x1234), true));
    b[23] = HM_EV_CQ_OVERRUN;
    b[31] = 0;
    assert_eq!(decode_event(&b).unwrap(), (Event::CqOverrun(0x1234), false));
    let mut bad = b.clone();
    bad[23] = 9;
    assert!(decode_event(&bad).is_err(), "unknown event");
    let mut bad = b.clone();
    bad[0] = 1;
    assert!(decode_event(&bad).is_err(), "wr_id not zero");
    let mut bad = b.clone();
    bad[22] = HM_CQE_OP_SEND;
    assert!(decode_event(&bad).is_err(), "not an event");
    assert!(decode_event(&b[..31]).is_err(), "short");
    // a completion decoder refuses an event entry
    assert!(decode_cqe(&b).is_err());
}
