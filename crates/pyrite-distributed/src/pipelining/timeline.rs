//! What each stage did during a schedule step, and when: the busy and idle time of a
//! pipeline.

use std::fmt;
use std::time::Duration;

/// A forward or a backward of one micro-batch on one stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActionKind {
    /// The stage's forward (with the loss on the last stage).
    Forward,
    /// The stage's backward.
    Backward,
}

/// One computation of a stage: which micro-batch, forward or backward, and when it started
/// and ended, measured from the start of the step. Waiting for a neighbour is not part of
/// it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event {
    pub microbatch: usize,
    pub kind: ActionKind,
    pub start: Duration,
    pub end: Duration,
}

/// A stage's events during one step, and the step's length (`span`) as that stage saw it.
#[derive(Clone, Debug, Default)]
pub struct StageTimeline {
    pub stage_index: usize,
    /// From the start of the step to its end (when every stage of this process was done).
    pub span: Duration,
    /// In the order they ran.
    pub events: Vec<Event>,
}

impl StageTimeline {
    /// The time spent computing.
    pub fn busy(&self) -> Duration {
        self.events.iter().map(|e| e.end.saturating_sub(e.start)).sum()
    }

    /// The time spent waiting: the span less the busy time.
    pub fn idle(&self) -> Duration {
        self.span.saturating_sub(self.busy())
    }

    /// The idle share of the span (0 when the span is empty).
    pub fn bubble_fraction(&self) -> f64 {
        fraction(self.idle(), self.span)
    }
}

fn fraction(part: Duration, whole: Duration) -> f64 {
    if whole.is_zero() {
        0.0
    } else {
        part.as_secs_f64() / whole.as_secs_f64()
    }
}

/// The last step of a schedule: one [`StageTimeline`] per stage this process ran (all of them
/// on threads; its own on a rank of a process group, with times from that rank's clock).
///
/// For GPipe with `p` stages of equal cost and `m` micro-batches, theory says each stage is
/// idle `(p - 1) / (m + p - 1)` of the time; [`Timeline::bubble_fraction`] measures it.
/// Printed (`{}`), it draws one row per stage, `F`/`B` for forward and backward (the
/// micro-batch's digit when there is room) and `.` for idle.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    pub stages: Vec<StageTimeline>,
}

impl Timeline {
    /// The idle share of the stages' time: total idle over total span.
    pub fn bubble_fraction(&self) -> f64 {
        let idle = self.stages.iter().map(StageTimeline::idle).sum();
        let span = self.stages.iter().map(|s| s.span).sum();
        fraction(idle, span)
    }

    /// The longest span of a stage: the step's wall-clock time.
    pub fn span(&self) -> Duration {
        self.stages.iter().map(|s| s.span).max().unwrap_or_default()
    }
}

impl fmt::Display for Timeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const WIDTH: usize = 72;
        let span = self.span().as_secs_f64();
        for s in &self.stages {
            let mut row = vec!['.'; WIDTH];
            for e in &s.events {
                // adjacent events share a column boundary, so no gap shows between them
                let col = |t: Duration| ((t.as_secs_f64() / span.max(1e-12)) * WIDTH as f64).round() as usize;
                let a = col(e.start).min(WIDTH - 1);
                let b = col(e.end).clamp(a + 1, WIDTH);
                let letter = match e.kind {
                    ActionKind::Forward => 'F',
                    ActionKind::Backward => 'B',
                };
                row[a..b].fill(letter);
                if b - a >= 2 && e.microbatch < 10 {
                    row[a + 1] = char::from_digit(e.microbatch as u32, 10).unwrap_or(letter);
                }
            }
            writeln!(
                f,
                "stage {:>2} |{}| idle {:>5.1}%",
                s.stage_index,
                row.into_iter().collect::<String>(),
                100.0 * s.bubble_fraction()
            )?;
        }
        Ok(())
    }
}
