//! `benchmarks`: self-checking CUDA benchmark programs and the harnesses that measure cuda-flux's
//! overhead and accuracy against uninstrumented builds. The CUDA programs and harness scripts
//! arrive with the benchmarks issue; the parse-throughput benchmark of the PTX model lives in
//! `crates/ptx-lexer/benches`.
