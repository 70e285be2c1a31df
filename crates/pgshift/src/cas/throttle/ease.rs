//! How fast the throttle lets the work go again: at once tighter, step by step looser.
//!
//! [`super::decide::decide`] reads each tick's signals as if nothing came before. Once
//! the work is paused, the signals soon read as if no work ran at all, and the next
//! tick opened it at full speed — every worker, no pause — so that the writers were
//! hit again at once, and the run went paused, open, paused (seen in the benchmark's
//! strict run: four pauses of half a second in six seconds of the copy). Here a
//! decision may tighten the pace at once but loosen it only a step a tick: out of a
//! pause the work resumes with one worker and the longest pause before each chunk;
//! then each tick halves the pause and adds a worker, until the pace is open.
//!
//! Pure, like `decide`; the pace it gives is never looser than `decide`'s (the signals
//! and the user's limits bound it; easing only holds the work back longer).

use super::decide::{Pace, MAX_PAUSE_MS};

/// A pause shorter than this is no pause: the next step opens it.
pub const EASE_FLOOR_MS: u64 = 50;

/// The pace to go at, from the one in force (`previous`) and the one the signals allow
/// (`target`, with its reason); `workers`: how many the work has.
pub fn ease(previous: Pace, target: (Pace, String), workers: usize) -> (Pace, String) {
    let workers = workers.max(1);
    let (allowed_pause, allowed_workers) = match target.0 {
        Pace::Paused => return target,
        Pace::Open => (0, workers),
        Pace::Slow { pause_ms, workers } => (pause_ms, workers),
    };
    let (pause_ms, step_workers) = match previous {
        Pace::Open => return target,
        Pace::Paused => (MAX_PAUSE_MS as u64, 1),
        Pace::Slow { pause_ms, workers } => {
            let halved = pause_ms / 2;
            (
                if halved < EASE_FLOOR_MS { 0 } else { halved },
                workers.saturating_add(1),
            )
        }
    };
    let (pause_ms, step_workers) = (
        pause_ms.max(allowed_pause),
        step_workers.min(allowed_workers).clamp(1, workers),
    );
    if (pause_ms, step_workers) == (allowed_pause, allowed_workers) {
        // The step reaches what the signals allow (open, when they allow that).
        return target;
    }
    let pace = Pace::Slow {
        pause_ms,
        workers: step_workers,
    };
    let from = match previous {
        Pace::Paused => "a pause",
        _ => "a slowdown",
    };
    let reason = if target.1.is_empty() {
        format!("easing back after {from}: every signal is under half its limit")
    } else {
        format!("easing back after {from}: {}", target.1)
    };
    (pace, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> (Pace, String) {
        (Pace::Open, String::new())
    }

    fn slow(pause_ms: u64, workers: usize) -> Pace {
        Pace::Slow { pause_ms, workers }
    }

    #[test]
    fn out_of_a_pause_the_work_resumes_with_one_worker_and_opens_step_by_step() {
        let mut pace = Pace::Paused;
        let mut steps = Vec::new();
        for _ in 0..10 {
            let (next, why) = ease(pace, open(), 2);
            if next != Pace::Open {
                assert!(why.starts_with("easing back after"), "{why}");
            }
            steps.push(next);
            pace = next;
            if pace == Pace::Open {
                break;
            }
        }
        assert_eq!(
            steps,
            vec![
                slow(1_000, 1),
                slow(500, 2),
                slow(250, 2),
                slow(125, 2),
                slow(62, 2),
                Pace::Open
            ]
        );
    }

    #[test]
    fn tightening_is_at_once() {
        let paused = (Pace::Paused, "over".to_owned());
        assert_eq!(ease(Pace::Open, paused.clone(), 4), paused);
        assert_eq!(ease(slow(0, 4), paused.clone(), 4), paused);
        let tight = (slow(800, 1), "near".to_owned());
        assert_eq!(ease(Pace::Open, tight.clone(), 4), tight);
        assert_eq!(ease(slow(100, 3), tight.clone(), 4), tight);
    }

    #[test]
    fn easing_is_never_looser_than_the_signals_allow() {
        // The signals allow 2 workers with 600 ms: a step from 1 000 ms and 1 worker
        // goes to 600 ms (not 500) and 2 workers (not more).
        let allowed = (slow(600, 2), "writer slowdown".to_owned());
        let (pace, why) = ease(slow(1_000, 1), allowed, 4);
        assert_eq!(pace, slow(600, 2));
        assert!(why.contains("writer slowdown"), "{why}");
        // Out of a pause, to a pace the signals allow: that pace where it is tighter.
        let (pace, _) = ease(Pace::Paused, (slow(1_000, 1), "x".to_owned()), 4);
        assert_eq!(pace, slow(1_000, 1));
        // A single worker's work can only pause.
        assert_eq!(ease(Pace::Paused, open(), 1).0, slow(1_000, 1));
        assert_eq!(ease(slow(40, 1), open(), 1).0, Pace::Open);
    }

    #[test]
    fn an_open_pace_follows_the_signals() {
        assert_eq!(ease(Pace::Open, open(), 4), open());
        let target = (slow(200, 3), "lag".to_owned());
        assert_eq!(ease(Pace::Open, target.clone(), 4), target);
    }
}
