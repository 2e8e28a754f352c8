//! Kernel names as profilers print them: `axpy(int, float, float const*, float*)` (cuda-flux,
//! from cpp_demangle), `axpy(int, float, const float *, float *)` (Nsight Compute),
//! `void scale<float>(float*, int)` (nvprof, templates with their return type), or just `axpy`.

/// The name without return type, argument list or white space: `scale<float>`, `axpy`,
/// `ns::k`.
pub fn base_name(name: &str) -> String {
    let name = name.trim();
    let without_args = strip_arguments(name);
    // A return type is separated from the name by a space outside template brackets.
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in without_args.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ' ' if depth == 0 => start = i + 1,
            _ => {}
        }
    }
    squeeze(&without_args[start..])
}

/// The whole name without white space (so that `float *` and `float*` compare equal).
pub fn squeeze(name: &str) -> String {
    name.chars().filter(|c| !c.is_whitespace()).collect()
}

/// `f(int, g(x))` without its trailing, balanced argument list.
fn strip_arguments(name: &str) -> &str {
    if !name.ends_with(')') {
        return name;
    }
    let mut depth = 0i32;
    for (i, c) in name.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return &name[..i];
                }
            }
            _ => {}
        }
    }
    name
}

/// Whether a reference profiler's kernel name denotes the kernel with this demangled and mangled
/// name: equal without white space, or equal base names.
pub fn same_kernel(reference: &str, demangled: &str, mangled: &str) -> bool {
    let reference = reference.trim();
    reference == mangled
        || squeeze(reference) == squeeze(demangled)
        || base_name(reference) == base_name(demangled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_names() {
        assert_eq!(base_name("axpy(int, float, float const*, float*)"), "axpy");
        assert_eq!(base_name("axpy"), "axpy");
        assert_eq!(
            base_name("void scale<float, 4>(float*, int)"),
            "scale<float,4>"
        );
        assert_eq!(base_name("ns::k(int (*)(int))"), "ns::k");
        assert_eq!(base_name("void ns::k<(int)3>(int)"), "ns::k<(int)3>");
    }

    #[test]
    fn same_kernel_across_printers() {
        let ours = "axpy(int, float, float const*, float*)";
        assert!(same_kernel(
            "axpy(int, float, const float *, float *)",
            ours,
            "_Z4axpyifPKfPf"
        ));
        assert!(same_kernel("axpy", ours, "_Z4axpyifPKfPf"));
        assert!(same_kernel("_Z4axpyifPKfPf", ours, "_Z4axpyifPKfPf"));
        assert!(!same_kernel("axpy2", ours, "_Z4axpyifPKfPf"));
    }
}
