//! The input check of a preflight (`policy.repair`): report pairing problems the input
//! already has, reject them, or fix them (archiving the input as received first).

use crate::config::Repair;
use crate::model::{Problem, Repaired, repair, validate};

use super::session::{Recognised, Session};
use super::trail::Trail;
use super::{CompactError, CompactManager};

impl CompactManager {
    /// Checks `input` under `mode`: the problems found, and what was repaired.
    pub(super) async fn check_input(
        &self,
        session: &mut Session,
        trail: &mut Trail,
        input: &mut Recognised,
        mode: Repair,
    ) -> Result<(Vec<Problem>, Vec<Repaired>), CompactError> {
        let problems = validate(&input.messages);
        if problems.is_empty() {
            return Ok((problems, Vec::new()));
        }
        match mode {
            Repair::Report => Ok((problems, Vec::new())),
            Repair::Strict => {
                let err = CompactError::InvalidInput(join(&problems));
                trail.failed(&err);
                Err(err)
            }
            Repair::Fix => {
                let original = std::mem::take(&mut input.messages);
                let (fixed, done) = repair(original.clone());
                input.messages = fixed;
                session.locate(input);
                let step = self.next_step(session).await;
                self.archive_compaction(session, trail, step, &original, None)
                    .await;
                Ok((problems, done))
            }
        }
    }
}

fn join(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
