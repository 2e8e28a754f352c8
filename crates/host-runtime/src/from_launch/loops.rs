//! Loops counted from the launch ([`LoopTrips`]): a loop block's counts as a sum of the counts
//! of ordinary launch conditions, which the methods of the parent module then count.
//!
//! A thread on the loop's path runs the block once, then once more for each test `k` (from the
//! first) that repeats, where test `k` compares `v_k = init + k × step` with `bound`. Where every
//! value a test reads, for every thread of the launch, is the exact integer `init + k × step` in
//! the comparison's reading (no wrap-around), the tests repeat for `k` below a limit that grows
//! with the distance `bound - init` (or `init - bound` for a falling step) and not after it. The
//! expressions are affine in the thread and CTA indices, so their extremes over the launch are
//! at the corners of its grid and block: tests below the limit of the nearest thread repeat for
//! all, those from the limit of the farthest for none, and each test between is a condition of
//! its own. So `threads = (1 + all) × threads(path) + Σ threads(path ∧ test k repeats)`, and
//! warps alike: a warp runs the block as often as its longest-running lane, and test k repeats
//! for that lane exactly when it repeats for any lane of the warp (the tests that repeat for a
//! thread are the first few).

use device_runtime::from_launch::{
    sign_extend, CompareOp, LaunchCounted, LaunchValues, LoopTrips, ThreadPoint,
};

use super::add_scaled;

/// The most tests of one loop that may repeat for some threads of a launch but not for others
/// (its threads' trips spread over at most this many values): each is a launch condition of its
/// own. A launch that needs more gets no counts (the runtime records why); the placement takes
/// loops whose values spread little (over a CTA, or a grid-stride loop over its grid).
pub(super) const MAX_MIXED_TESTS: i128 = 4096;

/// The blocks to count instead of the original ones, none of them a loop, and how each original
/// block's counts sum theirs.
pub(super) struct Expanded {
    pub blocks: Vec<LaunchCounted>,
    /// Per original block: `(index in blocks, times)`.
    pub sums: Vec<Vec<(usize, u64)>>,
    /// Loops whose trips cannot be counted under this launch: `(index in blocks of the loop's
    /// path, why)`. Their counts are the path's, zero, where no thread enters the loop (its
    /// guard skips it: `if (n >= 4)` before a loop to `n & -4`); otherwise the launch's counts
    /// are refused with the reason.
    pub uncountable: Vec<(usize, String)>,
}

/// Replaces each loop of `blocks` by its path and its mixed tests under `launch` (which has
/// threads: no dimension is zero).
pub(super) fn expand(blocks: &[LaunchCounted], launch: &LaunchValues) -> Result<Expanded, String> {
    let mut expanded = Expanded {
        blocks: Vec::new(),
        sums: Vec::new(),
        uncountable: Vec::new(),
    };
    for block in blocks {
        let Some(trips) = &block.trips else {
            expanded.sums.push(vec![(expanded.blocks.len(), 1)]);
            expanded.blocks.push(block.clone());
            continue;
        };
        let path_index = expanded.blocks.len();
        expanded.blocks.push(LaunchCounted {
            block: block.block,
            path: block.path.clone(),
            trips: None,
        });
        let tests = match mixed_tests(trips, launch) {
            Ok(tests) => tests,
            Err(why) => {
                let why = format!("block {}: the loop's trips: {why}", block.block);
                expanded.uncountable.push((path_index, why));
                expanded.sums.push(vec![(path_index, 1)]);
                continue;
            }
        };
        let mut sum = vec![(path_index, tests.all_threads)];
        for offset in tests.mixed {
            let repeats = trips
                .repeats_at(offset)
                .ok_or_else(|| format!("block {}: a step offset beyond 64 bits", block.block))?;
            let mut path = block.path.clone();
            path.push(repeats);
            sum.push((expanded.blocks.len(), 1));
            expanded.blocks.push(LaunchCounted {
                block: block.block,
                path,
                trips: None,
            });
        }
        expanded.sums.push(sum);
    }
    Ok(expanded)
}

/// The original blocks' counts from those of the expanded ones.
pub(super) fn fold(expanded: &Expanded, counts: &[(u64, u64)]) -> Result<Vec<(u64, u64)>, String> {
    for (path, why) in &expanded.uncountable {
        if counts[*path].0 != 0 {
            return Err(why.clone());
        }
    }
    expanded
        .sums
        .iter()
        .map(|sum| {
            let mut total = [(0u64, 0u64)];
            for &(index, times) in sum {
                add_scaled(&mut total, &counts[index..=index], times)?;
            }
            Ok(total[0])
        })
        .collect()
}

/// The tests of a loop that repeats until its induction register equals its bound, `init` and
/// `bound` (exact, at the launch's corners) the same for every thread: the register reaches the
/// bound at test `k* = (bound - init) / step` when that is a whole number from the first test on,
/// and every value up to it is exact (no wrap-around); then every thread runs the block
/// `1 + k* - first` times. Otherwise (it would pass the bound and wrap around, or never move)
/// the counts are refused.
fn until_equal(
    init: &[i128],
    bound: &[i128],
    step: i128,
    first: i128,
    (least, greatest): (i128, i128),
) -> Result<Tests, String> {
    let (Some(&v), Some(&b)) = (init.first(), bound.first()) else {
        return Err("no threads".to_string());
    };
    if init.iter().any(|&x| x != v) || bound.iter().any(|&x| x != b) {
        return Err("its distance to its bound differs between threads".to_string());
    }
    let distance = b - v;
    let reached = if step == 0 {
        (distance == 0).then_some(first)
    } else {
        (distance % step == 0 && distance / step >= first).then(|| distance / step)
    };
    let Some(last) = reached else {
        return Err(format!(
            "its induction register steps by {step} from {v} and does not meet its bound {b}: \
             it would wrap around"
        ));
    };
    if ![first, last]
        .iter()
        .all(|&k| (least..=greatest).contains(&(v + k * step)))
    {
        return Err("its induction register would wrap around".to_string());
    }
    let all_threads =
        u64::try_from(1 + (last - first)).map_err(|_| "more than 2^64 trips".to_string())?;
    Ok(Tests {
        all_threads,
        mixed: Vec::new(),
    })
}

/// What a loop's runs are made of under one launch.
#[derive(Debug, PartialEq, Eq)]
struct Tests {
    /// The runs of every thread on the path: the first, and one per test that repeats for all.
    all_threads: u64,
    /// The offsets `k × step` of the tests that repeat for some threads and not for others.
    mixed: Vec<i128>,
}

/// The comparison's reading of `width` bits: its least and greatest values.
fn reading(width: u32, signed: bool) -> (i128, i128) {
    if signed {
        (-(1i128 << (width - 1)), (1i128 << (width - 1)) - 1)
    } else {
        (0, (1i128 << width) - 1)
    }
}

/// Every corner of the launch: each thread and CTA index at its least or greatest value.
fn corners(launch: &LaunchValues) -> Vec<ThreadPoint> {
    let ends = |n: u32| [0, n.saturating_sub(1)];
    let mut out = Vec::new();
    for tz in ends(launch.block[2]) {
        for ty in ends(launch.block[1]) {
            for tx in ends(launch.block[0]) {
                for cz in ends(launch.grid[2]) {
                    for cy in ends(launch.grid[1]) {
                        for cx in ends(launch.grid[0]) {
                            out.push(ThreadPoint {
                                ctaid: [cx, cy, cz],
                                tid: [tx, ty, tz],
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// The loop's tests under `launch`, or why they cannot be counted.
fn mixed_tests(trips: &LoopTrips, launch: &LaunchValues) -> Result<Tests, String> {
    let width = trips.width;
    if !(1..=64).contains(&width) {
        return Err(format!("a comparison of {width} bits"));
    }
    let op = trips
        .repeat_op()
        .ok_or("a test that repeats while equal is not monotone")?;
    let modulus = 1i128 << width;
    let (least, greatest) = reading(width, trips.signed);
    let origin = ThreadPoint {
        ctaid: [0; 3],
        tid: [0; 3],
    };
    let missing = |e: device_runtime::from_launch::MissingParam| e.to_string();
    // The step reads no thread index: the same for all. As the signed number of its bits, the
    // one that keeps the values in range if any does (a step of 2^width - 1 counts down by 1).
    let step = i128::from(sign_extend(
        trips
            .step
            .wrapped(width, &origin, launch)
            .map_err(missing)?,
        width,
    ));
    // The exact values of `init` and `bound` at the corners, moved by the multiple of 2^width
    // that puts them all in the comparison's reading (where one does, the reading of every
    // thread's value is its exact value moved so: the values lie between the corners').
    let corners = corners(launch);
    let placed = |expr: &device_runtime::from_launch::IntExpr| -> Result<Vec<i128>, String> {
        let mut values = Vec::new();
        for corner in &corners {
            let value = expr
                .exact(width, trips.signed, corner, launch)
                .map_err(missing)?
                .ok_or("a value beyond 128 bits")?;
            values.push(value);
        }
        let (lo, hi) = (
            values.iter().copied().min().unwrap_or(0),
            values.iter().copied().max().unwrap_or(0),
        );
        let shift =
            (least - lo).div_euclid(modulus) + i128::from((least - lo).rem_euclid(modulus) != 0);
        let shift = shift * modulus;
        if hi + shift > greatest {
            return Err("its values wrap around within the launch".to_string());
        }
        Ok(values.into_iter().map(|v| v + shift).collect())
    };
    let init = placed(&trips.init)?;
    let bound = placed(&trips.bound)?;
    let first = trips.first_test();
    if op == CompareOp::Ne {
        return until_equal(&init, &bound, step, first, (least, greatest));
    }
    // Towards the bound: `forward` is the step's magnitude in the direction that ends the
    // loop, and the distance left; test k repeats while `k × forward < distance` (strict) or
    // `<=` (not).
    let (rising, strict) = match op {
        CompareOp::Lt => (true, true),
        CompareOp::Le => (true, false),
        CompareOp::Gt => (false, true),
        CompareOp::Ge => (false, false),
        CompareOp::Eq | CompareOp::Ne => {
            return Err("a test that repeats while equal is not monotone".into())
        }
    };
    let forward = if rising { step } else { -step };
    let distances: Vec<i128> = init
        .iter()
        .zip(&bound)
        .map(|(&v, &b)| if rising { b - v } else { v - b })
        .collect();
    let nearest = distances.iter().copied().min().unwrap_or(0);
    let farthest = distances.iter().copied().max().unwrap_or(0);
    // The first test that does not repeat for a thread at this distance.
    let stop = |distance: i128| -> i128 {
        if strict {
            distance.div_euclid(forward) + i128::from(distance.rem_euclid(forward) != 0)
        } else {
            distance.div_euclid(forward) + 1
        }
        .max(first)
    };
    let in_range = |k: i128| {
        init.iter()
            .all(|&v| (least..=greatest).contains(&(v + k * step)))
    };
    let (all_end, none_from) = if forward <= 0 {
        // The values never approach the bound: only a loop whose first test lets every thread
        // go has trips to count (one each).
        let repeats_for_some = if strict {
            first * forward < farthest
        } else {
            first * forward <= farthest
        };
        if repeats_for_some {
            return Err(format!(
                "its induction register steps by {step}, away from its bound"
            ));
        }
        (first, first)
    } else {
        let all_end = stop(nearest);
        (all_end, stop(farthest).max(all_end))
    };
    if none_from - all_end > MAX_MIXED_TESTS {
        return Err(format!(
            "its threads' trips spread over {} values, more than {MAX_MIXED_TESTS}",
            none_from - all_end
        ));
    }
    // Every value a test reads, up to the last one a thread reads (test `none_from` at the
    // latest), must be exact: the values are affine in k, so the ends suffice.
    if !(in_range(first) && in_range(none_from)) {
        return Err("its induction register would wrap around".to_string());
    }
    let all_threads =
        u64::try_from(1 + (all_end - first)).map_err(|_| "more than 2^64 trips".to_string())?;
    Ok(Tests {
        all_threads,
        mixed: (all_end..none_from).map(|k| k * step).collect(),
    })
}

#[cfg(test)]
mod tests {
    use device_runtime::from_launch::{CompareOp, Condition, Dim, IntExpr, Predicate, Special};

    use super::super::count_blocks;
    use super::super::tests::Random;
    use super::*;
    use crate::config::Mode;

    fn special(s: Special) -> IntExpr {
        IntExpr::Special(s)
    }

    fn add(a: IntExpr, b: IntExpr) -> IntExpr {
        IntExpr::Add(Box::new(a), Box::new(b))
    }

    fn mul(a: IntExpr, b: IntExpr) -> IntExpr {
        IntExpr::Mul(Box::new(a), Box::new(b))
    }

    fn param(index: usize, bytes: u8) -> IntExpr {
        IntExpr::Param { index, bytes }
    }

    /// `ctaid.x * ntid.x * 2 + tid.x`, SHOC's reduction's first index.
    fn two_per_thread() -> IntExpr {
        add(
            mul(
                mul(
                    special(Special::Ctaid(Dim::X)),
                    special(Special::Ntid(Dim::X)),
                ),
                IntExpr::Literal(2),
            ),
            special(Special::Tid(Dim::X)),
        )
    }

    /// `ntid.x * 2 * nctaid.x`: its stride.
    fn grid_stride() -> IntExpr {
        mul(
            mul(special(Special::Ntid(Dim::X)), IntExpr::Literal(2)),
            special(Special::Nctaid(Dim::X)),
        )
    }

    fn trips(
        op: CompareOp,
        signed: bool,
        width: u32,
        init: IntExpr,
        step: IntExpr,
        bound: IntExpr,
    ) -> LoopTrips {
        LoopTrips {
            op,
            signed,
            width,
            init,
            step,
            bound,
            induction_left: true,
            repeat_when: true,
            tested_after_step: true,
        }
    }

    /// The loop block on the path `init < bound` (the rotated loop's guard) or on every thread.
    fn block(trips: LoopTrips, guarded: bool) -> LaunchCounted {
        let path = if guarded {
            vec![Condition {
                predicate: Predicate::compare(
                    trips.op,
                    trips.signed,
                    trips.width,
                    trips.init.clone(),
                    trips.bound.clone(),
                ),
                holds: true,
            }]
        } else {
            Vec::new()
        };
        LaunchCounted {
            block: 7,
            path,
            trips: Some(trips),
        }
    }

    /// What the oracle saw of a loop under one launch.
    #[derive(Debug)]
    struct Truth {
        /// The threads and warps `mode` counts, run as the PTX runs them (modulo 2^width);
        /// `None` where a thread runs past the oracle's cap (endlessly, or just long).
        counts: Option<(u64, u64)>,
        /// The runtime may refuse: some thread of the launch, on the path or not, runs past the
        /// cap, or would read a value that is not the exact `init + k × step` (the step as a
        /// signed number) at some test up to the last exit of any thread (the runtime bounds
        /// the values of every thread over all those tests, as its conditions evaluate them).
        may_refuse: bool,
    }

    /// The oracle: every thread of `launch` runs the loop as the PTX does.
    fn simulate(block: &LaunchCounted, launch: &LaunchValues, mode: Mode) -> Truth {
        let trips = block.trips.as_ref().unwrap();
        let w = trips.width;
        let cap = 3_000i128;
        let (least, greatest) = reading(w, trips.signed);
        let read = |bits: u64| -> i128 {
            if trips.signed {
                i128::from(sign_extend(bits, w))
            } else {
                i128::from(bits)
            }
        };
        let modulus = 1i128 << w;
        let mut may_refuse = false;
        let mut endless = false;
        // Per thread of the launch: its start as read, and the last test it reads.
        let mut starts: Vec<(i128, i128)> = Vec::new();
        let mut last_test = trips.first_test();
        let (mut threads, mut warps) = (0u64, 0u64);
        let warp_limit = if mode == Mode::Warp { 32 } else { u64::MAX };
        for cz in 0..launch.grid[2] {
            for cy in 0..launch.grid[1] {
                for cx in 0..launch.grid[0] {
                    let ctaid = [cx, cy, cz];
                    let counted_cta = mode == Mode::All || ctaid == [0; 3];
                    let mut linear = 0u64;
                    let mut warp_max = 0u64;
                    for z in 0..launch.block[2] {
                        for y in 0..launch.block[1] {
                            for x in 0..launch.block[0] {
                                let thread = ThreadPoint {
                                    ctaid,
                                    tid: [x, y, z],
                                };
                                let init = trips.init.wrapped(w, &thread, launch).unwrap();
                                let step = trips.step.wrapped(w, &thread, launch).unwrap();
                                let bound = trips.bound.wrapped(w, &thread, launch).unwrap();
                                let signed_step = i128::from(sign_extend(step, w));
                                let mut runs = 1i128;
                                let mut k = trips.first_test();
                                loop {
                                    let bits = (i128::from(init) + k * i128::from(step))
                                        .rem_euclid(modulus)
                                        as u64;
                                    let exact = read(init) + k * signed_step;
                                    if !(least..=greatest).contains(&exact) || read(bits) != exact {
                                        may_refuse = true;
                                    }
                                    let (l, r) = if trips.induction_left {
                                        (bits, bound)
                                    } else {
                                        (bound, bits)
                                    };
                                    let holds = if trips.signed {
                                        trips.op.apply(read(l), read(r))
                                    } else {
                                        trips.op.apply(l, r)
                                    };
                                    if holds != trips.repeat_when {
                                        break;
                                    }
                                    runs += 1;
                                    k += 1;
                                    if runs >= cap {
                                        // Endless, or long: the runtime may take it for
                                        // either (values wrap on the way to the bound).
                                        may_refuse = true;
                                        break;
                                    }
                                }
                                starts.push((read(init), signed_step));
                                last_test = last_test.max(k);
                                let counted = counted_cta
                                    && linear < warp_limit
                                    && block.runs(&thread, launch).unwrap();
                                if counted {
                                    endless |= runs >= cap;
                                    threads += runs as u64;
                                    warp_max = warp_max.max(runs as u64);
                                }
                                linear += 1;
                                if linear % 32 == 0 {
                                    warps += warp_max;
                                    warp_max = 0;
                                }
                            }
                        }
                    }
                    warps += warp_max;
                }
            }
        }
        let outside = starts.iter().any(|&(start, step)| {
            [trips.first_test(), last_test]
                .iter()
                .any(|&k| !(least..=greatest).contains(&(start + k * step)))
        });
        Truth {
            counts: (!endless).then_some((threads, warps)),
            may_refuse: may_refuse || endless || outside,
        }
    }

    /// Counts `block` under `launch` in every mode and compares with the oracle; returns
    /// whether the counts were given.
    fn agrees(block: &LaunchCounted, launch: &LaunchValues) -> bool {
        let mut given = true;
        for mode in [Mode::All, Mode::Cta, Mode::Warp] {
            let truth = simulate(block, launch, mode);
            match count_blocks(std::slice::from_ref(block), launch, mode) {
                // Past the oracle's cap (a long or endless loop): not judged here.
                Ok(_) if truth.counts.is_none() => {}
                Ok((got, _)) => assert_eq!(
                    Some(got[0]),
                    truth.counts,
                    "mode {mode:?}, {launch:?}, {block:?}"
                ),
                Err(why) => {
                    assert!(
                        truth.may_refuse,
                        "refused ({why}), oracle {truth:?}: mode {mode:?}, {launch:?}, {block:?}"
                    );
                    given = false;
                }
            }
        }
        given
    }

    #[test]
    fn grid_stride_loops_count_as_the_threads_run_them() {
        // SHOC's reduction: `for (i = ctaid * 2 ntid + tid; i < n; i += 2 ntid nctaid)`, with
        // fewer elements than threads, as many, many more, and partial warps (CTAs of 48).
        let loop_trips = trips(
            CompareOp::Lt,
            false,
            32,
            two_per_thread(),
            grid_stride(),
            param(0, 4),
        );
        for (grid, cta) in [(5u32, 96u32), (3, 48), (1, 32), (7, 256)] {
            for n in [0u64, 1, 100, 2 * u64::from(grid * cta), 5000, 12_345] {
                let launch = LaunchValues {
                    grid: [grid, 1, 1],
                    block: [cta, 1, 1],
                    params: vec![Some(n)],
                };
                for guarded in [true, false] {
                    assert!(agrees(&block(loop_trips.clone(), guarded), &launch));
                }
            }
        }
    }

    #[test]
    fn every_form_of_test_counts_as_the_threads_run_it() {
        // Random loops over the forms a `setp` can take: each comparison, signed or not, 32 or
        // 64 bits, the induction register on either side, repeating on either outcome, tested
        // before or after the step, rising and falling steps, starts spread over the CTA, the
        // grid or not at all, bounds that vary per thread.
        let mut rng = Random(0x1234_5678_9ABC_DEF1);
        let ops = [CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge];
        let mut given = 0;
        for _ in 0..500 {
            let op = ops[rng.below(4) as usize];
            let signed = rng.below(2) == 0;
            let width = if rng.below(3) == 0 { 64 } else { 32 };
            let tid = special(Special::Tid(Dim::X));
            let global = add(
                mul(
                    special(Special::Ctaid(Dim::X)),
                    special(Special::Ntid(Dim::X)),
                ),
                tid.clone(),
            );
            let start = match rng.below(4) {
                0 => tid,
                1 => global,
                2 => IntExpr::Literal(rng.below(50)),
                _ => add(param(1, 8), IntExpr::Literal(rng.below(8))),
            };
            let bound = match rng.below(4) {
                0 => param(0, 8),
                1 => IntExpr::Literal(rng.below(300)),
                2 => add(param(0, 8), special(Special::Tid(Dim::X))),
                // A chunk per CTA: `n / nctaid`, signed or not.
                _ => IntExpr::Div {
                    value: Box::new(param(0, 8)),
                    divisor: Box::new(special(Special::Nctaid(Dim::X))),
                    signed: rng.below(2) == 0,
                },
            };
            let step = match rng.below(3) {
                0 => IntExpr::Literal(rng.below(40).wrapping_sub(20)),
                1 => mul(
                    special(Special::Ntid(Dim::X)),
                    special(Special::Nctaid(Dim::X)),
                ),
                _ => IntExpr::Neg(Box::new(special(Special::Ntid(Dim::X)))),
            };
            let t = LoopTrips {
                op,
                signed,
                width,
                init: start,
                step,
                bound,
                induction_left: rng.below(2) == 0,
                repeat_when: rng.below(2) == 0,
                tested_after_step: rng.below(2) == 0,
            };
            if t.repeat_op().is_none() {
                continue;
            }
            let near_edge = |rng: &mut Random| -> u64 {
                let base = match rng.below(4) {
                    0 => 0,
                    1 => 1 << 31,
                    2 => (1u64 << 32).wrapping_sub(300),
                    _ => u64::MAX - 300,
                };
                base.wrapping_add(rng.below(600))
            };
            let p0 = if rng.below(3) == 0 {
                near_edge(&mut rng)
            } else {
                rng.below(400)
            };
            let p1 = if rng.below(3) == 0 {
                near_edge(&mut rng)
            } else {
                rng.below(400)
            };
            let p0 = if width == 32 { p0 & 0xFFFF_FFFF } else { p0 };
            let p1 = if width == 32 { p1 & 0xFFFF_FFFF } else { p1 };
            let launch = LaunchValues {
                grid: [1 + rng.below(5) as u32, 1, 1],
                block: [1 + rng.below(80) as u32, 1, 1],
                params: vec![Some(p0), Some(p1)],
            };
            let guarded = rng.below(2) == 0;
            given += usize::from(agrees(&block(t, guarded), &launch));
        }
        // Most draws are counted, not refused.
        assert!(given > 200, "only {given} of the loops were counted");
    }

    #[test]
    fn long_loops_count_without_running_them() {
        // `for (k = 0; k < n; k++)` in 64 bits with n = 10^12, every thread of 3 CTAs of 40
        // (two warps each, one partial), tested after the step: n trips each.
        let long = trips(
            CompareOp::Lt,
            true,
            64,
            IntExpr::Literal(0),
            IntExpr::Literal(1),
            param(0, 8),
        );
        let n = 1_000_000_000_000u64;
        let launch = LaunchValues {
            grid: [3, 1, 1],
            block: [40, 1, 1],
            params: vec![Some(n)],
        };
        let (counts, _) = count_blocks(&[block(long, false)], &launch, Mode::All).unwrap();
        assert_eq!(counts, vec![(120 * n, 6 * n)]);
    }

    #[test]
    fn loops_until_equal_count_when_their_register_meets_the_bound() {
        // clang's unrolled loop and its remainder (Polybench's GEMM): `for (k = 0; k != (n &
        // -4); k += 4)` and `for (r = n & 3; r != 0; r -= 1)`, tested after the step.
        let and = |mask: u64| IntExpr::And(Box::new(param(0, 4)), mask);
        let ne = |init: IntExpr, step: u64, bound: IntExpr| {
            let mut t = trips(CompareOp::Ne, true, 32, init, IntExpr::Literal(step), bound);
            t.induction_left = false;
            t
        };
        let main = ne(IntExpr::Literal(0), 4, and(0xFFFF_FFFC));
        let rest = ne(and(3), u64::from(u32::MAX), IntExpr::Literal(0));
        for n in [4u64, 7, 1021, 4096] {
            let launch = LaunchValues {
                grid: [3, 2, 1],
                block: [40, 2, 1],
                params: vec![Some(n)],
            };
            let threads = 6 * 80;
            let warps = 6 * 3;
            for (t, trips) in [(&main, n / 4), (&rest, n % 4)] {
                if trips == 0 {
                    continue; // the loop's guard skips it
                }
                let (counts, _) =
                    count_blocks(&[block(t.clone(), false)], &launch, Mode::All).unwrap();
                assert_eq!(counts, vec![(threads * trips, warps * trips)], "n = {n}");
                assert!(agrees(&block(t.clone(), false), &launch));
            }
        }
        // A loop no thread enters (its guard `n & -4 != 0` fails for n = 3: the main loop
        // would step from 0 past its bound 0) counts zero, the launch is not refused.
        let guarded = LaunchCounted {
            path: vec![Condition {
                predicate: Predicate::compare(
                    CompareOp::Ne,
                    true,
                    32,
                    and(0xFFFF_FFFC),
                    IntExpr::Literal(0),
                ),
                holds: true,
            }],
            ..block(main.clone(), false)
        };
        let launch = LaunchValues {
            grid: [2, 1, 1],
            block: [32, 1, 1],
            params: vec![Some(3)],
        };
        let (counts, _) = count_blocks(std::slice::from_ref(&guarded), &launch, Mode::All).unwrap();
        assert_eq!(counts, vec![(0, 0)]);
        // Entered (n = 4: the guard holds, the register reaches 4 after one trip): one trip
        // per thread.
        let launch = LaunchValues {
            params: vec![Some(4)],
            ..launch
        };
        let (counts, _) = count_blocks(&[guarded], &launch, Mode::All).unwrap();
        assert_eq!(counts, vec![(64, 2)]);
        // A register that passes its bound (0 stepped by 4 until 6) wraps around: refused.
        let launch = LaunchValues {
            grid: [1, 1, 1],
            block: [32, 1, 1],
            params: vec![Some(6)],
        };
        let past = ne(IntExpr::Literal(0), 4, param(0, 4));
        let refused = count_blocks(&[block(past, false)], &launch, Mode::All);
        assert!(refused.is_err_and(|why| why.contains("does not meet its bound")));
    }

    #[test]
    fn launches_whose_values_wrap_or_never_end_are_refused() {
        // `for (i = tid; i < n; i += 0x70000000)` unsigned, n = 2^32 - 16: the third step
        // wraps past 2^32, back below n (a GPU would go on).
        let wraps = trips(
            CompareOp::Lt,
            false,
            32,
            special(Special::Tid(Dim::X)),
            IntExpr::Literal(0x7000_0000),
            param(0, 4),
        );
        let launch = LaunchValues {
            grid: [1, 1, 1],
            block: [4, 1, 1],
            params: vec![Some(0xFFFF_FFF0)],
        };
        let refused = count_blocks(&[block(wraps.clone(), false)], &launch, Mode::All);
        assert!(refused.is_err_and(|why| why.contains("block 7") && why.contains("wrap")));
        // With n = 2^32 - 2^29 the last test reads 0xE0000000 + tid, above n: two trips each.
        let launch = LaunchValues {
            params: vec![Some(0xE000_0000)],
            ..launch
        };
        let (counts, _) = count_blocks(&[block(wraps, false)], &launch, Mode::All).unwrap();
        assert_eq!(counts, vec![(8, 2)]);
        // `for (i = tid; i < n; i -= 1)` signed: away from the bound.
        let away = trips(
            CompareOp::Lt,
            true,
            32,
            special(Special::Tid(Dim::X)),
            IntExpr::Literal(u64::from(u32::MAX)),
            param(0, 4),
        );
        let launch = LaunchValues {
            grid: [1, 1, 1],
            block: [4, 1, 1],
            params: vec![Some(10)],
        };
        let refused = count_blocks(&[block(away.clone(), false)], &launch, Mode::All);
        assert!(refused.is_err_and(|why| why.contains("away from its bound")));
        // ... unless no thread repeats at all: one trip each.
        // (The first test reads `tid - 1`: below a bound of -5 for no thread.)
        let launch = LaunchValues {
            params: vec![Some(u64::from(-5i32 as u32))],
            ..launch
        };
        let (counts, _) = count_blocks(&[block(away, false)], &launch, Mode::All).unwrap();
        assert_eq!(counts, vec![(4, 1)]);
        // Threads whose trips spread over more values than a launch may take conditions for.
        let spread = trips(
            CompareOp::Lt,
            false,
            32,
            mul(special(Special::Tid(Dim::X)), IntExpr::Literal(8)),
            IntExpr::Literal(1),
            param(0, 4),
        );
        let launch = LaunchValues {
            grid: [1, 1, 1],
            block: [1024, 1, 1],
            params: vec![Some(9000)],
        };
        let refused = count_blocks(&[block(spread, false)], &launch, Mode::All);
        assert!(refused.is_err_and(|why| why.contains("spread over")));
    }
}
