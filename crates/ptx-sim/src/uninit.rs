//! Which registers of a kernel a thread may read before it has written them: only those must
//! start at zero in a new warp (a read before any write is deterministic: zero), so that a
//! warp start need not zero the whole register file (hundreds of registers × 32 lanes, a
//! measurable part of short warps' time).
//!
//! A forward "definitely written" analysis per thread over the kernel's control flow: a
//! register is written on entry to an instruction when every path from the kernel's start
//! to it passes an unguarded instruction that writes it in every lane that executes it
//! ([`Op::for_each_definite_destination`]). A warp's lanes each follow such a path (a lane
//! runs an instruction only when its thread is there), so a register read where it is
//! definitely written holds the thread's own value, whatever the register held before the
//! warp started. Every other read, and every register `shfl` reads (it reads other lanes,
//! which may be anywhere, inactive or exited), needs the zero.

use crate::decode::{Inst, Op, Src, NO_REG};

/// Above this many words of analysis state (blocks × register words), all registers are
/// zeroed instead (an analysis that large would cost more than it saves).
const MAX_STATE_WORDS: usize = 1 << 22;

/// The registers of `code` (a kernel with `registers` registers, ending with `ret`) that
/// must be zero when a warp starts, ascending.
pub(crate) fn registers_to_zero(code: &[Inst], registers: u32) -> Vec<u32> {
    let all = || (0..registers).collect::<Vec<u32>>();
    let n = code.len();
    let words = (registers as usize).div_ceil(64);
    if n == 0 || words == 0 {
        return Vec::new();
    }
    // Basic blocks: the entry, branch targets, and instructions after a branch, `ret`,
    // `exit` or `trap`.
    let mut leader = vec![false; n + 1];
    leader[0] = true;
    for (pc, inst) in code.iter().enumerate() {
        match &inst.op {
            Op::Bra { target, .. } => {
                mark(&mut leader, *target);
                leader[pc + 1] = true;
            }
            Op::Brx { targets, .. } => {
                targets.iter().for_each(|&t| mark(&mut leader, t));
                leader[pc + 1] = true;
            }
            Op::Ret | Op::Exit | Op::Trap => leader[pc + 1] = true,
            _ => {}
        }
    }
    let starts: Vec<usize> = (0..n).filter(|&pc| leader[pc]).collect();
    let blocks = starts.len();
    if blocks.saturating_mul(words) > MAX_STATE_WORDS {
        return all();
    }
    let mut block_of = vec![0usize; n];
    let ends: Vec<usize> = (0..blocks)
        .map(|b| starts.get(b + 1).copied().unwrap_or(n))
        .collect();
    for b in 0..blocks {
        block_of[starts[b]..ends[b]].fill(b);
    }
    let successors = |b: usize| -> Vec<usize> {
        let last = &code[ends[b] - 1];
        let next = (ends[b] < n).then(|| block_of[ends[b]]);
        let guarded = last.guard != NO_REG;
        let mut succ = Vec::new();
        let target = |pc: u32| block_of.get(pc as usize).copied();
        match &last.op {
            Op::Bra { target: t, .. } => succ.extend(target(*t)),
            Op::Brx { targets, .. } => succ.extend(targets.iter().filter_map(|&t| target(t))),
            Op::Ret | Op::Exit | Op::Trap => {}
            _ => succ.extend(next),
        }
        if guarded
            && matches!(
                last.op,
                Op::Bra { .. } | Op::Brx { .. } | Op::Ret | Op::Exit | Op::Trap
            )
        {
            succ.extend(next);
        }
        succ
    };
    let transfer = |inst: &Inst, state: &mut [u64]| {
        if inst.guard == NO_REG {
            inst.op
                .for_each_definite_destination(|r| set(state, r, registers));
        }
    };

    // Written-on-entry sets, to the fixed point; blocks not reached keep no state.
    let mut entry: Vec<Option<Vec<u64>>> = vec![None; blocks];
    entry[0] = Some(vec![0; words]);
    let mut work = vec![0usize];
    let mut queued = vec![false; blocks];
    queued[0] = true;
    while let Some(b) = work.pop() {
        queued[b] = false;
        let Some(mut state) = entry[b].clone() else {
            continue;
        };
        for inst in &code[starts[b]..ends[b]] {
            transfer(inst, &mut state);
        }
        for s in successors(b) {
            let changed = match &mut entry[s] {
                slot @ None => {
                    *slot = Some(state.clone());
                    true
                }
                Some(old) => {
                    let mut changed = false;
                    for (o, &w) in old.iter_mut().zip(&state) {
                        let meet = *o & w;
                        changed |= meet != *o;
                        *o = meet;
                    }
                    changed
                }
            };
            if changed && !queued[s] {
                queued[s] = true;
                work.push(s);
            }
        }
    }

    let mut zero = vec![0u64; words];
    for b in 0..blocks {
        let Some(mut state) = entry[b].clone() else {
            continue;
        };
        for inst in &code[starts[b]..ends[b]] {
            let mut read = |r: u32| {
                if r != NO_REG && !is_set(&state, r, registers) {
                    set(&mut zero, r, registers);
                }
            };
            read(inst.guard);
            inst.op.for_each_source(|src| match *src {
                Src::Reg(r) | Src::NotPred(r) => read(r),
                _ => {}
            });
            transfer(inst, &mut state);
        }
    }
    // `shfl` reads its value operand in other lanes too.
    for inst in code {
        if let Op::Shfl {
            a: Src::Reg(r) | Src::NotPred(r),
            ..
        } = inst.op
        {
            set(&mut zero, r, registers);
        }
    }
    (0..registers)
        .filter(|&r| is_set(&zero, r, registers))
        .collect()
}

fn mark(leader: &mut [bool], pc: u32) {
    if let Some(l) = leader.get_mut(pc as usize) {
        *l = true;
    }
}

fn set(bits: &mut [u64], r: u32, registers: u32) {
    if r < registers {
        bits[r as usize / 64] |= 1 << (r % 64);
    }
}

fn is_set(bits: &[u64], r: u32, registers: u32) -> bool {
    r < registers && bits[r as usize / 64] & (1 << (r % 64)) != 0
}

#[cfg(test)]
mod tests {
    use crate::Program;

    /// The zeroed registers of kernel `name` in `body` (registers are numbered in declaration
    /// order: `%p<2>` then `%r<8>` gives `%p0`=0, `%p1`=1, `%r0`=2, ...).
    fn zeroed(body: &str, name: &str) -> Vec<u32> {
        let text = format!(".version 7.8\n.target sm_70\n.address_size 64\n\n{body}");
        let program = Program::load(&text).unwrap_or_else(|e| panic!("{e}"));
        let function = program
            .functions
            .iter()
            .find(|f| f.name == name)
            .expect("the kernel");
        function.zeroed_registers.clone()
    }

    #[test]
    fn straight_code_written_before_read_needs_no_zero() {
        let body = r#"
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd0, [out];
    mov.u32 %r0, %tid.x;
    add.u32 %r1, %r0, 1;
    mul.wide.u32 %rd1, %r0, 4;
    add.s64 %rd2, %rd0, %rd1;
    st.global.u32 [%rd2], %r1;
    ret;
}
"#;
        assert_eq!(zeroed(body, "k"), Vec::<u32>::new());
    }

    #[test]
    fn reads_before_writes_on_some_path_guarded_writes_loops_and_shfl() {
        // %p0=0 %p1=1 %r0=2 %r1=3 %r2=4 %r3=5 %r4=6 %r5=7 %r6=8 %r7=9
        let body = r#"
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    mov.u32 %r0, %tid.x;
    setp.lt.u32 %p0, %r0, 16;
    @%p0 bra SKIP;
    mov.u32 %r1, 1;
    mov.u32 %r2, 2;
SKIP:
    add.u32 %r3, %r1, 0;
    @%p0 mov.u32 %r4, 3;
    add.u32 %r3, %r4, %r3;
    mov.u32 %r2, 4;
LOOP:
    add.u32 %r5, %r5, 1;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, 9;
    @%p1 bra LOOP;
    mov.u32 %r6, 5;
    shfl.sync.idx.b32 %r7, %r6, 0, 31, -1;
    add.u32 %r7, %r7, %r3;
    ret;
}
"#;
        // %r1: written on one path only; %r4: guarded write; %r5: read in the loop before
        // its first write; %r6: written, but `shfl` reads other lanes' too. %r2 (written on
        // both paths' join before the loop), %r0, %r3, %r7, %p0, %p1 need no zero.
        assert_eq!(zeroed(body, "k"), vec![3, 6, 7, 8]);
    }

    #[test]
    fn guarded_exit_and_unguarded_branch_edges() {
        // %p0=0 %r0=1 %r1=2 %r2=3
        let body = r#"
.visible .entry k()
{
    .reg .pred %p0;
    .reg .b32 %r<3>;
    mov.u32 %r0, %tid.x;
    setp.lt.u32 %p0, %r0, 16;
    @%p0 exit;
    mov.u32 %r1, 7;
    bra.uni NEXT;
    mov.u32 %r2, 1;
NEXT:
    add.u32 %r1, %r1, %r2;
    ret;
}
"#;
        // %r2 is written only in unreachable code.
        assert_eq!(zeroed(body, "k"), vec![3]);
    }
}
