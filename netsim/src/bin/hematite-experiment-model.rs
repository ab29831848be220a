//! `hematite-experiment-model`: the DCQCN incast experiments with the reference-model backend
//! only (no Verilator needed; `hematite-experiment` in the sim crate adds the RTL backend)
//! (see `docs/experiments.md`; `hematite_netsim::experiment::USAGE`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(hematite_netsim::experiment::cli_main(&args, &[]));
}
