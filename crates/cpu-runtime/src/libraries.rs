//! CUDA libraries whose kernels cuda-flux did not compile (cuBLAS, cuFFT, ...): a program
//! built for the CPU target that loads one gets a note, once, instead of failing silently.
//! Such a library's kernels are GPU code inside the library; on the CPU target its calls
//! fail (it finds no GPU) and nothing it would launch runs or is profiled.

use std::sync::Once;

/// Name stems of NVIDIA's libraries that carry their own kernels, compile kernels at run time
/// (NVRTC) or load them through the driver (`libcuda`: the driver API).
const GPU_LIBRARIES: &[&str] = &[
    "libcublas",
    "libcublasLt",
    "libcufft",
    "libcufftw",
    "libcurand",
    "libcusparse",
    "libcusolver",
    "libcusolverMg",
    "libnpp",
    "libnvjpeg",
    "libcudnn",
    "libcutensor",
    "libnccl",
    "libnvgraph",
    "libnvrtc",
    "libcuda",
];

/// The GPU libraries among the shared objects `maps` (the text of `/proc/self/maps`) lists,
/// as file names, sorted and without repeats.
pub fn gpu_libraries(maps: &str) -> Vec<String> {
    let mut found: Vec<String> = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter_map(|path| path.rsplit('/').next())
        .filter(|name| {
            name.split_once(".so").is_some_and(|(stem, _)| {
                GPU_LIBRARIES
                    .iter()
                    .any(|lib| stem == *lib || (*lib == "libnpp" && stem.starts_with("libnpp")))
            })
        })
        .map(str::to_owned)
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The note for `libraries`, if any.
pub fn note_for(libraries: &[String]) -> Option<String> {
    if libraries.is_empty() {
        return None;
    }
    Some(format!(
        "this program loads {}, whose kernels cuda-flux does not compile: on the CPU target \
         their calls fail (no GPU) and what they would launch neither runs nor is profiled",
        libraries.join(", ")
    ))
}

/// Says once on stderr which GPU libraries the process has loaded (at the first
/// registration or API call: shared libraries a program links are loaded before both).
pub fn note_once() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        if let Some(note) = note_for(&gpu_libraries(&maps)) {
            crate::runtime::note(&note);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_libraries_are_found_by_file_name() {
        let maps = "\
7f00-7f01 r--p 00000000 fd:01 1 /usr/lib/x86_64-linux-gnu/libcublas.so.11.11.3.6
7f01-7f02 r-xp 00001000 fd:01 1 /usr/lib/x86_64-linux-gnu/libcublas.so.11.11.3.6
7f02-7f03 r--p 00000000 fd:01 2 /usr/lib/x86_64-linux-gnu/libcublasLt.so.11
7f03-7f04 r--p 00000000 fd:01 3 /usr/lib/x86_64-linux-gnu/libc.so.6
7f04-7f05 r--p 00000000 fd:01 4 /opt/x/libcublas_helper.so
7f05-7f06 r--p 00000000 fd:01 5 /usr/lib/libnppif.so.11
7f06-7f07 rw-p 00000000 00:00 0
7f07-7f08 r--p 00000000 fd:01 6 /usr/lib/libcuda.so.1
7f08-7f09 r--p 00000000 fd:01 7 /usr/lib/libcudart.so.11.0
";
        let found = gpu_libraries(maps);
        assert_eq!(
            found,
            [
                "libcublas.so.11.11.3.6",
                "libcublasLt.so.11",
                "libcuda.so.1",
                "libnppif.so.11"
            ]
        );
        let note = note_for(&found).unwrap();
        assert!(note.starts_with("this program loads libcublas.so.11.11.3.6, libcublasLt.so.11"));
        assert_eq!(note_for(&[]), None);
        assert!(gpu_libraries("").is_empty());
    }
}
