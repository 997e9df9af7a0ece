//! Gives this crate's tests, examples and doctests a run path to libvattn
//! (the `-sys` crate's rpath applies only to its own binaries).
fn main() {
    if let Ok(dir) = std::env::var("DEP_VATTN_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
