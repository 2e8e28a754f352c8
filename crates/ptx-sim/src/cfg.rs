//! Reconvergence points: the immediate post-dominator of each branch's block, where the paths
//! of a divergent warp meet again (the classic IPDOM stack model).

use crate::decode::{Inst, Op, EXIT_PC, NO_REG};

/// Fills `reconverge` of every `bra` and `brx` in `code` (which ends with a `ret`).
pub(crate) fn assign_reconvergence(code: &mut [Inst]) {
    let n = code.len();
    if n == 0 {
        return;
    }
    // Block leaders: the entry, branch targets, and instructions after a terminator.
    let mut leader = vec![false; n + 1];
    leader[0] = true;
    for (pc, inst) in code.iter().enumerate() {
        match &inst.op {
            Op::Bra { target, .. } => {
                mark(&mut leader, *target as usize);
                leader[pc + 1] = true;
            }
            Op::Brx { targets, .. } => {
                for &t in targets.iter() {
                    mark(&mut leader, t as usize);
                }
                leader[pc + 1] = true;
            }
            Op::Ret | Op::Exit | Op::Trap => leader[pc + 1] = true,
            _ => {}
        }
    }
    let starts: Vec<usize> = (0..n).filter(|&pc| leader[pc]).collect();
    let mut block_of = vec![0usize; n];
    for (b, &start) in starts.iter().enumerate() {
        let end = starts.get(b + 1).copied().unwrap_or(n);
        block_of[start..end].fill(b);
    }
    let blocks = starts.len();
    let exit = blocks;
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); blocks + 1];
    for (b, &start) in starts.iter().enumerate() {
        let end = starts.get(b + 1).copied().unwrap_or(n);
        let last = &code[end - 1];
        let guarded = last.guard != NO_REG;
        let next = if end < n { block_of[end] } else { exit };
        let succ = &mut successors[b];
        match &last.op {
            Op::Bra { target, .. } => {
                succ.push(block_or_exit(&block_of, *target, exit));
                if guarded {
                    succ.push(next);
                }
            }
            Op::Brx { targets, .. } => {
                succ.extend(targets.iter().map(|&t| block_or_exit(&block_of, t, exit)));
                if guarded {
                    succ.push(next);
                }
            }
            Op::Ret | Op::Exit | Op::Trap => {
                succ.push(exit);
                if guarded {
                    succ.push(next);
                }
            }
            _ => succ.push(next),
        }
        let _ = start;
    }
    let ipdom = immediate_post_dominators(&successors, exit);
    for pc in 0..n {
        let block = block_of[pc];
        let reconvergence = match ipdom[block] {
            Some(d) if d != exit => starts[d] as u32,
            _ => EXIT_PC,
        };
        match &mut code[pc].op {
            Op::Bra { reconverge, .. } | Op::Brx { reconverge, .. } => *reconverge = reconvergence,
            _ => {}
        }
    }
}

fn mark(leader: &mut [bool], pc: usize) {
    if let Some(l) = leader.get_mut(pc) {
        *l = true;
    }
}

fn block_or_exit(block_of: &[usize], pc: u32, exit: usize) -> usize {
    block_of.get(pc as usize).copied().unwrap_or(exit)
}

/// Immediate post-dominators: dominators of the reverse graph from `exit`. `None` for nodes that
/// cannot reach `exit` (endless loops).
fn immediate_post_dominators(successors: &[Vec<usize>], exit: usize) -> Vec<Option<usize>> {
    let mut predecessors: Vec<Vec<usize>> = vec![Vec::new(); successors.len()];
    for (from, succ) in successors.iter().enumerate() {
        for &to in succ {
            predecessors[to].push(from);
        }
    }
    ptx_lexer::immediate_dominators(&predecessors, exit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diamond_and_loop() {
        // 0 -> {1, 2}; 1 -> 3; 2 -> 3; 3 -> exit.
        let succ = vec![vec![1, 2], vec![3], vec![3], vec![4], vec![]];
        let ipdom = immediate_post_dominators(&succ, 4);
        assert_eq!(ipdom[0], Some(3));
        assert_eq!(ipdom[1], Some(3));
        // Loop: 0 -> 1; 1 -> {1, 2}; 2 -> exit.
        let succ = vec![vec![1], vec![1, 2], vec![3], vec![]];
        let ipdom = immediate_post_dominators(&succ, 3);
        assert_eq!(ipdom[1], Some(2));
        // Early exit: 0 -> {1, exit}; 1 -> exit.
        let succ = vec![vec![1, 2], vec![2], vec![]];
        assert_eq!(immediate_post_dominators(&succ, 2)[0], Some(2));
        // Endless loop cannot reach exit.
        let succ = vec![vec![0], vec![]];
        assert_eq!(immediate_post_dominators(&succ, 1)[0], None);
    }
}
