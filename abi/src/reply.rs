//! The answers of QUERY_DEVICE and QUERY_PORT: one word layout each, which the firmware writes
//! (`to_words`) and the driver reads (`from_words`). Fields in answer order; a `u64` takes two
//! words, low word first.

/// A struct whose fields are answer words, in order, with its word count `$words`.
macro_rules! answer {
    ($(#[$m:meta])* $name:ident, $words:ident { $($(#[$fm:meta])* $f:ident : $t:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fm])* pub $f: $t,)*
        }

        #[doc = concat!("Words of a [`", stringify!($name), "`] answer.")]
        pub const $words: usize = 0 $(+ answer!(@n $t))*;

        impl $name {
            /// The answer words.
            pub fn to_words(&self) -> [u32; $words] {
                let mut w = [0u32; $words];
                let mut i = 0;
                $(answer!(@put w, i, self.$f, $t);)*
                let _ = i;
                w
            }

            /// Reads an answer; `None` when it is shorter than the layout.
            pub fn from_words(w: &[u32]) -> Option<$name> {
                if w.len() < $words {
                    return None;
                }
                let mut i = 0;
                $(let $f = answer!(@get w, i, $t);)*
                let _ = i;
                Some($name { $($f,)* })
            }
        }
    };
    (@n u32) => { 1 };
    (@n u64) => { 2 };
    (@put $w:ident, $i:ident, $v:expr, u32) => {
        $w[$i] = $v;
        $i += 1;
    };
    (@put $w:ident, $i:ident, $v:expr, u64) => {
        $w[$i] = $v as u32;
        $w[$i + 1] = ($v >> 32) as u32;
        $i += 2;
    };
    (@get $w:ident, $i:ident, u32) => {{
        $i += 1;
        $w[$i - 1]
    }};
    (@get $w:ident, $i:ident, u64) => {{
        $i += 2;
        $w[$i - 2] as u64 | ($w[$i - 1] as u64) << 32
    }};
}

answer! {
    /// What QUERY_DEVICE answers: `ibv_device_attr`'s fields.
    DeviceAttr, DEVICE_ATTR_WORDS {
        /// Firmware version: major << 16 | minor << 8 | patch.
        fw_ver: u32,
        vendor_id: u32,
        vendor_part_id: u32,
        hw_ver: u32,
        max_qp: u32,
        max_qp_wr: u32,
        max_sge: u32,
        max_cq: u32,
        max_cqe: u32,
        max_mr: u32,
        max_pd: u32,
        max_mr_size: u64,
        page_size_cap: u64,
        max_qp_rd_atom: u32,
        max_qp_init_rd_atom: u32,
        /// `enum ibv_atomic_cap`.
        atomic_cap: u32,
        max_inline_data: u32,
        phys_port_cnt: u32,
        num_comp_vectors: u32,
    }
}

answer! {
    /// What QUERY_PORT answers: `ibv_port_attr`'s fields (ibverbs enum values).
    PortAttr, PORT_ATTR_WORDS {
        /// `enum ibv_port_state`.
        state: u32,
        /// `enum ibv_mtu`.
        max_mtu: u32,
        active_mtu: u32,
        gid_tbl_len: u32,
        port_cap_flags: u32,
        max_msg_sz: u32,
        pkey_tbl_len: u32,
        /// `IBV_LINK_LAYER_*`.
        link_layer: u32,
        active_speed: u32,
        active_width: u32,
        phys_state: u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_round_trip_and_short_answers_are_refused() {
        assert_eq!(DEVICE_ATTR_WORDS, 21);
        assert_eq!(PORT_ATTR_WORDS, 11);
        let d = DeviceAttr { fw_ver: 1, max_mr_size: 0x1_2345_6789, page_size_cap: 0xF000, num_comp_vectors: 9, ..Default::default() };
        let w = d.to_words();
        assert_eq!((w[0], w[11], w[12], w[13], w[20]), (1, 0x2345_6789, 1, 0xF000, 9));
        assert_eq!(DeviceAttr::from_words(&w), Some(d));
        assert_eq!(DeviceAttr::from_words(&w[..20]), None);
        let p = PortAttr { state: 4, phys_state: 5, ..Default::default() };
        assert_eq!(PortAttr::from_words(&p.to_words()), Some(p));
        assert_eq!(PortAttr::from_words(&[0; 10]), None);
    }
}

/// The vendor ID QUERY_DEVICE reports (a placeholder, not an assigned PCI vendor ID or IEEE
/// OUI: "HM"); also the PCI vendor of the simulated NICs' functions in hematite-run's sysfs tree.
pub const VENDOR_ID: u32 = 0x48_4D;
/// The vendor part ID QUERY_DEVICE reports; also the simulated NICs' PCI device ID.
pub const VENDOR_PART_ID: u32 = 0x0001;
