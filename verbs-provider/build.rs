//! Compiles the C glue (src/shim.c) against the installed libibverbs headers and links it in
//! whole, so that its constructor (the provider's registration) is kept.
fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-changed=src/shim.h");
    if !std::path::Path::new("/usr/include/infiniband/verbs.h").exists() {
        panic!("libibverbs-dev is not installed (apt-get install libibverbs-dev): the provider needs <infiniband/verbs.h>");
    }
    cc::Build::new()
        .file("src/shim.c")
        .flag("-std=gnu11")
        .flag("-Wall")
        .flag("-Wextra")
        .flag("-Werror")
        .flag("-fvisibility=hidden")
        .cargo_metadata(false)
        .compile("hm_shim");
    let out = std::env::var("OUT_DIR").unwrap();
    println!("cargo:rustc-link-search=native={out}");
    println!("cargo:rustc-link-lib=static:+whole-archive=hm_shim");
    println!("cargo:rustc-link-lib=dylib=ibverbs");
    println!("cargo:rustc-link-arg=-Wl,-soname,libhematite-rdmav34.so");
}
