//! Basic blocks and control-flow edges of a function body.
//!
//! A block starts at every label (labels inside nested scopes included) and after every
//! instruction that can transfer control (`bra`, `brx.idx`, `ret`, `exit`, `trap`, guarded or
//! not). `call` returns and does not end a block. Scope braces and directives do not affect
//! blocks. A block holds a label, at least one instruction, or both.

use serde::Serialize;
use smol_str::SmolStr;

use crate::module::{Directive, Function, StatementKind};

/// A basic block: statement indices into [`Function::statements`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BasicBlock {
    /// The label that starts the block; `None` for a fall-through block after a branch, or the
    /// entry block when it has no label.
    pub label: Option<SmolStr>,
    /// Index of the label statement, if labeled.
    pub label_statement: Option<usize>,
    /// Indices of the block's instruction statements, in order.
    pub instructions: Vec<usize>,
}

impl BasicBlock {
    /// The statement index at which code inserted "at the top of the block" goes: right after
    /// the label, or right before the first instruction of an unlabeled block.
    pub fn insertion_point(&self) -> usize {
        match (self.label_statement, self.instructions.first()) {
            (Some(label), _) => label + 1,
            (None, Some(&first)) => first,
            // Unreachable by construction: a block has a label or an instruction.
            (None, None) => 0,
        }
    }

    /// The index of the first statement that belongs to the block (its label, or its first
    /// instruction).
    pub fn first_statement(&self) -> usize {
        self.label_statement
            .or_else(|| self.instructions.first().copied())
            .unwrap_or(0)
    }
}

/// How control moves along an edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// The block's last instruction is a branch to the target.
    Branch,
    /// Through a `brx.idx` jump table.
    JumpTable,
    /// Falls through into the next block in layout order.
    FallThrough,
}

/// A control-flow edge between two blocks (indices into [`Function::blocks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    pub kind: EdgeKind,
}

impl Function {
    /// The function's basic blocks in layout order (empty for a declaration).
    pub fn blocks(&self) -> Vec<BasicBlock> {
        let mut blocks = Vec::new();
        let mut current: Option<BasicBlock> = None;
        for (index, statement) in self.statements().iter().enumerate() {
            match &statement.kind {
                StatementKind::Label(label) => {
                    blocks.extend(current.take());
                    current = Some(BasicBlock {
                        label: Some(label.clone()),
                        label_statement: Some(index),
                        instructions: Vec::new(),
                    });
                }
                StatementKind::Instruction(instruction) => {
                    let block = current.get_or_insert_with(|| BasicBlock {
                        label: None,
                        label_statement: None,
                        instructions: Vec::new(),
                    });
                    block.instructions.push(index);
                    if instruction.is_terminator() {
                        blocks.extend(current.take());
                    }
                }
                StatementKind::Directive(_)
                | StatementKind::ScopeOpen
                | StatementKind::ScopeClose => {}
            }
        }
        blocks.extend(current);
        blocks
    }

    /// Control-flow edges between `blocks` (as returned by [`Function::blocks`]). Branches to
    /// labels that do not exist in the function are ignored.
    pub fn edges(&self, blocks: &[BasicBlock]) -> Vec<Edge> {
        let statements = self.statements();
        let block_of_label = |label: &str| {
            blocks
                .iter()
                .position(|b| b.label.as_deref() == Some(label))
        };
        let mut edges = Vec::new();
        for (from, block) in blocks.iter().enumerate() {
            let last = block
                .instructions
                .last()
                .and_then(|&i| statements[i].as_instruction());
            let falls_through = last.is_none_or(|i| i.can_fall_through());
            if let Some(last) = last.filter(|i| i.is_terminator()) {
                let is_jump_table = last.opcode.base() == "brx";
                for target in last.branch_targets() {
                    if is_jump_table {
                        for label in self.branch_table(target) {
                            if let Some(to) = block_of_label(label) {
                                edges.push(Edge {
                                    from,
                                    to,
                                    kind: EdgeKind::JumpTable,
                                });
                            }
                        }
                    } else if let Some(to) = block_of_label(target) {
                        edges.push(Edge {
                            from,
                            to,
                            kind: EdgeKind::Branch,
                        });
                    }
                }
            }
            if falls_through && from + 1 < blocks.len() {
                edges.push(Edge {
                    from,
                    to: from + 1,
                    kind: EdgeKind::FallThrough,
                });
            }
        }
        edges
    }

    /// The labels of a `.branchtargets` table named `table`.
    fn branch_table(&self, table: &str) -> Vec<&str> {
        for statement in self.statements() {
            if let StatementKind::Directive(Directive::Other {
                label: Some(label),
                name,
                text,
            }) = &statement.kind
            {
                if name == "branchtargets" && label == table {
                    let list = text
                        .trim_start_matches(".branchtargets")
                        .trim_end_matches(';');
                    return list
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .collect();
                }
            }
        }
        Vec::new()
    }
}

/// Immediate dominators of a directed graph (Cooper, Harvey and Kennedy's iterative algorithm):
/// `successors` per node; `None` for nodes not reachable from `entry`, which is its own. Run on
/// the reverse graph from an exit node, it gives immediate post-dominators. Iterative throughout,
/// since function bodies can be large.
pub fn immediate_dominators(successors: &[Vec<usize>], entry: usize) -> Vec<Option<usize>> {
    let nodes = successors.len();
    if entry >= nodes {
        return vec![None; nodes];
    }
    let mut predecessors: Vec<Vec<usize>> = vec![Vec::new(); nodes];
    for (from, succ) in successors.iter().enumerate() {
        for &to in succ {
            predecessors[to].push(from);
        }
    }
    let mut order = Vec::with_capacity(nodes); // postorder from `entry`
    let mut visited = vec![false; nodes];
    let mut stack = vec![(entry, 0usize)];
    visited[entry] = true;
    while let Some((node, next_child)) = stack.pop() {
        if let Some(&child) = successors[node].get(next_child) {
            stack.push((node, next_child + 1));
            if !visited[child] {
                visited[child] = true;
                stack.push((child, 0));
            }
        } else {
            order.push(node);
        }
    }
    let mut number = vec![usize::MAX; nodes];
    for (i, &node) in order.iter().enumerate() {
        number[node] = i;
    }
    let mut idom: Vec<Option<usize>> = vec![None; nodes];
    idom[entry] = Some(entry);
    let intersect = |idom: &[Option<usize>], mut a: usize, mut b: usize| {
        while a != b {
            while number[a] < number[b] {
                a = idom[a].unwrap_or(b);
            }
            while number[b] < number[a] {
                b = idom[b].unwrap_or(a);
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &node in order.iter().rev() {
            if node == entry {
                continue;
            }
            let mut new_idom = None;
            for &p in &predecessors[node] {
                if idom[p].is_none() {
                    continue;
                }
                new_idom = Some(match new_idom {
                    None => p,
                    Some(current) => intersect(&idom, p, current),
                });
            }
            if new_idom.is_some() && idom[node] != new_idom {
                idom[node] = new_idom;
                changed = true;
            }
        }
    }
    idom
}

#[cfg(test)]
mod dominator_tests {
    use super::immediate_dominators;

    #[test]
    fn a_diamond_a_loop_and_an_unreachable_node() {
        // 0 -> {1, 2}; 1 -> 3; 2 -> 3; 3 -> {4, 1}; 5 -> 4 (5 unreachable).
        let succ = vec![vec![1, 2], vec![3], vec![3], vec![4, 1], vec![], vec![4]];
        let idom = immediate_dominators(&succ, 0);
        assert_eq!(idom, [Some(0), Some(0), Some(0), Some(0), Some(3), None]);
        // Post-dominators: the same on the reverse graph from the exit (4).
        let mut reverse = vec![Vec::new(); succ.len()];
        for (from, s) in succ.iter().enumerate() {
            s.iter().for_each(|&to| reverse[to].push(from));
        }
        let ipdom = immediate_dominators(&reverse, 4);
        assert_eq!(
            ipdom,
            [Some(3), Some(3), Some(3), Some(4), Some(4), Some(4)]
        );
        assert!(immediate_dominators(&[], 0).is_empty());
    }
}
