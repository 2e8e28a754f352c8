//! The PTX model on hand-written PTX with the constructs that matter for block counting:
//! nested scopes, labelled directives, jump tables, guards, debug directives, and errors.

use ptx_lexer::{
    parse, DataType, Directive, EdgeKind, FunctionKind, Operand, StateSpace, Statement,
    StatementKind,
};

const HEADER: &str = ".version 7.8\n.target sm_90\n.address_size 64\n";

fn module(body: &str) -> ptx_lexer::Module {
    let text = format!("{HEADER}{body}");
    let m = parse(text.clone()).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(m.to_ptx(), text, "printing must give back the input");
    m
}

fn block_shape(m: &ptx_lexer::Module, name: &str) -> Vec<(Option<String>, Vec<String>)> {
    m.summary()
        .functions
        .into_iter()
        .find(|f| f.name == name)
        .expect("function exists")
        .blocks
        .into_iter()
        .map(|b| {
            (
                b.label.map(|l| l.to_string()),
                b.instructions.iter().map(|o| o.to_string()).collect(),
            )
        })
        .collect()
}

#[test]
fn module_header_and_globals() {
    let m = module(
        "\n.file\t1 \"/src/k.cu\"\n.global .align 4 .b8 table[8] = {1, 2, 3, 4, 5, 6, 7, 8};\n\
         .extern .shared .align 16 .b8 dyn[];\n.global .texref tex;\n\
         .extern .func (.param .b32 func_retval0) vprintf(.param .b64 a, .param .b64 b);\n",
    );
    assert_eq!(m.version(), Some("7.8"));
    assert_eq!(m.target(), ["sm_90"]);
    assert_eq!(m.address_size(), 64);
    assert_eq!(m.files().collect::<Vec<_>>(), [(1, "/src/k.cu")]);
    let vars: Vec<(&str, Option<StateSpace>)> = m
        .variables()
        .map(|v| (v.name.as_str(), v.state_space))
        .collect();
    assert_eq!(
        vars,
        [
            ("table", Some(StateSpace::Global)),
            ("dyn", Some(StateSpace::Shared)),
            ("tex", Some(StateSpace::Global)),
        ]
    );
    let vprintf = m.function("vprintf").unwrap();
    assert!(!vprintf.is_definition());
    assert_eq!(vprintf.return_params()[0].name, "func_retval0");
    assert_eq!(vprintf.params().len(), 2);
    assert!(
        m.summary().functions.is_empty(),
        "declarations have no blocks"
    );
}

#[test]
fn entry_with_params_and_attributes() {
    let m = module(
        ".visible .entry k(\n\t.param .u64 .ptr .global .align 4 k_p0,\n\t.param .align 8 .b8 k_p1[16]\n)\n\
         .maxntid 256, 1, 1\n.minnctapersm 2\n{\n\tret;\n}\n",
    );
    let k = m.function("k").unwrap();
    assert_eq!(k.kind(), FunctionKind::Entry);
    assert_eq!(k.linkage(), ["visible"]);
    assert_eq!(
        k.params()[0].declaration,
        ".param .u64 .ptr .global .align 4"
    );
    assert_eq!(k.params()[1].array.as_deref(), Some("16"));
    let attrs: Vec<&str> = k.attributes().iter().map(|a| a.text.as_str()).collect();
    assert_eq!(attrs, [".maxntid 256, 1, 1", ".minnctapersm 2"]);
}

#[test]
fn blocks_start_at_labels_and_after_transfers_but_not_after_calls() {
    let m = module(
        ".visible .entry k()\n{\n\t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n\
         \tmov.u32 %r1, %tid.x;\n\tsetp.eq.s32 %p1, %r1, 0;\n\t@%p1 bra $L__BB0_2;\n\
         \tadd.s32 %r2, %r1, 1;\n\tcall.uni f, ();\n\tsub.s32 %r2, %r2, 1;\n\
         $L__BB0_2:\n\t@!%p1 ret;\n\texit;\n\ttrap;\n}\n",
    );
    assert_eq!(
        block_shape(&m, "k"),
        [
            (
                None,
                vec!["mov.u32".into(), "setp.eq.s32".into(), "bra".into()]
            ),
            (
                None,
                vec!["add.s32".into(), "call.uni".into(), "sub.s32".into()]
            ),
            (Some("$L__BB0_2".into()), vec!["ret".into()]),
            (None, vec!["exit".into()]),
            (None, vec!["trap".into()]),
        ]
    );
    let k = m.function("k").unwrap();
    let edges: Vec<(usize, usize, EdgeKind)> = k
        .edges(&k.blocks())
        .iter()
        .map(|e| (e.from, e.to, e.kind))
        .collect();
    assert_eq!(
        edges,
        [
            (0, 2, EdgeKind::Branch),
            (0, 1, EdgeKind::FallThrough),
            (1, 2, EdgeKind::FallThrough),
            (2, 3, EdgeKind::FallThrough),
        ]
    );
}

#[test]
fn labels_inside_nested_scopes_start_blocks_and_declarations_are_not_labels() {
    let m = module(
        ".visible .entry k()\n{\n\t.reg .b32 %r<3>;\n\t{\n\t.reg .pred p;\n\t.reg .u32 t;\n\
         LOOP_0:\n\tsetp.eq.u32 p, t, 0;\n\t@p bra DONE_0;\n\tshr.u32 t, t, 1;\n\tbra LOOP_0;\n\
         DONE_0:\n\t}\n\t{ // callseq 0, 0\n\t.param .b64 param0;\n\
         \tprototype_0 : .callprototype (.param .b32 _) _ (.param .b64 _);\n\
         \tcall (retval0), %r1, (param0), prototype_0;\n\t}\n\tret;\n}\n",
    );
    let shape = block_shape(&m, "k");
    let labels: Vec<Option<&str>> = shape.iter().map(|(l, _)| l.as_deref()).collect();
    assert_eq!(labels, [Some("LOOP_0"), None, Some("DONE_0")]);
    assert_eq!(shape[2].1, ["call", "ret"]);
    let k = m.function("k").unwrap();
    let prototype = k.statements().iter().find_map(|s| match s.kind() {
        StatementKind::Directive(Directive::Other { label, name, .. })
            if name == "callprototype" =>
        {
            label.clone()
        }
        _ => None,
    });
    assert_eq!(prototype.as_deref(), Some("prototype_0"));
    let call = k
        .instructions()
        .find(|i| i.opcode.base() == "call")
        .unwrap();
    assert!(matches!(&call.operands[0], Operand::List(l) if l.len() == 1));
    assert!(matches!(&call.operands[2], Operand::List(_)));
}

#[test]
fn jump_tables_give_an_edge_per_target() {
    let m = module(
        ".visible .entry k()\n{\n\t.reg .b32 %r<2>;\n\tmov.u32 %r1, 0;\n\
         \t$L_brx_0: .branchtargets $L__BB0_1, $L__BB0_2;\n\tbrx.idx %r1, $L_brx_0;\n\
         $L__BB0_1:\n\tret;\n$L__BB0_2:\n\tret;\n}\n",
    );
    let k = m.function("k").unwrap();
    let blocks = k.blocks();
    assert_eq!(blocks.len(), 3);
    let edges: Vec<(usize, usize, EdgeKind)> = k
        .edges(&blocks)
        .iter()
        .map(|e| (e.from, e.to, e.kind))
        .collect();
    assert_eq!(
        edges,
        [(0, 1, EdgeKind::JumpTable), (0, 2, EdgeKind::JumpTable)]
    );
}

#[test]
fn operands_of_every_shape() {
    let m = module(
        ".visible .entry k()\n{\n\
         \tld.global.nc.v2.f64 {%fd1, %fd2}, [%rd4+8];\n\
         \tst.shared.u32 [smem+-4], %r1;\n\
         \tsetp.lt.s32 %p1|%p2, %r1, -12;\n\
         \tshfl.sync.down.b32 %r2|%p3, %r1, 1, 31, -1;\n\
         \tmov.b32 %f1, 0f3F800000;\n\
         \tmov.f64 %fd3, 0dBFF0000000000000;\n\
         \ttex.1d.v4.f32.s32 {%f1, %f2, %f3, _}, [tex, {%r1}];\n\
         \tand.pred %p1, %p2, !%p3;\n\
         \tmov.u32 %r9, - /* c */ 5;\n\
         \tret;\n}\n",
    );
    let ins: Vec<_> = m.function("k").unwrap().instructions().cloned().collect();
    assert_eq!(
        ins[0].operands[1],
        Operand::Address(vec![Operand::Offset {
            base: Box::new(Operand::reg("%rd4")),
            offset: "8".into()
        }])
    );
    assert_eq!(ins[0].facts.bytes_per_thread, Some(16));
    assert_eq!(ins[0].facts.data_type, Some(DataType::F64));
    assert!(
        matches!(&ins[1].operands[0], Operand::Address(a) if matches!(&a[0], Operand::Offset { offset, .. } if offset == "-4"))
    );
    assert_eq!(
        ins[2].operands[0],
        Operand::RegisterPair("%p1".into(), "%p2".into())
    );
    assert_eq!(ins[2].operands[2], Operand::Integer("-12".into()));
    assert_eq!(
        ins[3].operands[0],
        Operand::RegisterPair("%r2".into(), "%p3".into())
    );
    assert_eq!(ins[4].operands[1], Operand::Float("0f3F800000".into()));
    assert!(matches!(&ins[6].operands[0], Operand::Vector(v) if v[3] == Operand::Sink));
    assert!(
        matches!(&ins[6].operands[1], Operand::Address(a) if matches!(&a[1], Operand::Vector(_)))
    );
    assert_eq!(ins[6].facts.state_space, Some(StateSpace::Texture));
    assert_eq!(ins[7].operands[2], Operand::NegatedRegister("%p3".into()));
    assert_eq!(
        ins[8].operands[1],
        Operand::Integer("-5".into()),
        "trivia is not part of a number"
    );
    // Canonical printing of each instruction parses back to the same instruction.
    for i in &ins {
        let text = format!("{HEADER}.visible .entry k()\n{{\n\t{i}\n}}\n");
        let again = parse(text).unwrap();
        assert_eq!(again.function("k").unwrap().instructions().next(), Some(i));
    }
}

#[test]
fn debug_directives_are_kept_and_loc_is_parsed() {
    let m = module(
        ".file 1 \"k.cu\", 1700000000, 1234\n.visible .entry k()\n{\n\
         \t.loc\t1 10 5\n\tret;\n$L__func_end0:\n}\n\
         .section\t.debug_info\n{\n.b32 123\n.b8 1, 2 // comment }\n$L__x:\n.b64 $L__func_end0\n}\n",
    );
    let k = m.function("k").unwrap();
    let loc = k.statements().iter().find_map(|s| match s.kind() {
        StatementKind::Directive(Directive::Loc {
            file, line, column, ..
        }) => Some((*file, *line, *column)),
        _ => None,
    });
    assert_eq!(loc, Some((1, 10, 5)));
    assert_eq!(block_shape(&m, "k").len(), 2);
}

#[test]
fn inserting_at_a_block_top_goes_after_the_label_and_before_a_guard() {
    let mut m = module(
        ".visible .entry k()\n{\n\t.reg .pred %p<2>;\n$L__BB0_1:\n\t@%p1 bra $L__BB0_1;\n\tret;\n}\n",
    );
    let k = m.function_mut("k").unwrap();
    k.insert_at_block_top(
        0,
        vec![Statement::instruction(ptx_lexer::Instruction::simple(
            "membar.cta",
            vec![],
        ))],
    )
    .unwrap();
    k.insert_at_block_top(
        1,
        vec![Statement::instruction(ptx_lexer::Instruction::simple(
            "membar.gl",
            vec![],
        ))],
    )
    .unwrap();
    assert_eq!(
        m.to_ptx(),
        format!(
            "{HEADER}.visible .entry k()\n{{\n\t.reg .pred %p<2>;\n$L__BB0_1:\n\tmembar.cta;\n\
             \t@%p1 bra $L__BB0_1;\n\tmembar.gl;\n\tret;\n}}\n"
        )
    );
}

#[test]
fn attributes_are_replaced_and_printed_after_the_parameters() {
    let mut m =
        module(".visible .entry k(\n\t.param .u64 k_p0\n)\n.maxntid 256, 1, 1\n{\n\tret;\n}\n");
    let k = m.function_mut("k").unwrap();
    let mut attributes = k.attributes().to_vec();
    attributes.push(ptx_lexer::FunctionAttribute {
        name: "maxnreg".into(),
        text: ".maxnreg 32".into(),
    });
    k.set_attributes(attributes);
    let text = m.to_ptx();
    assert!(
        text.ends_with(".visible .entry k(\n\t.param .u64 k_p0\n)\n.maxntid 256, 1, 1\n.maxnreg 32\n{\n\tret;\n}\n"),
        "{text}"
    );
    let reparsed = parse(text).unwrap();
    let names: Vec<&str> = reparsed
        .function("k")
        .unwrap()
        .attributes()
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["maxntid", "maxnreg"]);
}

#[test]
fn cloning_prints_a_canonical_header_and_keeps_the_body() {
    let mut m = module(".visible .entry k(\n\t.param .u64 k_p0\n)\n{\n\tret;\n}\n");
    let clone = m.clone_function("k", "k_clone").unwrap();
    clone.push_param(ptx_lexer::Param::new(".param .u64", "k_counters"));
    clone.declare_registers(".b64", "%cf", 2).unwrap();
    assert!(clone.declares_register("%cf1"));
    assert!(!clone.declares_register("%cf2"));
    let err = clone.declare_registers(".b32", "%cf", 1).unwrap_err();
    assert!(err.to_string().contains("%cf0"), "{err}");
    let text = m.to_ptx();
    assert!(text.ends_with(
        "{\n\tret;\n}\n\n.visible .entry k_clone(\n\t.param .u64 k_p0,\n\t.param .u64 k_counters\n)\n{\n\t.reg .b64 %cf<2>;\n\tret;\n}\n"
    ), "{text}");
    assert_eq!(parse(text).unwrap().functions().count(), 2);
    assert!(
        m.clone_function("k", "k_clone").is_err(),
        "names must stay unique"
    );
    assert!(m.clone_function("missing", "x").is_err());
}

#[test]
fn malformed_input_reports_line_column_and_token() {
    let cases = [
        (
            ".version 7.8\n.target sm_90\n.visible .entry k()\n{\n\tmov.u32 %r1, #3;\n}\n",
            5,
            15,
            "'#'",
        ),
        (
            ".version 7.8\n.visible .entry k()\n{\n\tret;\n",
            3,
            1,
            "'{'",
        ),
        (
            ".version 7.8\n.visible .entry k()\n{\n\tadd.s32 %r1 %r2;\n}\n",
            4,
            14,
            "'%r2'",
        ),
        (".version\n", 2, 1, "end of input"),
        ("ret;\n", 1, 1, "'ret'"),
        (".visible .entry k()\n{\n\t@ bra L;\n}\n", 3, 4, "'bra'"),
        ("/* never closed", 1, 1, "'/*'"),
    ];
    for (text, line, column, found) in cases {
        let e = parse(text).unwrap_err();
        assert_eq!(
            (e.line, e.column, e.found.as_str()),
            (line, column, found),
            "{text:?}: {e}"
        );
        assert!(!e.to_string().contains('\n'), "one line: {e}");
        if text.starts_with("/*") {
            assert!(e.message.contains("never closed"), "{e}");
        }
    }
}

#[test]
fn variable_declarations_and_statement_lines() {
    let m = module(
        ".global .align 4 .b8 table[4] = {1, 2, 3, 4};\n.const .f32 c = 0f3F800000;\n\
         .visible .entry k()\n{\n\t.reg .b32 %r<2>;\n\tmov.u32 %r0, 1;\n\tret;\n}\n",
    );
    let decls: Vec<(&str, &str)> = m
        .variable_declarations()
        .map(|(v, text)| (v.name.as_str(), text))
        .collect();
    assert_eq!(
        decls,
        [
            ("table", ".global .align 4 .b8 table[4] = {1, 2, 3, 4};"),
            ("c", ".const .f32 c = 0f3F800000;"),
        ]
    );
    let k = m.function("k").unwrap();
    let lines: Vec<u32> = k
        .statements()
        .iter()
        .map(|s| {
            m.line_at(
                s.source_offset()
                    .expect("parsed statements keep their text"),
            )
        })
        .collect();
    // HEADER has 3 lines, then two variables, `.visible .entry k()` and `{`.
    assert_eq!(lines, [8, 9, 10]);
    assert_eq!(m.line_at(0), 1);
    assert_eq!(m.line_at(u32::MAX), m.source().lines().count() as u32 + 1);
    assert_eq!(Statement::label("L").source_offset(), None);
}
