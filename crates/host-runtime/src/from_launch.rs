//! Counts of the blocks counted from the launch (`device_runtime::from_launch`): for each such
//! block, the threads of a launch that run it and the warps with at least one such thread,
//! computed on the host from the grid, the block shape and the parameter values, so that the
//! block needs no counter on the device.
//!
//! The counts must be exact, and this runs once per kernel launch, so it must be fast for grids
//! of millions of threads. [`LaunchCounted::runs`] is the one definition of whether a thread runs
//! a block; everything here only decides *which* threads to ask it about:
//!
//! * **Classes of CTAs** (the usual case, independent of the number of CTAs): when every
//!   comparison either reads no `%ctaid` or is affine in the `%ctaid` and `%tid` of a single
//!   dimension, its outcome is decided by the signs of a few linear functions ("planes") of
//!   (CTA index, thread index) in that dimension: the difference of its sides where no value
//!   wraps, and where one does (an unsigned range check `x - lo <u hi - lo`, a signed value
//!   crossing 2^31), also one plane per wrap boundary a side crosses and one per pair of wrap
//!   counts, as long as each side wraps at most [`MAX_WRAPS`] times over the launch (see
//!   [`analyse`]). Along each dimension, the CTAs then fall into a few classes whose CTAs give
//!   every plane the same sign at each thread index (those before the CTAs where a plane's sign
//!   changes within the CTA, each such CTA alone, those after), so their threads all see the
//!   same outcomes; one representative CTA per combination of classes is enumerated and its
//!   counts weighted by the number of CTAs it stands for. A comparison that is an affine
//!   function of one dimension's CTA index plus any function of the thread's indices (a warp
//!   per row, [`separable`]) gives, at each thread index, such planes in the CTA index alone.
//! * **Enumeration**: otherwise (a comparison whose values wrap more often, that is not affine,
//!   or that mixes dimensions), every counted thread is asked, up to 2^22 of them (about 0.4 s
//!   at some 100 ns a thread); a larger launch is refused with an error, which the runtime
//!   records as the launch's reason for having no counts, rather than stalling the program at
//!   every launch.
//!
//! Modes `cta` and `warp` count only the first CTA (or its first warp), which is enumerated.

use std::collections::BTreeSet;

use device_runtime::from_launch::{
    Compare, CtaDependence, Dim, IntExpr, LaunchCounted, LaunchValues, MissingParam, ThreadPoint,
    MAX_BLOCK, MAX_GRID,
};

use crate::config::Mode;

mod loops;

/// Threads in a warp: warp `w` of a CTA holds the threads of linear id `[32w, 32w + 32)`.
const WARP_SIZE: u64 = 32;

/// The most threads the enumeration fallback asks about (some 0.4 s of evaluation at about
/// 100 ns a thread, at every such launch): beyond it, a launch whose conditions the class method
/// cannot handle is refused rather than stalling the program at every launch.
const MAX_ENUMERATED_THREADS: u128 = 1 << 22;

/// The most threads the class method asks about (combinations of classes times threads per CTA,
/// some 0.1 s at most): beyond it, enumeration rules apply (a launch that needs more classes is
/// a launch of many threads, which enumeration refuses).
const MAX_CLASS_THREADS: u128 = 1 << 20;

/// For each entry of `blocks` (same order): the threads of the launch that run it and the warps
/// with at least one such thread, counting the threads `mode` counts (every CTA, the first CTA,
/// or the first warp of the first CTA).
///
/// Errors (one line): a condition reads a parameter the launch does not provide or compares more
/// than 64 bits, the counts do not fit a `u64`, or the launch is too large to enumerate and its
/// conditions do not allow counting by classes of CTAs.
pub fn counts_from_launch(
    blocks: &[LaunchCounted],
    launch: &LaunchValues,
    mode: Mode,
) -> Result<Vec<(u64, u64)>, String> {
    count_blocks(blocks, launch, mode).map(|(counts, _)| counts)
}

/// How [`count_blocks`] counted, so that tests can tell the fast method ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    /// A zero dimension in the grid or block: no threads.
    Empty,
    /// Modes `cta` and `warp`: the counted threads of the first CTA, one by one.
    FirstCta,
    /// Classes of CTAs: `combinations` representative CTAs enumerated.
    Classes { combinations: u64 },
    /// Every thread of the launch, one by one.
    Enumerated,
}

/// [`counts_from_launch`], also saying which method counted.
fn count_blocks(
    blocks: &[LaunchCounted],
    launch: &LaunchValues,
    mode: Mode,
) -> Result<(Vec<(u64, u64)>, Method), String> {
    // Checked up front, not as threads are asked, so that the answer does not depend on which
    // threads the method happens to ask about (nor on whether an earlier condition failed).
    check_conditions(blocks, launch)?;
    // The compiler's exact widening of index arithmetic assumes the launch is one CUDA runs.
    if !launch.within_limits() {
        return Err(format!(
            "grid {:?} or block {:?} is beyond CUDA's limits (grid {:?}, block {:?})",
            launch.grid, launch.block, MAX_GRID, MAX_BLOCK
        ));
    }
    if launch.grid.contains(&0) || launch.block.contains(&0) {
        return Ok((vec![(0, 0); blocks.len()], Method::Empty));
    }
    let expanded = loops::expand(blocks, launch)?;
    let (counts, method) = count_expanded(&expanded.blocks, launch, mode)?;
    Ok((loops::fold(&expanded, &counts)?, method))
}

/// [`count_blocks`] of blocks none of which is a loop, in a launch with threads.
fn count_expanded(
    blocks: &[LaunchCounted],
    launch: &LaunchValues,
    mode: Mode,
) -> Result<(Vec<(u64, u64)>, Method), String> {
    if mode == Mode::All {
        let cta_threads = product(launch.block);
        if cta_threads <= MAX_CLASS_THREADS {
            let max_combinations = u64::try_from(MAX_CLASS_THREADS / cta_threads).unwrap_or(0);
            if let Some(classes) = cta_classes(blocks, launch, max_combinations)? {
                return count_classes(blocks, launch, &classes);
            }
        }
    }
    let counted = counted_threads(launch, mode);
    if counted > MAX_ENUMERATED_THREADS {
        return Err(format!(
            "a launch of {counted} counted threads (grid {:?}, block {:?}) is too large to count \
             its blocks from the launch conditions one thread at a time (at most {}), and its \
             conditions do not let it be counted by classes of CTAs",
            launch.grid, launch.block, MAX_ENUMERATED_THREADS
        ));
    }
    let method = if mode == Mode::All {
        Method::Enumerated
    } else {
        Method::FirstCta
    };
    Ok((enumerate(blocks, launch, mode)?, method))
}

/// Refuses conditions no method could evaluate: a parameter the launch lacks, or a comparison
/// wider than the 64 bits a PTX register holds (which [`Compare::holds`] does not define).
fn check_conditions(blocks: &[LaunchCounted], launch: &LaunchValues) -> Result<(), String> {
    let check_params = |block: &LaunchCounted, exprs: &[&IntExpr]| {
        let mut params = Vec::new();
        for expr in exprs {
            expr.params(&mut params);
        }
        match params
            .into_iter()
            .find(|&(index, _)| launch.params.get(index).copied().flatten().is_none())
        {
            Some((index, _)) => Err(format!("block {}: {}", block.block, MissingParam(index))),
            None => Ok(()),
        }
    };
    for block in blocks {
        for compare in block.compares() {
            if compare.width > 64 {
                return Err(format!(
                    "block {}: a launch condition compares {} bits, more than 64",
                    block.block, compare.width
                ));
            }
            check_params(block, &[&compare.lhs, &compare.rhs])?;
        }
        if let Some(trips) = &block.trips {
            if trips.width > 64 {
                return Err(format!(
                    "block {}: a loop's test compares {} bits, more than 64",
                    block.block, trips.width
                ));
            }
            check_params(block, &trips.exprs())?;
        }
    }
    Ok(())
}

/// The product of three dimensions (cannot overflow a `u128`).
fn product(dims: [u32; 3]) -> u128 {
    dims.iter().map(|&d| u128::from(d)).product()
}

/// The threads `mode` counts in the launch (`u128::MAX` where that overflows).
fn counted_threads(launch: &LaunchValues, mode: Mode) -> u128 {
    let cta_threads = product(launch.block);
    match mode {
        Mode::All => product(launch.grid).saturating_mul(cta_threads),
        Mode::Cta => cta_threads,
        Mode::Warp => cta_threads.min(u128::from(WARP_SIZE)),
    }
}

/// The brute-force count: asks [`LaunchCounted::runs`] about every counted thread. Exact, but
/// proportional to the threads; the tests' oracle and the fallback for small launches.
fn enumerate(
    blocks: &[LaunchCounted],
    launch: &LaunchValues,
    mode: Mode,
) -> Result<Vec<(u64, u64)>, String> {
    let mut counts = vec![(0, 0); blocks.len()];
    if launch.grid.contains(&0) || launch.block.contains(&0) {
        return Ok(counts);
    }
    let cta_threads = u64::try_from(product(launch.block))
        .map_err(|_| format!("a CTA of {:?} threads is too large", launch.block))?;
    match mode {
        Mode::All => {
            for z in 0..launch.grid[2] {
                for y in 0..launch.grid[1] {
                    for x in 0..launch.grid[0] {
                        let cta = count_cta(blocks, launch, [x, y, z], cta_threads)?;
                        add_scaled(&mut counts, &cta, 1)?;
                    }
                }
            }
        }
        Mode::Cta => counts = count_cta(blocks, launch, [0; 3], cta_threads)?,
        Mode::Warp => counts = count_cta(blocks, launch, [0; 3], cta_threads.min(WARP_SIZE))?,
    }
    Ok(counts)
}

/// Per block, the threads of CTA `ctaid` with linear id below `limit` that run it and the warps
/// with at least one of them.
fn count_cta(
    blocks: &[LaunchCounted],
    launch: &LaunchValues,
    ctaid: [u32; 3],
    limit: u64,
) -> Result<Vec<(u64, u64)>, String> {
    let mut counts = vec![(0u64, 0u64); blocks.len()];
    // Threads are visited in linear order, so a warp's threads come together: a block's warp
    // count grows when a thread that runs it lies in another warp than the last one that did.
    let mut last_warp: Vec<Option<u64>> = vec![None; blocks.len()];
    // Counters below grow by one per thread visited, so they stay below `limit`.
    let mut linear: u64 = 0;
    'threads: for z in 0..launch.block[2] {
        for y in 0..launch.block[1] {
            for x in 0..launch.block[0] {
                if linear >= limit {
                    break 'threads;
                }
                let thread = ThreadPoint {
                    ctaid,
                    tid: [x, y, z],
                };
                let warp = linear / WARP_SIZE;
                for ((block, count), last) in blocks.iter().zip(&mut counts).zip(&mut last_warp) {
                    let runs = block
                        .runs(&thread, launch)
                        .map_err(|missing| format!("block {}: {missing}", block.block))?;
                    if runs {
                        count.0 += 1;
                        if *last != Some(warp) {
                            count.1 += 1;
                            *last = Some(warp);
                        }
                    }
                }
                linear += 1;
            }
        }
    }
    Ok(counts)
}

/// Adds `times` times `counts` to `total`, refusing counts beyond a `u64`.
fn add_scaled(total: &mut [(u64, u64)], counts: &[(u64, u64)], times: u64) -> Result<(), String> {
    let overflow = || "the counts of a block counted from the launch exceed 2^64".to_string();
    for (sum, &(threads, warps)) in total.iter_mut().zip(counts) {
        sum.0 = threads
            .checked_mul(times)
            .and_then(|t| t.checked_add(sum.0))
            .ok_or_else(overflow)?;
        sum.1 = warps
            .checked_mul(times)
            .and_then(|w| w.checked_add(sum.1))
            .ok_or_else(overflow)?;
    }
    Ok(())
}

/// A linear function of the CTA index `c` and the thread index `t` along one dimension:
/// `a * c + b * t + k`, exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Plane {
    a: i128,
    b: i128,
    k: i128,
}

impl Plane {
    /// The plane of value `k` everywhere.
    fn constant(k: i128) -> Plane {
        Plane { a: 0, b: 0, k }
    }

    fn at(self, c: u32, t: u32) -> Option<i128> {
        self.a
            .checked_mul(i128::from(c))?
            .checked_add(self.b.checked_mul(i128::from(t))?)?
            .checked_add(self.k)
    }

    fn minus(self, other: Plane) -> Option<Plane> {
        Some(Plane {
            a: self.a.checked_sub(other.a)?,
            b: self.b.checked_sub(other.b)?,
            k: self.k.checked_sub(other.k)?,
        })
    }
}

/// The most times a side of a comparison may wrap around over the launch (the spread of its wrap
/// count, see [`analyse`]) for the class method to take the comparison: a spread of `s` on both
/// sides gives `2s + (s + 1)^2` planes (22 for 3), each of which may add classes. Compilers'
/// range checks (`x - lo <u hi - lo`) and a signed index crossing 2^31 wrap once; a value that
/// wraps more (`i << 30`) usually wraps at nearly every CTA, and classes would not pay.
const MAX_WRAPS: i128 = 3;

/// How a comparison's outcome depends on the CTA, where the class method can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Shape {
    /// It reads no `%ctaid`: every CTA gives a thread index the same outcome.
    CtaIndependent,
    /// Throughout the launch, its outcome at CTA index `c` and thread index `t` along `dim` is a
    /// function of the signs (negative, zero, positive) of `planes` at `(c, t)`: two CTAs that
    /// give each plane the same sign at every `t` give every thread index the same outcome.
    Planes { dim: Dim, planes: Vec<Plane> },
}

/// One side of a comparison over the launch: its exact value, and the least and greatest of its
/// wrap counts `q` (see [`analyse`]) over the launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Side {
    plane: Plane,
    wraps: (i128, i128),
}

/// One class of CTAs along a dimension: `ctas` consecutive CTA indices starting at
/// `representative`, whose threads all see the same outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Class {
    representative: u32,
    ctas: u64,
}

/// How `compare`'s outcome depends on the CTA under `launch` (no zero dimension), or `None`
/// where the class method cannot tell (not affine, several dimensions, a value that wraps more
/// than [`MAX_WRAPS`] times, an exact value beyond an `i128`).
///
/// Why the planes decide the outcome. With `w` the width, `M = 2^w` and `low` the least number
/// of the reading (`-2^(w-1)` signed, 0 unsigned), the PTX reads a side whose exact value is `E`
/// (congruent to its bits modulo `M`, [`IntExpr::exact`]) as the one number of `[low, low + M)`
/// congruent to it: `R(E) = E - M * q(E)` with the wrap count `q(E) = floor((E - low) / M)`.
/// The comparison `R(E_l) op R(E_r)` is `(R(E_l) - R(E_r)) op 0`, for each of the six operators:
/// the sign of `E_l - E_r - M * (q_l - q_r)`.
///
/// * Each side is affine over the launch's rectangle of (CTA, thread) indices, so it takes its
///   extremes at the corners, and `q`, non-decreasing in `E`, lies between its values there:
///   `q_min..=q_max`.
/// * `q(E) >= m` exactly when `E >= B_m = low + m * M`, when the *boundary plane* `E - B_m` is
///   not negative; so `q(E) = q_min + #{m in q_min+1..=q_max : E - B_m >= 0}` is a function of
///   the signs of the boundary planes of that side.
/// * Given `(q_l, q_r)`, the outcome is the sign of the *pair plane*
///   `E_l - E_r - M * (q_l - q_r)`; there is one for each pair of the two sides' ranges.
///
/// So the outcome at `(c, t)` is a function of the signs of these planes at `(c, t)`. Pair planes
/// for pairs that never occur only add classes, never change an outcome. Without wraps (both
/// ranges `0..=0`, the common case) this is the one plane `E_l - E_r`.
fn analyse(compare: &Compare, launch: &LaunchValues) -> Result<Option<Shape>, MissingParam> {
    let dependence = compare.cta_dependence();
    let dim = match dependence {
        CtaDependence::None => return Ok(Some(Shape::CtaIndependent)),
        CtaDependence::Affine(dim) | CtaDependence::Separable(dim) => dim,
        CtaDependence::Other => return Ok(None),
    };
    if !(1..=64).contains(&compare.width) {
        return Ok(None);
    }
    let modulus = 1i128 << compare.width;
    let low = if compare.signed {
        -(1i128 << (compare.width - 1))
    } else {
        0
    };
    if let CtaDependence::Separable(_) = dependence {
        return separable(compare, dim, launch, low, modulus);
    }
    let lhs = side(&compare.lhs, compare, dim, launch, low, modulus)?;
    let rhs = side(&compare.rhs, compare, dim, launch, low, modulus)?;
    Ok(lhs
        .zip(rhs)
        .and_then(|(lhs, rhs)| wrap_planes(lhs, rhs, low, modulus))
        .map(|planes| Shape::Planes { dim, planes }))
}

/// [`analyse`] for a comparison that is, at each thread index of a CTA, affine in the CTA index
/// along `dim` ([`CtaDependence::Separable`]: `ctaid.x * (ntid.x >> 5) + (tid.x >> 5)`): at a
/// fixed thread index each side is a [`Side`] whose plane does not depend on the thread index
/// (`b = 0`), and that thread index's outcome is a function of the signs of its sides' boundary
/// and pair planes, as in [`analyse`]. So the planes of every thread index of a CTA together
/// decide every thread index's outcome (a thread index's own planes decide it; the others only
/// cut the grid into more classes). Thread indices with the same sides share their planes, so
/// a function of the thread index with few values (a warp index) gives few planes.
/// Its values are read in `[low, low + modulus)`.
fn separable(
    compare: &Compare,
    dim: Dim,
    launch: &LaunchValues,
    low: i128,
    modulus: i128,
) -> Result<Option<Shape>, MissingParam> {
    let mut seen: BTreeSet<(Side, Side)> = BTreeSet::new();
    let mut planes: BTreeSet<Plane> = BTreeSet::new();
    let [bx, by, bz] = launch.block;
    for z in 0..bz {
        for y in 0..by {
            for x in 0..bx {
                let tid = [x, y, z];
                let at = |expr: &IntExpr| {
                    fixed_thread_side(expr, compare, dim, tid, launch, low, modulus)
                };
                let (Some(lhs), Some(rhs)) = (at(&compare.lhs)?, at(&compare.rhs)?) else {
                    return Ok(None);
                };
                if !seen.insert((lhs, rhs)) {
                    continue;
                }
                let Some(new) = wrap_planes(lhs, rhs, low, modulus) else {
                    return Ok(None);
                };
                planes.extend(new);
            }
        }
    }
    Ok(Some(Shape::Planes {
        dim,
        planes: planes.into_iter().collect(),
    }))
}

/// One side of a [`CtaDependence::Separable`] comparison at thread index `tid`, over the CTA
/// indices along `dim`: its exact value as a plane in the CTA index alone (`b = 0`) and the
/// range of its wrap count, or `None` where a value does not fit an `i128` or the wrap count
/// spreads over more than [`MAX_WRAPS`] + 1 values. As in [`side`], the extremes (the first and
/// last CTA) are evaluated, not only predicted.
fn fixed_thread_side(
    expr: &IntExpr,
    compare: &Compare,
    dim: Dim,
    tid: [u32; 3],
    launch: &LaunchValues,
    low: i128,
    modulus: i128,
) -> Result<Option<Side>, MissingParam> {
    let at = |c: u32| {
        let mut point = ThreadPoint { ctaid: [0; 3], tid };
        point.ctaid[dim.index()] = c;
        expr.exact(compare.width, compare.signed, &point, launch)
    };
    let last_cta = launch.grid[dim.index()].saturating_sub(1);
    let Some(k) = at(0)? else {
        return Ok(None);
    };
    let a = if last_cta > 0 {
        at(1)?.and_then(|v| v.checked_sub(k))
    } else {
        Some(0)
    };
    let Some(a) = a else {
        return Ok(None);
    };
    let plane = Plane { a, b: 0, k };
    let last = at(last_cta)?;
    let Some(last) = last.filter(|&v| plane.at(last_cta, 0) == Some(v)) else {
        return Ok(None);
    };
    Ok(with_wraps(plane, k.min(last), k.max(last), low, modulus))
}

/// The boundary planes of both sides and the pair planes of a comparison whose values are read
/// in `[low, low + modulus)` (see [`analyse`]), or `None` where one does not fit an `i128`.
fn wrap_planes(lhs: Side, rhs: Side, low: i128, modulus: i128) -> Option<Vec<Plane>> {
    let mut planes = Vec::new();
    for side in [lhs, rhs] {
        let (q_min, q_max) = side.wraps;
        for m in q_min.checked_add(1)?..=q_max {
            let boundary = m.checked_mul(modulus)?.checked_add(low)?;
            planes.push(side.plane.minus(Plane::constant(boundary))?);
        }
    }
    let difference = lhs.plane.minus(rhs.plane)?;
    for q_l in lhs.wraps.0..=lhs.wraps.1 {
        for q_r in rhs.wraps.0..=rhs.wraps.1 {
            let shift = q_l.checked_sub(q_r)?.checked_mul(modulus)?;
            planes.push(difference.minus(Plane::constant(shift))?);
        }
    }
    Some(planes)
}

/// One side of `compare` (affine, reading thread indices of `dim` only) over the launch's CTA and
/// thread indices of `dim`: its exact value as a plane and the range of its wrap count
/// `floor((value - low) / modulus)`, or `None` where a value does not fit an `i128` or the wrap
/// count spreads over more than [`MAX_WRAPS`] + 1 values.
fn side(
    expr: &IntExpr,
    compare: &Compare,
    dim: Dim,
    launch: &LaunchValues,
    low: i128,
    modulus: i128,
) -> Result<Option<Side>, MissingParam> {
    let at = |c: u32, t: u32| {
        let mut point = ThreadPoint {
            ctaid: [0; 3],
            tid: [0; 3],
        };
        point.ctaid[dim.index()] = c;
        point.tid[dim.index()] = t;
        expr.exact(compare.width, compare.signed, &point, launch)
    };
    let last_cta = launch.grid[dim.index()].saturating_sub(1);
    let last_thread = launch.block[dim.index()].saturating_sub(1);
    let Some(k) = at(0, 0)? else {
        return Ok(None);
    };
    // Steps measured between points of the launch; a dimension one wide has no step to measure,
    // and none matters.
    let step = |value: Option<i128>| value.and_then(|v| v.checked_sub(k));
    let a = if last_cta > 0 {
        step(at(1, 0)?)
    } else {
        Some(0)
    };
    let b = if last_thread > 0 {
        step(at(0, 1)?)
    } else {
        Some(0)
    };
    let (Some(a), Some(b)) = (a, b) else {
        return Ok(None);
    };
    let plane = Plane { a, b, k };
    // An affine function takes its extremes over the launch's rectangle at its corners (and so
    // does every sub-expression, so no value in between overflows an i128 either). Each corner
    // is evaluated, not only predicted, so a plane that did not fit would be caught here.
    let (mut least, mut most) = (k, k);
    for (c, t) in [
        (0, 0),
        (last_cta, 0),
        (0, last_thread),
        (last_cta, last_thread),
    ] {
        match at(c, t)? {
            Some(value) if plane.at(c, t) == Some(value) => {
                least = least.min(value);
                most = most.max(value);
            }
            _ => return Ok(None),
        }
    }
    Ok(with_wraps(plane, least, most, low, modulus))
}

/// `plane` as the [`Side`] of a comparison read in `[low, low + modulus)` whose exact values
/// over the launch lie in `[least, most]`, with the range of its wrap count, or `None` where that
/// spreads over more than [`MAX_WRAPS`] + 1 values.
fn with_wraps(plane: Plane, least: i128, most: i128, low: i128, modulus: i128) -> Option<Side> {
    let wraps = |value: i128| floor_div(value.checked_sub(low)?, modulus);
    let (q_min, q_max) = (wraps(least)?, wraps(most)?);
    if q_max
        .checked_sub(q_min)
        .is_none_or(|spread| spread > MAX_WRAPS)
    {
        return None;
    }
    Some(Side {
        plane,
        wraps: (q_min, q_max),
    })
}

/// The classes of CTAs along each dimension, such that all CTAs of a combination of classes give
/// every thread index the same outcome for every comparison; `None` where some comparison does
/// not allow it or the combinations would exceed `max_combinations`.
///
/// Every comparison reads the indices of at most one dimension and is decided by the signs of
/// its planes ([`Shape::Planes`]); [`classes_along`] cuts each dimension so that within a class,
/// every plane of the dimension has the same sign at each thread index for all its CTAs. So all
/// CTAs of a combination of classes give each thread index the outcomes of the representative,
/// and run the same blocks. Cutting on more planes (duplicates are dropped) is always safe: it
/// only makes more, smaller classes.
fn cta_classes(
    blocks: &[LaunchCounted],
    launch: &LaunchValues,
    max_combinations: u64,
) -> Result<Option<[Vec<Class>; 3]>, String> {
    let mut planes: [BTreeSet<Plane>; 3] = Default::default();
    for block in blocks {
        for compare in block.compares() {
            let shape = analyse(compare, launch)
                .map_err(|missing| format!("block {}: {missing}", block.block))?;
            match shape {
                None => return Ok(None),
                Some(Shape::CtaIndependent) => {}
                Some(Shape::Planes { dim, planes: new }) => planes[dim.index()].extend(new),
            }
        }
    }
    let mut classes: [Vec<Class>; 3] = Default::default();
    let mut combinations: u64 = 1;
    for dim in Dim::ALL {
        let i = dim.index();
        let Some(along) = classes_along(
            launch.grid[i],
            launch.block[i],
            &planes[i].iter().copied().collect::<Vec<_>>(),
            max_combinations,
        ) else {
            return Ok(None);
        };
        combinations = match u64::try_from(along.len())
            .ok()
            .and_then(|n| n.checked_mul(combinations))
        {
            Some(n) if n <= max_combinations => n,
            _ => return Ok(None),
        };
        classes[i] = along;
    }
    Ok(Some(classes))
}

/// The classes of the CTA indices `[0, ctas)` of one dimension (CTAs `threads` wide in it) for
/// the planes `differences`, at most `max_classes` of them: within a class, each plane has the
/// same sign (negative, zero or positive) at each thread index for every CTA.
///
/// A plane with `a == 0` does not depend on the CTA, and cuts nothing. For another, the CTAs
/// where the sign changes (or reaches 0) among their threads form an interval of indices (the
/// plane's range over a CTA's threads moves by `a` per CTA); before it, all CTAs see one strict
/// sign at every thread, after it the other. So the classes start at 0, at each CTA of such an
/// interval, and just after it (where the interval holds no whole index, the sign changes
/// between two CTAs, and that is where a class starts).
fn classes_along(
    ctas: u32,
    threads: u32,
    differences: &[Plane],
    max_classes: u64,
) -> Option<Vec<Class>> {
    let mut starts = BTreeSet::from([0u32]);
    let last_cta = i128::from(ctas.checked_sub(1)?);
    for difference in differences {
        if difference.a == 0 || last_cta == 0 {
            continue;
        }
        let (first, last) = critical_ctas(*difference, threads)?;
        let first_start = first.max(1);
        let last_start = last.checked_add(1)?.min(last_cta);
        if first_start > last_start {
            continue;
        }
        let new = u64::try_from(last_start - first_start + 1).ok()?;
        if u64::try_from(starts.len()).ok()?.checked_add(new)? > max_classes {
            return None;
        }
        for start in first_start..=last_start {
            starts.insert(u32::try_from(start).ok()?);
        }
    }
    let ends = starts.iter().skip(1).copied().chain([ctas]);
    Some(
        starts
            .iter()
            .zip(ends)
            .map(|(&start, end)| Class {
                representative: start,
                ctas: u64::from(end - start),
            })
            .collect(),
    )
}

/// The CTA indices `c` (possibly none: then `first == last + 1`, where the sign changes between
/// CTAs) whose threads `t` in `[0, threads)` do not all give `difference` one strict sign, for a
/// difference with `a != 0`: those with `min_t D(c, t) <= 0 <= max_t D(c, t)`.
fn critical_ctas(difference: Plane, threads: u32) -> Option<(i128, i128)> {
    let Plane { a, b, k } = difference;
    let span = b.checked_mul(i128::from(threads.checked_sub(1)?))?;
    let (low_t, high_t) = (span.min(0), span.max(0));
    // a*c + k + low_t <= 0 <= a*c + k + high_t, that is -k - high_t <= a*c <= -k - low_t.
    let low = k.checked_neg()?.checked_sub(high_t)?;
    let high = k.checked_neg()?.checked_sub(low_t)?;
    if a > 0 {
        Some((ceil_div(low, a)?, floor_div(high, a)?))
    } else {
        Some((ceil_div(high, a)?, floor_div(low, a)?))
    }
}

/// `floor(x / d)` for `d != 0`.
fn floor_div(x: i128, d: i128) -> Option<i128> {
    let q = x.checked_div(d)?;
    let r = x.checked_rem(d)?;
    if r != 0 && ((r < 0) != (d < 0)) {
        q.checked_sub(1)
    } else {
        Some(q)
    }
}

/// `ceil(x / d)` for `d != 0`.
fn ceil_div(x: i128, d: i128) -> Option<i128> {
    let q = x.checked_div(d)?;
    let r = x.checked_rem(d)?;
    if r != 0 && ((r < 0) == (d < 0)) {
        q.checked_add(1)
    } else {
        Some(q)
    }
}

/// Counts every CTA of the launch from one representative CTA per combination of classes,
/// weighted by the number of CTAs the combination holds.
fn count_classes(
    blocks: &[LaunchCounted],
    launch: &LaunchValues,
    classes: &[Vec<Class>; 3],
) -> Result<(Vec<(u64, u64)>, Method), String> {
    let cta_threads = u64::try_from(product(launch.block))
        .map_err(|_| format!("a CTA of {:?} threads is too large", launch.block))?;
    let mut counts = vec![(0, 0); blocks.len()];
    let mut combinations: u64 = 0;
    for z in &classes[2] {
        for y in &classes[1] {
            for x in &classes[0] {
                let ctas = x
                    .ctas
                    .checked_mul(y.ctas)
                    .and_then(|n| n.checked_mul(z.ctas))
                    .ok_or_else(|| format!("a grid of {:?} CTAs is too large", launch.grid))?;
                let ctaid = [x.representative, y.representative, z.representative];
                let cta = count_cta(blocks, launch, ctaid, cta_threads)?;
                add_scaled(&mut counts, &cta, ctas)?;
                combinations += 1;
            }
        }
    }
    Ok((counts, Method::Classes { combinations }))
}

#[cfg(test)]
mod tests {
    use device_runtime::from_launch::{CompareOp, Condition, Predicate, Special};

    use super::*;

    fn lit(bits: u64) -> IntExpr {
        IntExpr::Literal(bits)
    }

    fn param(index: usize) -> IntExpr {
        IntExpr::Param { index, bytes: 4 }
    }

    fn tid(d: Dim) -> IntExpr {
        IntExpr::Special(Special::Tid(d))
    }

    fn ctaid(d: Dim) -> IntExpr {
        IntExpr::Special(Special::Ctaid(d))
    }

    fn ntid(d: Dim) -> IntExpr {
        IntExpr::Special(Special::Ntid(d))
    }

    fn nctaid(d: Dim) -> IntExpr {
        IntExpr::Special(Special::Nctaid(d))
    }

    fn add(a: IntExpr, b: IntExpr) -> IntExpr {
        IntExpr::Add(Box::new(a), Box::new(b))
    }

    fn sub(a: IntExpr, b: IntExpr) -> IntExpr {
        IntExpr::Sub(Box::new(a), Box::new(b))
    }

    fn mul(a: IntExpr, b: IntExpr) -> IntExpr {
        IntExpr::Mul(Box::new(a), Box::new(b))
    }

    /// `ctaid * ntid + tid`: the global index along `d`.
    fn global(d: Dim) -> IntExpr {
        add(mul(ctaid(d), ntid(d)), tid(d))
    }

    fn compare(op: CompareOp, signed: bool, width: u32, lhs: IntExpr, rhs: IntExpr) -> Predicate {
        Predicate::compare(op, signed, width, lhs, rhs)
    }

    /// `lhs op rhs`, signed 32 bits.
    fn s32(lhs: IntExpr, op: CompareOp, rhs: IntExpr) -> Predicate {
        compare(op, true, 32, lhs, rhs)
    }

    fn and(a: Predicate, b: Predicate) -> Predicate {
        Predicate::And(Box::new(a), Box::new(b))
    }

    fn or(a: Predicate, b: Predicate) -> Predicate {
        Predicate::Or(Box::new(a), Box::new(b))
    }

    fn xor(a: Predicate, b: Predicate) -> Predicate {
        Predicate::Xor(Box::new(a), Box::new(b))
    }

    fn not(a: Predicate) -> Predicate {
        Predicate::Not(Box::new(a))
    }

    /// A block run where every `(predicate, holds)` of `path` holds.
    fn counted(block: usize, path: Vec<(Predicate, bool)>) -> LaunchCounted {
        LaunchCounted {
            trips: None,
            block,
            path: path
                .into_iter()
                .map(|(predicate, holds)| Condition { predicate, holds })
                .collect(),
        }
    }

    fn launch(grid: [u32; 3], block: [u32; 3], params: &[u64]) -> LaunchValues {
        LaunchValues {
            grid,
            block,
            params: params.iter().map(|&p| Some(p)).collect(),
        }
    }

    /// Counts in every mode, checks them against [`enumerate`], and returns mode `all`'s counts
    /// and method.
    fn check(blocks: &[LaunchCounted], launch: &LaunchValues) -> (Vec<(u64, u64)>, Method) {
        for mode in [Mode::Cta, Mode::Warp] {
            let (counts, _) = count_blocks(blocks, launch, mode).unwrap();
            assert_eq!(
                counts,
                enumerate(blocks, launch, mode).unwrap(),
                "mode {mode:?}, {launch:?}, {blocks:?}"
            );
        }
        let (counts, method) = count_blocks(blocks, launch, Mode::All).unwrap();
        assert_eq!(
            counts,
            enumerate(blocks, launch, Mode::All).unwrap(),
            "mode all ({method:?}), {launch:?}, {blocks:?}"
        );
        (counts, method)
    }

    fn is_classes(method: Method) -> bool {
        matches!(method, Method::Classes { .. })
    }

    #[test]
    fn one_dimension_with_a_partial_last_cta() {
        // i < n, 1000 threads of 10 CTAs of 128: warps 0..=31 of the grid's 40.
        let less = s32(global(Dim::X), CompareOp::Lt, param(0));
        let blocks = [
            counted(3, vec![(less.clone(), true)]),
            counted(4, vec![(less, false)]),
        ];
        let (counts, method) = check(&blocks, &launch([10, 1, 1], [128, 1, 1], &[1000]));
        // Threads 1000..1280 fail it: warps 31..=39.
        assert_eq!(counts, [(1000, 32), (280, 9)]);
        assert!(is_classes(method), "{method:?}");
    }

    #[test]
    fn two_dimensional_guards_with_warps_over_two_rows() {
        let inside = |d: Dim| {
            and(
                s32(global(d), CompareOp::Ge, lit(1)),
                s32(global(d), CompareOp::Lt, sub(param(0), lit(1))),
            )
        };
        let blocks = [counted(
            0,
            vec![(inside(Dim::X), true), (inside(Dim::Y), true)],
        )];
        // 16x16 CTAs: a warp holds two rows. n = 63: x and y in [1, 61], 61 * 61 threads; the
        // row pairs (0, 1) .. (60, 61) count, (62, 63) does not: 31 pairs times 4 CTA columns.
        let (counts, method) = check(&blocks, &launch([4, 4, 1], [16, 16, 1], &[63]));
        assert_eq!(counts, [(61 * 61, 31 * 4)]);
        assert!(is_classes(method), "{method:?}");
        // 32x8 CTAs: a warp is a row. n = 64: rows 1..=62 in both CTA columns.
        let (counts, method) = check(&blocks, &launch([2, 8, 1], [32, 8, 1], &[64]));
        assert_eq!(counts, [(62 * 62, 62 * 2)]);
        assert!(is_classes(method), "{method:?}");
    }

    #[test]
    fn thread_index_only() {
        let blocks = [counted(
            0,
            vec![(s32(tid(Dim::X), CompareOp::Lt, lit(16)), true)],
        )];
        let (counts, method) = check(&blocks, &launch([3, 1, 1], [64, 1, 1], &[]));
        assert_eq!(counts, [(48, 3)]);
        assert_eq!(method, Method::Classes { combinations: 1 });
    }

    /// Lane and warp indices (`tid & 31`, `tid >> 5`, an arithmetic shift of a negative
    /// value): not affine, but read no `%ctaid`, so every CTA gives a thread index the same
    /// outcome.
    #[test]
    fn lane_and_warp_indices() {
        let lane = IntExpr::And(Box::new(tid(Dim::X)), 31);
        let warp = IntExpr::Shr {
            value: Box::new(tid(Dim::X)),
            amount: 5,
            arithmetic: false,
        };
        let blocks = [
            counted(0, vec![(s32(lane.clone(), CompareOp::Lt, lit(16)), true)]),
            counted(
                1,
                vec![
                    (s32(lane, CompareOp::Lt, lit(16)), false),
                    (s32(warp, CompareOp::Eq, lit(1)), true),
                ],
            ),
            // (tid - 40) >> 3 (arithmetic) < -2: tid - 40 < -16, tid < 24.
            counted(
                2,
                vec![(
                    s32(
                        IntExpr::Shr {
                            value: Box::new(sub(tid(Dim::X), lit(40))),
                            amount: 3,
                            arithmetic: true,
                        },
                        CompareOp::Lt,
                        lit(2u64.wrapping_neg()),
                    ),
                    true,
                )],
            ),
        ];
        // 3 CTAs of 72 threads: warps of 32, 32 and 8 lanes.
        let (counts, method) = check(&blocks, &launch([3, 1, 1], [72, 1, 1], &[]));
        assert_eq!(counts, [(3 * 40, 3 * 3), (3 * 16, 3), (3 * 24, 3)]);
        assert_eq!(method, Method::Classes { combinations: 1 });
    }

    /// A warp's global index, `ctaid.x * (ntid.x >> 5) + (tid.x >> 5) < n` (a warp per row):
    /// separable, counted by classes; and the same read unsigned after a subtraction that
    /// wraps below row 3000 (`row - 3000 <u 100`: rows 3000 to 3099).
    #[test]
    fn warp_per_row_guards_are_counted_by_classes() {
        let warp_row = add(
            mul(
                ctaid(Dim::X),
                IntExpr::Shr {
                    value: Box::new(ntid(Dim::X)),
                    amount: 5,
                    arithmetic: false,
                },
            ),
            IntExpr::Shr {
                value: Box::new(tid(Dim::X)),
                amount: 5,
                arithmetic: true,
            },
        );
        let guard = s32(warp_row.clone(), CompareOp::Lt, param(0));
        let blocks = [counted(0, vec![(guard, true)])];
        // 1000 CTAs of 128 threads: 4 rows each; rows 0..1234 run it.
        let (counts, method) = check(&blocks, &launch([1000, 1, 1], [128, 1, 1], &[1234]));
        assert_eq!(counts, [(1234 * 32, 1234)]);
        assert!(is_classes(method), "{method:?}");
        let unsigned = compare(CompareOp::Lt, false, 32, sub(warp_row, lit(3000)), lit(100));
        let blocks = [counted(0, vec![(unsigned, true)])];
        let (counts, method) = check(&blocks, &launch([1000, 1, 1], [128, 1, 1], &[]));
        assert_eq!(counts, [(100 * 32, 100)]);
        assert!(is_classes(method), "{method:?}");
    }

    #[test]
    fn cta_index_only() {
        // CTAs 0 and 1 of 5, each 40 threads: a full warp and a partial one.
        let blocks = [counted(
            0,
            vec![(s32(ctaid(Dim::X), CompareOp::Lt, lit(2)), true)],
        )];
        let (counts, method) = check(&blocks, &launch([5, 1, 1], [40, 1, 1], &[]));
        assert_eq!(counts, [(80, 4)]);
        assert!(is_classes(method), "{method:?}");
    }

    #[test]
    fn constant_predicates() {
        let blocks = [
            counted(0, vec![(Predicate::Constant(true), true)]),
            counted(1, vec![(Predicate::Constant(true), false)]),
            counted(2, vec![]),
        ];
        let (counts, _) = check(&blocks, &launch([3, 2, 1], [48, 1, 1], &[]));
        assert_eq!(counts, [(288, 12), (0, 0), (288, 12)]);
    }

    #[test]
    fn or_xor_and_not() {
        let low = s32(tid(Dim::X), CompareOp::Lt, lit(8));
        let high = s32(tid(Dim::X), CompareOp::Ge, lit(40));
        let first_cta = s32(ctaid(Dim::X), CompareOp::Eq, lit(0));
        let blocks = [
            // Threads 0..8 and 40..64 of each CTA of 64: 32, in both warps.
            counted(0, vec![(or(low.clone(), high.clone()), true)]),
            // The same threads in CTA 0, the others elsewhere.
            counted(1, vec![(xor(or(low, high), first_cta.clone()), true)]),
            counted(2, vec![(not(first_cta), true)]),
        ];
        let (counts, method) = check(&blocks, &launch([3, 1, 1], [64, 1, 1], &[]));
        assert_eq!(counts, [(96, 6), (32 + 32 + 32, 6), (128, 4)]);
        assert!(is_classes(method), "{method:?}");
    }

    #[test]
    fn signed_and_unsigned_readings_of_a_negative_parameter() {
        let minus_one = 0xFFFF_FFFF;
        let less = |signed| compare(CompareOp::Lt, signed, 32, global(Dim::X), param(0));
        let blocks = [
            counted(0, vec![(less(true), true)]),
            counted(1, vec![(less(false), true)]),
            counted(
                2,
                vec![(s32(global(Dim::X), CompareOp::Gt, param(0)), true)],
            ),
        ];
        let (counts, method) = check(&blocks, &launch([4, 1, 1], [64, 1, 1], &[minus_one]));
        assert_eq!(counts, [(0, 0), (256, 8), (256, 8)]);
        assert!(is_classes(method), "{method:?}");
    }

    #[test]
    fn three_dimensional_launch() {
        // Global z < 5 of 8 planes: 12 * 8 * 5 threads. A CTA of 4x4x4 has two warps of two
        // planes each; in the upper CTAs (planes 4..8) only the first warp (4, 5) counts.
        let blocks = [counted(
            0,
            vec![(s32(global(Dim::Z), CompareOp::Lt, lit(5)), true)],
        )];
        let (counts, method) = check(&blocks, &launch([3, 2, 2], [4, 4, 4], &[]));
        assert_eq!(counts, [(480, 6 * 3)]);
        assert!(is_classes(method), "{method:?}");
        let diagonal = s32(
            add(global(Dim::X), global(Dim::Y)),
            CompareOp::Le,
            global(Dim::Z),
        );
        let blocks = [counted(0, vec![(diagonal, true)])];
        let (_, method) = check(&blocks, &launch([3, 2, 2], [4, 4, 4], &[]));
        assert_eq!(method, Method::Enumerated);
    }

    #[test]
    fn partial_last_warp() {
        let blocks = [counted(
            0,
            vec![(s32(tid(Dim::X), CompareOp::Ge, lit(40)), true)],
        )];
        let (counts, _) = check(&blocks, &launch([2, 1, 1], [48, 1, 1], &[]));
        assert_eq!(counts, [(16, 2)]);
    }

    #[test]
    fn first_cta_and_first_warp_modes() {
        let blocks = [
            counted(0, vec![(s32(global(Dim::X), CompareOp::Lt, lit(20)), true)]),
            counted(1, vec![(s32(tid(Dim::X), CompareOp::Ge, lit(40)), true)]),
        ];
        let launch = launch([4, 1, 1], [64, 1, 1], &[]);
        let count = |mode| count_blocks(&blocks, &launch, mode).unwrap();
        assert_eq!(count(Mode::Cta), (vec![(20, 1), (24, 1)], Method::FirstCta));
        assert_eq!(count(Mode::Warp), (vec![(20, 1), (0, 0)], Method::FirstCta));
        assert_eq!(check(&blocks, &launch).0, [(20, 1), (96, 4)]);
    }

    #[test]
    fn a_missing_parameter_is_an_error() {
        let blocks = [counted(
            7,
            vec![
                (Predicate::Constant(false), true),
                (s32(global(Dim::X), CompareOp::Lt, param(1)), true),
            ],
        )];
        for mode in [Mode::All, Mode::Cta, Mode::Warp] {
            let error = counts_from_launch(&blocks, &launch([2, 1, 1], [32, 1, 1], &[5]), mode)
                .unwrap_err();
            assert!(
                error.contains("block 7") && error.contains("parameter 1"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_comparison_wider_than_64_bits_is_an_error() {
        let blocks = [counted(
            0,
            vec![(compare(CompareOp::Lt, true, 65, tid(Dim::X), lit(1)), true)],
        )];
        let error = counts_from_launch(&blocks, &launch([1, 1, 1], [32, 1, 1], &[]), Mode::All)
            .unwrap_err();
        assert!(error.contains("65 bits"), "{error}");
    }

    #[test]
    fn zero_dimensions_have_no_threads() {
        let blocks = [counted(0, vec![])];
        for (grid, block) in [([0, 1, 1], [32, 1, 1]), ([4, 1, 1], [32, 0, 1])] {
            for mode in [Mode::All, Mode::Cta, Mode::Warp] {
                let counts = counts_from_launch(&blocks, &launch(grid, block, &[]), mode).unwrap();
                assert_eq!(counts, [(0, 0)]);
            }
        }
    }

    #[test]
    fn wrapping_values_are_enumerated() {
        // i * 2^30 in 32 bits is (i mod 4) * 2^30: below 2^31 for i mod 4 in {0, 1}. It wraps
        // every 4 indices, 64 times in this launch: more than classes handle.
        let blocks = [counted(
            0,
            vec![(
                compare(
                    CompareOp::Lt,
                    false,
                    32,
                    mul(global(Dim::X), lit(1 << 30)),
                    param(0),
                ),
                true,
            )],
        )];
        let (counts, method) = check(&blocks, &launch([8, 1, 1], [32, 1, 1], &[1 << 31]));
        assert_eq!(counts, [(128, 8)]);
        assert_eq!(method, Method::Enumerated);
    }

    #[test]
    fn a_large_launch_is_counted_by_classes() {
        // 2^20 CTAs of 256 threads, i < n: n threads, ceil(n / 32) warps.
        let n: u64 = (1 << 27) + 100;
        let blocks = [
            counted(
                0,
                vec![(s32(global(Dim::X), CompareOp::Lt, param(0)), true)],
            ),
            counted(
                1,
                vec![(
                    compare(CompareOp::Lt, false, 64, global(Dim::X), param(0)),
                    false,
                )],
            ),
        ];
        let launch = launch([1 << 20, 1, 1], [256, 1, 1], &[n]);
        let (counts, method) = count_blocks(&blocks, &launch, Mode::All).unwrap();
        let total = 1u64 << 28;
        // Threads n.. of the warp n / 32 fail it, as do all later warps.
        assert_eq!(
            counts,
            [(n, n.div_ceil(32)), (total - n, total / 32 - n / 32)]
        );
        match method {
            Method::Classes { combinations } => assert!(combinations <= 4, "{combinations}"),
            other => panic!("counted by {other:?}"),
        }
    }

    /// `(x - 1) <u (n - 2)`: the compilers' form of `x >= 1 && x < n - 1`.
    fn range_check(x: IntExpr) -> Predicate {
        compare(
            CompareOp::Lt,
            false,
            32,
            sub(x, lit(1)),
            sub(param(0), lit(2)),
        )
    }

    #[test]
    fn an_unsigned_range_check_is_counted_by_classes() {
        // 2^20 CTAs of 256 threads. x - 1 is -1 (2^32 - 1 read unsigned) at x = 0: it wraps once.
        let blocks = [
            counted(0, vec![(range_check(global(Dim::X)), true)]),
            counted(1, vec![(range_check(global(Dim::X)), false)]),
        ];
        let total = 1u64 << 28;
        let count = |n: u64| {
            let launch = launch([1 << 20, 1, 1], [256, 1, 1], &[n]);
            let (counts, method) = count_blocks(&blocks, &launch, Mode::All).unwrap();
            match method {
                Method::Classes { combinations } => assert!(combinations <= 8, "{combinations}"),
                other => panic!("n = {n}: counted by {other:?}"),
            }
            counts
        };
        // n = 2^27 + 100: x in [1, n - 2], in warps 0 ..= (n - 2) / 32. The others: x = 0 (warp
        // 0) and x in [n - 1, 2^28), from warp (n - 1) / 32 on.
        let n: u64 = (1 << 27) + 100;
        assert_eq!(
            count(n),
            [
                (n - 2, (n - 2) / 32 + 1),
                (total - (n - 2), 1 + total / 32 - (n - 1) / 32)
            ]
        );
        // n = 1: n - 2 is 2^32 - 1 unsigned (the right side wraps too); only x = 0 fails it.
        assert_eq!(count(1), [(total - 1, total / 32), (1, 1)]);
        // n = 2: nothing passes.
        assert_eq!(count(2), [(0, 0), (total, total / 32)]);
        // n = 2^28 + 1: x = 0 fails it, x = 2^28 - 1 passes it.
        assert_eq!(count((1 << 28) + 1), [(total - 1, total / 32), (1, 1)]);
    }

    #[test]
    fn a_wrapped_side_compared_with_a_large_one() {
        // (i - 100) <u 2^32 - 60: below i = 100 the left side reads i - 100 + 2^32, below the
        // right one for i < 40 only; from i = 100 on it is small. The outcome changes at i = 40,
        // where no value wraps, only the plane (i - 100 + 2^32) - (2^32 - 60) changes sign.
        let less = compare(
            CompareOp::Lt,
            false,
            32,
            sub(global(Dim::X), lit(100)),
            lit(0xFFFF_FFC4),
        );
        let blocks = [
            counted(0, vec![(less.clone(), true)]),
            counted(1, vec![(less, false)]),
        ];
        let (counts, method) = check(&blocks, &launch([8, 1, 1], [32, 1, 1], &[]));
        assert_eq!(counts, [(40 + 156, 7), (60, 3)]);
        assert!(is_classes(method), "{method:?}");
    }

    #[test]
    fn a_two_dimensional_unsigned_range_check_is_counted_by_classes() {
        let inside = |d: Dim| range_check(global(d));
        let blocks = [
            counted(0, vec![(inside(Dim::X), true), (inside(Dim::Y), true)]),
            counted(1, vec![(and(inside(Dim::X), inside(Dim::Y)), false)]),
        ];
        // 16x16 CTAs: a warp holds two rows. n = 63: x and y in [1, 61], 61 * 61 threads; the
        // row pairs (0, 1) .. (60, 61) count, (62, 63) does not: 31 pairs times 4 CTA columns.
        for n in [63, 64, 1, 2, 0, 100] {
            let launch = launch([4, 4, 1], [16, 16, 1], &[n]);
            let (counts, method) = check(&blocks, &launch);
            assert!(is_classes(method), "n = {n}: {method:?}");
            if n == 63 {
                assert_eq!(counts[0], (61 * 61, 31 * 4));
                assert_eq!(counts[1].0, 64 * 64 - 61 * 61);
            }
        }
        // A large 2-D launch (2^10 x 2^10 CTAs of 16x16) by classes: 16382^2 threads.
        let launch = launch([1 << 10, 1 << 10, 1], [16, 16, 1], &[1 << 14]);
        let (counts, method) = count_blocks(&blocks, &launch, Mode::All).unwrap();
        assert!(is_classes(method), "{method:?}");
        let inner = (1u64 << 14) - 2;
        // Rows 1 ..= 2^14 - 2 of 2^14: row pairs 0 ..= 2^13 - 1 all count, in 2^10 CTA columns.
        assert_eq!(counts[0], (inner * inner, (1 << 13) * (1 << 10)));
        assert_eq!(counts[1].0, (1 << 28) - inner * inner);
    }

    #[test]
    fn a_signed_value_crossing_2_pow_31_is_counted_by_classes() {
        // i + 0x7FFF_FF00 < 0x7FFF_FFF0 signed: true for i < 240, false for 240 <= i < 256, true
        // again from i = 256 on, where the sum exceeds 2^31 - 1 and reads negative.
        let less = s32(
            add(global(Dim::X), lit(0x7FFF_FF00)),
            CompareOp::Lt,
            lit(0x7FFF_FFF0),
        );
        let blocks = [
            counted(0, vec![(less.clone(), true)]),
            counted(1, vec![(less, false)]),
        ];
        let (counts, method) = check(&blocks, &launch([16, 1, 1], [64, 1, 1], &[]));
        // Warp 7 (224..256) holds both kinds.
        assert_eq!(counts, [(1024 - 16, 32), (16, 1)]);
        assert!(is_classes(method), "{method:?}");
        // The wrap inside a CTA, away from where the difference changes sign: with CTAs of 48
        // (two warps, 32 + 16), i + 0x7FFF_FE00 < 0x7FFF_FE40 holds for i < 64 (CTA 0, the first
        // warp of CTA 1) and from i = 512 on (the second warp of CTA 10, CTAs 11..20).
        let less = s32(
            add(global(Dim::X), lit(0x7FFF_FE00)),
            CompareOp::Lt,
            lit(0x7FFF_FE40),
        );
        let blocks = [
            counted(0, vec![(less.clone(), true)]),
            counted(1, vec![(less, false)]),
        ];
        let (counts, method) = check(&blocks, &launch([20, 1, 1], [48, 1, 1], &[]));
        assert_eq!(counts, [(64 + 448, 2 + 1 + 1 + 18), (448, 2 + 16 + 1)]);
        assert!(is_classes(method), "{method:?}");
        // The same across CTAs of another width, and 64 bits near 2^63.
        let blocks = [counted(
            0,
            vec![(
                compare(
                    CompareOp::Ge,
                    true,
                    64,
                    add(global(Dim::X), lit((1 << 63) - 300)),
                    lit((1 << 63) - 7),
                ),
                true,
            )],
        )];
        let (counts, method) = check(&blocks, &launch([9, 1, 1], [48, 1, 1], &[]));
        assert_eq!(counts, [(300 - 293, 1)]);
        assert!(is_classes(method), "{method:?}");
    }

    #[test]
    fn enumeration_stops_at_2_pow_22_threads() {
        // x * x < 1000 in 64 bits (no wrap, but not affine): x in 0..32, the first warp.
        let blocks = [counted(
            0,
            vec![(
                compare(
                    CompareOp::Lt,
                    true,
                    64,
                    mul(global(Dim::X), global(Dim::X)),
                    lit(1000),
                ),
                true,
            )],
        )];
        let at_limit = launch([1 << 14, 1, 1], [256, 1, 1], &[]);
        assert_eq!(
            count_blocks(&blocks, &at_limit, Mode::All).unwrap(),
            (vec![(32, 1)], Method::Enumerated)
        );
        let beyond = launch([(1 << 14) + 1, 1, 1], [256, 1, 1], &[]);
        let error = counts_from_launch(&blocks, &beyond, Mode::All).unwrap_err();
        assert!(
            error.contains("too large") && error.contains("at most 4194304"),
            "{error}"
        );
    }

    #[test]
    fn a_launch_beyond_cudas_limits_is_refused() {
        // The compiler widens index arithmetic exactly only within CUDA's limits.
        let blocks = [counted(
            0,
            vec![(s32(global(Dim::X), CompareOp::Lt, param(0)), true)],
        )];
        for (grid, block) in [
            ([1, 65536, 1], [32, 1, 1]),
            ([1, 1, 65536], [32, 1, 1]),
            ([1 << 31, 1, 1], [32, 1, 1]),
            ([1, 1, 1], [1025, 1, 1]),
            ([1, 1, 1], [1, 1, 65]),
        ] {
            let error =
                counts_from_launch(&blocks, &launch(grid, block, &[10]), Mode::All).unwrap_err();
            assert!(error.contains("beyond CUDA's limits"), "{error}");
        }
        // The largest grid is counted (its first CTA: 64 threads along z, two warps).
        let largest = launch([(1 << 31) - 1, 65535, 65535], [1, 1, 64], &[10]);
        assert_eq!(
            counts_from_launch(&blocks, &largest, Mode::Cta).unwrap(),
            [(64, 2)]
        );
    }

    #[test]
    fn a_large_launch_that_wraps_is_refused() {
        let blocks = [counted(
            0,
            vec![(
                s32(mul(global(Dim::X), global(Dim::X)), CompareOp::Lt, param(0)),
                true,
            )],
        )];
        let launch = launch([1 << 20, 1, 1], [256, 1, 1], &[1000]);
        let error = counts_from_launch(&blocks, &launch, Mode::All).unwrap_err();
        assert!(error.contains("too large"), "{error}");
        // Its first CTA is still counted in mode cta.
        assert_eq!(
            counts_from_launch(&blocks, &launch, Mode::Cta).unwrap(),
            [(32, 1)]
        );
    }

    #[test]
    fn classes_cut_where_the_sign_changes() {
        // CTAs of 8: global x - 20 changes sign within CTA 2 (x = 16..24), is zero at x = 20.
        let difference = Plane { a: 8, b: 1, k: -20 };
        assert_eq!(critical_ctas(difference, 8), Some((2, 2)));
        let classes = classes_along(10, 8, &[difference], 100).unwrap();
        let class = |representative, ctas| Class {
            representative,
            ctas,
        };
        assert_eq!(classes, [class(0, 2), class(2, 1), class(3, 7)]);
        // ctaid - 2.5 never reaches 0: the sign changes between CTAs 2 and 3.
        let difference = Plane { a: 2, b: 0, k: -5 };
        assert_eq!(critical_ctas(difference, 1), Some((3, 2)));
        assert_eq!(
            classes_along(10, 1, &[difference], 100).unwrap(),
            [class(0, 3), class(3, 7)]
        );
        // Decreasing: 100 - 10c - t (t < 10) is positive for c < 10, reaches 0 in CTA 10.
        let difference = Plane {
            a: -10,
            b: -1,
            k: 100,
        };
        assert_eq!(critical_ctas(difference, 10), Some((10, 10)));
        assert_eq!(
            classes_along(20, 10, &[difference], 100).unwrap(),
            [class(0, 10), class(10, 1), class(11, 9)]
        );
        assert_eq!(classes_along(20, 10, &[difference], 2), None);
    }

    /// A small deterministic generator (SplitMix64), so that failures reproduce (also the
    /// loops' tests').
    pub(super) struct Random(pub(super) u64);

    impl Random {
        pub(super) fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// In `[0, n)`.
        pub(super) fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        fn range(&mut self, low: u32, high: u32) -> u32 {
            low + self.below(u64::from(high - low + 1)) as u32
        }

        fn chance(&mut self, percent: u64) -> bool {
            self.below(100) < percent
        }

        fn pick<T: Clone>(&mut self, items: &[T]) -> T {
            items[self.below(items.len() as u64) as usize].clone()
        }
    }

    const PARAMS: usize = 4;

    /// Generates launches and conditions; a `wild` one also uses values near 2^31, 2^32 and 2^63,
    /// large literals and shifts, mixed dimensions and products of indices (mostly counted by
    /// enumeration), a tame one small values of one dimension per comparison (mostly counted by
    /// classes). A `wraps` one is tame, but moves sides next to a wrap boundary of their reading
    /// (0 and 2^width unsigned, -2^(width-1) and 2^(width-1) signed), so that they cross it a
    /// few times in the launch (mostly counted by classes since those are handled). A `lanes` one
    /// is tame, but adds lane and warp indices (`tid & 31`, `tid >> 5`) to the sides, so that
    /// they are separable ([`CtaDependence::Separable`]) where they read a `%ctaid`.
    struct Generator {
        random: Random,
        wild: bool,
        wraps: bool,
        /// Also adds functions of the thread index that are not affine (lane and warp indices)
        /// to the sides of comparisons.
        lanes: bool,
    }

    impl Generator {
        fn value(&mut self) -> u64 {
            let small = self.random.below(64);
            let kinds = if self.wild { 7 } else { 3 };
            match self.random.below(kinds) {
                0 | 1 => small,
                // Negative in 32 bits.
                2 => (small as u32).wrapping_neg().into(),
                3 => (1 << 31) + small - 32,
                4 => (1 << 32) - 1 - small,
                // Negative in 64 bits.
                5 => small.wrapping_neg(),
                _ => (1 << 63) - small,
            }
        }

        /// A term reading launch constants only.
        fn constant(&mut self) -> IntExpr {
            let random = &mut self.random;
            match random.below(4) {
                0 => param(random.below(PARAMS as u64) as usize),
                1 => ntid(random.pick(&Dim::ALL)),
                2 => nctaid(random.pick(&Dim::ALL)),
                _ if self.wild => lit(random.pick(&[
                    0,
                    1,
                    3,
                    32,
                    1 << 30,
                    (1 << 31) - 1,
                    u64::MAX,
                    3u64.wrapping_neg(),
                ])),
                _ => lit(random.pick(&[0, 1, 2, 3, 5, 16, 32, 100])),
            }
        }

        /// An expression affine in the indices of `dim`, except, when wild, sometimes those of
        /// another dimension or a product of two indices.
        fn expr(&mut self, dim: Dim, depth: u32) -> IntExpr {
            let dim = if self.wild && self.random.chance(10) {
                self.random.pick(&Dim::ALL)
            } else {
                dim
            };
            if depth == 0 || self.random.chance(30) {
                return match self.random.below(5) {
                    0 => global(dim),
                    1 => tid(dim),
                    2 => ctaid(dim),
                    _ => self.constant(),
                };
            }
            let a = self.expr(dim, depth - 1);
            // Wild ones also take lane and warp indices (`and`, `shr`: not affine).
            let kinds = if self.wild { 8 } else { 6 };
            match self.random.below(kinds) {
                0 => add(a, self.expr(dim, depth - 1)),
                1 => sub(a, self.expr(dim, depth - 1)),
                2 if self.wild && self.random.chance(15) => mul(a, self.expr(dim, depth - 1)),
                2 => mul(a, self.constant()),
                3 => IntExpr::Neg(Box::new(a)),
                4 => {
                    let most = if self.wild { 31 } else { 3 };
                    IntExpr::Shl(Box::new(a), self.random.range(0, most))
                }
                // A lane or warp index added: separable where `a` reads one `%ctaid`.
                5 if self.wild => add(a, self.lane_or_warp()),
                6 if self.wild => IntExpr::Shr {
                    value: Box::new(a),
                    amount: self.random.range(0, 6),
                    arithmetic: self.random.chance(50),
                },
                _ => a,
            }
        }

        /// `(tid - s) & mask` or `(tid - s) >> amount` (logical or arithmetic), of some
        /// dimension's thread index: a function of the thread index that is not affine.
        fn lane_or_warp(&mut self) -> IntExpr {
            let d = self.random.pick(&Dim::ALL);
            let shifted = sub(tid(d), lit(self.random.pick(&[0, 1, 5, 40])));
            if self.random.chance(50) {
                IntExpr::And(Box::new(shifted), self.random.pick(&[31, 3, 0xFFFF_FFF8]))
            } else {
                IntExpr::Shr {
                    value: Box::new(shifted),
                    amount: self.random.range(1, 6),
                    arithmetic: self.random.chance(50),
                }
            }
        }

        fn predicate(&mut self, depth: u32) -> Predicate {
            if depth == 0 || self.random.chance(40) {
                if self.random.chance(5) {
                    return Predicate::Constant(self.random.chance(50));
                }
                let dim = self.random.pick(&Dim::ALL);
                let op = self.random.pick(&CompareOp::ALL);
                // Unsigned differences of small values often go below 0, and so wrap.
                let signed = self.random.chance(if self.wild { 50 } else { 75 });
                let width = self.random.pick(&[32, 64]);
                let depth = if self.wild { 2 } else { 1 };
                let (mut lhs, mut rhs) = (self.expr(dim, depth), self.expr(dim, depth));
                if self.lanes {
                    lhs = add(lhs, self.lane_or_warp());
                    if self.random.chance(30) {
                        rhs = add(rhs, self.lane_or_warp());
                    }
                }
                if self.wraps {
                    if self.random.chance(80) {
                        lhs = self.near_boundary(lhs, signed, width);
                    }
                    if self.random.chance(40) {
                        rhs = self.near_boundary(rhs, signed, width);
                    }
                }
                return compare(op, signed, width, lhs, rhs);
            }
            let a = self.predicate(depth - 1);
            match self.random.below(4) {
                0 => and(a, self.predicate(depth - 1)),
                1 => or(a, self.predicate(depth - 1)),
                2 => xor(a, self.predicate(depth - 1)),
                _ => not(a),
            }
        }

        /// `e` moved so that, as `e` grows from 0 past a small value, it crosses a wrap boundary
        /// of the `width`-bit reading: `e - s` (crosses 0) or `e + 2^width - s` unsigned,
        /// `e + 2^(width-1) - s` or `-2^(width-1) + s - e` signed.
        fn near_boundary(&mut self, e: IntExpr, signed: bool, width: u32) -> IntExpr {
            let s = if self.random.chance(50) {
                self.random.below(64)
            } else {
                self.random.below(4096)
            };
            let mask = if width == 64 {
                u64::MAX
            } else {
                (1 << width) - 1
            };
            let half = 1u64 << (width - 1);
            match (signed, self.random.chance(50)) {
                (false, true) => sub(e, lit(s)),
                (false, false) => add(e, lit(s.wrapping_neg() & mask)),
                (true, true) => add(e, lit(half - s)),
                (true, false) => sub(lit(half + s), e),
            }
        }

        fn launch(&mut self) -> LaunchValues {
            let random = &mut self.random;
            let grid = if random.chance(25) {
                // Long in x, so that classes hold many CTAs.
                [random.range(1, 200), 1, random.range(1, 2)]
            } else {
                [random.range(1, 5), random.range(1, 4), random.range(1, 3)]
            };
            let block = [random.range(1, 40), random.range(1, 5), random.range(1, 3)];
            let params: Vec<u64> = (0..PARAMS).map(|_| self.value()).collect();
            launch(grid, block, &params)
        }

        fn blocks(&mut self) -> Vec<LaunchCounted> {
            let blocks = self.random.range(1, 4) as usize;
            (0..blocks)
                .map(|index| {
                    let conditions = self.random.range(1, 3);
                    let path = (0..conditions)
                        .map(|_| (self.predicate(2), self.random.chance(60)))
                        .collect();
                    counted(index, path)
                })
                .collect()
        }
    }

    /// Whether a comparison of `block` that reads `%ctaid` has a side whose exact value leaves the
    /// range of its reading somewhere along its dimension in `launch` (asked of every CTA and
    /// thread index of that dimension, the others 0, independently of [`analyse`]).
    fn wraps_in_launch(block: &LaunchCounted, launch: &LaunchValues) -> bool {
        block.compares().into_iter().any(|compare| {
            let mut ctaids = Vec::new();
            compare.lhs.ctaid_dims(&mut ctaids);
            compare.rhs.ctaid_dims(&mut ctaids);
            let mut dims = Vec::new();
            compare.lhs.thread_dims(&mut dims);
            compare.rhs.thread_dims(&mut dims);
            let ([_, ..], [dim]) = (&ctaids[..], &dims[..]) else {
                return false;
            };
            let w = compare.width;
            let (low, high) = if compare.signed {
                (-(1i128 << (w - 1)), (1i128 << (w - 1)) - 1)
            } else {
                (0, (1i128 << w) - 1)
            };
            (0..launch.grid[dim.index()]).any(|c| {
                (0..launch.block[dim.index()]).any(|t| {
                    let mut point = ThreadPoint {
                        ctaid: [0; 3],
                        tid: [0; 3],
                    };
                    point.ctaid[dim.index()] = c;
                    point.tid[dim.index()] = t;
                    [&compare.lhs, &compare.rhs].into_iter().any(|side| {
                        let exact = side.exact(w, compare.signed, &point, launch).unwrap();
                        !exact.is_some_and(|v| (low..=high).contains(&v))
                    })
                })
            })
        })
    }

    #[test]
    fn random_launches_agree_with_enumeration() {
        let mut generator = Generator {
            random: Random(0x00C0_FFEE),
            wild: false,
            wraps: false,
            lanes: false,
        };
        let (mut by_classes, mut enumerated) = (0, 0);
        // Cases with wrap boundaries nearby: counted by classes, of which with a comparison that
        // reads `%ctaid` and whose values wrap in the launch (the new part of the method).
        let (mut near, mut near_by_classes, mut wrapping_by_classes) = (0, 0, 0);
        // Cases with a comparison affine in one `%ctaid` plus a function of `%tid` that is not
        // affine, counted by classes.
        let mut separable_by_classes = 0;
        for case in 0..600 {
            let flavour = generator.random.below(4);
            generator.wild = flavour == 0;
            generator.wraps = flavour == 1;
            generator.lanes = flavour == 3;
            let launch = generator.launch();
            let blocks = generator.blocks();
            // `check` compares every mode with `enumerate`.
            let (_, method) = check(&blocks, &launch);
            match method {
                Method::Classes { .. } => by_classes += 1,
                Method::Enumerated => enumerated += 1,
                other => panic!("case {case}: {other:?}"),
            }
            let separable = blocks.iter().any(|b| {
                b.compares()
                    .iter()
                    .any(|c| matches!(c.cta_dependence(), CtaDependence::Separable(_)))
            });
            if separable && is_classes(method) {
                separable_by_classes += 1;
            }
            if generator.wraps {
                near += 1;
                if is_classes(method) {
                    near_by_classes += 1;
                    if blocks.iter().any(|b| wraps_in_launch(b, &launch)) {
                        wrapping_by_classes += 1;
                    }
                }
            }
        }
        // Both methods were exercised, and the class method on values that wrap.
        eprintln!(
            "{by_classes} by classes, {enumerated} enumerated; near a wrap boundary: {near}, \
             {near_by_classes} by classes, {wrapping_by_classes} of them wrapping; \
             {separable_by_classes} separable by classes"
        );
        assert!(
            by_classes >= 50
                && enumerated >= 50
                && wrapping_by_classes >= 40
                && separable_by_classes >= 100,
            "{by_classes} {enumerated} {wrapping_by_classes} {separable_by_classes}"
        );
    }
}
