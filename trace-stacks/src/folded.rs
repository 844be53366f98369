//! Folded stacks (Brendan Gregg's format, read by inferno, speedscope and
//! flamegraph.pl): one line per distinct stack, frames root first separated by
//! `;`, a space, the count.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::model::{Sample, Stacks};

/// The root frame of a sample whose stack could not be unwound to the
/// thread's start, so that partial stacks do not pass for whole ones.
pub const NOT_UNWOUND_FRAME: &str = "[not unwound]";

impl Stacks {
    /// Writes the samples as folded stacks, lines sorted, each line's frames
    /// root first: `span:<name>` for each name `span_prefix` gives for the
    /// sample (called with its index in [`Stacks::samples`] and the sample;
    /// outermost span first), then [`NOT_UNWOUND_FRAME`] if the
    /// stack is partial, then the functions from the thread's start to the
    /// leaf, inlined ones included. `;` and line breaks inside a name become
    /// `_`, so every line parses.
    ///
    /// ```
    /// use trace_stacks::{Frame, Sample, Stacks};
    /// let frame = |name: &str| Frame {
    ///     function: name.to_string(), file: None, line: None, mapping: None, rel_pc: 0, inlined: false,
    /// };
    /// let sample = Sample { tid: 7, time_ns: 1, frames: vec![0, 1], unwound: true };
    /// let stacks = Stacks {
    ///     frames: vec![frame("app::lex"), frame("main")],
    ///     samples: vec![sample.clone(), sample],
    ///     ..Stacks::default()
    /// };
    /// let mut out = Vec::new();
    /// stacks.write_folded(&mut out, |_, _| vec!["build".to_string()]).unwrap();
    /// assert_eq!(String::from_utf8(out).unwrap(), "span:build;main;app::lex 2\n");
    /// ```
    pub fn write_folded<W, F>(&self, mut out: W, mut span_prefix: F) -> io::Result<()>
    where
        W: Write,
        F: FnMut(usize, &Sample) -> Vec<String>,
    {
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        let mut line = String::new();
        for (index, sample) in self.samples.iter().enumerate() {
            line.clear();
            for span in span_prefix(index, sample) {
                push_frame(&mut line, "span:");
                push_name(&mut line, &span);
            }
            if !sample.unwound {
                push_frame(&mut line, NOT_UNWOUND_FRAME);
            }
            for &index in sample.frames.iter().rev() {
                let name = self.frames.get(index as usize).map_or("??", |f| f.function.as_str());
                push_frame(&mut line, "");
                push_name(&mut line, name);
            }
            if line.is_empty() {
                line.push_str("??");
            }
            *counts.entry(line.clone()).or_default() += 1;
        }
        for (stack, count) in &counts {
            writeln!(out, "{stack} {count}")?;
        }
        out.flush()
    }
}

/// Starts a frame: the separator if one came before, then `head`.
fn push_frame(line: &mut String, head: &str) {
    if !line.is_empty() {
        line.push(';');
    }
    line.push_str(head);
}

fn push_name(line: &mut String, name: &str) {
    line.extend(name.chars().map(|c| if matches!(c, ';' | '\n' | '\r') { '_' } else { c }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::frame;

    #[test]
    fn distinct_stacks_get_one_line_each_with_their_counts_and_spans_first() {
        let stacks = Stacks {
            frames: vec![frame("a::leaf"), frame("a::mid"), frame("main"), frame("b::other")],
            samples: vec![
                Sample { tid: 1, time_ns: 1, frames: vec![0, 1, 2], unwound: true },
                Sample { tid: 1, time_ns: 2, frames: vec![0, 1, 2], unwound: true },
                Sample { tid: 1, time_ns: 3, frames: vec![3, 2], unwound: true },
                Sample { tid: 1, time_ns: 4, frames: vec![0, 1], unwound: false },
            ],
            ..Stacks::default()
        };
        let mut out = Vec::new();
        stacks
            .write_folded(&mut out, |_, s| {
                if s.time_ns <= 2 {
                    vec!["build".into(), "compile".into()]
                } else {
                    Vec::new()
                }
            })
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[not unwound];a::mid;a::leaf 1\n\
             main;b::other 1\n\
             span:build;span:compile;main;a::mid;a::leaf 2\n"
        );
    }

    #[test]
    fn separators_inside_names_become_underscores() {
        let stacks = Stacks {
            frames: vec![frame("<a;b as c>::f")],
            samples: vec![Sample { tid: 1, time_ns: 1, frames: vec![0], unwound: true }],
            ..Stacks::default()
        };
        let mut out = Vec::new();
        stacks.write_folded(&mut out, |_, _| vec!["x;y\nz".into()]).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "span:x_y_z;<a_b as c>::f 1\n");
    }
}
