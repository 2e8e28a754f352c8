//! The PTX model against real compiler output: the CUDA corpus compiled by clang-16 (sm_70,
//! sm_90) and nvcc 11.8 (sm_70, sm_90). Every file must parse, print back byte for byte, agree
//! with an independent count of blocks and instructions, print canonically to something that
//! parses to the same model and assembles, and stay assemblable after rewriting.

use test_support as support;

use std::sync::OnceLock;

use ptx_lexer::{
    parse, EdgeKind, Function, Instruction, Module, Operand, Param, Statement, StatementKind,
};
use support::{parallel, ptxas, PtxFile};

fn corpus() -> &'static [PtxFile] {
    static FILES: OnceLock<Vec<PtxFile>> = OnceLock::new();
    FILES.get_or_init(support::generate_corpus_ptx)
}

fn read(file: &PtxFile) -> String {
    std::fs::read_to_string(&file.path).expect("generated PTX is readable")
}

fn load(file: &PtxFile) -> Result<(String, Module), String> {
    let text = read(file);
    let module = parse(text.clone()).map_err(|e| format!("{}: {e}", file.describe()))?;
    Ok((text, module))
}

fn check_all(job: impl Fn(&PtxFile) -> Result<(), String> + Sync) {
    let errors = parallel(corpus(), job);
    assert!(
        errors.is_empty(),
        "{} failure(s):\n{}",
        errors.len(),
        errors.join("\n\n")
    );
}

#[test]
fn every_file_parses_and_prints_back_byte_for_byte() {
    check_all(|file| {
        let (text, module) = load(file)?;
        if module.to_ptx() != text {
            return Err(format!(
                "{}: printing differs from the input",
                file.describe()
            ));
        }
        if module.functions().filter(|f| f.is_definition()).count() == 0 {
            return Err(format!(
                "{}: no function definitions found",
                file.describe()
            ));
        }
        Ok(())
    });
}

// ---- an independent count of blocks and instructions, straight from the text ---------------

/// Replaces comments and string contents by spaces so that `;`, `{` and `}` inside them do not
/// count; drops line-terminated `.loc`/`.file` directives.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
                out.push(' ');
            }
            '"' => {
                out.push('"');
                for c in chars.by_ref() {
                    if c == '"' {
                        break;
                    }
                }
                out.push('"');
            }
            c => out.push(c),
        }
    }
    out.lines()
        .filter(|l| !matches!(l.split_whitespace().next(), Some(".loc" | ".file")))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

/// `(function name, blocks, instructions)` for each function definition, found by scanning the
/// text: a block starts at each label and at an instruction that follows a branch, `ret`,
/// `exit` or `trap` (or starts the body) without a label in between.
fn independent_structure(text: &str) -> Vec<(String, usize, usize)> {
    let text = clean(text);
    let mut result = Vec::new();
    let mut search = 0;
    while let Some(found) = [".entry", ".func"]
        .iter()
        .filter_map(|k| text[search..].find(k).map(|i| (search + i, k.len())))
        .min()
    {
        let (at, len) = found;
        search = at + len;
        if text[search..].starts_with(is_ident) {
            continue; // `.function_name` or similar, not the keyword
        }
        // Header: skip a return-parameter list, read the name, then find `{` or `;` outside
        // parentheses.
        let mut rest = text[search..].trim_start();
        if rest.starts_with('(') {
            let close = rest.find(')').expect("return parameter list closes");
            rest = rest[close + 1..].trim_start();
        }
        let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
        let header_start = text.len() - rest.len();
        let mut depth = 0i32;
        let mut open = None;
        for (i, c) in text[header_start..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                '{' if depth == 0 => {
                    open = Some(header_start + i);
                    break;
                }
                ';' if depth == 0 => break,
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let mut depth = 0i32;
        let mut close = open;
        for (i, c) in text[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let (blocks, instructions) = count_body(&text[open + 1..close]);
        result.push((name, blocks, instructions));
        search = close;
    }
    result
}

fn count_body(body: &str) -> (usize, usize) {
    let (mut blocks, mut instructions, mut open) = (0, 0, false);
    for piece in body.split(';') {
        let mut rest = piece.trim_start();
        loop {
            if rest.starts_with(['{', '}']) {
                rest = rest[1..].trim_start();
                continue;
            }
            let ident_len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
            let after = rest[ident_len..].trim_start();
            if ident_len > 0 && after.starts_with(':') {
                let after = after[1..].trim_start();
                if after.starts_with(".callprototype") || after.starts_with(".branchtargets") {
                    rest = "";
                    break;
                }
                blocks += 1;
                open = true;
                rest = after;
                continue;
            }
            break;
        }
        if rest.is_empty() || rest.starts_with('.') {
            continue;
        }
        let without_guard = if rest.starts_with('@') {
            rest.split_once(char::is_whitespace)
                .map_or("", |(_, r)| r.trim_start())
        } else {
            rest
        };
        let base: String = without_guard.chars().take_while(|&c| is_ident(c)).collect();
        if !open {
            blocks += 1;
            open = true;
        }
        instructions += 1;
        if matches!(base.as_str(), "bra" | "brx" | "ret" | "exit" | "trap") {
            open = false;
        }
    }
    (blocks, instructions)
}

#[test]
fn blocks_and_instructions_match_an_independent_count() {
    check_all(|file| {
        let (text, module) = load(file)?;
        let ours: Vec<(String, usize, usize)> = module
            .functions()
            .filter(|f| f.is_definition())
            .map(|f| {
                (
                    f.name().to_string(),
                    f.blocks().len(),
                    f.instructions().count(),
                )
            })
            .collect();
        let theirs = independent_structure(&text);
        if ours != theirs {
            return Err(format!(
                "{}: (function, blocks, instructions)\n  model:       {ours:?}\n  independent: {theirs:?}",
                file.describe()
            ));
        }
        Ok(())
    });
}

#[test]
fn back_end_blocks_are_found_in_a_lowered_switch() {
    // One IR `switch` becomes a tree of compares and branches: many more PTX blocks than cases.
    let file = corpus()
        .iter()
        .find(|f| {
            f.source == "switch_dense"
                && f.compiler == support::Compiler::Clang
                && f.arch == "sm_90"
        })
        .expect("switch_dense is in the corpus");
    let (_, module) = load(file).unwrap();
    let kernel = module
        .functions()
        .find(|f| f.kind() == ptx_lexer::FunctionKind::Entry && f.is_definition())
        .unwrap();
    assert!(
        kernel.blocks().len() > 20,
        "only {} blocks",
        kernel.blocks().len()
    );
}

// ---- canonical printing ----------------------------------------------------------------------

fn instructions_of(module: &Module) -> Vec<(String, Vec<Instruction>)> {
    module
        .functions()
        .filter(|f| f.is_definition())
        .map(|f| (f.name().to_string(), f.instructions().cloned().collect()))
        .collect()
}

#[test]
fn canonical_printing_reparses_to_the_same_model_and_assembles() {
    check_all(|file| {
        let (_, module) = load(file)?;
        let canonical = module.to_canonical_ptx();
        let reparsed = parse(canonical.clone())
            .map_err(|e| format!("{}: canonical form does not parse: {e}", file.describe()))?;
        if reparsed.summary() != module.summary()
            || instructions_of(&reparsed) != instructions_of(&module)
        {
            return Err(format!(
                "{}: canonical form parses to a different model",
                file.describe()
            ));
        }
        let path = file.path.with_extension("canonical.ptx");
        std::fs::write(&path, canonical).map_err(|e| e.to_string())?;
        for arch in file.assemble_archs() {
            ptxas(&path, arch).map_err(|e| format!("{}: canonical form: {e}", file.describe()))?;
        }
        Ok(())
    });
}

// ---- rewriting -----------------------------------------------------------------------------

/// A dummy counter update for block `index`: `counters[index] += 1` through a parameter pointer.
fn dummy_update(param: &str, index: usize) -> Vec<Statement> {
    vec![
        Statement::instruction(Instruction::simple(
            "ld.param.u64",
            vec![
                Operand::reg("%dummy0"),
                Operand::Address(vec![Operand::sym(param)]),
            ],
        )),
        Statement::instruction(Instruction::simple(
            "red.global.add.u64",
            vec![
                Operand::Address(vec![Operand::Offset {
                    base: Box::new(Operand::reg("%dummy0")),
                    offset: (index * 8).to_string().into(),
                }]),
                Operand::int(1),
            ],
        )),
    ]
}

/// Inserts the dummy update at the top of every block; returns the counter parameter's name.
fn instrument_every_block(function: &mut Function) -> Result<String, String> {
    let param = format!("{}_dummy_counters", function.name());
    function.push_param(Param::new(".param .u64", param.clone()));
    function
        .declare_registers(".b64", "%dummy", 1)
        .map_err(|e| e.to_string())?;
    function
        .insert_at_every_block_top(|i, _| dummy_update(&param, i))
        .map_err(|e| e.to_string())?;
    Ok(param)
}

fn split_every_edge(function: &mut Function) -> Result<usize, String> {
    let param = format!("{}_dummy_counters", function.name());
    function.push_param(Param::new(".param .u64", param.clone()));
    function
        .declare_registers(".b64", "%dummy", 1)
        .map_err(|e| e.to_string())?;
    let mut created: Vec<String> = Vec::new();
    // Splitting changes block indices; recompute and split the first unsplit edge each time.
    loop {
        let blocks = function.blocks();
        let is_new = |b: usize| {
            blocks[b]
                .label
                .as_ref()
                .is_some_and(|l| created.iter().any(|c| c == l))
        };
        let edge = function
            .edges(&blocks)
            .into_iter()
            .find(|e| e.kind != EdgeKind::JumpTable && !is_new(e.from) && !is_new(e.to));
        let Some(edge) = edge else {
            return Ok(created.len());
        };
        let label = format!("$L__split{}", created.len());
        function
            .split_edge(edge, &label, dummy_update(&param, created.len()))
            .map_err(|e| e.to_string())?;
        created.push(label);
    }
}

#[test]
fn rewritten_clones_assemble() {
    check_all(|file| {
        let (_, mut module) = load(file)?;
        let names: Vec<String> = module
            .functions()
            .filter(|f| f.is_definition())
            .map(|f| f.name().to_string())
            .collect();
        for name in &names {
            let original_blocks = module.function(name).unwrap().blocks();
            let clone = module
                .clone_function(name, &format!("{name}__cf_blocks"))
                .map_err(|e| e.to_string())?;
            let param = instrument_every_block(clone)?;
            // Every block of the clone now starts with its own update, right after its label.
            let statements = clone.statements();
            for (i, block) in clone.blocks().iter().enumerate() {
                let at = block.insertion_point();
                let expected = dummy_update(&param, i);
                let found: Vec<&StatementKind> = statements[at..(at + 2).min(statements.len())]
                    .iter()
                    .map(Statement::kind)
                    .collect();
                if found != expected.iter().map(Statement::kind).collect::<Vec<_>>() {
                    return Err(format!(
                        "{}: {name} block {i} does not start with the update",
                        file.describe()
                    ));
                }
            }
            if clone.blocks().len() != original_blocks.len() {
                return Err(format!(
                    "{}: {name}: inserting changed the block count",
                    file.describe()
                ));
            }
            if module.function_mut(&format!("{name}__cf_edges")).is_none() {
                let clone = module
                    .clone_function(name, &format!("{name}__cf_edges"))
                    .map_err(|e| e.to_string())?;
                let expected = clone
                    .edges(&clone.blocks())
                    .iter()
                    .filter(|e| e.kind != EdgeKind::JumpTable)
                    .count();
                let split = split_every_edge(clone)?;
                if split != expected {
                    return Err(format!(
                        "{}: {name}: split {split} of {expected} edges",
                        file.describe()
                    ));
                }
            }
        }
        let path = file.path.with_extension("rewritten.ptx");
        std::fs::write(&path, module.to_ptx()).map_err(|e| e.to_string())?;
        // The rewritten module must parse again, with the clones in it.
        let reparsed = parse(module.to_ptx())
            .map_err(|e| format!("{}: rewritten PTX: {e}", file.describe()))?;
        if reparsed.functions().count() != module.functions().count() {
            return Err(format!("{}: rewritten PTX lost functions", file.describe()));
        }
        for arch in file.assemble_archs() {
            ptxas(&path, arch).map_err(|e| format!("{}: rewritten: {e}", file.describe()))?;
        }
        Ok(())
    });
}
