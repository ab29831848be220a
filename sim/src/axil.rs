//! AXI4-Lite bundles as the Verilated models carry them: `hm_axil_req_t` (what a manager
//! drives) and `hm_axil_rsp_t` (what a subordinate drives) of `rtl/pkg/hm_pkg.sv`, packed
//! into words at the field positions hematite-abi generates from that package.

use crate::layout::{get_bits, set_bits};
use hematite_abi::desc::fpos;
use hematite_abi::pkt::{HM_AXIL_REQ_T_BITS, HM_AXIL_REQ_T_FIELDS as REQ, HM_AXIL_RSP_T_FIELDS as RSP};

/// 32-bit words of a packed request (a model port wider than 64 bits is a word array).
pub const REQ_WORDS: usize = HM_AXIL_REQ_T_BITS.div_ceil(32);

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

impl AxilReq {
    /// The packed bundle.
    pub fn pack(&self) -> [u32; REQ_WORDS] {
        let mut w = [0u32; REQ_WORDS];
        let fields: [((usize, usize), u32); 9] = [
            (fpos(REQ, "awaddr"), self.awaddr),
            (fpos(REQ, "awvalid"), self.awvalid as u32),
            (fpos(REQ, "wdata"), self.wdata),
            (fpos(REQ, "wstrb"), u32::from(self.wstrb)),
            (fpos(REQ, "wvalid"), self.wvalid as u32),
            (fpos(REQ, "bready"), self.bready as u32),
            (fpos(REQ, "araddr"), self.araddr),
            (fpos(REQ, "arvalid"), self.arvalid as u32),
            (fpos(REQ, "rready"), self.rready as u32),
        ];
        for ((lsb, width), v) in fields {
            set_bits(&mut w, lsb, width, u128::from(v));
        }
        w
    }
}

impl AxilRsp {
    /// The bundle from its packed form.
    pub fn unpack(v: u64) -> AxilRsp {
        let w = [v as u32, (v >> 32) as u32];
        let f = |name: &str| {
            let (lsb, width) = fpos(RSP, name);
            get_bits(&w, lsb, width) as u32
        };
        AxilRsp {
            awready: f("awready") != 0,
            wready: f("wready") != 0,
            bresp: f("bresp") as u8,
            bvalid: f("bvalid") != 0,
            arready: f("arready") != 0,
            rdata: f("rdata"),
            rresp: f("rresp") as u8,
            rvalid: f("rvalid") != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
