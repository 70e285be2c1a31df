//! One target's verdict: the figure, the bound, met or not, and the gap in
//! words.

use serde::{Deserialize, Serialize};

/// Whether a figure must stay below or above its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The figure must be at most the target.
    AtMost,
    /// The figure must be at least the target.
    AtLeast,
    /// A yes/no check (1 = yes); the target is 1.
    Holds,
}

/// One target's verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetResult {
    /// `P1`, `P3a`, …
    pub id: String,
    /// What is measured.
    pub what: String,
    /// The figure (`None`: not measured).
    pub value: Option<f64>,
    /// Its unit (`×`, `ms`, `MiB`, `%`, ``).
    pub unit: String,
    /// The target's bound.
    pub target: f64,
    /// Which side of the bound is good.
    pub direction: Direction,
    /// Met, not met, or not measured.
    pub met: Option<bool>,
    /// The gap, in words.
    pub gap: String,
}

impl TargetResult {
    pub(crate) fn new(
        id: &str,
        what: &str,
        value: Option<f64>,
        unit: &str,
        direction: Direction,
        target: f64,
    ) -> Self {
        let met = value.map(|v| match direction {
            Direction::AtMost => v <= target,
            Direction::AtLeast => v >= target,
            Direction::Holds => v >= 1.0,
        });
        TargetResult {
            id: id.to_owned(),
            what: what.to_owned(),
            value,
            unit: unit.to_owned(),
            target,
            direction,
            met,
            gap: gap_text(value, unit, direction, target),
        }
    }

    /// The bound in words: `≤ 1.5×`, `≥ 80 %`, `yes`.
    pub fn target_text(&self) -> String {
        match self.direction {
            Direction::AtMost => format!("≤ {}", with_unit(self.target, &self.unit)),
            Direction::AtLeast => format!("≥ {}", with_unit(self.target, &self.unit)),
            Direction::Holds => "yes".to_owned(),
        }
    }

    /// The figure in words.
    pub fn value_text(&self) -> String {
        match (self.value, self.direction) {
            (None, _) => "not measured".to_owned(),
            (Some(v), Direction::Holds) => if v >= 1.0 { "yes" } else { "no" }.to_owned(),
            (Some(v), _) => with_unit(v, &self.unit),
        }
    }
}

/// A number with its unit, rounded for reading.
pub fn with_unit(value: f64, unit: &str) -> String {
    let integral = unit.is_empty() && value.fract() == 0.0 && value.abs() < 1e15;
    let number = if integral || value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    };
    match unit {
        "" => number,
        "×" => format!("{number}×"),
        unit => format!("{number} {unit}"),
    }
}

/// The gap between a figure and its target, in words.
fn gap_text(value: Option<f64>, unit: &str, direction: Direction, target: f64) -> String {
    let Some(value) = value else {
        return "not measured".to_owned();
    };
    let relative = |over: f64| {
        if target.abs() > f64::EPSILON {
            format!(" ({:.0} %)", over / target.abs() * 100.0)
        } else {
            String::new()
        }
    };
    match direction {
        Direction::Holds if value >= 1.0 => "met".to_owned(),
        Direction::Holds => "not met".to_owned(),
        Direction::AtMost | Direction::AtLeast if value == target => "met".to_owned(),
        Direction::AtMost if value <= target => {
            format!("met, {} under", with_unit(target - value, unit))
        }
        Direction::AtMost => format!(
            "missed by {}{}",
            with_unit(value - target, unit),
            relative(value - target)
        ),
        Direction::AtLeast if value >= target => {
            format!("met, {} over", with_unit(value - target, unit))
        }
        Direction::AtLeast => format!(
            "missed by {}{}",
            with_unit(target - value, unit),
            relative(target - value)
        ),
    }
}
