//! Build script of the firmware: generates `$OUT_DIR/desc_gen.rs` (constants and struct field
//! tables of `rtl/pkg/hm_desc_pkg.sv`) with hematite-model's generator, reused as a module
//! (no second parser), and, for the riscv32 target only, links the binary with `link.x`.

#[path = "../model/build.rs"]
mod gen;

fn main() {
    // Same env as the model's build: CARGO_MANIFEST_DIR/../rtl/pkg/hm_desc_pkg.sv -> OUT_DIR.
    gen::main();
    println!("cargo:rerun-if-changed=../model/build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.starts_with("riscv32") {
        let dir = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
        println!("cargo:rustc-link-arg-bins=-L{dir}");
        println!("cargo:rustc-link-arg-bins=-T{dir}/link.x");
        println!("cargo:rerun-if-changed=link.x");
        println!("cargo:rerun-if-changed=memory.x");
    }
}
