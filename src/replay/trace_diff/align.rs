//! Aligning two sequences of calls by tool id.
//!
//! The common prefix and suffix are matched first (linear; for two runs of
//! the same agent this is usually everything). The middle is aligned with
//! Myers' shortest edit script (a longest common subsequence of tool ids:
//! the fewest calls left unmatched), within a budget of [`MAX_EDITS`]
//! unmatched calls and [`MAX_STEPS`] comparison steps. Past the budget the
//! middle is aligned greedily instead: the i-th call of one side with the
//! i-th of the other when their tools are equal, both unmatched otherwise
//! ([`Alignment::greedy`] says so). Both are deterministic: among equally
//! short edit scripts Myers' algorithm as written here always picks the same
//! one.

/// Unmatched calls the exact alignment of the middle may have.
pub(crate) const MAX_EDITS: usize = 2000;
/// Comparison steps the exact alignment may take.
const MAX_STEPS: u64 = 100_000_000;

/// One step of an alignment (indexes into the two sequences).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Baseline call `.0` aligned with candidate call `.1` (same tool).
    Pair(usize, usize),
    /// A baseline call with no counterpart.
    Baseline(usize),
    /// A candidate call with no counterpart.
    Candidate(usize),
}

/// An alignment, in order.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Alignment {
    /// The steps, in order of both sequences.
    pub steps: Vec<Step>,
    /// Whether the middle was aligned greedily (over budget).
    pub greedy: bool,
}

/// Aligns `a` (baseline) with `b` (candidate); see the module documentation.
pub(crate) fn align<T: Eq>(a: &[T], b: &[T]) -> Alignment {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..].iter().rev().zip(b[prefix..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (mid_a, mid_b) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut steps: Vec<Step> = (0..prefix).map(|i| Step::Pair(i, i)).collect();
    let greedy = match myers(mid_a, mid_b) {
        Some(middle) => {
            steps.extend(middle.into_iter().map(|step| shift(step, prefix)));
            false
        }
        None => {
            steps.extend(greedy_steps(mid_a, mid_b).map(|step| shift(step, prefix)));
            true
        }
    };
    let (tail_a, tail_b) = (a.len() - suffix, b.len() - suffix);
    steps.extend((0..suffix).map(|i| Step::Pair(tail_a + i, tail_b + i)));
    Alignment { steps, greedy }
}

fn shift(step: Step, by: usize) -> Step {
    match step {
        Step::Pair(i, j) => Step::Pair(i + by, j + by),
        Step::Baseline(i) => Step::Baseline(i + by),
        Step::Candidate(j) => Step::Candidate(j + by),
    }
}

/// Position by position: equal tools pair, others are left unmatched.
fn greedy_steps<'a, T: Eq>(a: &'a [T], b: &'a [T]) -> impl Iterator<Item = Step> + 'a {
    (0..a.len().max(b.len())).flat_map(move |i| match (a.get(i), b.get(i)) {
        (Some(x), Some(y)) if x == y => vec![Step::Pair(i, i)],
        (x, y) => {
            let mut steps = Vec::with_capacity(2);
            if x.is_some() {
                steps.push(Step::Baseline(i));
            }
            if y.is_some() {
                steps.push(Step::Candidate(i));
            }
            steps
        }
    })
}

/// Myers' O((N+M)·D) shortest edit script, or `None` over budget.
fn myers<T: Eq>(a: &[T], b: &[T]) -> Option<Vec<Step>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = ((n + m) as usize).min(MAX_EDITS) as isize;
    let offset = max + 1;
    let mut v = vec![0isize; 2 * max as usize + 3];
    // trace[d]: v[k] for k in -d-1..=d+1, before round d.
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let mut steps = 0u64;
    for d in 0..=max {
        trace.push(v[(offset - d - 1) as usize..=(offset + d + 1) as usize].to_vec());
        let mut k = -d;
        while k <= d {
            let at = |k: isize| (offset + k) as usize;
            let mut x =
                if k == -d || (k != d && v[at(k - 1)] < v[at(k + 1)]) { v[at(k + 1)] } else { v[at(k - 1)] + 1 };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
                steps += 1;
            }
            steps += 1;
            v[at(k)] = x;
            if x >= n && y >= m {
                return Some(backtrack(&trace, n, m));
            }
            k += 2;
        }
        if steps > MAX_STEPS {
            return None;
        }
    }
    None
}

fn backtrack(trace: &[Vec<isize>], n: isize, m: isize) -> Vec<Step> {
    let mut steps = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (0..trace.len() as isize).rev() {
        let v = &trace[d as usize];
        let at = |k: isize| v[(k + d + 1) as usize];
        let k = x - y;
        let prev_k = if k == -d || (k != d && at(k - 1) < at(k + 1)) { k + 1 } else { k - 1 };
        let prev_x = if d == 0 { 0 } else { at(prev_k) };
        let prev_y = if d == 0 { 0 } else { prev_x - prev_k };
        while x > prev_x && y > prev_y {
            steps.push(Step::Pair(x as usize - 1, y as usize - 1));
            x -= 1;
            y -= 1;
        }
        if d > 0 {
            if x == prev_x {
                steps.push(Step::Candidate(y as usize - 1));
            } else {
                steps.push(Step::Baseline(x as usize - 1));
            }
        }
        x = prev_x;
        y = prev_y;
    }
    steps.reverse();
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(a: &str, b: &str) -> String {
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        align(&a, &b)
            .steps
            .iter()
            .map(|step| match *step {
                Step::Pair(i, _) => a[i].to_string(),
                Step::Baseline(i) => format!("-{}", a[i]),
                Step::Candidate(j) => format!("+{}", b[j]),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn aligns_on_a_longest_common_subsequence() {
        assert_eq!(render("abc", "abc"), "a b c");
        assert_eq!(render("abcd", "abxd"), "a b -c +x d");
        assert_eq!(render("abc", "axbc"), "a +x b c");
        assert_eq!(render("abc", "ac"), "a -b c");
        assert_eq!(render("ab", "ba"), "-a b +a");
        assert_eq!(render("", "ab"), "+a +b");
        assert_eq!(render("ab", ""), "-a -b");
        assert_eq!(render("abcabba", "cbabac"), "-a -b c +b a b -b a +c");
    }

    #[test]
    fn falls_back_to_greedy_past_the_budget() {
        let a: Vec<u32> = (0..3 * MAX_EDITS as u32).collect();
        let b: Vec<u32> = (0..3 * MAX_EDITS as u32).map(|i| if i % 2 == 0 { i } else { u32::MAX }).collect();
        let alignment = align(&a, &b);
        assert!(alignment.greedy);
        let pairs = alignment.steps.iter().filter(|s| matches!(s, Step::Pair(..))).count();
        assert_eq!(pairs, 3 * MAX_EDITS / 2);
        assert_eq!(alignment.steps.len(), pairs + 2 * (3 * MAX_EDITS - pairs));
    }
}
