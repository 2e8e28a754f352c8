//! The device pass's view of clang's IR agrees with the PTX clang emits from it: the kernels
//! found in the IR are exactly the `.entry` functions of the PTX, in order.

use test_support as support;

use inkwell::context::Context;

#[test]
fn kernels_in_device_ir_are_the_ptx_entries() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("pass-corpus");
    std::fs::create_dir_all(&dir).unwrap();
    let sources = support::corpus_sources();
    let errors = support::parallel(&sources, |source| {
        let stem = source.file_stem().unwrap().to_string_lossy().to_string();
        let ir = dir.join(format!("{stem}.ll"));
        let ptx = dir.join(format!("{stem}.ptx"));
        support::compile_device_ir(source, "sm_70", &ir)?;
        support::compile(source, support::Compiler::Clang, "sm_70", &ptx)?;
        let context = Context::create();
        let module = cuda_flux_pass::read_module(&context, &ir).map_err(|e| e.to_string())?;
        let from_ir: Vec<String> = cuda_flux_pass::kernels(&module)
            .iter()
            .map(|f| f.get_name().to_string_lossy().into_owned())
            .collect();
        let ptx_text = std::fs::read_to_string(&ptx).map_err(|e| e.to_string())?;
        let ptx_module = ptx_lexer::parse(ptx_text).map_err(|e| e.to_string())?;
        let entries: Vec<String> = ptx_module
            .functions()
            .filter(|f| f.kind() == ptx_lexer::FunctionKind::Entry && f.is_definition())
            .map(|f| f.name().to_string())
            .collect();
        if from_ir.is_empty() || from_ir != entries {
            return Err(format!(
                "{stem}: IR kernels {from_ir:?} != PTX entries {entries:?}"
            ));
        }
        Ok(())
    });
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn unreadable_ir_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.ll");
    std::fs::write(&path, "this is not IR").unwrap();
    let context = Context::create();
    let error = cuda_flux_pass::read_module(&context, &path)
        .unwrap_err()
        .to_string();
    assert!(error.contains("broken.ll"), "{error}");
}
