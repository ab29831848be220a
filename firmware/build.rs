//! Build script of the firmware: for the riscv32 target only, links the binary with `link.x`
//! (the register and descriptor constants come from hematite-abi).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.starts_with("riscv32") {
        let dir = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
        println!("cargo:rustc-link-arg-bins=-L{dir}");
        println!("cargo:rustc-link-arg-bins=-T{dir}/link.x");
        println!("cargo:rerun-if-changed=link.x");
        println!("cargo:rerun-if-changed=memory.x");
    }
}
