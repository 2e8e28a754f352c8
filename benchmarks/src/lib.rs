//! `benchmarks`: what measures cuda-flux. The CUDA benchmark programs (`programs/`), the harness
//! that builds them plain and instrumented here and runs them on a GPU (`build.sh`, `run.sh`,
//! `report.py`), the compile-time benchmark (`compile_time.sh`) and the GPU check of the
//! instrumenting compiler against the corpus's witness counts (`gpu/`) are scripts; see
//! `benchmarks/README.md`. The parse-throughput benchmark of the PTX model lives in
//! `crates/ptx-lexer/benches`.
