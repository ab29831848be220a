#!/usr/bin/env python3
"""The shell's cocotb tests (issue 21): builds each block under test with Verilator through
cocotb's runner (cocotb and cocotbext-axi pinned in ./hematite, installed by `./hematite deps`)
and runs its tests; exit status 0 only when every test passed and none was skipped.

    python3 tests/shell/run.py            # everything (./hematite test-shell; the card's
                                          # end-to-end test needs build/fw/firmware.hex and
                                          # hematite-sim: $HM_SIM_EXE, else target/debug/)
    python3 tests/shell/run.py pcie_dma   # one build (the names in CASES)
    python3 tests/shell/run.py card_host  # the host driver's demo through the card alone
                                          # (./hematite demo-card; in the suite as part of card)
"""
import os
import sys
from pathlib import Path

from cocotb.runner import get_results, get_runner

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BUILD = ROOT / "build" / "shell"
sys.path.insert(0, str(ROOT / "scripts"))
import manifest  # noqa: E402  (hematite.core: the card's sources, the generated ones made first)

# (name, top, RTL files, parameters, test module, test cases, environment)
CARD_PARAMS = {"NUM_QPS": 256, "NUM_MRS": 256, "NUM_CQS": 256, "MSIX_TIMEOUT": 64, "TIMEOUT_TICK": 256,
               "FLR_WAIT": 1024}
FIFO_RTL = ["rtl/shell/hm_sync.sv", "rtl/shell/hm_axis_async_frame_fifo.sv"]
CASES = [
    ("fifo_rx", "hm_axis_async_frame_fifo", FIFO_RTL,
     {"DATA_WIDTH": 512, "DEPTH": 32, "DROP_WHEN_FULL": 1}, "test_frame_fifo",
     ["rx_line_rate_core_stalled", "rx_bad_and_oversize", "rx_core_keeps_up"], {"HM_FIFO_DEPTH": "32"}),
    ("fifo_tx", "hm_axis_async_frame_fifo", FIFO_RTL,
     {"DATA_WIDTH": 512, "DEPTH": 32, "DROP_WHEN_FULL": 0}, "test_frame_fifo",
     ["tx_no_underflow", "tx_mac_backpressure"], {"HM_FIFO_DEPTH": "32"}),
    ("eth_port", "hm_eth_port", FIFO_RTL + ["rtl/shell/hm_pfc_gen.sv", "rtl/shell/hm_eth_port.sv"],
     {"DATA_WIDTH": 512, "RX_DEPTH": 64, "TX_DEPTH": 64}, "test_eth_port",
     ["pfc_xoff_refresh_xon", "pfc_disable_while_paused", "pfc_disabled", "mac_reset_alone"], {}),
    ("msix", "hm_msix", ["rtl/pkg/hm_pkg.sv", "rtl/csr/hm_axil_fe.sv", "rtl/shell/hm_msix.sv"], {"NUM_VEC": 20, "ADDR_W": 12, "PBA_OFFSET": 0x800, "TIMEOUT": 64},
     "test_msix", ["table_reads_back_and_resets_masked", "events_masking_and_retry", "unanswered_request_times_out",
                   "event_storm_loses_nothing"], {}),
    ("pcie_dma", "hm_pcie_dma", ["rtl/common/hm_fifo.sv", "rtl/common/hm_skid.sv", "rtl/shell/hm_pcie_dma.sv"], {"TIMEOUT_TICK": 1024},
     "test_pcie_dma", ["dma_across_mps_mrrs", "completions_out_of_order", "completion_never_arrives",
                       "error_completions_and_bus_master", "strobes_and_refused_bursts",
                       "b_waits_for_the_link"], {}),
    ("pcie_ep", "hm_pcie_ep", ["rtl/pkg/hm_pkg.sv", "rtl/common/hm_fifo.sv", "rtl/common/hm_skid.sv",
                               "rtl/csr/hm_axil_fe.sv", "rtl/shell/hm_msix.sv", "rtl/shell/hm_pcie_dma.sv",
                               "rtl/shell/hm_pcie_cq.sv", "rtl/shell/hm_pcie_ep.sv"],
     {"NUM_VEC": 32, "MSIX_TIMEOUT": 64, "TIMEOUT_TICK": 256, "FLR_WAIT": 1024}, "test_pcie_ep",
     ["enumeration_bars_and_mmio", "msix_delivered_and_masked", "dma_through_the_endpoint",
      "flr_quiesces_and_resets", "requests_the_completer_refuses"], {}),
    # (at 256 bits a PFC frame is two beats)
    # the DMA bridge's throughput against a root complex at the interface's rate (a benchmark:
    # figures in clocks, targets asserted; bench_pcie_dma.py)
    ("dma_bench", "hm_pcie_dma", ["rtl/common/hm_fifo.sv", "rtl/common/hm_skid.sv", "rtl/shell/hm_pcie_dma.sv"],
     {"TIMEOUT_TICK": 65536}, "bench_pcie_dma", ["read_bandwidth", "write_bandwidth"], {}),
    # the card's logic whole: every source of hematite.core's synth_card target (the engine with
    # 256 QPs, MRs and CQs; the control core with its CPU, held until the test loads firmware),
    # then served to the host driver (card_host.py) for the demo's traffic; it needs
    # build/fw/firmware.hex and hematite-sim (the suite has built both by then)
    ("card", "hm_card", None, CARD_PARAMS, "test_card",
     ["card_windows_registers_mac_and_flr", "card_serves_the_host_driver"], {}),
    ("eth_port_256", "hm_eth_port", FIFO_RTL + ["rtl/shell/hm_pfc_gen.sv", "rtl/shell/hm_eth_port.sv"],
     {"DATA_WIDTH": 256, "RX_DEPTH": 64, "TX_DEPTH": 64}, "test_eth_port",
     ["pfc_xoff_refresh_xon", "pfc_disable_while_paused", "pfc_disabled", "mac_reset_alone"], {}),
]

# run only when named: (name, build shared with, test module, test cases)
ON_DEMAND = [("card_host", "card", "test_card", ["card_serves_the_host_driver"])]


def main():
    sys.path.insert(0, str(HERE))
    only = sys.argv[1:]
    runner = get_runner("verilator")
    failed = 0
    total = 0
    cases = [c for c in CASES if not only or c[0] in only]
    for name, shared, module, tests in ON_DEMAND:
        if name in only and shared not in only:
            base = next(c for c in CASES if c[0] == shared)
            cases.append((shared,) + base[1:4] + (module, tests, base[6]))
    unknown = set(only) - {c[0] for c in CASES} - {c[0] for c in ON_DEMAND}
    if unknown:
        print(f"shell: no such case: {' '.join(sorted(unknown))}")
        return 1
    for name, top, rtl, params, module, tests, env in cases:
        bdir = BUILD / name
        if rtl is None:
            rtl = manifest.sources("synth_card", "sv")
        runner.build(verilog_sources=[ROOT / f for f in rtl], hdl_toplevel=top, parameters=params,
                     build_args=["--timescale", "1ns/1ps", "-Wno-fatal"], build_dir=bdir)
        xml = runner.test(test_module=module, hdl_toplevel=top, testcase=tests, build_dir=bdir,
                          test_dir=HERE, extra_env=env, results_xml=str(bdir / "results.xml"))
        n, f = get_results(xml)
        total += n
        failed += f
        print(f"shell: {name}: {n - f} of {n} passed")
        if n != len(tests):
            print(f"shell: {name}: {len(tests)} tests expected, {n} ran")
            failed += 1
    print(f"shell: {total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
