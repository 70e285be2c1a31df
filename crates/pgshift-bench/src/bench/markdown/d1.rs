//! D1's section: how long desired state's `pull` and `diff` took on the generated
//! schema, every round, with the child process's peak RSS.

use std::fmt::Write as _;

use super::{count, secs, section};
use crate::bench::results::D1;

/// The section, when D1 ran.
pub(super) fn render(out: &mut String, d1: Option<&D1>) {
    let Some(d1) = d1 else {
        return;
    };
    section(
        out,
        &format!(
            "D1: desired state, `pull` and `diff` on {} tables",
            count(u64::from(d1.tables))
        ),
    );
    let _ = writeln!(
        out,
        "A generated schema `{}` of {} tables, each with {}: a script of {} statements, run in a database of the benchmark's cluster. Each round pulls it into a new folder as `pgshift pull` does (the dump read, then the files proven on a throwaway cluster), then edits the folder ({}) and diffs it against the database as `pgshift diff` does (both schemas built and compared on a throwaway cluster and the changes proven there, then planned against the database). Each ran in a child process; its peak RSS is that process's `VmHWM` (`pg_dump`, `psql` and the throwaway cluster are other processes). No target: targets.md sets none for D1.\n",
        d1.schema,
        count(u64::from(d1.tables)),
        d1.shape,
        count(d1.generated_statements as u64),
        d1.edit
    );
    out.push_str("| round | pull | read | proof | files written | their statements | fidelity | pull peak RSS | diff | compare | plan | changes | diff peak RSS |\n|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|\n");
    for (i, r) in d1.rounds.iter().enumerate() {
        let (p, d) = (&r.pull, &r.diff);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            i + 1,
            ms(p.total_ms),
            ms(p.read_ms),
            ms(p.prove_ms),
            count(p.files as u64),
            count(p.statements as u64),
            p.fidelity,
            mib(p.child.vm_hwm_kib),
            ms(d.total_ms),
            ms(d.compare_ms),
            ms(d.plan_ms),
            d.changes,
            mib(d.child.vm_hwm_kib)
        );
    }
    let rounds = d1.rounds.len();
    let range = |figure: fn(&crate::bench::results::D1Round) -> u64| {
        let values = d1.rounds.iter().map(figure);
        let (low, high) = (values.clone().min(), values.max());
        match (low, high) {
            (Some(low), Some(high)) if rounds > 1 => {
                format!(" (range {}–{})", ms(low), ms(high))
            }
            _ => String::new(),
        }
    };
    let _ = writeln!(
        out,
        "\n{}: `pull` **{}**{}, `diff` **{}**{}.\n",
        if rounds == 1 {
            "One round".to_owned()
        } else {
            format!("Median of {rounds} rounds")
        },
        ms(d1.pull_median_ms),
        range(|r| r.pull.total_ms),
        ms(d1.diff_median_ms),
        range(|r| r.diff.total_ms)
    );
}

fn ms(ms: u64) -> String {
    secs(ms as f64)
}

fn mib(kib: u64) -> String {
    format!("{:.0} MiB", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::results::sample::sample;

    #[test]
    fn d1_states_every_round_and_the_medians_with_no_target() {
        let results = sample();
        let mut out = String::new();
        render(&mut out, results.d1.as_ref());
        assert!(
            out.contains("### D1: desired state, `pull` and `diff` on 1,000 tables"),
            "{out}"
        );
        assert!(out.contains("a script of 5,001 statements"), "{out}");
        assert!(
            out.contains("| 1 | 14.20 s | 2.40 s | 11.70 s | 1,002 | 5,004 | exact | 116 MiB | 26.70 s | 25.90 s | 800 ms | 10 | 202 MiB |"),
            "{out}"
        );
        assert!(
            out.contains(
                "Median of 3 rounds: `pull` **14.20 s** (range 13.10 s–15.00 s), `diff` **26.70 s** (range 26.00 s–27.50 s)."
            ),
            "{out}"
        );
        assert!(out.contains("No target"), "{out}");
        let mut none = String::new();
        render(&mut none, None);
        assert!(none.is_empty());
    }

    #[test]
    fn one_round_has_no_range() {
        let mut results = sample();
        let d1 = results.d1.as_mut().expect("the sample has D1");
        d1.rounds.truncate(1);
        let mut out = String::new();
        render(&mut out, results.d1.as_ref());
        assert!(
            out.contains("One round: `pull` **14.20 s**, `diff` **26.70 s**."),
            "{out}"
        );
    }
}
