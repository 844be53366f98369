//! `<stem>.stacks.folded`: the capture's CPU stacks as folded stacks, for
//! flame graphs (`<P>_TRACE_STACKS`).

use std::io::{self, Write};

use trace_core::{CpuStacks, Event, Finish, Sink};

/// Writes the capture's CPU stacks as folded stacks
/// ([`CpuStacks::write_folded`]); the file is empty when none were taken.
#[derive(Debug, Default)]
pub(crate) struct FoldedStacksSink;

impl Sink for FoldedStacksSink {
    fn name(&self) -> &'static str {
        "stacks"
    }

    fn suffix(&self) -> &'static str {
        "stacks.folded"
    }

    fn event(&mut self, _event: &Event<'_>, _out: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }

    fn stacks(&mut self, stacks: &CpuStacks, out: &mut dyn Write) -> io::Result<()> {
        stacks.write_folded(out)
    }

    fn finish(&mut self, _end: &Finish<'_>, _out: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }
}
