//! AXI4-Lite bundles as the Verilated models carry them: `hm_axil_req_t` (what a manager
//! drives) and `hm_axil_rsp_t` (what a subordinate drives) of `rtl/pkg/hm_pkg.sv`, packed
//! into words at the field positions hematite-abi generates from that package.

use hematite_abi::desc::fpos;
use hematite_abi::pkt::{HM_AXIL_REQ_T_BITS, HM_AXIL_REQ_T_FIELDS as REQ, HM_AXIL_RSP_T_BITS, HM_AXIL_RSP_T_FIELDS as RSP};

/// 32-bit words of a packed request (a model port wider than 64 bits is a word array).
pub const REQ_WORDS: usize = HM_AXIL_REQ_T_BITS.div_ceil(32);
// a response is one 64-bit model port
const _: () = assert!(HM_AXIL_RSP_T_BITS <= 64);

/// What an AXI4-Lite manager drives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AxilReq {
    pub awaddr: u32,
    pub awvalid: bool,
    pub wdata: u32,
    pub wstrb: u8,
    pub wvalid: bool,
    pub bready: bool,
    pub araddr: u32,
    pub arvalid: bool,
    pub rready: bool,
}

/// What an AXI4-Lite subordinate drives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AxilRsp {
    pub awready: bool,
    pub wready: bool,
    pub bresp: u8,
    pub bvalid: bool,
    pub arready: bool,
    pub rdata: u32,
    pub rresp: u8,
    pub rvalid: bool,
}

// Field positions (lsb, width), resolved when compiling (the engine packs three bundles a cycle).
const AWADDR: (usize, usize) = fpos(REQ, "awaddr");
const AWVALID: (usize, usize) = fpos(REQ, "awvalid");
const WDATA: (usize, usize) = fpos(REQ, "wdata");
const WSTRB: (usize, usize) = fpos(REQ, "wstrb");
const WVALID: (usize, usize) = fpos(REQ, "wvalid");
const BREADY: (usize, usize) = fpos(REQ, "bready");
const ARADDR: (usize, usize) = fpos(REQ, "araddr");
const ARVALID: (usize, usize) = fpos(REQ, "arvalid");
const RREADY: (usize, usize) = fpos(REQ, "rready");
const AWREADY: (usize, usize) = fpos(RSP, "awready");
const WREADY: (usize, usize) = fpos(RSP, "wready");
const BRESP: (usize, usize) = fpos(RSP, "bresp");
const BVALID: (usize, usize) = fpos(RSP, "bvalid");
const ARREADY: (usize, usize) = fpos(RSP, "arready");
const RDATA: (usize, usize) = fpos(RSP, "rdata");
const RRESP: (usize, usize) = fpos(RSP, "rresp");
const RVALID: (usize, usize) = fpos(RSP, "rvalid");

/// ORs `v` (at most 32 bits wide) into field `f` of the zero-initialised words `w`.
#[inline]
fn put(w: &mut [u32], f: (usize, usize), v: u32) {
    let x = (u64::from(v) & ((1u64 << f.1) - 1)) << (f.0 % 32);
    w[f.0 / 32] |= x as u32;
    if f.0 % 32 + f.1 > 32 {
        w[f.0 / 32 + 1] |= (x >> 32) as u32;
    }
}

/// Field `f` (at most 32 bits wide, below bit 64) of `v`.
#[inline]
fn get(v: u64, f: (usize, usize)) -> u32 {
    ((v >> f.0) & ((1u64 << f.1) - 1)) as u32
}

impl AxilReq {
    /// The packed bundle.
    pub fn pack(&self) -> [u32; REQ_WORDS] {
        let mut w = [0u32; REQ_WORDS];
        put(&mut w, AWADDR, self.awaddr);
        put(&mut w, AWVALID, self.awvalid as u32);
        put(&mut w, WDATA, self.wdata);
        put(&mut w, WSTRB, u32::from(self.wstrb));
        put(&mut w, WVALID, self.wvalid as u32);
        put(&mut w, BREADY, self.bready as u32);
        put(&mut w, ARADDR, self.araddr);
        put(&mut w, ARVALID, self.arvalid as u32);
        put(&mut w, RREADY, self.rready as u32);
        w
    }
}

impl AxilRsp {
    /// The bundle from its packed form.
    pub fn unpack(v: u64) -> AxilRsp {
        AxilRsp {
            awready: get(v, AWREADY) != 0,
            wready: get(v, WREADY) != 0,
            bresp: get(v, BRESP) as u8,
            bvalid: get(v, BVALID) != 0,
            arready: get(v, ARREADY) != 0,
            rdata: get(v, RDATA),
            rresp: get(v, RRESP) as u8,
            rvalid: get(v, RVALID) != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::get_bits;

    #[test]
    fn fields_land_where_the_package_puts_them() {
        // hm_axil_req_t: awaddr is the most significant field, rready bit 0
        let w = AxilReq { rready: true, awaddr: 0x8000_0001, ..Default::default() }.pack();
        assert_eq!(w[0], 1);
        assert_eq!(get_bits(&w, HM_AXIL_REQ_T_BITS - 32, 32), 0x8000_0001);
        // hm_axil_rsp_t: rvalid bit 0, rresp bits 1..2, rdata bits 3..34
        let r = AxilRsp::unpack(1 | (2 << 1) | (0xDEAD_BEEF << 3));
        assert_eq!((r.rvalid, r.rresp, r.rdata, r.bvalid), (true, 2, 0xDEAD_BEEF, false));
    }
}
