//! The order in which a stage runs its forwards and backwards under each schedule. Every
//! stage follows its own list and waits for its neighbours only through the transport, so
//! the list is all a schedule is.

use super::timeline::ActionKind;

/// Which schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScheduleKind {
    GPipe,
    OneFOneB,
}

impl ScheduleKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ScheduleKind::GPipe => "ScheduleGPipe",
            ScheduleKind::OneFOneB => "Schedule1F1B",
        }
    }
}

/// One step of a stage's list: a forward or backward of a micro-batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Action {
    pub kind: ActionKind,
    pub microbatch: usize,
}

fn f(microbatch: usize) -> Action {
    Action { kind: ActionKind::Forward, microbatch }
}

fn b(microbatch: usize) -> Action {
    Action { kind: ActionKind::Backward, microbatch }
}

/// Stage `stage`'s actions, of `num_stages`, for `m` micro-batches.
///
/// - GPipe (fill-drain): every forward, then every backward, both in micro-batch order.
/// - 1F1B, as PyTorch's `Schedule1F1B`: `min(m, num_stages - stage)` forwards to fill the
///   pipeline, then one backward and one forward alternately until every forward has run,
///   then the remaining backwards. Stage `s` holds at most `num_stages - s` micro-batches'
///   activations, where GPipe holds `m`.
pub(crate) fn stage_actions(kind: ScheduleKind, stage: usize, num_stages: usize, m: usize) -> Vec<Action> {
    let mut out = Vec::with_capacity(2 * m);
    match kind {
        ScheduleKind::GPipe => {
            out.extend((0..m).map(f));
            out.extend((0..m).map(b));
        }
        ScheduleKind::OneFOneB => {
            let warmup = m.min(num_stages - stage);
            out.extend((0..warmup).map(f));
            let (mut next_f, mut next_b) = (warmup, 0);
            while next_f < m {
                out.push(b(next_b));
                out.push(f(next_f));
                next_b += 1;
                next_f += 1;
            }
            out.extend((next_b..m).map(b));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(a: &[Action]) -> String {
        a.iter()
            .map(|a| format!("{}{}", if a.kind == ActionKind::Forward { 'F' } else { 'B' }, a.microbatch))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn gpipe_fills_then_drains() {
        assert_eq!(show(&stage_actions(ScheduleKind::GPipe, 1, 2, 3)), "F0 F1 F2 B0 B1 B2");
    }

    #[test]
    fn one_f_one_b_as_pytorch() {
        let s = |stage| show(&stage_actions(ScheduleKind::OneFOneB, stage, 3, 5));
        assert_eq!(s(0), "F0 F1 F2 B0 F3 B1 F4 B2 B3 B4");
        assert_eq!(s(1), "F0 F1 B0 F2 B1 F3 B2 F4 B3 B4");
        assert_eq!(s(2), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4");
        // fewer micro-batches than the warm-up
        assert_eq!(show(&stage_actions(ScheduleKind::OneFOneB, 0, 3, 2)), "F0 F1 B0 B1");
    }

    /// Every stage runs each forward and backward once, forward before backward.
    #[test]
    fn every_action_once() {
        for kind in [ScheduleKind::GPipe, ScheduleKind::OneFOneB] {
            for p in 1..5 {
                for m in 1..7 {
                    for s in 0..p {
                        let a = stage_actions(kind, s, p, m);
                        assert_eq!(a.len(), 2 * m);
                        for i in 0..m {
                            let fi = a.iter().position(|&x| x == f(i)).unwrap();
                            let bi = a.iter().position(|&x| x == b(i)).unwrap();
                            assert!(fi < bi);
                        }
                    }
                }
            }
        }
    }
}
