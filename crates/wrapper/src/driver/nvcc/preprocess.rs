//! nvcc's `-E` and `-cuda`.

use std::path::PathBuf;

use super::PreprocessOutput;
use crate::driver::args::InputKind;
use crate::driver::Driver;

impl Driver {
    /// nvcc's `-E` and `-cuda`: the host side of each CUDA source preprocessed (spaced chevrons
    /// joined, prelude included, as the build would compile it). Host sources are preprocessed
    /// as they are compiled: C++, or C for `.c`. Nothing is instrumented: this output is for reading, or for a compiler check.
    pub fn preprocess(&self, output: &PreprocessOutput) -> anyhow::Result<()> {
        use anyhow::Context as _;
        for input in self
            .args
            .inputs
            .iter()
            .filter(|i| i.kind != InputKind::Link)
        {
            let mut command = if input.kind == InputKind::Cuda {
                let mut command = self.clang_cuda();
                command.arg("--cuda-host-only");
                for arch in &self.args.archs {
                    command.arg(format!("--cuda-gpu-arch={arch}"));
                }
                command
            } else {
                self.host_source_command(input)
            };
            command.arg("-E").arg(&input.path);
            let target = match (output, &self.args.output) {
                (_, Some(path)) => Some(path.clone()),
                (PreprocessOutput::Stdout, None) => None,
                (PreprocessOutput::CppIi, None) => {
                    let name = input.path.file_name().unwrap_or_default().to_string_lossy();
                    Some(PathBuf::from(format!("{name}.cpp.ii")))
                }
            };
            if let Some(target) = target {
                command.arg("-o").arg(target);
            }
            self.run(&mut command)
                .with_context(|| format!("preprocessing {}", input.path.display()))?;
        }
        Ok(())
    }
}
