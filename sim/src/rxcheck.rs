//! The RTL receive path against the receive spec: one status per frame, the same verdict,
//! ICRC verdict, length and decoded record as [`hematite_model::classify`], and exactly the
//! accepted frames' records and payloads delivered. Used by the tests and by `hematite-fuzz`.

use crate::{RxRun, RxStatus};
use hematite_model::{classify, RxOutcome};

/// Compare one RTL status with the model's verdict on the same frame; Err describes the first
/// difference.
pub fn compare_status(frame: &[u8], s: &RxStatus, m: &RxOutcome) -> Result<(), String> {
    let mr = m.reason.map(|r| r as u8).unwrap_or(0);
    if s.reason != mr {
        return Err(format!("reason: rtl {} model {} ({:?})", s.reason, mr, m.reason));
    }
    if s.icrc_ok != m.icrc_ok {
        return Err(format!("icrc_ok: rtl {} model {}", s.icrc_ok, m.icrc_ok));
    }
    if s.frame_len as usize != frame.len().min(0xFFFF) {
        return Err(format!("frame_len: rtl {} actual {}", s.frame_len, frame.len()));
    }
    if mr == 0 && s.hdr != m.rec {
        return Err(format!("decoded record differs:\n rtl   {:?}\n model {:?}", s.hdr, m.rec));
    }
    Ok(())
}

/// Check a whole RX run against the model: statuses, records and payloads.
pub fn check_rx_run(frames: &[Vec<u8>], run: &RxRun) -> Result<usize, String> {
    if run.status.len() != frames.len() {
        return Err(format!("{} statuses for {} frames", run.status.len(), frames.len()));
    }
    let mut accepted = 0;
    let mut hi = 0;
    let mut pi = 0;
    for (i, (f, s)) in frames.iter().zip(&run.status).enumerate() {
        let m = classify(f);
        compare_status(f, s, &m).map_err(|e| format!("frame {}: {e}\n  hex {}", i + 1, hexs(f)))?;
        if m.reason.is_none() {
            accepted += 1;
            let h = run.hdrs.get(hi).ok_or(format!("frame {}: no header record delivered", i + 1))?;
            if *h != m.rec {
                return Err(format!("frame {}: m_hdr record differs from monitor/model", i + 1));
            }
            hi += 1;
            let off = m.rec.payload_off as usize;
            let want = &f[off..off + m.rec.payload_len as usize];
            if !want.is_empty() {
                let got = run.payloads.get(pi).ok_or(format!("frame {}: no payload delivered", i + 1))?;
                if got.as_slice() != want {
                    return Err(format!("frame {}: payload differs (len rtl {} model {})", i + 1, got.len(), want.len()));
                }
                pi += 1;
            }
        }
    }
    if hi != run.hdrs.len() || pi != run.payloads.len() {
        return Err(format!("extra outputs: {} records / {} payloads used of {} / {}", hi, pi, run.hdrs.len(), run.payloads.len()));
    }
    Ok(accepted)
}

/// Lower-case hex of `b`.
pub fn hexs(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

