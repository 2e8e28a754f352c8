//! Thread counts by flow conservation (Knuth–Stevenson).
//!
//! Every thread that enters a block leaves it along exactly one of its out-edges, unless the
//! block can end the thread (`ret`, `exit`, `trap`) or calls a function (which could end it),
//! and every thread that runs a block entered it along one of its in-edges (block 0 also from
//! outside: the launch or the call). So the thread counts of a function's blocks and edges
//! satisfy one equation per block and side, whatever the warps do; given the thread counts of
//! some blocks ("measured" on the device, or known otherwise), the equations determine others.
//! Warp counts obey no such law (a divergent warp runs both sides of a branch), so a block whose
//! thread count is derived here still counts its warps on the device.
//!
//! [`thread_flows`] keeps the thread measurement only where it is needed: it tries to drop each
//! measured block, most frequently run first (deepest in loops), and keeps the drop when every
//! block's thread count still follows. The equations are solved by peeling (repeatedly an
//! equation with one unknown left), which yields each derived count as an integer combination
//! of the known ones; the runtime evaluates them in checked arithmetic.

use std::collections::BTreeMap;

use crate::placement::Cfg;

/// `threads(block) = Σ coefficient × threads(source)` over blocks whose thread count the device
/// writes or the runtime takes from the launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadFlow {
    pub block: usize,
    pub terms: Vec<(usize, i64)>,
}

/// What the flow equations of one function are built from.
pub(crate) struct FlowInputs<'a> {
    pub cfg: &'a Cfg,
    /// Blocks after which the threads that entered need not leave along an out-edge.
    pub leaky: &'a [bool],
    /// `(block, from)`: blocks with the same counts (the runtime copies them).
    pub copies: &'a [(usize, usize)],
    /// Blocks whose thread counts are known without a measurement of their own: the entry
    /// counted from the launch, blocks a loop's flush writes.
    pub known: &'a [usize],
    /// Blocks that carry no thread measurement whatever happens (their counts must follow).
    pub never_measured: &'a [usize],
}

/// The equations: each a list of (variable, ±1) summing to zero. Variables: block `b` is `b`,
/// edge `i` of `cfg.edges` is `n + i`, the flow into block 0 from outside is `n + edges`.
struct System {
    variables: usize,
    equations: Vec<Vec<(usize, i64)>>,
    /// Per variable, the equations it appears in.
    uses: Vec<Vec<usize>>,
}

impl System {
    fn of(inputs: &FlowInputs) -> Self {
        let cfg = inputs.cfg;
        let n = cfg.blocks.len();
        let source = n + cfg.edges.len();
        // threads(b) - Σ in-edges (- the outside, for block 0) and threads(b) - Σ out-edges.
        let mut ins: Vec<Vec<(usize, i64)>> = (0..n).map(|b| vec![(b, 1)]).collect();
        let mut outs: Vec<Vec<(usize, i64)>> = (0..n).map(|b| vec![(b, 1)]).collect();
        for (i, edge) in cfg.edges.iter().enumerate() {
            ins[edge.to].push((n + i, -1));
            outs[edge.from].push((n + i, -1));
        }
        if n > 0 {
            ins[0].push((source, -1));
        }
        let mut equations: Vec<Vec<(usize, i64)>> = Vec::new();
        for (b, (in_eq, out_eq)) in ins.into_iter().zip(outs).enumerate() {
            equations.push(in_eq);
            // Out only where no thread can stop in the block, and it has out-edges.
            if !inputs.leaky[b] && out_eq.len() > 1 {
                equations.push(out_eq);
            }
        }
        for &(block, from) in inputs.copies {
            if block < n && from < n {
                equations.push(vec![(block, 1), (from, -1)]);
            }
        }
        let variables = source + 1;
        let mut uses = vec![Vec::new(); variables];
        for (i, eq) in equations.iter().enumerate() {
            for &(v, _) in eq {
                uses[v].push(i);
            }
        }
        System {
            variables,
            equations,
            uses,
        }
    }

    /// Peels the equations given the known variables; returns each variable's value as a
    /// combination of known ones, where it follows (`forms`), or only whether it follows.
    fn solve(&self, known: &[bool], with_forms: bool) -> Vec<Option<BTreeMap<usize, i64>>> {
        let mut forms: Vec<Option<BTreeMap<usize, i64>>> = (0..self.variables)
            .map(|v| known[v].then(|| BTreeMap::from([(v, 1)])))
            .collect();
        let mut unknown: Vec<usize> = self
            .equations
            .iter()
            .map(|eq| eq.iter().filter(|(v, _)| forms[*v].is_none()).count())
            .collect();
        let mut ready: Vec<usize> = (0..self.equations.len())
            .filter(|&i| unknown[i] == 1)
            .collect();
        while let Some(i) = ready.pop() {
            if unknown[i] != 1 {
                continue;
            }
            let eq = &self.equations[i];
            let Some(&(v, coefficient)) = eq.iter().find(|(v, _)| forms[*v].is_none()) else {
                continue;
            };
            // coefficient × v + Σ others = 0, coefficient ±1: v = -coefficient × Σ others.
            let mut form = BTreeMap::new();
            if with_forms {
                for &(w, k) in eq.iter().filter(|(w, _)| *w != v) {
                    for (&source, &c) in forms[w].iter().flatten() {
                        *form.entry(source).or_insert(0) -= coefficient * k * c;
                    }
                }
                form.retain(|_, c| *c != 0);
            }
            forms[v] = Some(form);
            for &j in &self.uses[v] {
                unknown[j] -= 1;
                if unknown[j] == 1 {
                    ready.push(j);
                }
            }
        }
        forms
    }
}

/// Chooses which blocks measure their thread counts: `candidates` (hottest first) are the
/// blocks that would; returns those that still must, and the flows that derive the others
/// (every block not known, copied or measured), in terms of measured and known blocks only.
pub(crate) fn thread_flows(
    inputs: &FlowInputs,
    candidates: &[usize],
) -> (Vec<usize>, Vec<ThreadFlow>) {
    let n = inputs.cfg.blocks.len();
    let system = System::of(inputs);
    let mut known = vec![false; system.variables];
    for &b in inputs.known.iter().chain(candidates) {
        known[b] = true;
    }
    for &b in inputs.never_measured {
        known[b] = false;
    }
    let all_blocks_follow =
        |known: &[bool]| system.solve(known, false)[..n].iter().all(Option::is_some);
    if !all_blocks_follow(&known) {
        // Some count follows from nothing (an unreached block without a measurement, say):
        // keep every measurement there is.
        return (candidates.to_vec(), Vec::new());
    }
    for &b in candidates {
        known[b] = false;
        if !all_blocks_follow(&known) {
            known[b] = true;
        }
    }
    let measured: Vec<usize> = candidates.iter().copied().filter(|&b| known[b]).collect();
    let forms = system.solve(&known, true);
    let copied = |b: usize| inputs.copies.iter().any(|&(c, _)| c == b);
    let flows = (0..n)
        .filter(|&b| !known[b] && !copied(b))
        .filter_map(|b| {
            forms[b].as_ref().map(|form| ThreadFlow {
                block: b,
                terms: form.iter().map(|(&s, &c)| (s, c)).collect(),
            })
        })
        .collect();
    (measured, flows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(ptx_body: &str) -> Cfg {
        let ptx = format!(
            ".version 7.8\n.target sm_70\n.address_size 64\n.visible .entry k(.param .u32 k_n)\n{{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<8>;\n{ptx_body}}}\n"
        );
        let module = ptx_lexer::parse(&ptx).unwrap();
        Cfg::of(module.function("k").unwrap())
    }

    /// if/then/else then join: entry(0) → then(1) | else(2) → join(3).
    const DIAMOND: &str = "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r2, %tid.x;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $T;\n\tadd.s32 %r3, %r2, 1;\n\tbra.uni $J;\n$T:\n\tadd.s32 %r3, %r2, 2;\n$J:\n\tret;\n";

    #[test]
    fn one_side_of_a_diamond_follows_from_the_branch_and_the_other_side() {
        let cfg = cfg(DIAMOND);
        assert_eq!(cfg.blocks.len(), 4);
        let leaky = [false, false, false, true];
        let inputs = FlowInputs {
            cfg: &cfg,
            leaky: &leaky,
            copies: &[(3, 0)],
            known: &[0],
            never_measured: &[],
        };
        let (measured, flows) = thread_flows(&inputs, &[1, 2]);
        // The first candidate is dropped (it follows), the second must stay.
        assert_eq!(measured, vec![2]);
        assert_eq!(
            flows,
            vec![ThreadFlow {
                block: 1,
                terms: vec![(0, 1), (2, -1)]
            }]
        );
    }

    #[test]
    fn a_block_that_can_end_threads_gives_no_out_equation() {
        let cfg = cfg(DIAMOND);
        // If the entry could end threads, neither side follows from it.
        let leaky = [true, false, false, true];
        let inputs = FlowInputs {
            cfg: &cfg,
            leaky: &leaky,
            copies: &[],
            known: &[0],
            never_measured: &[],
        };
        let (measured, flows) = thread_flows(&inputs, &[1, 2, 3]);
        // The join's count is the sum of the sides', so one of the three may go, not more.
        assert_eq!(measured, vec![2, 3]);
        assert_eq!(flows.len(), 1);
        assert_eq!(flows[0].block, 1);
        assert_eq!(flows[0].terms, vec![(2, -1), (3, 1)]);
    }

    #[test]
    fn counts_that_follow_from_nothing_keep_every_measurement() {
        let cfg = cfg(DIAMOND);
        let leaky = [false, false, false, true];
        let inputs = FlowInputs {
            cfg: &cfg,
            leaky: &leaky,
            copies: &[],
            known: &[],
            never_measured: &[1, 2],
        };
        let (measured, flows) = thread_flows(&inputs, &[0, 3]);
        assert_eq!(measured, vec![0, 3]);
        assert!(flows.is_empty());
    }

    #[test]
    fn a_loop_body_follows_from_the_entry_and_the_exit() {
        // 0 → 1 (header) → 2 (body) → 1; 1 → 3 (exit).
        let cfg = cfg("\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r2, 0;\n$H:\n\tsetp.ge.u32 %p1, %r2, %r1;\n\t@%p1 bra $X;\n\tadd.s32 %r2, %r2, 1;\n\tbra.uni $H;\n$X:\n\tret;\n");
        assert_eq!(cfg.blocks.len(), 4);
        let leaky = [false, false, false, true];
        let inputs = FlowInputs {
            cfg: &cfg,
            leaky: &leaky,
            copies: &[],
            known: &[0],
            never_measured: &[],
        };
        // Hottest first: the body, then the header, then the exit.
        let (measured, flows) = thread_flows(&inputs, &[2, 1, 3]);
        assert_eq!(measured, vec![1]);
        let body = flows.iter().find(|f| f.block == 2).unwrap();
        // body = header - exit = header - entry (the exit runs as often as the entry).
        assert_eq!(body.terms, vec![(0, -1), (1, 1)]);
    }
}
