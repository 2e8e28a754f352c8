//! The rewriter: clone functions, add parameters, declare registers, insert code at the top of
//! blocks, split edges. Every change forgets the source text of what it touches, so the printer
//! emits the changed parts from the model.

use smol_str::SmolStr;
use thiserror::Error;

use crate::blocks::{BasicBlock, Edge, EdgeKind};
use crate::instruction::{Instruction, Operand};
use crate::module::{
    Directive, DirectiveText, Function, FunctionAttribute, Item, Module, ModuleDirective,
    ModuleDirectiveKind, Param, RegDeclaration, RegName, Statement, StatementKind,
};

/// Why a rewrite could not be done.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RewriteError {
    #[error("no function named '{0}'")]
    NoSuchFunction(String),
    #[error("function '{0}' is a declaration without a body")]
    NotADefinition(String),
    #[error("a function named '{0}' already exists")]
    NameTaken(String),
    #[error("register '{register}' is already declared in function '{function}'")]
    RegisterClash { register: String, function: String },
    #[error("function '{function}' has no block {block}")]
    NoSuchBlock { function: String, block: usize },
    #[error("function '{function}' has no edge {from} -> {to} of that kind")]
    NoSuchEdge {
        function: String,
        from: usize,
        to: usize,
    },
    #[error("edges of a brx.idx jump table cannot be split (function '{0}')")]
    JumpTableEdge(String),
    #[error("label '{label}' is already used in function '{function}'")]
    LabelTaken { label: String, function: String },
    #[error(
        "function '{0}': no point in the target label's scope that control cannot fall into, \
         so no block can be placed there"
    )]
    NoPlaceForBlock(String),
}

impl Module {
    /// Clones the definition of `name` under `new_name`, placing the clone right after the
    /// original, and returns it.
    pub fn clone_function(
        &mut self,
        name: &str,
        new_name: &str,
    ) -> Result<&mut Function, RewriteError> {
        if self.functions().any(|f| f.name() == new_name) {
            return Err(RewriteError::NameTaken(new_name.to_string()));
        }
        let index = self
            .function_index(name)
            .ok_or_else(|| RewriteError::NoSuchFunction(name.to_string()))?;
        let Item::Function(original) = &self.items[index] else {
            return Err(RewriteError::NoSuchFunction(name.to_string()));
        };
        if !original.is_definition() {
            return Err(RewriteError::NotADefinition(name.to_string()));
        }
        let mut clone = original.clone();
        clone.leading = None;
        clone.set_name(new_name);
        self.items.insert(index + 1, Item::Function(clone));
        match &mut self.items[index + 1] {
            Item::Function(f) => Ok(f),
            Item::Directive(_) => unreachable!("a function was just inserted here"),
        }
    }

    /// Inserts a module-level directive (e.g. an `.extern .func` declaration) before the first
    /// function. `text` must be complete PTX (with its `;`).
    pub fn insert_directive_before_functions(&mut self, text: impl Into<String>) {
        let at = self
            .items
            .iter()
            .position(|i| matches!(i, Item::Function(_)))
            .unwrap_or(self.items.len());
        self.items.insert(
            at,
            Item::Directive(ModuleDirective {
                leading: None,
                text: DirectiveText::Owned(text.into()),
                kind: ModuleDirectiveKind::Other {
                    name: SmolStr::new_static("inserted"),
                },
            }),
        );
    }
}

impl Function {
    /// Renames the function.
    pub fn set_name(&mut self, name: &str) {
        self.name = SmolStr::new(name);
        self.header = None;
    }

    /// Appends a parameter.
    pub fn push_param(&mut self, param: Param) {
        self.params.get_or_insert_with(Vec::new).push(param);
        self.header = None;
    }

    /// Replaces the attributes after the parameter list (`.maxntid 256, 1, 1`, `.maxnreg 32`).
    pub fn set_attributes(&mut self, attributes: Vec<FunctionAttribute>) {
        self.attributes = attributes;
        self.header = None;
    }

    fn body_mut(&mut self) -> Result<&mut Vec<Statement>, RewriteError> {
        self.body
            .as_mut()
            .ok_or_else(|| RewriteError::NotADefinition(self.name.to_string()))
    }

    /// Whether `register` is declared anywhere in the body (any scope).
    pub fn declares_register(&self, register: &str) -> bool {
        self.statements().iter().any(|s| match &s.kind {
            StatementKind::Directive(Directive::Reg(decl)) => decl.declares(register),
            _ => false,
        })
    }

    /// Declares `%prefix0`..`%prefix{count-1}` with the given type modifier (e.g. `.b64`) at
    /// the top of the body, after checking that no name is taken.
    pub fn declare_registers(
        &mut self,
        type_modifier: &str,
        prefix: &str,
        count: u32,
    ) -> Result<(), RewriteError> {
        if let Some(taken) = (0..count)
            .map(|i| format!("{prefix}{i}"))
            .find(|r| self.declares_register(r))
        {
            return Err(RewriteError::RegisterClash {
                register: taken,
                function: self.name.to_string(),
            });
        }
        let declaration = Directive::Reg(RegDeclaration {
            modifiers: vec![SmolStr::new(type_modifier)],
            names: vec![RegName {
                name: SmolStr::new(prefix),
                count: Some(count),
            }],
        });
        self.body_mut()?
            .insert(0, Statement::directive(declaration));
        Ok(())
    }

    /// Inserts `code` at the top of block `block` (see [`BasicBlock::insertion_point`]).
    pub fn insert_at_block_top(
        &mut self,
        block: usize,
        code: Vec<Statement>,
    ) -> Result<(), RewriteError> {
        let blocks = self.blocks();
        let target = blocks.get(block).ok_or_else(|| RewriteError::NoSuchBlock {
            function: self.name.to_string(),
            block,
        })?;
        let at = target.insertion_point();
        self.insert_statements(at, code)
    }

    /// Inserts code at the top of every block in one pass: `code(index, block)` gives the
    /// statements for each block.
    pub fn insert_at_every_block_top(
        &mut self,
        mut code: impl FnMut(usize, &BasicBlock) -> Vec<Statement>,
    ) -> Result<(), RewriteError> {
        let blocks = self.blocks();
        let body = self.body_mut()?;
        let old = std::mem::take(body);
        let mut inserts = blocks
            .iter()
            .enumerate()
            .map(|(i, b)| (b.insertion_point(), code(i, b)))
            .peekable();
        body.reserve(old.len() + blocks.len() * 8);
        for (index, statement) in old.into_iter().enumerate() {
            while let Some((_, stmts)) = inserts.next_if(|(at, _)| *at == index) {
                body.extend(stmts);
            }
            body.push(statement);
        }
        // Insertion points are statement indices that exist, so nothing is left over.
        for (_, stmts) in inserts {
            body.extend(stmts);
        }
        Ok(())
    }

    /// Whether `label` names a label or a labelled directive anywhere in the body.
    pub fn has_label(&self, label: &str) -> bool {
        self.statements().iter().any(|s| match &s.kind {
            StatementKind::Label(l) => l == label,
            StatementKind::Directive(Directive::Other { label: Some(l), .. }) => l == label,
            _ => false,
        })
    }

    /// A statement index in the scope that directly holds statement `statement` (labels are
    /// scoped in PTX) at which nothing falls through: right after the last unguarded `bra`,
    /// `brx.idx`, `ret`, `exit` or `trap` directly in that scope.
    fn unreachable_point_in_scope_of(&self, statement: usize) -> Option<usize> {
        let statements = self.statements();
        // Scope instance of every statement: 0 for the body, a fresh id per `{`.
        let mut scope_of = Vec::with_capacity(statements.len());
        let mut stack = vec![0usize];
        let mut next_id = 1;
        for s in statements {
            match s.kind {
                StatementKind::ScopeOpen => {
                    scope_of.push(*stack.last().unwrap_or(&0));
                    stack.push(next_id);
                    next_id += 1;
                }
                StatementKind::ScopeClose => {
                    stack.pop();
                    scope_of.push(*stack.last().unwrap_or(&0));
                }
                _ => scope_of.push(*stack.last().unwrap_or(&0)),
            }
        }
        let scope = *scope_of.get(statement)?;
        (0..statements.len())
            .rev()
            .find(|&i| {
                scope_of[i] == scope
                    && statements[i]
                        .as_instruction()
                        .is_some_and(|ins| !ins.can_fall_through())
            })
            .map(|i| i + 1)
    }

    /// Splits `edge` by a new block labelled `label` holding `code`, so that `code` runs exactly
    /// when control moves along that edge.
    ///
    /// A fall-through edge gets the block placed between the two blocks (an unlabeled target is
    /// given the label `{label}_next`, so that it stays a block of its own); a branch edge gets
    /// it placed where no control falls through, in the scope of the target's label (labels are
    /// scoped), ending in `bra.uni` to the old target, and the branch retargeted. Every existing block keeps its instructions.
    pub fn split_edge(
        &mut self,
        edge: Edge,
        label: &str,
        code: Vec<Statement>,
    ) -> Result<(), RewriteError> {
        let name = self.name.to_string();
        if self.has_label(label) {
            return Err(RewriteError::LabelTaken {
                label: label.to_string(),
                function: name,
            });
        }
        let blocks = self.blocks();
        if !self.edges(&blocks).contains(&edge) {
            return Err(RewriteError::NoSuchEdge {
                function: name,
                from: edge.from,
                to: edge.to,
            });
        }
        let mut new_block = Vec::with_capacity(code.len() + 2);
        new_block.push(Statement::label(label));
        new_block.extend(code);
        match edge.kind {
            EdgeKind::JumpTable => Err(RewriteError::JumpTableEdge(name)),
            EdgeKind::FallThrough => {
                let target = &blocks[edge.to];
                if target.label.is_none() {
                    // An unlabeled target would be absorbed into the new block: label it so it
                    // stays a block of its own.
                    let target_label = format!("{label}_next");
                    if self.has_label(&target_label) {
                        return Err(RewriteError::LabelTaken {
                            label: target_label,
                            function: name,
                        });
                    }
                    new_block.push(Statement::label(target_label));
                }
                let at = target.first_statement();
                self.insert_statements(at, new_block)
            }
            EdgeKind::Branch => {
                let target_block = &blocks[edge.to];
                let (Some(target), Some(target_statement)) =
                    (target_block.label.clone(), target_block.label_statement)
                else {
                    return Err(RewriteError::NoSuchEdge {
                        function: name,
                        from: edge.from,
                        to: edge.to,
                    });
                };
                let Some(&branch_index) = blocks[edge.from].instructions.last() else {
                    return Err(RewriteError::NoSuchEdge {
                        function: name,
                        from: edge.from,
                        to: edge.to,
                    });
                };
                let at = self
                    .unreachable_point_in_scope_of(target_statement)
                    .ok_or(RewriteError::NoPlaceForBlock(name))?;
                new_block.push(Statement::instruction(Instruction::simple(
                    "bra.uni",
                    vec![Operand::Symbol(target.clone())],
                )));
                let body = self.body_mut()?;
                if let StatementKind::Instruction(branch) = body[branch_index].kind_mut() {
                    for operand in &mut branch.operands {
                        if matches!(operand, Operand::Symbol(s) if *s == target) {
                            *operand = Operand::Symbol(SmolStr::new(label));
                        }
                    }
                }
                body.splice(at..at, new_block);
                Ok(())
            }
        }
    }
}

impl Function {
    /// Inserts `statements` before statement index `at` (at most the statement count).
    pub fn insert_statements(
        &mut self,
        at: usize,
        statements: Vec<Statement>,
    ) -> Result<(), RewriteError> {
        let body = self.body_mut()?;
        let at = at.min(body.len());
        body.splice(at..at, statements);
        Ok(())
    }
}

impl Function {
    /// The body's statements, mutable in place (a statement changed through
    /// [`Statement::kind_mut`] prints from its model). Empty for a declaration.
    pub fn statements_mut(&mut self) -> &mut [Statement] {
        self.body.as_deref_mut().unwrap_or(&mut [])
    }
}
