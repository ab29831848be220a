//! `hematite-experiment`: the DCQCN incast experiments (docs/experiments.md) with the
//! congestion control of every NIC in Verilated RTL (`--backend rtl`, the default here) or in
//! the reference model (`--backend model`).

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--backend" || a.starts_with("--backend=")) && args.first().is_some_and(|a| a == "dcqcn") {
        args.push("--backend".into());
        args.push("rtl".into());
    }
    let rtl = hematite_sim::ccexp::RtlBackend::default();
    std::process::exit(hematite_netsim::experiment::cli_main(&args, &[("rtl", &rtl)]));
}
