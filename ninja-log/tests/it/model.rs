//! A naive model of how Ninja writes its log, used as the reference the
//! property tests hold the reader to. It knows the truth (which actions a run
//! performed) because it performs them.
//!
//! What it models, from the facts checked against real Ninja 1.10-1.13:
//! - a log is a path pointing at a file; Ninja holds the file it opened, so a
//!   file replaced or deleted under it keeps receiving its lines unseen;
//! - at load, a log without a usable header is deleted (every version), a log
//!   of another version is deleted by 1.12+ (v6, v7 writers), and a log over
//!   the threshold is recompacted: the latest line of each output that is not
//!   dead, in hash-map order (v5, v6: shuffled) or first-appearance order (v7),
//!   with the writer's header;
//! - v5 and v6 writers open the log when the build starts (creating it with a
//!   header), v7 writers when the first action succeeds;
//! - each successful action writes one line per output, as it finishes, so
//!   end times never go back within one clock; a v5 writer logs each output's
//!   own modification time, later ones the action's start;
//! - a manifest rebuild restarts Ninja (a new load, a new clock near zero);
//! - `ninja -t restat` run from inside the build rewrites the log like a
//!   recompaction but keeps dead outputs, and gives lines new modification
//!   times (all of them for v6+ writers, whose logged times were command
//!   starts; touched outputs only for v5).

use std::collections::{HashMap, HashSet};

/// SplitMix64: small, seedable, good enough to draw scenarios.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    pub fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub start: u64,
    pub end: u64,
    pub mtime: u64,
    pub output: String,
    pub hash: u64,
}

impl Entry {
    fn render(&self) -> String {
        format!("{}\t{}\t{}\t{}\t{:x}\n", self.start, self.end, self.mtime, self.output, self.hash)
    }
}

#[derive(Clone, Debug)]
pub struct File {
    pub header: String,
    pub lines: Vec<Entry>,
}

impl File {
    pub fn bytes(&self) -> Vec<u8> {
        let mut s = format!("{}\n", self.header);
        for e in &self.lines {
            s.push_str(&e.render());
        }
        s.into_bytes()
    }
}

/// One command of the manifest.
#[derive(Clone, Debug)]
pub struct Edge {
    pub outputs: Vec<String>,
    pub hash: u64,
}

/// An action as the truth knows it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TrueAction {
    pub epoch: u32,
    pub start: u64,
    pub end: u64,
    pub hash: String,
    pub outputs: Vec<String>,
}

fn header_of(version: u32) -> String {
    format!("# ninja log v{version}")
}

/// The file system and the Ninja processes writing to it.
pub struct World {
    pub files: Vec<File>,
    pub path: Option<usize>,
    /// The next modification time: always increasing, so no two lines ever
    /// written are the same bytes.
    pub clock: u64,
    pub rng: Rng,
}

/// What one Ninja process does in [`World::cycle`].
pub struct Run<'a> {
    /// The Ninja log version it writes.
    pub version: u32,
    /// The edges it builds, in order.
    pub edges: &'a [&'a Edge],
    /// Outputs no longer in the manifest (dropped when it recompacts).
    pub dead: &'a HashSet<String>,
    /// The epoch its actions get (1 after a regeneration).
    pub epoch: u32,
    /// What happens to the log while it runs.
    pub event: Event,
    /// The index of its first action among the traced run's.
    pub first_index: usize,
    /// Its last action runs long (a regeneration Ninja restarts after).
    pub long_last: bool,
}

impl<'a> Run<'a> {
    /// A build of `edges` by Ninja `version` before the traced run.
    pub fn history(version: u32, edges: &'a [&'a Edge], dead: &'a HashSet<String>) -> Run<'a> {
        Run { version, edges, dead, epoch: 0, event: Event::None, first_index: 0, long_last: false }
    }
}

/// What happens to the log while the traced run goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    None,
    /// The command of the n-th action runs `ninja -t restat`.
    Restat(usize),
    /// The log is deleted while the n-th action runs.
    Delete(usize),
}

impl World {
    pub fn new(seed: u64) -> Self {
        World { files: Vec::new(), path: None, clock: 1_795_957_600_000_000_000, rng: Rng::new(seed) }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1 + self.rng.below(5_000_000);
        self.clock
    }

    /// The latest entry of each output, in first-appearance order.
    fn latest(lines: &[Entry]) -> Vec<Entry> {
        let mut order: Vec<String> = Vec::new();
        let mut latest: HashMap<String, Entry> = HashMap::new();
        for e in lines {
            if latest.insert(e.output.clone(), e.clone()).is_none() {
                order.push(e.output.clone());
            }
        }
        order.into_iter().map(|o| latest[&o].clone()).collect()
    }

    fn arrange(&mut self, mut entries: Vec<Entry>, version: u32) -> Vec<Entry> {
        if version < 7 {
            self.rng.shuffle(&mut entries);
        }
        entries
    }

    /// Ninja loading the log; returns how many lines a recompaction kept, if
    /// it recompacted.
    fn load(&mut self, version: u32, dead: &HashSet<String>) -> Option<usize> {
        let id = self.path?;
        let file = &self.files[id];
        let read = ninja_reads_version(&file.header);
        if read.is_none_or(|v| v < 4) || (version >= 6 && read != Some(i64::from(version))) {
            self.path = None;
            return None;
        }
        if !qualifies(file) {
            return None;
        }
        let kept: Vec<Entry> =
            World::latest(&file.lines).into_iter().filter(|e| !dead.contains(&e.output)).collect();
        let count = kept.len();
        let lines = self.arrange(kept, version);
        self.files.push(File { header: header_of(version), lines });
        self.path = Some(self.files.len() - 1);
        Some(count)
    }

    fn open(&mut self, version: u32) -> usize {
        match self.path {
            Some(id) => id,
            None => {
                self.files.push(File { header: header_of(version), lines: Vec::new() });
                self.path = Some(self.files.len() - 1);
                self.files.len() - 1
            }
        }
    }

    /// `ninja -t restat` from inside the build.
    fn restat(&mut self, version: u32) {
        let Some(id) = self.path else {
            return;
        };
        let mut entries = World::latest(&self.files[id].lines);
        for e in &mut entries {
            if version >= 6 || self.rng.chance(3) {
                e.mtime = self.tick();
            }
        }
        let lines = self.arrange(entries, version);
        let header = self.files[id].header.clone();
        self.files.push(File { header, lines });
        self.path = Some(self.files.len() - 1);
    }

    /// One Ninja process building `run.edges` in order; returns the actions
    /// that succeeded. `run.event` counts actions from `run.first_index`.
    pub fn cycle(&mut self, run: Run) -> (Vec<TrueAction>, Option<usize>) {
        let Run { version, edges, dead, epoch, event, first_index, long_last } = run;
        let recompacted = self.load(version, dead);
        let mut handle = (version < 7).then(|| self.open(version));
        let mut actions = Vec::new();
        let (mut prev_start, mut prev_end) = (self.rng.below(3), 0u64);
        for (i, edge) in edges.iter().enumerate() {
            let index = first_index + i;
            let start = prev_start + self.rng.below(prev_end.saturating_sub(prev_start) + 3);
            let mut end = (start + self.rng.below(30)).max(prev_end);
            if long_last && i + 1 == edges.len() {
                end = end.max(5_000) + self.rng.below(1_000);
            }
            (prev_start, prev_end) = (start, end);
            match event {
                Event::Restat(n) if n == index => self.restat(version),
                Event::Delete(n) if n == index => self.path = None,
                _ => {}
            }
            let id = *handle.get_or_insert_with(|| self.open(version));
            let shared = self.tick();
            for output in &edge.outputs {
                let mtime = if version >= 6 { shared } else { self.tick() };
                self.files[id].lines.push(Entry {
                    start,
                    end,
                    mtime,
                    output: output.clone(),
                    hash: edge.hash,
                });
            }
            actions.push(TrueAction {
                epoch,
                start,
                end,
                hash: format!("{:x}", edge.hash),
                outputs: edge.outputs.clone(),
            });
        }
        (actions, recompacted)
    }

    pub fn current(&self) -> Option<Vec<u8>> {
        self.path.map(|id| self.files[id].bytes())
    }
}

/// Whether Ninja recompacts this log when it loads it.
fn qualifies(file: &File) -> bool {
    let unique = file.lines.iter().map(|e| &e.output).collect::<HashSet<_>>().len();
    let total = file.lines.len();
    total > 100 && total > 3 * unique
}

/// What Ninja's `sscanf("# ninja log v%d")` finds in a header.
fn ninja_reads_version(header: &str) -> Option<i64> {
    let rest = header.strip_prefix("# ninja log v")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// What can be asked of the reader in a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Demand {
    /// Available, with exactly the truth.
    Exact,
    /// Unavailable: the log shows that it cannot be followed.
    Unavailable,
    /// Unavailable, or available with exactly the truth.
    Sound,
    /// Unavailable, or available with true actions only: lines went to a
    /// replaced file, and the log left may look like a run that did less (a
    /// documented limit), but an old line must never pass for a new action.
    NoInvention,
}

pub struct Scenario {
    pub before: Option<Vec<u8>>,
    pub after: Option<Vec<u8>>,
    pub truth: Vec<TrueAction>,
    pub demand: Demand,
    pub story: String,
}

/// Draws a scenario: a history of runs that leaves the log before, a traced
/// run with its truth, and perhaps an event during it or damage after it.
pub fn scenario(seed: u64) -> Scenario {
    let mut w = World::new(seed);
    let rng = &mut w.rng;
    let n_edges = 1 + rng.below(7) as usize;
    let mut edges: Vec<Edge> = (0..n_edges)
        .map(|i| {
            let n_out = 1 + usize::from(rng.chance(3)) + usize::from(rng.chance(4));
            Edge {
                outputs: (0..n_out)
                    .map(|k| match (i + k) % 5 {
                        0 => format!("obj/e{i}_{k}.o"),
                        1 => format!("gen {i}-{k}.h"),
                        _ => format!("e{i}.{k}"),
                    })
                    .collect(),
                hash: 1 + rng.below(u64::MAX - 1),
            }
        })
        .collect();
    let manifest = Edge { outputs: vec!["build.ninja".into()], hash: 1 + rng.below(u64::MAX - 1) };
    let history_version = [5, 6, 7][rng.below(3) as usize];
    let history_runs = if rng.chance(8) { 0 } else { rng.below(70) as usize };
    let mut story = format!("{n_edges} edges; history: {history_runs} runs by v{history_version}");

    let none_dead = HashSet::new();
    for _ in 0..history_runs {
        let mut chosen: Vec<&Edge> = edges.iter().filter(|_| w.rng.chance(2)).collect();
        w.rng.shuffle(&mut chosen);
        w.cycle(Run::history(history_version, &chosen, &none_dead));
    }
    // Often go on until the log is one Ninja will recompact when it loads it
    // (real logs get there every few dozen builds).
    if w.rng.chance(2) {
        for _ in 0..300 {
            if w.path.is_some_and(|id| qualifies(&w.files[id])) {
                story.push_str(", then until it qualifies for recompaction");
                break;
            }
            let mut chosen: Vec<&Edge> = edges.iter().filter(|_| w.rng.chance(2)).collect();
            w.rng.shuffle(&mut chosen);
            w.cycle(Run::history(history_version, &chosen, &none_dead));
        }
    }
    if w.path.is_some() && w.rng.chance(15) {
        let id = w.path.unwrap_or_default();
        w.files[id].header = "garbage".into();
        story.push_str(", header garbled");
    }
    let before = w.current();
    let before_file = w.path.map(|id| w.files[id].clone());

    // The traced run.
    let rng = &mut w.rng;
    let version = if rng.chance(2) { history_version } else { [5, 6, 7][rng.below(3) as usize] };
    let mut dead = HashSet::new();
    let mut removed = HashSet::new();
    for (i, e) in edges.iter().enumerate() {
        if rng.chance(5) {
            removed.insert(i);
            if rng.chance(2) {
                dead.extend(e.outputs.iter().cloned());
            }
        }
    }
    let mut build: Vec<&Edge> = edges
        .iter()
        .enumerate()
        .filter(|(i, _)| !removed.contains(i) && rng.chance(2))
        .map(|(_, e)| e)
        .collect();
    rng.shuffle(&mut build);
    let regenerate = rng.chance(5);
    let n_actions = build.len() + usize::from(regenerate);
    let event = match rng.below(8) {
        0 if n_actions > 0 => Event::Restat(rng.below(n_actions as u64) as usize),
        1 if n_actions > 0 => Event::Delete(rng.below(n_actions as u64) as usize),
        _ => Event::None,
    };
    story.push_str(&format!(
        "; run by v{version}: {} actions{}, event {event:?}",
        build.len(),
        if regenerate { " after a regeneration" } else { "" }
    ));

    let mut truth = Vec::new();
    let mut rewritten_mid_run = false;
    let mut kept_nothing = false;
    let (first_cycle, epoch) = if regenerate {
        let (actions, recompacted) =
            w.cycle(Run { edges: &[&manifest], event, long_last: true, ..Run::history(version, &[], &dead) });
        truth.extend(actions);
        kept_nothing = recompacted == Some(0);
        (1, 1)
    } else {
        (0, 0)
    };
    let (actions, recompacted) =
        w.cycle(Run { epoch, event, first_index: first_cycle, ..Run::history(version, &build, &dead) });
    truth.extend(actions);
    if regenerate && recompacted.is_some() {
        rewritten_mid_run = true;
    }
    // A recompaction that kept no line leaves nothing to tell it from a log
    // deleted and restarted, or cut back to its header.
    kept_nothing |= recompacted == Some(0);
    // Keep the hashes of the edges of the manifest around for shrinking runs.
    edges.push(manifest);

    let mut after = w.current();
    let mut demand = match event {
        Event::None if rewritten_mid_run || kept_nothing => Demand::Sound,
        Event::None => Demand::Exact,
        Event::Restat(_) => {
            // A v6+ restat changes every line; with an old log of the same
            // version that still had entries, nothing about it looks clean.
            let same_header =
                before_file.as_ref().is_some_and(|f| f.header == header_of(version) && !f.lines.is_empty());
            // A v6+ restat changes every line.
            let every_line_changed = same_header && version >= 6;
            // Ninja would not have recompacted so small a log itself.
            let too_small = same_header
                && before_file.as_ref().is_some_and(|f| !qualifies(f))
                && after.as_ref().is_some_and(|a| before.as_ref().is_some_and(|b| !a.starts_with(b)));
            if every_line_changed || too_small {
                Demand::Unavailable
            } else {
                Demand::NoInvention
            }
        }
        Event::Delete(_) => {
            if before.is_some() && after.is_none() {
                Demand::Unavailable
            } else {
                Demand::NoInvention
            }
        }
    };
    if demand == Demand::Exact && before.is_some() && after.is_none() {
        // A v7 writer that deleted another version's log and then had no
        // action to log: there is no log to read.
        demand = Demand::Sound;
    }

    // Damage after the run.
    if let Some(bytes) = after.as_mut() {
        match w.rng.below(10) {
            0 => {
                // Cut inside a line (never right after a newline).
                let cuts: Vec<usize> = (1..bytes.len()).filter(|&i| bytes[i - 1] != b'\n').collect();
                if !cuts.is_empty() {
                    let cut = cuts[w.rng.below(cuts.len() as u64) as usize];
                    bytes.truncate(cut);
                    demand = Demand::Unavailable;
                    story.push_str(&format!("; cut at byte {cut}"));
                }
            }
            1 => {
                let starts: Vec<usize> = (1..=bytes.len()).filter(|&i| bytes[i - 1] == b'\n').collect();
                let at = starts[w.rng.below(starts.len() as u64) as usize];
                let junk: &[u8] = match w.rng.below(4) {
                    0 => b"junk\n",
                    1 => b"1\t2\t3\tx\n",
                    2 => b"1x\t2\t3\tx\tab\n",
                    _ => b"1\t2\t3\tx\tab\tcd\n",
                };
                bytes.splice(at..at, junk.iter().copied());
                demand = Demand::Unavailable;
                story.push_str(&format!("; junk line at byte {at}"));
            }
            _ => {}
        }
    }
    story.push_str(&format!("; demand {demand:?}"));
    Scenario { before, after, truth, demand, story }
}
