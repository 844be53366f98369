//! Symbolization of the addresses the samples hold, each distinct address
//! once: functions (inlined ones too) and `file:line` from DWARF, the symbol
//! table where there is no DWARF ([`object_symbols`](super::object_symbols)),
//! names demangled. A thread of its own symbolizes each batch of samples the
//! reader thread sends as it arrives, so that the finish only does what is
//! left, and the reader, never kept from its buffers, loses no sample.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

use object::{Object, ObjectSymbol};

use std::sync::mpsc::{Receiver, Sender};

use super::object_symbols::{demangle, ObjectSymbols};
use super::unwinding::{LoadedObject, Objects};
use crate::model::{Frame, Mapping, Sample};

/// A sample as the reader thread keeps it: lookup addresses, leaf first.
pub(crate) struct RawSample {
    pub(crate) tid: u32,
    pub(crate) time_ns: u64,
    pub(crate) addresses: Vec<u64>,
    pub(crate) unwound: bool,
}

/// How one object's addresses get names.
enum Symbols {
    /// DWARF and the symbol table of a file.
    File(Box<ObjectSymbols>),
    /// The symbol table of an image in memory (the vdso): start, name.
    Table(Vec<(u64, String)>),
    /// Nothing could be read.
    None,
}

/// What the reader thread sends the symbolizer thread.
pub(crate) enum ToSymbolizer {
    /// The objects found since the last batch (numbered on, as in
    /// [`Objects`]) and the samples read since.
    Batch { objects: Vec<LoadedObject>, samples: Vec<RawSample> },
    /// The reader stopped, with its counts: nothing follows.
    End { lost: u64, not_unwound: u64, reader_cpu_time: Duration },
}

/// What the symbolizer thread hands the finish.
pub(crate) struct Symbolized {
    pub(crate) mappings: Vec<Mapping>,
    pub(crate) frames: Vec<Frame>,
    pub(crate) samples: Vec<Sample>,
    pub(crate) lost: u64,
    pub(crate) not_unwound: u64,
    pub(crate) reader_cpu_time: Duration,
    /// Wall time spent opening objects' symbols and symbolizing.
    pub(crate) symbolization_time: Duration,
}

/// The symbolizer thread: names the new addresses of each batch as it
/// arrives, then, at the reader's end, sends everything to `output` (before
/// freeing the objects' symbols, which nobody needs to wait for).
pub(crate) fn symbolize_until_end(input: Receiver<ToSymbolizer>, output: Sender<Symbolized>) {
    let mut symbolizer = Symbolizer::default();
    let mut objects = Objects::default();
    let mut samples = Vec::new();
    // The program's own executable: nearly every stack holds its addresses,
    // so its symbols are opened with the first objects, before any sample.
    let mut executable = std::fs::read_link("/proc/self/exe").ok();
    while let Ok(message) = input.recv() {
        match message {
            ToSymbolizer::Batch { objects: found, samples: batch } => {
                found.into_iter().for_each(|object| objects.push(object));
                if let Some(path) = executable.take() {
                    symbolizer.open_ahead(&objects, &path);
                }
                symbolizer.add(&objects, &batch);
                samples.extend(batch);
            }
            ToSymbolizer::End { lost, not_unwound, reader_cpu_time } => {
                let (frames, samples) = symbolizer.take(std::mem::take(&mut samples));
                let _ = output.send(Symbolized {
                    mappings: objects.list().iter().map(|o| o.mapping.clone()).collect(),
                    frames,
                    samples,
                    lost,
                    not_unwound,
                    reader_cpu_time,
                    symbolization_time: symbolizer.time,
                });
                return;
            }
        }
    }
}

/// The frames of every address symbolized so far, and the objects' symbols
/// opened for them.
#[derive(Default)]
struct Symbolizer {
    /// By object index ([`Objects`]), opened at the first address in it.
    symbols: HashMap<usize, Symbols>,
    /// Per address, its frames in `frames`, innermost first.
    by_address: HashMap<u64, Range<u32>>,
    frames: Vec<Frame>,
    /// Wall time spent opening symbols and symbolizing.
    time: Duration,
}

impl Symbolizer {
    /// Opens the symbols of the object `path` names before any sample
    /// needs them.
    fn open_ahead(&mut self, objects: &Objects, path: &Path) {
        self.timed(|this| {
            if let Some(index) = objects.list().iter().position(|o| Path::new(&o.mapping.path) == path) {
                let object = &objects.list()[index];
                this.symbols.entry(index).or_insert_with(|| open_symbols(object));
            }
        });
    }

    /// Symbolizes the addresses of `samples` not seen before.
    fn add(&mut self, objects: &Objects, samples: &[RawSample]) {
        if samples.is_empty() {
            return;
        }
        self.timed(|this| {
            for &address in samples.iter().flat_map(|s| &s.addresses) {
                if this.by_address.contains_key(&address) {
                    continue;
                }
                let before = this.frames.len();
                match objects.index_of(address) {
                    Some(index) => {
                        let object = &objects.list()[index];
                        let symbols = this.symbols.entry(index).or_insert_with(|| open_symbols(object));
                        frames_of(address, index, object, symbols, &mut this.frames);
                    }
                    None => this.frames.push(Frame {
                        function: format!("0x{address:x}"),
                        file: None,
                        line: None,
                        mapping: None,
                        rel_pc: address,
                        inlined: false,
                    }),
                }
                this.by_address.insert(address, before as u32..this.frames.len() as u32);
            }
        });
    }

    fn timed(&mut self, work: impl FnOnce(&mut Symbolizer)) {
        let started = Instant::now();
        work(self);
        self.time += started.elapsed();
    }

    /// Takes the frames, and the samples as indices into them; every address
    /// of `raw` must have been [`add`](Symbolizer::add)ed. The objects'
    /// symbols stay, to be dropped when nobody waits for it.
    fn take(&mut self, raw: Vec<RawSample>) -> (Vec<Frame>, Vec<Sample>) {
        let by_address = std::mem::take(&mut self.by_address);
        let samples = raw
            .into_iter()
            .map(|sample| Sample {
                tid: sample.tid,
                time_ns: sample.time_ns,
                frames: sample
                    .addresses
                    .iter()
                    .flat_map(|a| by_address.get(a).cloned().into_iter().flatten())
                    .collect(),
                unwound: sample.unwound,
            })
            .collect();
        (std::mem::take(&mut self.frames), samples)
    }
}

fn open_symbols(object: &LoadedObject) -> Symbols {
    let path = &object.mapping.path;
    if path == "[vdso]" {
        // SAFETY: the vdso stays mapped, readable, for the life of the process.
        let image = unsafe {
            std::slice::from_raw_parts(
                object.mapping.start as *const u8,
                (object.mapping.end - object.mapping.start) as usize,
            )
        };
        let Ok(file) = object::File::parse(image) else { return Symbols::None };
        let mut table: Vec<(u64, String)> = file
            .dynamic_symbols()
            .chain(file.symbols())
            .filter(|s| s.is_definition() && s.size() > 0)
            .filter_map(|s| Some((s.address(), s.name().ok()?.to_string())))
            .collect();
        table.sort();
        return Symbols::Table(table);
    }
    match ObjectSymbols::open(Path::new(path)) {
        Some(file) => Symbols::File(Box::new(file)),
        None => Symbols::None,
    }
}

/// Pushes the frames of one address, innermost (inlined) first.
fn frames_of(
    address: u64,
    mapping: usize,
    object: &LoadedObject,
    symbols: &mut Symbols,
    frames: &mut Vec<Frame>,
) {
    let rel_pc = address - object.mapping.start + object.mapping.offset;
    let svma = address.wrapping_sub(object.base_avma);
    let frame = |function: String, file: Option<String>, line: Option<u32>| Frame {
        function,
        file,
        line,
        mapping: Some(mapping as u32),
        rel_pc,
        inlined: true,
    };
    let first = frames.len();
    match symbols {
        Symbols::File(file) => {
            for found in file.frames(svma) {
                frames.push(frame(found.function, found.file, found.line));
            }
            if frames.len() == first {
                if let Some(name) = file.symbol(svma) {
                    frames.push(frame(demangle(name, None), None, None));
                }
            }
        }
        Symbols::Table(table) => {
            let after = table.partition_point(|(start, _)| *start <= svma);
            if let Some((_, name)) = after.checked_sub(1).map(|i| &table[i]) {
                frames.push(frame(demangle(name, None), None, None));
            }
        }
        Symbols::None => {}
    }
    if frames.len() == first {
        let file_name = Path::new(&object.mapping.path)
            .file_name()
            .map_or_else(|| object.mapping.path.clone(), |n| n.to_string_lossy().into_owned());
        frames.push(frame(format!("0x{rel_pc:x} in {file_name}"), None, None));
    }
    // Every frame but the outermost was inlined into the one after it.
    if let Some(outer) = frames.last_mut() {
        outer.inlined = false;
    }
}
