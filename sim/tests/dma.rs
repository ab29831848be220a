//! DMA read/write engines (rtl/dma) against a host-memory model behind AXI4: every byte read
//! equals memory, every write lands exactly in [addr, addr+len) and nowhere else, AXI protocol
//! rules hold (checked by the memory model), errors are reported per request, and large
//! transfers run at line rate behind a 100-cycle memory latency.
use hematite_sim::dma::{run_dma, AxiMem, DmaRead, DmaSim, DmaWrite, MemCfg, PagedMem};
use hematite_sim::{Rng, WIDTHS};
use proptest::prelude::*;

const RD_BASE: u64 = 0x1_0000;
const RD_SPAN: u64 = 0x4_0000;
const WR_BASE: u64 = 0x10_0000;

fn source_mem() -> PagedMem {
    let mut m = PagedMem::new(0xCC);
    let mut r = Rng::new(99);
    let data: Vec<u8> = (0..RD_SPAN).map(|_| r.next() as u8).collect();
    m.write(RD_BASE, &data);
    m
}

fn check_reads(m: &PagedMem, reads: &[DmaRead], got: &[(u8, Vec<u8>, bool)]) -> Result<(), String> {
    let want: Vec<&DmaRead> = reads.iter().filter(|r| r.len != 0).collect();
    if want.len() != got.len() {
        return Err(format!("{} read packets for {} requests", got.len(), want.len()));
    }
    for (k, (r, (tag, bytes, err))) in want.iter().zip(got).enumerate() {
        if *tag != r.tag || *err {
            return Err(format!("read {k}: tag {tag} err {err}, want tag {}", r.tag));
        }
        if bytes != &m.read(r.addr, r.len as usize) {
            return Err(format!("read {k} ({:#x}, {} bytes): data differs (got {} bytes)", r.addr, r.len, bytes.len()));
        }
    }
    Ok(())
}

#[test]
fn reads_and_writes_at_every_alignment() {
    for w in WIDTHS {
        let kw = (w / 8) as u64;
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut expect = source_mem();
        let mut slot = WR_BASE;
        let mut tag = 0u8;
        for off in 0..kw {
            for len in [1u32, 2, kw as u32 - off as u32, kw as u32, kw as u32 + 1, 3 * kw as u32 - 1, 4096, 4096 + 77] {
                reads.push(DmaRead { addr: RD_BASE + 4096 - 2 * kw + off, len, tag });
                let data: Vec<u8> = (0..len).map(|b| (b as u8) ^ tag).collect();
                let addr = slot + off;
                expect.write(addr, &data);
                writes.push(DmaWrite { addr, len, data, tag });
                slot += 16384;
                tag = tag.wrapping_add(1);
            }
        }
        let mut sim = DmaSim::new(w).unwrap();
        let mut mem = AxiMem::new(source_mem(), kw as usize, MemCfg { latency: 20, stall_pct: 10, ..Default::default() });
        let run = run_dma(&mut sim, &mut mem, &reads, &writes, 10, 5).unwrap();
        assert!(run.violations.is_empty(), "{:?}", run.violations);
        check_reads(&expect, &reads, &run.reads).unwrap();
        assert_eq!(run.writes.len(), writes.len());
        assert!(run.writes.iter().zip(&writes).all(|((t, e), wr)| *t == wr.tag && !e));
        let d = mem.mem.diff(&expect);
        assert!(d.is_empty(), "{} bytes differ, first at {:#x}", d.len(), d[0]);
        println!("width {w}: {} reads and {} writes at every byte offset, 4 KiB crossings included: exact", reads.len(), writes.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: hematite_sim::proptest_cases(40), ..ProptestConfig::default() })]
    #[test]
    fn random_mixes_match_memory(w in prop_oneof![Just(256usize), Just(512usize)],
                                 ops in proptest::collection::vec((any::<bool>(), 0u64..RD_SPAN - 10_000, 0u32..9000, 0u64..64), 1..30),
                                 lat in 1u64..200, stall in 0u32..40, seed in any::<u64>()) {
        let kw = w / 8;
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut expect = source_mem();
        let mut slot = WR_BASE;
        for (k, (is_read, a, len, off)) in ops.iter().enumerate() {
            let len = (*len).max(1);
            if *is_read {
                reads.push(DmaRead { addr: RD_BASE + a, len, tag: k as u8 });
            } else {
                let addr = slot + off;
                let data: Vec<u8> = (0..len).map(|b| (b as u64 ^ seed ^ k as u64) as u8).collect();
                expect.write(addr, &data);
                writes.push(DmaWrite { addr, len, data, tag: k as u8 });
                slot += 16384;
            }
        }
        let mut sim = DmaSim::new(w).unwrap();
        let mut mem = AxiMem::new(source_mem(), kw, MemCfg { latency: lat, stall_pct: stall, err_ranges: vec![], seed });
        let run = run_dma(&mut sim, &mut mem, &reads, &writes, stall, seed).map_err(TestCaseError::fail)?;
        prop_assert!(run.violations.is_empty(), "{:?}", run.violations);
        check_reads(&expect, &reads, &run.reads).map_err(TestCaseError::fail)?;
        prop_assert_eq!(run.writes.len(), writes.len());
        for ((t, e), wr) in run.writes.iter().zip(&writes) {
            prop_assert!(*t == wr.tag && !*e);
        }
        prop_assert!(mem.mem.diff(&expect).is_empty());
    }
}

#[test]
fn errors_are_reported_per_request() {
    for w in WIDTHS {
        let kw = w / 8;
        let err_lo = RD_BASE + 0x2000;
        let reads = vec![
            DmaRead { addr: RD_BASE + 5, len: 300, tag: 1 },
            DmaRead { addr: err_lo - 100, len: 200, tag: 2 },   // touches the error range
            DmaRead { addr: RD_BASE + 0x100, len: 0, tag: 3 },  // zero length: dropped, counted
            DmaRead { addr: RD_BASE + 9, len: 70, tag: 4 },
        ];
        let data = |n: usize| (0..n).map(|b| b as u8 ^ 0x5A).collect::<Vec<u8>>();
        let writes = vec![
            DmaWrite { addr: WR_BASE + 3, len: 500, data: data(500), tag: 10 },
            DmaWrite { addr: WR_BASE + 0x1000 + 7, len: 500, data: data(400), tag: 11 },  // short stream
            DmaWrite { addr: WR_BASE + 0x2000 + 1, len: 100, data: data(300), tag: 12 },  // long stream
            DmaWrite { addr: WR_BASE + 0x3000, len: 0, data: vec![], tag: 13 },           // zero length
            DmaWrite { addr: err_lo + 0x10_0000 - 8, len: 64, data: data(64), tag: 14 },  // error range
            DmaWrite { addr: WR_BASE + 0x5000 + 33, len: 65, data: data(65), tag: 15 },
        ];
        let mut sim = DmaSim::new(w).unwrap();
        let cfg = MemCfg { latency: 30, stall_pct: 5, err_ranges: vec![(err_lo, err_lo + 0x100), (err_lo + 0x10_0000, err_lo + 0x10_0100)], seed: 3 };
        let mut mem = AxiMem::new(source_mem(), kw, cfg);
        let run = run_dma(&mut sim, &mut mem, &reads, &writes, 5, 9).unwrap();
        assert!(run.violations.is_empty(), "{:?}", run.violations);
        let flags: Vec<(u8, bool)> = run.reads.iter().map(|(t, _, e)| (*t, *e)).collect();
        assert_eq!(flags, vec![(1, false), (2, true), (4, false)]);
        assert_eq!(run.reads[0].1, source_mem().read(RD_BASE + 5, 300));
        assert_eq!(run.reads[2].1, source_mem().read(RD_BASE + 9, 70));
        assert_eq!(run.rd_bad, 1);
        assert_eq!(run.writes, vec![(10, false), (11, true), (12, true), (14, true), (15, false)]);
        assert_eq!(run.wr_bad, 1);
        assert_eq!(run.wr_len_err, 2);
        // good writes landed; nothing outside any request's [addr, addr+len) changed
        let m = &mem.mem;
        assert_eq!(m.read(WR_BASE + 3, 500), data(500));
        assert_eq!(m.read(WR_BASE + 0x5000 + 33, 65), data(65));
        let allowed: Vec<(u64, u64)> = writes.iter().map(|w| (w.addr, w.addr + w.len as u64)).collect();
        for a in m.diff(&source_mem()) {
            assert!(allowed.iter().any(|(s, e)| a >= *s && a < *e), "byte {a:#x} written outside every request");
        }
        // the long stream's extra bytes were discarded, not written past its end
        assert_eq!(m.read(WR_BASE + 0x2000 + 1, 100), data(100));
        println!("width {w}: read/write errors, length mismatches and zero-length requests reported per request");
    }
}

#[test]
fn large_transfers_at_line_rate() {
    for w in WIDTHS {
        let kw = (w / 8) as u64;
        for lat in [100u64, 400] {
            // 16 reads of 64 KiB, unaligned
            let reads: Vec<DmaRead> = (0..4).map(|k| DmaRead { addr: RD_BASE + 3 + k * 65536 % (RD_SPAN - 65536), len: 65536, tag: k as u8 }).collect();
            let mut sim = DmaSim::new(w).unwrap();
            let mut mem = AxiMem::new(source_mem(), kw as usize, MemCfg { latency: lat, ..Default::default() });
            let run = run_dma(&mut sim, &mut mem, &reads, &[], 0, 1).unwrap();
            check_reads(&source_mem(), &reads, &run.reads).unwrap();
            let ideal = 4 * 65536 / kw;
            let rratio = ideal as f64 / run.cycles as f64;
            let writes: Vec<DmaWrite> = (0..4)
                .map(|k| DmaWrite { addr: WR_BASE + 5 + k * 0x20000, len: 65536, data: vec![k as u8; 65536], tag: k as u8 })
                .collect();
            let mut sim = DmaSim::new(w).unwrap();
            let mut mem = AxiMem::new(PagedMem::new(0), kw as usize, MemCfg { latency: lat, ..Default::default() });
            let wrun = run_dma(&mut sim, &mut mem, &[], &writes, 0, 1).unwrap();
            assert!(wrun.writes.iter().all(|(_, e)| !e));
            let wratio = ideal as f64 / wrun.cycles as f64;
            // baseline: one beat per cycle after the first access's latency
            let base = ideal + lat;
            println!(
                "width {w}, memory latency {lat} cycles: 256 KiB read in {} cycles ({:.3} of one beat per cycle; {:.3} of ideal+latency), 256 KiB write in {} cycles ({:.3}; {:.3})",
                run.cycles, rratio, base as f64 / run.cycles as f64, wrun.cycles, wratio, base as f64 / wrun.cycles as f64
            );
            assert!(run.cycles <= base + 100 && wrun.cycles <= base + 100, "not at line rate once the pipe is full");
        }
    }
}

#[test]
fn surplus_stream_beats_never_shift_later_requests() {
    // streams one beat (and one byte) longer than their requests, back to back with correct
    // ones, under heavy back-pressure on W: the surplus is discarded, the long requests report
    // an error, and every correct request after them still gets exactly its own bytes
    for w in WIDTHS {
        let kw = w / 8;
        for seed in 0..12u64 {
            let mut writes = Vec::new();
            let mut expect = PagedMem::new(0xCC);
            for k in 0..8u64 {
                let len = 3 * kw as u32 + (k as u32 * 7) % kw as u32 + 1;
                let addr = WR_BASE + k * 0x2000 + (k * 5) % kw as u64;
                let good: Vec<u8> = (0..len).map(|b| (b as u64 ^ k ^ seed) as u8).collect();
                let data = if k % 2 == 0 {
                    let mut d = good.clone();
                    d.extend(std::iter::repeat(0xEE).take(if seed % 2 == 0 { kw } else { 1 }));
                    d
                } else {
                    expect.write(addr, &good);
                    good
                };
                writes.push(DmaWrite { addr, len, data, tag: k as u8 });
            }
            let mut sim = DmaSim::new(w).unwrap();
            let mut mem = AxiMem::new(PagedMem::new(0xCC), kw, MemCfg { latency: 7, stall_pct: 45, err_ranges: vec![], seed });
            let run = run_dma(&mut sim, &mut mem, &[], &writes, 30, seed).unwrap();
            assert!(run.violations.is_empty(), "{:?}", run.violations);
            let errs: Vec<bool> = run.writes.iter().map(|(_, e)| *e).collect();
            assert_eq!(errs, (0..8).map(|k| k % 2 == 0).collect::<Vec<_>>(), "width {w} seed {seed}");
            for wr in writes.iter().filter(|x| x.tag % 2 == 1) {
                assert_eq!(mem.mem.read(wr.addr, wr.len as usize), expect.read(wr.addr, wr.len as usize), "width {w} seed {seed} tag {}", wr.tag);
            }
        }
    }
}
