//! Generates the raw bindings from `vattn.h` with bindgen and tells cargo
//! how to link libvattn.
//!
//! Where things are found:
//! - `VATTN_INCLUDE_DIR`: directory of `vattn.h` (default: the repository's
//!   `include/`, or pkg-config's include dir when pkg-config finds vattn);
//! - `VATTN_LIB_DIR`: directory of `libvattn.so`; without it `pkg-config vattn`
//!   is asked (a version in the same major/minor as these bindings).
//!
//! Dependent crates see the library directory as `DEP_VATTN_LIB_DIR` and the
//! include directory as `DEP_VATTN_INCLUDE`.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Version of the C header these bindings were written against.
const MAJOR: u32 = 0;
const MINOR: u32 = 1;

fn pkg_config(args: &[&str]) -> Option<String> {
    let out = Command::new(env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into()))
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `-L/-I` values of `pkg-config --libs-only-L / --cflags-only-I vattn`.
fn pkg_config_dirs(flag: &str, prefix: &str) -> Vec<PathBuf> {
    pkg_config(&[flag, "vattn"])
        .map(|s| {
            s.split_whitespace()
                .filter_map(|t| t.strip_prefix(prefix).map(PathBuf::from))
                .collect()
        })
        .unwrap_or_default()
}

#[derive(Debug)]
struct IntTypes;

impl bindgen::callbacks::ParseCallbacks for IntTypes {
    /// Macro constants get the C type of the fields that hold them: status
    /// codes and enum-like values are `int32_t`, feature bits and the version
    /// number `uint32_t`.
    fn int_macro(&self, name: &str, _value: i64) -> Option<bindgen::callbacks::IntKind> {
        use bindgen::callbacks::IntKind;
        if name.starts_with("VATTN_FEATURE_") || name == "VATTN_VERSION_NUMBER" {
            Some(IntKind::U32)
        } else if name.starts_with("VATTN_") {
            Some(IntKind::I32)
        } else {
            None
        }
    }

    fn include_file(&self, filename: &str) {
        println!("cargo:rerun-if-changed={}", filename);
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=VATTN_LIB_DIR");
    println!("cargo:rerun-if-env-changed=VATTN_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let repo_include = manifest.join("../../../include");

    // ---- the library ---------------------------------------------------------
    let lib_dir: PathBuf = match env::var_os("VATTN_LIB_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let range = format!("vattn >= {}.{}.0 vattn < {}.{}.0", MAJOR, MINOR, MAJOR, MINOR + 1);
            if pkg_config(&["--exists", &range]).is_none() {
                panic!(
                    "libvattn not found: set VATTN_LIB_DIR to the directory of libvattn.so \
                     (and VATTN_INCLUDE_DIR to that of vattn.h), or make `pkg-config vattn` \
                     find a {}.{}.x install",
                    MAJOR, MINOR
                );
            }
            pkg_config_dirs("--libs-only-L", "-L")
                .into_iter()
                .next()
                .unwrap_or_else(|| PathBuf::from("/usr/lib"))
        }
    };
    let lib_dir = lib_dir
        .canonicalize()
        .unwrap_or_else(|e| panic!("library directory {} : {}", lib_dir.display(), e));
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-lib=dylib=vattn");
    // Lets this crate's own tests run without LD_LIBRARY_PATH; dependents
    // read DEP_VATTN_LIB_DIR and do the same for theirs.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    println!("cargo:lib_dir={}", lib_dir.display());

    // ---- the header -------------------------------------------------------------
    let include_dir = env::var_os("VATTN_INCLUDE_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            if repo_include.join("vattn.h").exists() {
                Some(repo_include.clone())
            } else {
                pkg_config_dirs("--cflags-only-I", "-I").into_iter().find(|d| d.join("vattn.h").exists())
            }
        })
        .unwrap_or_else(|| PathBuf::from("/usr/include"));
    let header = include_dir.join("vattn.h");
    assert!(Path::new(&header).exists(), "vattn.h not found in {}", include_dir.display());
    println!("cargo:include={}", include_dir.display());

    let bindings = bindgen::Builder::default()
        .header(header.to_str().expect("non-UTF-8 include path"))
        .clang_arg(format!("-I{}", include_dir.display()))
        // Everything public is vattn_* / VATTN_*; DLPack's types come in as
        // they are used, plus its enum constants (kDLCPU, kDLFloat, ...).
        .allowlist_function("vattn_.*")
        .allowlist_type("vattn_.*")
        .allowlist_var("VATTN_.*")
        .allowlist_type("DL(Tensor|Device|DeviceType|DataType|DataTypeCode|ManagedTensor)")
        // C enums (DLPack's) become plain integer constants, never Rust enums:
        // a Rust enum holding an out-of-range value is undefined behaviour.
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .size_t_is_usize(true)
        .layout_tests(true)
        .derive_default(true)
        .derive_debug(true)
        .derive_copy(true)
        .generate_comments(true)
        .parse_callbacks(Box::new(IntTypes))
        .generate()
        .expect("bindgen could not generate the vattn bindings");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
    bindings.write_to_file(&out).expect("could not write bindings.rs");
}
